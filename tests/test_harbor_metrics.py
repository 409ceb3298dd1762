"""Harbor's several reward metrics (``reward.json`` with named numbers) with the real Docker
engine: carried through the verifier's result, picked by name as the RL reward, and reported by
the runner (summary, table, HTML report). The attack on reward.json itself (a process that keeps
rewriting it during the tests) is in ``test_verify_protected.py``; here, result files that the
agent's program writes while the tests run it, which the verifier does not read unless the
tests name them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.cli import main
from terminal_env.models.simple import NopBackend, OracleBackend, ScriptedBackend
from terminal_env.tasks import load_task

pytestmark = pytest.mark.docker
DATA = Path(__file__).parent / "data" / "tasks"

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


# A task whose tests run the agent's program and write only reward.txt (the common shape).
RUNS_AGENT_SH = """#!/bin/bash
mkdir -p /logs/verifier
out=$(timeout 10 /app/run.sh 2>/dev/null)
if [ "$out" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""
# The agent's program, run by the tests as root: it answers wrong and writes reward.json itself.
FORGER = ("printf '#!/bin/sh\\nmkdir -p /logs/verifier\\n"
          "echo {\\\\\"reward\\\\\": 1, \\\\\"accuracy\\\\\": 1} > /logs/verifier/reward.json\\necho 41\\n' "
          "> /app/run.sh && chmod +x /app/run.sh")


def test_a_reward_json_the_tests_never_write_is_not_read(tmp_path, base_image):
    d = write_task(tmp_path)
    (d / "tests" / "test.sh").write_text(RUNS_AGENT_SH)
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\nprintf '#!/bin/sh\\necho 42\\n' > /app/run.sh\n"
                                             "chmod +x /app/run.sh\n")
    task = load_task(d)
    reward, info = play(task, ScriptedBackend.of_actions([FORGER]), "binary")
    result = info["verification"]
    # the forgery happened (the tests ran the program, which wrote reward.json), and was ignored
    assert "reward.json ignored: the task's tests never name it" in result.message, result.message
    assert reward == 0.0 and result.outcome == "failed", (result.message, result.metrics)
    assert result.metrics == {"reward": 0.0}, result.metrics
    reward, info = play(task, OracleBackend(), "binary")
    assert reward == 1.0 and "ignored" not in info["verification"].message


def test_checks_the_tests_never_write_are_not_read(tmp_path, base_image):
    """The same with a forged checks.json: every check passed would be progress 1.0."""
    d = write_task(tmp_path)
    (d / "tests" / "test.sh").write_text(RUNS_AGENT_SH)
    task = load_task(d)
    forger = ("printf '#!/bin/sh\\nmkdir -p /logs/verifier\\necho [{\\\\\"name\\\\\": \\\\\"a\\\\\", "
              "\\\\\"passed\\\\\": true}] > /logs/verifier/checks.json\\necho 41\\n' > /app/run.sh "
              "&& chmod +x /app/run.sh")
    reward, info = play(task, ScriptedBackend.of_actions([forger]), "partial_progress")
    result = info["verification"]
    assert "checks.json ignored" in result.message, result.message
    assert reward == 0.0 and result.checks == [], (result.message, result.checks)


def test_a_terminal_bench_1_verdict_is_its_pytest_output_alone(tmp_path, base_image):
    """A TB1 task's tests name no result file (the verdict is pytest's -rA summary): a
    checks.json that the agent's program writes while the tests run it is not read. (The guard
    already refused this one, a passing check its pytest session never recorded; now the file
    is not read at all, as for a test script that runs no pytest.)"""
    d = tmp_path / "tb1-runs-agent"
    shutil.copytree(DATA / "tb1-grep", d)
    (d / "tests" / "test_outputs.py").write_text(
        "import subprocess\n\n\ndef test_the_program_answers():\n"
        "    out = subprocess.run(['/app/run.sh'], capture_output=True, text=True).stdout\n"
        "    assert out.strip() == '42'\n")
    forged = ("printf '#!/bin/sh\\nmkdir -p /logs/verifier\\necho [{\\\\\"name\\\\\": \\\\\"a\\\\\", "
              "\\\\\"passed\\\\\": true}] > /logs/verifier/checks.json\\necho 41\\n' > /app/run.sh "
              "&& chmod +x /app/run.sh")
    task = load_task(d)
    reward, info = play(task, ScriptedBackend.of_actions([forged]), "partial_progress")
    result = info["verification"]
    assert "checks.json ignored" in result.message, result.message  # it was there: proof
    assert reward == 0.0 and result.source == "pytest-output", (result.message, result.source)
