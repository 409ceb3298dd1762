"""Harbor's several reward metrics (``reward.json`` with named numbers) with the real Docker
engine: carried through the verifier's result, picked by name as the RL reward, and reported by
the runner (summary, table, HTML report). The attack on reward.json itself (a process that keeps
rewriting it during the tests) is in ``test_verify_protected.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.cli import main
from terminal_env.models.simple import NopBackend, ScriptedBackend
from terminal_env.tasks import load_task

pytestmark = pytest.mark.docker

WORDS = ("amber", "basil", "cedar", "delta")
# accuracy: the share of the four words in /app/out; lines: how many lines it has (a metric that
# is not a share); reward: 1 only when every word is there
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
found=0
for w in amber basil cedar delta; do grep -qx "$w" /app/out 2>/dev/null && found=$((found + 1)); done
lines=$(cat /app/out 2>/dev/null | wc -l)
reward=0; [ "$found" = 4 ] && reward=1
printf '{"reward": %s, "accuracy": %s, "lines": %s, "note": "words found"}\\n' \\
    "$reward" "$(awk -v f="$found" 'BEGIN { print f / 4 }')" "$lines" \\
    > /logs/verifier/reward.json
"""


def write_task(root: Path) -> Path:
    d = root / "metrics-task"
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text(f"Write the words {', '.join(WORDS)} to /app/out, one a line.\n")
    (d / "task.toml").write_text(
        'schema_version = "1.3"\n\n[task]\nname = "test/metrics-task"\n\n'
        "[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n"
        '[environment]\ncpus = 1\nmemory_mb = 512\nnetwork_mode = "no-network"\n'
    )
    (d / "environment" / "Dockerfile").write_text("FROM terminal-env/base:bookworm-1\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text(TEST_SH)
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\nprintf '%s\\n' " + " ".join(WORDS) + " > /app/out\n")
    return d


@pytest.fixture(scope="module")
def task(tmp_path_factory, base_image):
    return load_task(write_task(tmp_path_factory.mktemp("metrics")))


def play(task, agent, reward):
    env = TerminalEnv(task, reward=reward, max_steps=5)
    try:
        return run_episode(env, agent)
    finally:
        env.close()


def test_every_metric_is_carried_and_one_is_picked_by_name(task):
    half = ScriptedBackend.of_actions(["printf 'amber\\ncedar\\nzinc\\n' > /app/out"])
    reward, info = play(task, half, "metric:accuracy")
    result = info["verification"]
    assert result.metrics == {"reward": 0.0, "accuracy": 0.5, "lines": 3.0}, result.metrics  # "note" is no number
    assert reward == 0.5 and result.outcome == "failed"  # reward.json's reward decides the verdict
    reward, info = play(task, ScriptedBackend.of_actions(["printf 'amber\\ncedar\\nzinc\\n' > /app/out"]),
                        "metrics:accuracy=1,reward=1")
    assert reward == 0.25
    reward, info = play(task, NopBackend(), "metric:accuracy")
    assert reward == 0.0 and info["verification"].metrics == {"reward": 0.0, "accuracy": 0.0, "lines": 0.0}


def test_the_runner_reports_each_metric(task, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", "--tasks", str(task.path), "--model", "oracle", "-k", "2", "--out", str(out),
            "--reward", "metric:accuracy", "--report"]
    assert main(argv) == 0
    printed = " ".join(capsys.readouterr().out.split())
    trial = json.loads((out / "trials" / "metrics-task" / "1" / "result.json").read_text())
    assert trial["metrics"] == {"reward": 1.0, "accuracy": 1.0, "lines": 4.0} and trial["reward"] == 1.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["accuracy"]["value"] == 1.0 and summary["metrics"]["lines"]["value"] == 4.0
    assert summary["tasks"][0]["metrics"] == {"accuracy": 1.0, "lines": 4.0, "reward": 1.0}
    assert "metric accuracy (1 tasks)" in printed and "metric lines (1 tasks)" in printed, printed
    html = (out / "report" / "index.html").read_text()
    assert "Metric accuracy" in html and "Metric lines" in html
    page = next((out / "report").rglob("trials/metrics-task/1*.html"), None) or next(
        p for p in (out / "report").rglob("*.html") if "metrics-task" in str(p) and p.name != "index.html")
    assert "accuracy 1, lines 4, reward 1" in page.read_text()
