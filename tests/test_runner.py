"""The full path, for real: a scripted OpenAI-compatible HTTP server on loopback -> the official
openai client -> each harness -> TerminalEnv in Docker -> the protected verifier -> the run
directory -> summary -> HTML report. Plus bad model output, a failing or stalling server, a 401,
a killed run that is resumed, and the exports."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from terminal_env.errors import ConfigError
from terminal_env.models.scripted_server import Fail, ScriptedServer, Stall
from terminal_env.runner.config import RunConfig
from terminal_env.runner.records import load_results
from terminal_env.runner.run import Runner

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
TASK = str(ROOT / "tests/data/tasks/harbor-sum")
GOOD = "printf 'import sys\\nprint(sum(int(a) for a in sys.argv[1:]))\\n' > /app/sum.py"
# no-args and positive checks pass, negative numbers fail: progress 2 of 4 weight
HALF = "printf 'import sys\\nprint(sum(int(a) for a in sys.argv[1:] if a.isdigit()))\\n' > /app/sum.py"
SUM_PY = "import sys\nprint(sum(int(a) for a in sys.argv[1:]))\n"


def turn_of(body: dict) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def reply(harness: str, turn: int, command: str = GOOD):
    """The scripted model's answer for ``harness`` at ``turn``: solve, then submit."""
    if harness == "generic":
        return f"I will write the program.\n```bash\n{command}\n```" if turn == 0 else "Done.\n```bash\n#!submit\n```"
    if harness == "react":
        return (f"<thought>write it</thought>\n<action>{command}</action>" if turn == 0
                else "<thought>done</thought>\n<action>#!submit</action>")
    if harness == "terminus":
        if turn == 0:
            return json.dumps({"analysis": "empty dir", "plan": "write sum.py",
                               "commands": [{"keystrokes": command + "\n", "duration": 1.0}],
                               "task_complete": False})
        return json.dumps({"analysis": "written", "plan": "finish", "commands": [], "task_complete": True})
    if harness == "tool-calling":
        if turn == 0:
            if command == GOOD:
                return {"tool_calls": [{"name": "write_file", "arguments": {"path": "/app/sum.py", "content": SUM_PY}}]}
            return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}
        return {"tool_calls": [{"name": "submit", "arguments": {}}]}
    raise AssertionError(harness)


def config(**kw) -> RunConfig:
    base = dict(tasks=[TASK], harness="generic", model="openai:scripted", attempts=1, concurrency=1,
                max_turns=6, progress=False, infra_retries=1)
    base.update(kw)
    return RunConfig(**base)


@pytest.mark.parametrize("harness", ["generic", "terminus", "tool-calling", "react"])
def test_full_path_every_harness(harness, tmp_path, client, base_image):
    with ScriptedServer(lambda body: reply(harness, turn_of(body))) as server:
        cfg = config(harness=harness, attempts=2, concurrency=2, model_options={"base_url": server.base_url})
        summary = Runner(cfg, tmp_path / "run", client=client).run()
        bodies = list(server.requests)
    assert summary["mean_at_k"]["value"] == 1.0
    assert summary["n_trials"] == 2 and summary["n_masked"] == 0
    results = load_results(tmp_path / "run")
    assert [r.strict_success for r in results] == [True, True]
    assert all(r.outcome == "passed" and r.termination == "submitted" for r in results)
    # the paper's protocol went over the wire
    assert {b["temperature"] for b in bodies} == {0.6}
    assert {b.get("max_tokens") or b.get("max_completion_tokens") for b in bodies} == {8192}
    if harness == "tool-calling":
        assert {t["function"]["name"] for t in bodies[0]["tools"]} >= {"bash", "write_file", "edit", "submit"}
    trial = tmp_path / "run/trials/harbor-sum/1"
    from terminal_env.trajectory import Trajectory

    traj = Trajectory.load(trial / "trajectory.json")
    assert traj.harness == harness and traj.reward == 1.0 and traj.strict_success
    assert traj.generic_commands()[-1] == "#!submit"
    assert (trial / "verifier.json").exists() and (trial / "recording.cast").exists()
    header = json.loads((trial / "recording.cast").read_text().splitlines()[0])
    assert header["version"] == 2
    from terminal_env.report import write_report

    index = write_report(tmp_path / "run")
    assert index.exists() and "harbor-sum" in index.read_text()


