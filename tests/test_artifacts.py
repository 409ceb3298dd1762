"""Harbor's artifacts with the real Docker engine: the task's ``artifacts`` and the convention
directory /logs/artifacts are copied out of the sandbox after the run into the trial's
``artifacts/``, listed in artifacts.json and in the report; what the agent plants to reach out
of the sandbox (links to host paths, links out of the destination, a huge file) lands nowhere
outside the trial directory and is recorded as refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from terminal_env.cli import main
from terminal_env.tasks import load_task

pytestmark = pytest.mark.docker

SOLVE = """#!/bin/bash
mkdir -p /app/res/sub /logs/artifacts
echo answer > /app/out.txt
echo kept > /app/res/a.txt; echo skipped > /app/res/b.tmp; echo deep > /app/res/sub/c.txt
echo conv > /logs/artifacts/note.txt
"""
# What an agent that wants the host's files does: links into the host's paths (absolute, and up
# out of the trial directory), in every place that is collected; and a file over the byte cap.
PLANT = """#!/bin/bash
mkdir -p /app/res /logs/artifacts
ln -s /etc/passwd /app/out.txt
ln -s ../../../../../../../../etc/hostname /app/res/up
echo fine > /app/res/a.txt
ln -s /root /logs/artifacts/rootdir
head -c 3000000 /dev/zero > /app/big.bin
"""


def write_task(root: Path, solve: str, extra: str = "") -> Path:
    d = root / "artifact-task"
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text("Write /app/out.txt.\n")
    (d / "task.toml").write_text(
        'schema_version = "1.3"\n'
        'artifacts = ["/app/out.txt", { source = "/app/res", destination = "results", exclude = ["*.tmp"] }'
        f'{extra}]\n\n[task]\nname = "test/artifact-task"\n\n'
        "[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n"
        '[environment]\ncpus = 1\nmemory_mb = 512\nnetwork_mode = "no-network"\n')
    (d / "environment" / "Dockerfile").write_text("FROM terminal-env/base:bookworm-1\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if [ \"$(cat /app/out.txt)\" = answer ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
    (d / "solution" / "solve.sh").write_text(solve)
    return d


def run(task_dir: Path, out: Path) -> Path:
    assert main(["run", "--tasks", str(task_dir), "--model", "oracle", "-k", "1", "--out", str(out),
                 "--quiet", "--report"]) == 0
    return out / "trials" / "artifact-task" / "1"


def test_artifacts_are_collected_into_the_trial_directory_and_reported(tmp_path, base_image):
    trial = run(write_task(tmp_path, SOLVE), tmp_path / "run")
    arts = trial / "artifacts"
    assert (arts / "out.txt").read_text() == "answer\n"
    assert (arts / "results" / "a.txt").read_text() == "kept\n"
    assert (arts / "results" / "sub" / "c.txt").read_text() == "deep\n"
    assert not (arts / "results" / "b.tmp").exists()  # excluded
    assert (arts / "note.txt").read_text() == "conv\n"  # the convention directory, at the top
    records = {r["source"]: r for r in json.loads((trial / "artifacts.json").read_text())}
    assert records["/app/out.txt"]["status"] == "collected" and records["/app/out.txt"]["files"] == ["out.txt"]
    assert sorted(records["/app/res"]["files"]) == ["a.txt", "sub/c.txt"]
    assert records["/logs/artifacts"]["files"] == ["note.txt"]
    page = (tmp_path / "run" / "report" / "trials" / "artifact-task" / "1.html").read_text()
    assert "<h2>Artifacts</h2>" in page and "/app/res" in page and "sub/c.txt" in page


def test_links_out_of_the_sandbox_land_nowhere(tmp_path, base_image, monkeypatch):
    monkeypatch.setattr("terminal_env.artifacts.MAX_BYTES", 2_000_000)
    d = write_task(tmp_path, PLANT, extra=', "/app/big.bin"')
    task = load_task(d)
    assert [a.source for a in task.trial_artifacts] == ["/app/out.txt", "/app/res", "/app/big.bin"]
    trial = run(d, tmp_path / "run")
    arts = trial / "artifacts"
    records = {r["source"]: r for r in json.loads((trial / "artifacts.json").read_text())}
    # each planted link reached the host side as a tar entry (the reasons name them: the attack
    # happened) and was refused before anything was written
    assert "'out.txt' is a link to an absolute path" in records["/app/out.txt"]["reason"], records
    assert "'res/up' would link to" in records["/app/res"]["reason"], records["/app/res"]
    assert "'artifacts/rootdir' is a link to an absolute path" in records["/logs/artifacts"]["reason"]
    assert all(records[s]["status"] == "refused" for s in records), records
    assert "limit" in records["/app/big.bin"]["reason"]
    assert not (arts / "out.txt").exists() and not (arts / "out.txt").is_symlink()
    assert not (arts / "results").exists() and not (arts / "big.bin").exists()
    # nothing under the trial directory points outside it, and nothing was written next to it
    for p in trial.rglob("*"):
        if p.is_symlink():
            assert Path(os.path.realpath(p)).is_relative_to(trial.resolve()), (p, os.readlink(p))
    assert sorted(x.name for x in trial.parent.parent.iterdir()) == ["artifact-task"]
    assert not list(arts.glob(".staging-*")) and not (tmp_path / "etc").exists()
