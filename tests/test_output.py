import re

from hypothesis import given, settings
from hypothesis import strategies as st

from terminal_env.output import OutputBuffer, clean_text, strip_ansi, truncate_middle


def test_clean_text_normalises_what_a_terminal_shows():
    raw = b"\x1b[31merror\x1b[0m: \x1b]0;title\x07x\r\ndone 10%\rdone 100%\r\n"
    assert clean_text(raw) == "error: x\ndone 100%\n"


def test_invalid_utf8_is_replaced_not_raised():
    assert clean_text(b"\xff\xfeok") == "\ufffd\ufffdok"


def test_cursor_movement_and_private_modes_are_removed():
    assert strip_ansi("\x1b[?1049h\x1b[2J\x1b[1;1Hvim\x1b(B\x1b=") == "vim"


def test_truncate_keeps_head_and_tail_and_says_so():
    text = "".join(f"line {i}\n" for i in range(10_000))
    out, cut = truncate_middle(text, 1000)
    assert cut
    assert out.startswith("line 0\n") and out.endswith("line 9999\n")
    assert re.search(r"\[\.\.\. \d+ characters \(\d+ lines\) truncated \.\.\.\]", out)
    assert len(out) < 1100


def test_output_buffer_memory_is_bounded_for_a_flood():
    buf = OutputBuffer(head_limit=1000, tail_limit=1000)
    chunk = b"x" * 65536
    for _ in range(1600):  # 100 MiB
        buf.feed(chunk)
    assert buf.total == 1600 * 65536
    assert len(buf.head) == 1000 and len(buf.tail) == 1000
    assert b"not kept" in buf.getvalue() and len(buf.getvalue()) < 2100


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_clean_text_output_has_no_control_characters(data):
    text = clean_text(data)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=30), st.integers(0, 500), st.integers(0, 500))
def test_output_buffer_keeps_exact_head_and_tail(chunks, head, tail):
    buf = OutputBuffer(head_limit=head, tail_limit=tail)
    for c in chunks:
        buf.feed(c)
    whole = b"".join(chunks)
    assert buf.total == len(whole)
    assert buf.head == whole[:head]
    rest = whole[len(buf.head):]
    assert buf.tail == (rest[-tail:] if tail else b"")
    if buf.dropped == 0:
        assert buf.getvalue() == whole


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000), st.integers(200, 2000))
def test_truncate_middle_bounds_length(text, limit):
    out, cut = truncate_middle(text, limit)
    assert cut == (len(text) > limit)
    if cut:
        assert len(out) <= limit + 80  # the marker line
    else:
        assert out == text