def test_mixed_attempts_give_mean_at_k_and_partial_progress(tmp_path, client, base_image):
    """Three attempts: a success, a half solution, garbage until the turn budget runs out."""
    conversations = []
    lock = threading.Lock()

    def script(body):
        with lock:
            if turn_of(body) == 0:
                conversations.append(len(conversations))
            n = len(conversations) - 1
        if n == 0:
            return reply("generic", turn_of(body))
        if n == 1:
            return reply("generic", turn_of(body), command=HALF)
        return "I am not sure what to do."  # never a code block

    with ScriptedServer(script) as server:
        cfg = config(attempts=3, max_turns=3, model_options={"base_url": server.base_url}, reward="partial_progress")
        summary = Runner(cfg, tmp_path / "run", client=client).run()
    results = load_results(tmp_path / "run")
    assert [r.strict_success for r in results] == [True, False, False]
    assert results[1].outcome == "partial" and results[1].progress == pytest.approx(0.5)
    assert results[2].termination == "max_turns" and results[2].format_errors == 3
    assert results[2].outcome == "failed" and not results[2].masked
    assert summary["mean_at_k"]["value"] == pytest.approx(1 / 3)
    assert summary["pass_at_k"]["3"]["value"] == pytest.approx(1.0)
    assert summary["pass_at_k"]["1"]["value"] == pytest.approx(1 / 3)
    assert summary["mean_progress"]["value"] == pytest.approx(0.5)


def test_server_errors_are_retried_and_a_dead_server_is_masked(tmp_path, client, base_image):
    state = {"n": 0}

    def flaky(body):
        state["n"] += 1
        if state["n"] <= 2:
            return Fail(500, body="overloaded")
        return reply("generic", turn_of(body))

    with ScriptedServer(flaky) as server:
        opts = {"base_url": server.base_url, "backoff": 0.05, "max_retries": 3}
        Runner(config(model_options=opts), tmp_path / "a", client=client).run()
    (ok,) = load_results(tmp_path / "a")
    assert ok.strict_success and not ok.masked

    with ScriptedServer(lambda body: Stall(30)) as server:
        opts = {"base_url": server.base_url, "timeout": 0.5, "max_retries": 1, "backoff": 0.05}
        summary = Runner(config(model_options=opts, infra_retries=1), tmp_path / "b", client=client).run()
    (dead,) = load_results(tmp_path / "b")
    assert dead.masked and dead.termination == "model_error" and dead.tries == 2
    assert "127.0.0.1" in dead.error
    assert summary["n_masked"] == 1 and summary["mean_at_k"]["value"] is None
    assert (tmp_path / "b/trials/harbor-sum/1/trajectory.try1.json").exists()


def test_refused_key_stops_the_run_with_a_clear_message(tmp_path, client, base_image, monkeypatch, capsys):
    from terminal_env.cli import main

    with ScriptedServer(lambda body: Fail(401, body='{"error": {"message": "invalid api key"}}')) as server:
        monkeypatch.setenv("MY_KEY", "sk-secret-value")
        rc = main(["run", "--tasks", TASK, "--model", "openai:m", "--base-url", server.base_url,
                   "--api-key-env", "MY_KEY", "--attempts", "2", "--out", str(tmp_path / "run"), "--quiet"])
        n_requests = len(server.requests)
    err = capsys.readouterr().err
    assert rc == 2 and "error:" in err and "401" in err
    assert "sk-secret-value" not in err
    assert n_requests == 1  # not retried, and the second attempt never started


