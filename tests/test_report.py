"""The HTML report over a synthetic run directory: pages, links, escaping, recordings, compare."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from terminal_env.errors import ConfigError
from terminal_env.fileio import write_json_atomic
from terminal_env.harness.base import ActionResult, CommandRecord, HarnessAction
from terminal_env.models.base import Completion, Usage
from terminal_env.report import write_report
from terminal_env.report.cast import CastError, read_cast
from terminal_env.runner.records import RUN_SCHEMA, TrialResult, trial_dir
from terminal_env.trajectory import ModelRef, TaskRef, Trajectory, Turn
from terminal_env.verify.result import Check, VerifierResult

EVIL = "<script>alert(1)</script>"
WEIRD_TASK = "we<ird> & name"


def write_cast(path: Path, events, width=20, height=5) -> Path:
    lines = [json.dumps({"version": 2, "width": width, "height": height, "timestamp": 1700000000})]
    lines += [json.dumps(list(ev)) for ev in events]
    path.write_text("\n".join(lines) + "\n")
    return path


CAST_EVENTS = [
    (0.10, "o", "\x1b[2J\x1b[Hhello\r\n"),
    (0.20, "i", "ls\r"),
    (0.30, "m", "turn <1>"),
    (0.35, "o", "world \x1b[31mred\x1b[0m"),
    (0.50, "o", "\x1b[4;3Hmoved"),
]


def verifier_result(outcome: str, progress: float) -> VerifierResult:
    if outcome == "passed":
        checks = [Check(name="test_a", passed=True), Check(name="test_b", passed=True)]
    elif outcome == "partial":
        checks = [Check(name="test_a", passed=True),
                  Check(name="test_b <i>", passed=False, message=f"assert {EVIL} == 2")]
    elif outcome == "failed":
        checks = [Check(name="test_a", passed=False, message="nope")]
    else:
        checks = []
    return VerifierResult(outcome=outcome, checks=checks, progress=progress, source="ctrf",
                          message="verifier says " + EVIL, log_tail="log line\n" + EVIL,
                          duration=1.5, exit_code=1)


def make_trajectory(task: str, v: VerifierResult | None) -> Trajectory:
    cmd = CommandRecord(action={"kind": "command", "command": "echo hi"}, text="echo hi",
                        observation=f"hi\n{EVIL}", exit_code=0, duration=0.2)
    return Trajectory(
        task=TaskRef(name=task, category="git"),
        harness="generic",
        model=ModelRef(name="test-model", backend="script"),
        messages=[
            {"role": "system", "content": "You are a terminal agent."},
            {"role": "user", "content": "Fix the repository."},
            {"role": "assistant", "content": f"Let me look. {EVIL}",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "bash", "arguments": '{"command": "echo hi"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "hi"},
            {"role": "assistant", "content": "garbled"},
            {"role": "user", "content": "Your reply had no command."},
        ],
        turns=[
            Turn(index=0, started=1700000000.0, message_index=2,
                 completion=Completion(text="Let me look.", reasoning="thinking <b>hard</b>",
                                       usage=Usage(prompt_tokens=120, completion_tokens=30)),
                 actions=[ActionResult(action=HarnessAction(tool="bash", args={"command": "echo hi"},
                                                            call_id="c1"),
                                       commands=[cmd], observation="hi")],
                 model_seconds=1.0, env_seconds=0.3),
            Turn(index=1, started=1700000002.0, message_index=4,
                 format_error="no command found <em>in</em> the reply"),
        ],
        termination="submitted",
        verification=v.model_dump(mode="json") if v else None,
        reward=v.progress if v else None,
    )


def make_run(root: Path, trials: dict[str, list[tuple[str, float, bool]]], *, model="test-model",
             attempts=2, cast_for=(), no_trajectory=(), broken_trajectory=(),
             categories=None) -> Path:
    """``trials``: task -> [(outcome, progress, masked) per attempt]."""
    root.mkdir(parents=True)
    categories = categories or {}
    manifest = {
        "schema": RUN_SCHEMA, "version": 1, "created": 1700000000,
        "config": {"harness": "generic", "model": model, "attempts": attempts},
        "tasks": [{"name": t, "category": categories.get(t, "git"), "difficulty": "easy",
                   "split": "test"} for t in trials],
    }
    write_json_atomic(root / "run.json", manifest)
    for task, specs in trials.items():
        for attempt, (outcome, progress, masked) in enumerate(specs, 1):
            d = trial_dir(root, task, attempt)
            d.mkdir(parents=True)
            v = None if masked else verifier_result(outcome, progress)
            result = TrialResult(
                task=task, attempt=attempt, outcome=outcome, strict_success=outcome == "passed",
                progress=progress, reward=progress, rewards={"binary": float(outcome == "passed")},
                termination="infra_error" if masked else "submitted", masked=masked,
                tries=2 if masked else 1, error="sandbox died" if masked else None, turns=2,
                commands=1, format_errors=1, duration=12.5, prompt_tokens=120, completion_tokens=30,
                trial_dir=str(d.relative_to(root)),
            )
            if v is not None:
                write_json_atomic(d / "verifier.json", v.model_dump(mode="json"))
            if (task, attempt) in broken_trajectory:
                (d / "trajectory.json").write_text("{not json")
            elif (task, attempt) not in no_trajectory:
                make_trajectory(task, v).save(d / "trajectory.json")
            if (task, attempt) in cast_for:
                write_cast(d / "recording.cast", CAST_EVENTS)
            write_json_atomic(d / "result.json", result.model_dump())
    return root


@pytest.fixture
def run_a(tmp_path):
    return make_run(
        tmp_path / "run-a",
        {
            "fix-git": [("passed", 1.0, False), ("partial", 0.5, False)],
            "sys-perms": [("failed", 0.0, False), ("infra_error", 0.0, True)],
            WEIRD_TASK: [("timeout", 0.0, False), ("partial", 0.25, False)],
            "never-run": [],
        },
        categories={"sys-perms": "sys"},
        cast_for={("fix-git", 1)},
        no_trajectory={("sys-perms", 1)},
        broken_trajectory={(WEIRD_TASK, 2)},
    )


def hrefs(page: Path) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'href="([^"]*)"', page.read_text())]


def assert_links_resolve(page: Path) -> list[Path]:
    targets = []
    for h in hrefs(page):
        if h.startswith("#") or "://" in h:
            continue
        target = (page.parent / unquote(h.split("#")[0])).resolve()
        assert target.is_file(), f"{page.name}: broken link {h}"
        targets.append(target)
    return targets


def script_blocks(text: str) -> list[str]:
    return re.findall(r"<script[^>]*>(.*?)</script>", text, flags=re.S)


# ---------------------------------------------------------------------------- recordings
def test_cast_frames_render_the_screen(tmp_path):
    cast = read_cast(write_cast(tmp_path / "r.cast", CAST_EVENTS))
    final = cast.frames[-1].lines
    assert final[0] == "hello"
    assert final[1] == "world red"  # colours rendered away
    assert final[3] == "  moved"  # cursor movement honoured
    assert all("\x1b" not in line for f in cast.frames for line in f.lines)
    assert cast.frames[0].t == 0 and cast.frames[0].lines == []
    assert ["hello"] in [f.lines for f in cast.frames]  # the screen after the first event
    assert [f.t for f in cast.frames] == sorted(f.t for f in cast.frames)
    assert (cast.width, cast.height, cast.output_events, cast.input_events) == (20, 5, 3, 1)
    assert cast.markers == [(0.3, "turn <1>")]
    data = cast.to_json()
    assert data["frames"][-1][1] == [data["pool"].index(line) for line in final]


def test_cast_alternate_screen_is_restored(tmp_path):
    path = write_cast(tmp_path / "vim.cast", [
        (0.1, "o", "$ vim x\r\n"),
        (0.2, "o", "\x1b[?1049h\x1b[2J\x1b[Hvim screen\x1b[5;1H-- INSERT --"),
        (0.3, "o", "\x1b[?1049l$ done"),
    ])
    frames = [f.lines for f in read_cast(path).frames]
    assert ["vim screen", "", "", "", "-- INSERT --"] in frames
    assert frames[-1] == ["$ vim x", "$ done"]


def test_cast_coalesces_frames_and_caps_output(tmp_path):
    events = [(i * 0.01, "o", f"line {i}\r\n") for i in range(3000)]
    path = write_cast(tmp_path / "long.cast", events, width=40, height=10)
    cast = read_cast(path)
    assert len(cast.frames) <= 600
    assert cast.frames[-1].lines[-1] == "line 2999"
    capped = read_cast(path, max_chars=2000, max_frames=50)
    assert len(capped.frames) <= 50
    assert capped.frames[-1].lines[-1] == "line 2999"  # the tail is kept
    assert any("not replayed" in n for n in capped.notes)
    cut = read_cast(path, max_bytes=4000)
    assert any("bytes were read" in n for n in cut.notes) and cut.frames[-1].lines[-1] == "line 2999"


def test_cast_shortens_pauses_and_skips_bad_lines(tmp_path):
    path = write_cast(tmp_path / "idle.cast", [(0.5, "o", "a"), (100.0, "o", "b")])
    with path.open("a") as fh:
        fh.write("not json\n[1]\n")
    cast = read_cast(path)
    assert cast.real_duration == 100.0 and cast.duration == pytest.approx(2.5)
    assert any("malformed" in n for n in cast.notes)
    assert cast.frames[-1].lines == ["ab"]


def test_cast_errors(tmp_path):
    (tmp_path / "v1.cast").write_text(json.dumps({"version": 1, "stdout": []}))
    with pytest.raises(CastError, match="v2"):
        read_cast(tmp_path / "v1.cast")
    (tmp_path / "junk.cast").write_text("garbage\n")
    with pytest.raises(CastError):
        read_cast(tmp_path / "junk.cast")
    (tmp_path / "empty.cast").write_text("")
    with pytest.raises(CastError, match="empty"):
        read_cast(tmp_path / "empty.cast")


# ---------------------------------------------------------------------------- report
def test_report_pages_links_and_escaping(run_a):
    index = write_report(run_a)
    out = run_a / "report"
    assert index == out / "index.html" and index.is_file()
    text = index.read_text()

    # every trial has a page and the index links to each, and every link resolves
    pages = sorted(out.glob("trials/*/*.html"))
    assert len(pages) == 6
    linked = set(assert_links_resolve(index))
    assert set(p.resolve() for p in pages) <= linked
    for p in pages:
        assert_links_resolve(p)

    # headline numbers and charts
    assert "Mean@2" in text and "pass@1" in text and "Infra errors" in text
    assert text.count("<svg") >= 3 and "success by category" in text
    assert ">git<" in text and ">sys<" in text
    assert "never-run" in text and "o-pending" in text  # a task of the manifest without trials
    assert "masked" in text
    # escaping: the weird task name, and no raw markup from the run anywhere
    assert "we&lt;ird&gt; &amp; name" in text and WEIRD_TASK not in text
    for p in [index, *pages]:
        page = p.read_text()
        assert EVIL not in page, p
        assert "<i>" not in page and "<em>in</em>" not in page
        for block in script_blocks(page):
            assert "alert" not in block or "\\u003cscript\\u003e" in block, p


def test_trial_page_contents(run_a):
    write_report(run_a)
    out = run_a / "report"
    page = (out / "trials" / "fix-git" / "2.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "test_b &lt;i&gt;" in page  # the verifier's checks table
    assert "format error" in page and "no command found &lt;em&gt;in&lt;/em&gt; the reply" in page
    assert "echo hi" in page and "exit 0" in page  # the generic command and its output
    assert "thinking &lt;b&gt;hard&lt;/b&gt;" in page  # reasoning
    assert "No terminal recording" in page

    played = (out / "trials" / "fix-git" / "1.html").read_text()
    assert 'class="player"' in played and "cast-data" in played
    data = json.loads(re.search(r'class="cast-data">(.*?)</script>', played, re.S).group(1))
    assert {"hello", "world red", "  moved"} <= set(data["pool"])
    assert "requestAnimationFrame" in played  # the player script is inlined
    assert 'data-speed="4"' in played and 'class="seek"' in played
    assert 'data-t="0.300">turn &lt;1&gt;</button>' in played  # a marker to jump to

    no_traj = (out / "trials" / "sys-perms" / "1.html").read_text()
    assert "No trajectory" in no_traj
    masked = (out / "trials" / "sys-perms" / "2.html").read_text()
    assert "masked: infrastructure error" in masked and "No verifier result" in masked
    weird = next((out / "trials").glob("we*"))
    broken = (weird / "2.html").read_text()
    assert "trajectory.json is unreadable" in broken


def test_report_custom_out_dir_and_rewrite(run_a, tmp_path):
    out = tmp_path / "elsewhere"
    index = write_report(run_a, out_dir=out)
    assert index == out / "index.html" and index.is_file()
    assert not (run_a / "report").exists()
    assert write_report(run_a, out_dir=out) == index  # idempotent


def test_missing_recording_and_bad_recording(run_a):
    d = trial_dir(run_a, "fix-git", 2)
    (d / "recording.cast").write_text("not a cast\n")
    write_report(run_a)
    page = (run_a / "report" / "trials" / "fix-git" / "2.html").read_text()
    assert "could not be replayed" in page


def test_compare_page(tmp_path, run_a):
    run_b = make_run(
        tmp_path / "run-b",
        {
            "fix-git": [("passed", 1.0, False), ("passed", 1.0, False)],
            "sys-perms": [("passed", 1.0, False), ("passed", 1.0, False)],
            WEIRD_TASK: [("failed", 0.0, False), ("failed", 0.0, False)],
            "only-in-b": [("passed", 1.0, False)],
        },
        model="other-model",
    )
    index = write_report(run_a, run_b)
    cmp_page = index.parent / "compare.html"
    assert cmp_page.is_file()
    assert "compare.html" in hrefs(index)
    assert_links_resolve(cmp_page)
    text = cmp_page.read_text()
    # sys-perms: 0/1 -> 2/2 (+100 pp); fix-git: 1/2 -> 2/2 (+50 pp); weird: 0/2 -> 0/2, progress down
    order = [text.index(name) for name in ("sys-perms", "fix-git", "we&lt;ird&gt; &amp; name")]
    assert order == sorted(order)
    assert "+100.0 pp" in text and "+50.0 pp" in text and "−12.5 pp" in text
    assert "only-in-b" in text and "Scored only in B" in text
    assert "other-model" in text and "B − A" in text


# ---------------------------------------------------------------------------- damaged input
def test_missing_manifest_is_a_config_error(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(ConfigError, match="run.json"):
        write_report(tmp_path / "run")
    with pytest.raises(ConfigError, match="no such run directory"):
        write_report(tmp_path / "nowhere")


def test_damaged_inputs_are_config_errors(tmp_path, run_a):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run.json").write_text("{oops")
    with pytest.raises(ConfigError, match=r"run\.json: not valid JSON"):
        write_report(bad)
    (bad / "run.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="run manifest"):
        write_report(bad)
    with pytest.raises(ConfigError, match="no such run directory"):
        write_report(run_a, tmp_path / "missing-other-run")
    (trial_dir(run_a, "fix-git", 1) / "result.json").write_text("{broken")
    with pytest.raises(ConfigError, match="result.json"):
        write_report(run_a)


def test_minimal_and_empty_run(tmp_path):
    run = tmp_path / "fresh"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"config": {"harness": "h", "model": "m", "attempts": 3},
                                              "tasks": [{"name": "t1"}, {"name": "t2"}]}))
    index = write_report(run)
    text = index.read_text()
    assert "t1" in text and "t2" in text and text.count("o-pending") >= 6
    assert "no data" in text and "Mean@3" in text
    assert_links_resolve(index)


def test_unreadable_verifier_result_is_shown_not_raised(run_a):
    d = trial_dir(run_a, "fix-git", 2)
    (d / "verifier.json").write_text("{nope")
    (d / "verifier.log").write_text("x" * 70_000 + "\nFINAL VERDICT <b>")
    write_report(run_a)
    page = (run_a / "report" / "trials" / "fix-git" / "2.html").read_text()
    assert "verifier.json is unreadable" in page
    assert "FINAL VERDICT &lt;b&gt;" in page and "bytes cut" in page  # the log's end
    assert "test_b &lt;i&gt;" in page  # falls back to the trajectory's verification


def test_parallel_rendering_matches_serial(tmp_path):
    trials = {f"t{i}": [("passed", 1.0, False), ("failed", 0.0, False)] for i in range(5)}
    run = make_run(tmp_path / "many", trials, cast_for={("t0", 1), ("t3", 2)})
    serial = write_report(run, out_dir=tmp_path / "serial", workers=1).parent
    parallel = write_report(run, out_dir=tmp_path / "parallel", workers=2).parent
    pages = sorted(p.relative_to(serial) for p in serial.glob("trials/*/*.html"))
    assert len(pages) == 10
    assert pages == sorted(p.relative_to(parallel) for p in parallel.glob("trials/*/*.html"))
    for p in pages:
        assert (serial / p).read_text() == (parallel / p).read_text()


def test_screen_rows_follow_pyte_under_scrolling_and_editing():
    """The incremental row rendering (dirty rows, shifted on scroll) equals a full render."""
    import random

    import pyte

    from terminal_env.report.cast import _Screen

    def full(screen):
        rows = []
        for y in range(screen.lines):
            chars = [" "] * screen.columns
            for x, ch in (screen.buffer.get(y) or {}).items():
                if 0 <= x < screen.columns:
                    chars[x] = ch.data
            rows.append("".join(chars).rstrip())
        while rows and not rows[-1]:
            rows.pop()
        return rows

    pieces = ["\x1b[2J", "\x1b[H", "\x1b[K", "\x1b[1K", "\x1b[J", "\x1b[3;5H", "\r\n", "\n", "\n",
              "\x1b[L", "\x1b[M", "\x1b[P", "\x1b[@", "\x1bM", "\x1bD", "\x1b[S", "\x1b[2;4r",
              "\x1b[r", "\x1b[?1049h", "\x1b[?1049l", "\x1bc", "\t", "\b", "宽字", "e\u0301",
              "\x1b[31m", "\x1b[0m", "\x1b[5A", "\x1b[20C", "\x1b[?7l", "\x1b[?7h", "hello",
              "x" * 30, "0123456789" * 3]
    for seed in range(40):
        rng = random.Random(seed)
        screen = _Screen(rng.choice([10, 20, 40]), rng.choice([3, 5, 10]))
        stream = pyte.Stream(screen)
        for _ in range(150):
            stream.feed("".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))))
            if rng.random() < 0.5:
                assert screen.text() == full(screen), seed
