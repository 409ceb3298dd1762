"""The quality gate against real builds and episodes: good tasks pass; a leaking task, a broken
Dockerfile and a failing solution are each reported by name with the reason, and one broken task
does not stop the others."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from terminal_env.cli import main
from terminal_env.tasks import load_task
from terminal_env.tasks.check import check_task, innocent, needles, sample_paths

pytestmark = pytest.mark.docker

GOOD = Path(__file__).parent / "data" / "protected" / "word-stats"


def variant(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(GOOD, dest)
    return dest


def test_a_good_task_passes_the_gate(base_image):
    row = check_task(GOOD)
    assert row.ok, row.reason
    assert row.oracle.startswith("passed 1.00") and row.nop.startswith("failed")
    assert row.snoop.startswith("0 found") and row.checks == 3 and row.build_s is not None
    assert row.in_process == []  # its tests run the agent's script in subprocesses


def test_a_task_that_ships_its_tests_in_the_image_is_caught(tmp_path, base_image):
    leaky = variant(tmp_path, "leaky-stats")
    shutil.copy(leaky / "tests" / "test_stats.py", leaky / "environment" / "notes.py")
    (leaky / "environment" / "Dockerfile").write_text(
        (leaky / "environment" / "Dockerfile").read_text() + "COPY notes.py /usr/share/doc/notes.py\n"
    )
    task = load_task(leaky)
    # copied into the environment, the lines are "given" and no longer count as needles;
    # the file name still gives it away only if it has a test's name, so search the content:
    row = check_task(leaky)
    assert not row.ok and "snoop found" in row.reason, row.reason
    assert any("/usr/share/doc/notes.py" in h for h in row.snoop_hits)
    assert needles(task)  # at least the canary


STOCK = "# System-wide .bashrc file for interactive bash(1) shells."  # a line of the base image


def test_what_the_base_image_holds_is_no_leak(tmp_path, base_image):
    """A test line that the base image holds too (here a stock comment) is found by the snoop
    and then dropped as innocent; a line only the task holds stays a leak."""
    task = variant(tmp_path, "stock-line")
    test_sh = task / "tests" / "test.sh"
    test_sh.write_text(test_sh.read_text() + f"\n{STOCK}\n")
    loaded = load_task(task)
    wanted = needles(loaded)  # the snoop names a line by its number among these, from 1
    assert STOCK in wanted
    own = next(i for i, w in enumerate(wanted, 1) if w != STOCK and "CANARY" not in w)
    secret = f"FOUND-TEXT: /app/notes.txt:#{own}"
    hits = [f"FOUND-TEXT: /etc/bash.bashrc:#{wanted.index(STOCK) + 1}", secret, "FOUND-DIR: /tests",
            "FOUND-FILE: /usr/share/doc/test_outputs.py"]
    assert innocent(loaded, hits) == [secret, "FOUND-DIR: /tests", "FOUND-FILE: /usr/share/doc/test_outputs.py"]
    row = check_task(task, probes=())
    assert row.ok and row.snoop.startswith("0 found"), (row.reason, row.snoop_hits)


def test_broken_dockerfile_and_failing_solution_are_named(tmp_path, base_image):
    broken = variant(tmp_path, "broken-build")
    (broken / "environment" / "Dockerfile").write_text(
        "FROM terminal-env/base:bookworm-1\nRUN exit 3\n"
    )
    wrong = variant(tmp_path, "wrong-solution")
    (wrong / "solution" / "solve.sh").write_text("#!/bin/bash\necho nothing useful\n")
    out = tmp_path / "rows.json"
    res = subprocess.run(
        [sys.executable, "-m", "terminal_env", "tasks", "check", str(tmp_path), "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 1 and "Traceback" not in res.stdout + res.stderr
    rows = {r["task"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"broken-build", "wrong-solution"}
    assert "ImageBuildError" in rows["broken-build"]["reason"]
    assert "broken-build" in rows["broken-build"]["reason"] or "exit" in rows["broken-build"]["reason"]
    assert rows["wrong-solution"]["reason"].startswith("oracle: failed")
    # cut off after one task: --resume checks only the other and keeps the first one's row
    first = rows["wrong-solution"]
    out.write_text(json.dumps([first]))
    res = subprocess.run(
        [sys.executable, "-m", "terminal_env", "tasks", "check", str(tmp_path), "--json", str(out),
         "--resume"], capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 1 and "resuming: 1 task(s) already checked" in res.stdout, res.stdout
    assert "wrong-solution:" not in res.stdout and "broken-build: FAIL" in res.stdout
    rows = json.loads(out.read_text())
    assert [r["task"] for r in rows] == ["wrong-solution", "broken-build"] and rows[0] == first
    # a task whose files changed since its row was written is checked again; a row of a task not
    # asked for this time stays in the file
    (wrong / "solution" / "solve.sh").write_text("#!/bin/bash\necho still nothing useful\n")
    elsewhere = dict(first, path=str(tmp_path / "elsewhere" / "t"), task="elsewhere")
    out.write_text(json.dumps([elsewhere] + rows))
    res = subprocess.run(
        [sys.executable, "-m", "terminal_env", "tasks", "check", str(tmp_path), "--json", str(out),
         "--resume"], capture_output=True, text=True, timeout=600,
    )
    said = " ".join(res.stdout.split())
    assert "1 task(s) changed since" in said and "resuming: 1 task(s) already checked" in said, said
    assert "wrong-solution: FAIL" in res.stdout and "broken-build:" not in res.stdout
    rows = {r["task"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"elsewhere", "wrong-solution", "broken-build"}
    assert rows["wrong-solution"]["digest"] != first["digest"] and rows["elsewhere"] == elsewhere


def test_a_check_stopped_by_sigterm_leaves_no_container(tmp_path, base_image):
    """The checks run in worker threads: their sandboxes are removed on SIGTERM as well (the
    gate over a big pool is stopped and resumed)."""
    client = docker.from_env()
    proc = subprocess.Popen([sys.executable, "-m", "terminal_env", "tasks", "check", str(GOOD)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mine = {"label": f"terminal-env.owner-pid={proc.pid}"}
    try:
        deadline = time.monotonic() + 300
        while not client.containers.list(filters=mine) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.containers.list(filters=mine), "the check never started a sandbox"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    assert client.containers.list(all=True, filters=mine) == []


def test_resume_refuses_what_it_cannot_read(tmp_path, capsys):
    def error() -> str:
        return " ".join(capsys.readouterr().err.split())  # rich wraps long lines

    assert main(["tasks", "check", str(GOOD), "--resume"]) == 2
    assert "--resume needs --json FILE" in error()
    bad = tmp_path / "rows.json"
    bad.write_text("{not json")
    assert main(["tasks", "check", str(GOOD), "--resume", "--json", str(bad)]) == 2
    assert f"--resume: {bad} is not the JSON" in error()
    assert bad.read_text() == "{not json"  # nothing lost


def test_sample_is_fixed_for_a_seed(tmp_path):
    paths = [tmp_path / f"t{i:02d}" for i in range(20)]
    a = sample_paths(paths, 5, seed=3)
    assert a == sample_paths(list(reversed(paths)), 5, seed=3)
    assert len(a) == 5 and a != sample_paths(paths, 5, seed=4)


FIXTURES = Path(__file__).parent / "data" / "tasks"


@pytest.mark.parametrize("name, static", [("harbor-inprocess", "spec_from_file_location"),
                                          ("tb1-inprocess", "sys.path.insert(0, \"/app\")")])
def test_tests_that_load_the_agents_code_in_process_are_reported_with_the_fix(name, static, base_image):
    row = check_task(FIXTURES / name)
    assert not row.ok and "run it in a subprocess" in row.reason, row.reason
    assert any(static in f for f in row.in_process), row.in_process  # the static scan
    module = "/app/stats.py" if name == "harbor-inprocess" else "/app/solution.py"
    assert f"the test process ran {module}" in row.in_process  # the dynamic probe (oracle run)
    assert row.oracle.startswith("passed 1.00")  # the guard does not break the oracle