def test_killed_run_is_resumed(tmp_path, client, base_image):
    """SIGKILL the runner mid-run; `gc` removes its orphaned sandbox; the same command finishes
    the run without redoing finished trials."""
    out = tmp_path / "run"
    calls = []

    def script(body):
        calls.append(turn_of(body))
        return reply("generic", turn_of(body))

    with ScriptedServer(script) as server:
        cmd = [sys.executable, "-m", "terminal_env.cli", "run", "--tasks", TASK, "--model", "openai:m",
               "--base-url", server.base_url, "--attempts", "3", "--out", str(out), "--quiet"]
        proc = subprocess.Popen(cmd + ["--max-turns", "6"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not (out / "trials/harbor-sum/1/result.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished_before = len(load_results(out))
        assert 1 <= finished_before < 3
        gc = subprocess.run([sys.executable, "-m", "terminal_env.cli", "gc"], cwd=ROOT, capture_output=True)
        assert gc.returncode == 0
        n_before = len(calls)
        done = subprocess.run(cmd + ["--max-turns", "6"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    results = load_results(out)
    assert [r.attempt for r in results] == [1, 2, 3] and all(r.strict_success for r in results)
    # only the unfinished trials asked the model again (2 turns each)
    assert len(calls) - n_before == 2 * (3 - finished_before)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_trials"] == 3
    label = f"terminal-env.run={Runner(config(attempts=3), out, client=client).run_id}"
    assert client.containers.list(all=True, filters={"label": label}) == []


def test_interrupted_run_leaves_nothing_and_records_nothing_unfinished(tmp_path, client, base_image):
    out = tmp_path / "run"
    with ScriptedServer(lambda body: Stall(60)) as server:
        cmd = [sys.executable, "-m", "terminal_env.cli", "run", "--tasks", TASK, "--model", "openai:m",
               "--base-url", server.base_url, "--attempts", "1", "--out", str(out), "--quiet"]
        # Ctrl-C reaches it as from a terminal, even where the tests run from a shell that ignores
        # SIGINT (a command started in the background with `&`; its children inherit the ignore)
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while not server.requests:  # the episode started and asked the model
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "resume with the same command" in err
    assert not (out / "trials/harbor-sum/1/result.json").exists()
    label = f"terminal-env.run={Runner(config(), out, client=client).run_id}"
    assert client.containers.list(all=True, filters={"label": label}) == []


def test_resume_refuses_damaged_or_different_runs(tmp_path, client, base_image):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{not json")
    with pytest.raises(ConfigError, match="damaged run manifest"):
        Runner(config(), out, client=client).prepare()
    (out / "run.json").unlink()
    Runner(config(), out, client=client).prepare()
    with pytest.raises(ConfigError, match="different configuration.*attempts"):
        Runner(config(attempts=5), out, client=client).prepare()
    Runner(config(concurrency=4), out, client=client).prepare()  # may change on resume
    trial = out / "trials/harbor-sum/1"
    trial.mkdir(parents=True)
    (trial / "result.json").write_text("{}")
    with pytest.raises(ConfigError, match="damaged trial result.*delete this trial"):
        Runner(config(), out, client=client).prepare()


def test_oracle_nop_replay_and_exports(tmp_path, client, base_image, capsys):
    from terminal_env.cli import main
    from terminal_env.trajectory import Trajectory

    assert main(["run", "--tasks", TASK, "--model", "oracle", "--attempts", "1", "--out",
                 str(tmp_path / "oracle"), "--quiet"]) == 0
    assert main(["run", "--tasks", TASK, "--model", "nop", "--attempts", "1", "--out",
                 str(tmp_path / "nop"), "--quiet"]) == 0
    oracle = json.loads((tmp_path / "oracle/summary.json").read_text())
    nop = json.loads((tmp_path / "nop/summary.json").read_text())
    assert oracle["mean_at_k"]["value"] == 1.0 and nop["mean_at_k"]["value"] == 0.0
    capsys.readouterr()
    # replay a model's trajectory: the same commands, the same verdict
    with ScriptedServer(lambda body: reply("terminus", turn_of(body))) as server:
        assert main(["run", "--tasks", TASK, "--model", "openai:m", "--base-url", server.base_url,
                     "--harness", "terminus", "--attempts", "1", "--out", str(tmp_path / "model"), "--quiet"]) == 0
    src = tmp_path / "model/trials/harbor-sum/1/trajectory.json"
    assert main(["run", "--tasks", TASK, "--model", f"replay:{src}", "--attempts", "1", "--out",
                 str(tmp_path / "replay"), "--quiet"]) == 0
    replayed = Trajectory.load(tmp_path / "replay/trials/harbor-sum/1/trajectory.json")
    assert replayed.harness == "terminus" and replayed.strict_success
    assert replayed.generic_commands() == Trajectory.load(src).generic_commands()
    capsys.readouterr()
    assert main(["export", str(tmp_path / "oracle"), "--format", "atif"]) == 0
    atif = json.loads(capsys.readouterr().out.splitlines()[0])
    assert atif["schema_version"].startswith("ATIF-v1")
    assert [s["step_id"] for s in atif["steps"]] == list(range(1, len(atif["steps"]) + 1))
    assert any(s.get("tool_calls") for s in atif["steps"])
    assert main(["export", str(tmp_path / "oracle"), "--format", "chat", "-o", str(tmp_path / "sft.jsonl")]) == 0
    rec = json.loads((tmp_path / "sft.jsonl").read_text().splitlines()[0])
    assert [m["role"] for m in rec["messages"]][:3] == ["system", "user", "assistant"] and rec["strict_success"]
    # comparing two runs: the oracle beats nop on every task
    assert main(["report", str(tmp_path / "nop"), str(tmp_path / "oracle")]) == 0
    assert (tmp_path / "nop/report/compare.html").exists()


def test_harbor_spelled_options_pick_tasks_and_scale_timeouts(tmp_path, client, base_image):
    """-k/-n/-l and --timeout-multiplier as Harbor spells them: the first N tasks by name, and
    each task's own agent and verifier timeouts scaled (an explicit timeout still wins)."""
    import shutil

    from terminal_env.cli import main
    from terminal_env.runner.run import trial_spec
    from terminal_env.tasks import load_task

    folder = tmp_path / "tasks"
    for name in ("harbor-sum", "tb1-grep"):
        shutil.copytree(ROOT / "tests/data/tasks" / name, folder / name)
    out = tmp_path / "run"
    assert main(["run", "--tasks", str(folder), "--model", "oracle", "-k", "1", "-n", "2", "-l", "1",
                 "--timeout-multiplier", "2", "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["harbor-sum"]
    saved = json.loads((out / "run.json").read_text())["config"]
    assert (saved["attempts"], saved["concurrency"], saved["n_tasks"], saved["timeout_multiplier"]) == (1, 2, 1, 2.0)
    task = load_task(TASK)
    spec = trial_spec(config(timeout_multiplier=2.5), task, 1, "r")
    assert spec.env["time_limit"] == 2.5 * task.agent_timeout
    assert spec.verify_timeout == 2.5 * task.verifier_timeout
    spec = trial_spec(config(timeout_multiplier=2.5, episode_timeout=7, verify_timeout=9), task, 1, "r")
    assert (spec.env["time_limit"], spec.verify_timeout) == (7, 9)
    assert trial_spec(config(), task, 1, "r").verify_timeout is None  # the task's own, unscaled


def test_context_is_trimmed_and_recorded(tmp_path, client, base_image):
    """Big outputs with a small input budget: old observations are elided, the trajectory
    says so, and the full conversation is still kept."""
    def script(body):
        t = turn_of(body)
        if t < 4:
            return "```bash\nseq 1 3000\n```"
        return reply("generic", t - 4)

    with ScriptedServer(script) as server:
        params = {"max_input_tokens": 9000}
        cfg = config(max_turns=8, model_options={"base_url": server.base_url}, params=params)
        Runner(cfg, tmp_path / "run", client=client).run()
        sizes = [sum(len(m.get("content") or "") for m in b["messages"]) for b in server.requests]
    from terminal_env.trajectory import Trajectory

    traj = Trajectory.load(tmp_path / "run/trials/harbor-sum/1/trajectory.json")
    assert traj.strict_success
    assert traj.context_events and traj.context_events[0].kind == "elided"
    assert max(sizes) < 9000 * 3.5
    # nothing is lost in the record
    assert sum("2999" in (m.get("content") or "") for m in traj.messages) == 4


def test_human_plays_through_stdin(tmp_path, client, base_image):
    import io

    from terminal_env.agent import run_agent
    from terminal_env.env import TerminalEnv
    from terminal_env.harness import get_harness
    from terminal_env.models.simple import HumanBackend

    typed = io.StringIO(f"cd /app\n{GOOD}\npython3 sum.py 2 \\\n 3\n#!submit\n")
    shown = io.StringIO()
    env = TerminalEnv(TASK, client=client)
    try:
        traj = run_agent(env, get_harness("react"), HumanBackend(stdin=typed, stdout=shown))
    finally:
        env.close()
    assert traj.harness == "generic"  # a human speaks the generic harness
    assert traj.strict_success and traj.termination == "submitted"
    assert "5" in shown.getvalue()


def test_a_missing_runtime_stops_the_run_before_it_starts(tmp_path, client, base_image):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "terminal_env.cli", "run", "--tasks", TASK, "--model", "oracle",
         "--runtime", "no-such-runtime", "--out", str(out), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert "no OCI runtime 'no-such-runtime'" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()  # nothing recorded for a run that could not start


def test_runc_by_name_runs_and_is_recorded(tmp_path, client, base_image):
    out = tmp_path / "run"
    summary = Runner(config(model="oracle", attempts=1, runtime="runc"), out, client=client).run()
    assert summary["n_trials"] == 1 and summary["mean_at_k"]["value"] == 1.0
    assert json.loads((out / "run.json").read_text())["config"]["runtime"] == "runc"
