"""Turning raw terminal bytes into text a model can read, with bounded memory.

Two pieces:

* :class:`OutputBuffer` collects a stream of any size while keeping only a head and a tail of it,
  so a 100 MB flood or an endless line costs a constant amount of memory.
* :func:`clean_text` turns bytes into plain text: invalid UTF-8 replaced, ANSI escape sequences
  removed, ``\\r\\n`` normalised, carriage-return overwrites and backspaces applied as a terminal
  would show them, other control characters dropped.
* :func:`truncate_middle` keeps the head and tail of a long text with a marker saying what was cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/SOS/PM/APC strings (ESC P/X/^/_ ... ST),
# and two-byte escapes (ESC followed by one char, including charset selections like ESC ( B).
# A control string never spans a line here: one left open by binary output (`cat` of a binary
# file) would otherwise swallow all the output after it, the command's own included.
_ANSI_RE = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]          # CSI
  | \x9b[0-?]*[ -/]*[@-~]            # 8-bit CSI
  | \x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?   # OSC, terminated by BEL or ST (or cut off)
  | \x1b[PX^_][^\x1b\n]*(?:\x1b\\)?    # DCS / SOS / PM / APC
  | \x1b[()*+][0-9A-Za-z]            # charset designation
  | \x1b[ -/]*[0-~]                  # other escapes (ESC =, ESC >, ESC 7, ESC c ...)
    """,
    re.VERBOSE,
)
# Control characters a model gains nothing from (C0, DEL and C1). Tab and newline are kept; CR and
# BS are applied.
_CTRL_RE = re.compile(r"[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_ansi(text: str) -> str:
    r"""Remove ANSI escape sequences.

    >>> strip_ansi("\x1b[1;31mred\x1b[0m plain \x1b]0;title\x07done")
    'red plain done'
    >>> strip_ansi("binary\x1bPgarbage never closed\nend\n")  # a string left open ends at the line
    'binary\nend\n'
    """
    return _ANSI_RE.sub("", text)


def _apply_overwrites(line: str) -> str:
    """Apply carriage returns and backspaces within one line the way a terminal shows them."""
    if "\r" not in line and "\b" not in line:
        return line
    cells: list[str] = []
    col = 0
    for ch in line:
        if ch == "\r":
            col = 0
        elif ch == "\b":
            col = max(0, col - 1)
        else:
            if col < len(cells):
                cells[col] = ch
            else:
                cells.append(ch)
            col += 1
    return "".join(cells)


def clean_text(data: bytes | str) -> str:
    r"""Bytes from a terminal to plain text for a model.

    >>> clean_text(b"a\r\nb\r\n")
    'a\nb\n'
    >>> clean_text(b"progress 10%\rprogress 99%\r\n\x1b[32mok\x1b[0m\n")
    'progress 99%\nok\n'
    >>> clean_text(b"bad \xff\xfe bytes\x00\x07")
    'bad \ufffd\ufffd bytes'
    >>> clean_text(b"abc\x08\x08X")
    'aXc'
    """
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = strip_ansi(text)
    text = text.replace("\r\n", "\n")
    if "\r" in text or "\b" in text:
        text = "\n".join(_apply_overwrites(line) for line in text.split("\n"))
    return _CTRL_RE.sub("", text)


def truncate_middle(text: str, max_chars: int, head_fraction: float = 0.5) -> tuple[str, bool]:
    """Keep the head and the tail of ``text`` within ``max_chars``; say in a marker what was cut.

    Returns the text and whether it was truncated.

    >>> truncate_middle("0123456789" * 3, 10)
    ('01234\\n[... 20 characters (0 lines) truncated ...]\\n56789', True)
    >>> truncate_middle("short", 10)
    ('short', False)
    """
    if max_chars <= 0 or len(text) <= max_chars:
        return text, False
    head_n = int(max_chars * head_fraction)
    tail_n = max_chars - head_n
    head, tail = text[:head_n], text[len(text) - tail_n :] if tail_n else ""
    cut = text[head_n : len(text) - tail_n]
    marker = f"\n[... {len(cut)} characters ({cut.count(chr(10))} lines) truncated ...]\n"
    return head + marker + tail, True


@dataclass
class OutputBuffer:
    """A byte stream of any length reduced to a bounded head and tail.

    ``head_limit`` and ``tail_limit`` are in bytes. ``total`` counts every byte seen, so a caller
    can tell how much was dropped from the middle.

    >>> b = OutputBuffer(head_limit=4, tail_limit=4)
    >>> for chunk in (b"abcdef", b"ghij", b"kl"):
    ...     b.feed(chunk)
    >>> b.head, b.tail, b.total, b.dropped
    (b'abcd', b'ijkl', 12, 4)
    """

    head_limit: int = 64 * 1024
    tail_limit: int = 64 * 1024

    def __post_init__(self) -> None:
        self.head = b""
        self._tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail += chunk
        if len(self._tail) > self.tail_limit:
            del self._tail[: len(self._tail) - self.tail_limit]

    @property
    def tail(self) -> bytes:
        return bytes(self._tail)

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self._tail)

    def getvalue(self) -> bytes:
        """Head and tail joined; a marker line stands for a dropped middle."""
        if self.dropped == 0:
            return self.head + bytes(self._tail)
        marker = f"\n[... {self.dropped} bytes of output not kept ...]\n".encode()
        return self.head + marker + bytes(self._tail)


@dataclass(frozen=True)
class SentinelMatch:
    """Where a :class:`Sentinel` was found, read like a ``re.Match``."""

    begin: int
    match: re.Match[bytes]

    def start(self) -> int:
        return self.begin

    def end(self) -> int:
        return self.match.end()

    def group(self, n: int) -> bytes:
        return self.match.group(n)


@dataclass(frozen=True)
class Sentinel:
    """A marker made of a per-session ``prefix`` (it holds a random nonce) and a ``tail`` pattern
    shared by every session. Compiling one pattern per nonce would fill the ``re`` module's own
    cache (512 entries) with patterns used by one session each, evicting everyone else's.

    >>> s = Sentinel(b"<TE1a:", re.compile(rb"(\\d+)>"))
    >>> m = s.search(b"out <TE1a:x> <TE2b:5> <TE1a:7> more")
    >>> m.start(), m.group(1), m.end()
    (22, b'7', 30)
    """

    prefix: bytes
    tail: re.Pattern[bytes]

    def search(self, data: bytes) -> SentinelMatch | None:
        at = data.find(self.prefix)
        while at >= 0:
            m = self.tail.match(data, at + len(self.prefix))
            if m is not None:
                return SentinelMatch(at, m)
            at = data.find(self.prefix, at + 1)
        return None
