"""Recursive Self-Rewrite end to end, without a model: the typed oracle collects under three
harnesses, the deterministic planner rewrites, the leak checks review, the executor re-runs under
the generic harness, and the dataset holds only verified, leak-free records."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from terminal_env.errors import ConfigError
from terminal_env.harness.base import ActionResult, CommandRecord, HarnessAction
from terminal_env.models.base import Completion
from terminal_env.models.simple import NopBackend, ScriptedBackend
from terminal_env.models.typed import UntypeableSolution, tool_call_for, typed_commands
from terminal_env.rsr import (
    DeterministicPlanner,
    LeakChecks,
    ModelPlanner,
    ModelReviewer,
    Playbook,
    PlaybookStep,
    RSRConfig,
    RSRRun,
    review,
)
from terminal_env.rsr.plan import heredoc, planner_view, python_edit
from terminal_env.rsr.playbook import Source
from terminal_env.scale.rollout import RolloutPool
from terminal_env.tasks import load_task
from terminal_env.trajectory import ModelRef, TaskRef, Trajectory, Turn

ROOT = Path(__file__).resolve().parent.parent
POOL = ROOT / "tasks"
A, B = "td-csv-region-totals", "td-csv-customer-totals"  # both in the train split


# ---- the typed oracle ------------------------------------------------------------------------


def test_a_solution_is_cut_into_the_commands_a_person_would_type():
    script = ("#!/bin/bash\nset -euo pipefail\n# build it\ncd /app\ncat > a.py <<'EOF'\nprint(1)\n\nEOF\n"
              "if [ -f a.py ]; then\n  echo yes\nfi\nawk '{print $0}' a.py\ngit log \\\n  --oneline\nexit 0\n")
    assert typed_commands(script) == ["cd /app", "cat > a.py <<'EOF'\nprint(1)\n\nEOF",
                                      "if [ -f a.py ]; then\n  echo yes\nfi", "awk '{print $0}' a.py",
                                      "git log \\\n  --oneline"]
    for own in ('cp "$(dirname "$0")/data" /app', "cp /solution/x /app", 'source "${BASH_SOURCE%/*}/lib"'):
        with pytest.raises(UntypeableSolution, match="its own directory"):
            typed_commands(own)
    assert tool_call_for("cat > /app/a.py <<'EOF'\nx = 1\nEOF") == {
        "name": "write_file", "arguments": {"path": "/app/a.py", "content": "x = 1\n"}}
    assert tool_call_for('cat > /app/$N <<EOF\n$HOME\nEOF')["name"] == "bash"  # expanded: not literal


# ---- the planner -----------------------------------------------------------------------------


def traj_of(harness: str, turns: list[tuple[str, list[ActionResult]]]) -> Trajectory:
    t = Trajectory(task=TaskRef(name="x"), harness=harness, model=ModelRef(name="m", backend="ScriptedBackend"))
    t.turns = [Turn(index=i, started=0.0, completion=Completion(text=text), actions=acts)
               for i, (text, acts) in enumerate(turns)]
    t.verification = {"outcome": "passed", "strict_success": True, "progress": 1.0,
                      "checks": [{"name": "test_secret_value", "passed": True}], "log_tail": "expected 4242"}
    return t


def act(tool: str, args: dict, *, error: str | None = None, out: str = "", code: int | None = 0) -> ActionResult:
    return ActionResult(action=HarnessAction(tool=tool, args=args), error=error,
                        commands=[CommandRecord(action={"kind": "command"}, text="", observation=out, exit_code=code)])


def test_harness_actions_become_generic_commands_and_the_verifier_stays_out():
    terminus = traj_of("terminus", [
        (json.dumps({"analysis": "Look first.", "plan": "List the files."}),
         [act("keystrokes", {"keystrokes": "ls -la\n", "duration": 1})]),
        ('{"analysis": "stop it", "plan": ""}', [act("keystrokes", {"keystrokes": "C-c"})]),
        ('{"analysis": "half", "plan": ""}', [act("keystrokes", {"keystrokes": "echo typed-but-not-run"})]),
        ('{"analysis": "done", "plan": ""}', [act("submit", {})]),
    ])
    tools = traj_of("tool-calling", [
        ("write it", [act("write_file", {"path": "/app/a.txt", "content": "one\ntwo"}),
                      act("read_file", {"path": "/app/a.txt"}),
                      act("bash", {"command": "rm -rf /"}, error="refused: bad arguments")]),
        ("fix it", [act("edit", {"path": "/app/a.txt", "old_str": "two", "new_str": "2"})]),
    ])
    planner = DeterministicPlanner()
    kw = dict(instruction="do it", task_path="/t", task_digest="d", attempt=1, source_path="p")
    pb = planner.plan(terminus, **kw)
    assert pb.commands() == ["ls -la", "#!keys C-c", "#!keys 'echo typed-but-not-run'"]
    assert pb.steps[0].why == "Look first. List the files." and pb.steps[1].keys == ["C-c"]  # keys survive
    pb2 = planner.plan(tools, **kw)
    assert pb2.commands() == [heredoc("/app/a.txt", "one\ntwo"), python_edit("/app/a.txt", "two", "2")]
    assert any("read_file" in d for d in pb2.dropped) and any("refused" in d for d in pb2.dropped)
    # the planner's whole view: nothing of the verifier in it
    view = json.dumps(planner_view(terminus, "do it"))
    assert "4242" not in view and "test_secret_value" not in view and "strict_success" not in view


def test_heredoc_and_edit_write_exactly_what_the_tool_did(sandbox):
    content = "line 1\nEOF\n  indented $HOME `x`\nno newline at the end"
    res = sandbox.exec(heredoc("/app/sub/f.txt", content) + "\n" + python_edit("/app/sub/f.txt", "line 1", "first"))
    assert res.exit_code == 0, res.output
    assert sandbox.read_file("/app/sub/f.txt").decode() == content.replace("line 1", "first")
    res = sandbox.exec(python_edit("/app/sub/f.txt", "missing", "x"))
    assert res.exit_code != 0 and "exactly once" in res.output


# ---- the reviewer ----------------------------------------------------------------------------


def small_task(tmp_path: Path) -> Path:
    d = tmp_path / "leaky"
    (d / "tests").mkdir(parents=True)
    (d / "environment").mkdir()
    (d / "tests" / "test_outputs.py").write_text(
        "def test_total():\n    assert open('/app/out').read().strip() == 'TOTAL 98765'\n"
        "def test_region():\n    assert 'north-east' in open('/app/out').read()\n"
        "def test_git():\n    import subprocess\n"
        "    assert subprocess.run(['git', 'rev-parse', '--verify', 'HEAD~1'], cwd='/app/repo').returncode == 0\n")
    (d / "tests" / "expected.csv").write_text("region,total\nnorth-east,98765\n")
    (d / "environment" / "data.csv").write_text("region,units\nnorth-east,5\n")
    return d


def playbook(*commands: str, why: str = "") -> Playbook:
    return Playbook(task="leaky", task_path="/t", task_digest="d", instruction="Sum the units per region.",
                    source=Source(trajectory_id="t", harness="generic", attempt=1, policy="p", path="p"),
                    steps=[PlaybookStep(command=c, why=why) for c in commands])


def test_leak_checks_reject_hidden_values_and_verifier_files_and_nothing_public(tmp_path):
    checks = LeakChecks(small_task(tmp_path), instruction="Sum the units per region into /app/out.")
    assert "TOTAL 98765" in checks.hidden and "98765" in checks.hidden
    assert "north-east" not in checks.hidden  # it is in the environment's data: an agent can see it
    assert "rev-parse" not in checks.hidden and "--verify" not in checks.hidden  # what the tests run
    clean = review(playbook("awk -F, 'NR>1{s+=$2} END{print \"TOTAL\", s}' /app/data.csv > /app/out",
                            "grep north-east /app/data.csv", "cd /app/tests && ls"), checks)
    assert clean.accepted and clean.reasons == [] and clean.reviewers == ["leak-checks"]
    leaky = review(playbook("echo 'TOTAL 98765' > /app/out"), checks)
    assert not leaky.accepted
    assert "leaked-value: step 1 holds 'TOTAL 98765', which only the task's tests hold" in leaky.reasons
    for cmd in ("cat /tests/test_outputs.py", "cat /logs/verifier/reward.txt", "ls /solution", "bash solve.sh"):
        verdict = review(playbook(cmd), checks)
        assert not verdict.accepted and verdict.reasons[0].startswith("path-reference"), cmd
    assert not review(playbook("true", why="the answer is 98765"), checks).accepted  # reasoning counts too


def test_model_roles_come_after_the_checks_and_read_prompt_files(tmp_path):
    checks = LeakChecks(small_task(tmp_path), instruction="x")
    asked = []

    def answer(messages):
        asked.append(messages)
        return '{"accept": false, "reason": "hard-codes a total"}'

    reviewer = ModelReviewer(ScriptedBackend(answer, name="rev"))
    assert not review(playbook("echo 'TOTAL 98765'"), checks, reviewer).accepted
    assert asked == []  # the leak checks rejected it: the model was never asked
    verdict = review(playbook("echo hi"), checks, reviewer)
    assert verdict.reasons == ["model-rejected: hard-codes a total"] and verdict.reviewers == ["leak-checks", "model:rev"]
    assert set(verdict.usage) <= {"prompt_tokens", "completion_tokens"}  # what the backend reported
    shown = asked[0][1]["content"]
    assert "98765" not in shown and "test_total" not in shown  # the model sees instruction and steps only
    prompt = tmp_path / "mine.md"
    prompt.write_text("Plan it.")
    planner = ModelPlanner(ScriptedBackend(['```json\n[{"command": "make", "why": "build"}]\n```']), prompt)
    t = traj_of("generic", [("x", [act("bash", {"command": "make all"})])])
    pb = planner.plan(t, instruction="i", task_path="/t", task_digest="d", attempt=1, source_path="p")
    assert pb.commands() == ["make"] and pb.planner == "model:scripted"
    kept = ModelPlanner(ScriptedBackend(["no list here"])).plan(t, instruction="i", task_path="/t", task_digest="d",
                                                                attempt=1, source_path="p")
    assert kept.commands() == ["make all"] and kept.planner == "deterministic"  # the draft, labelled as such
    with pytest.raises(ConfigError, match="does not exist"):
        ModelPlanner(ScriptedBackend([]), tmp_path / "none.md")


def test_validation_and_test_tasks_are_refused(tmp_path):
    held = [p for p in sorted(POOL.iterdir()) if 'split = "validation"' in (p / "task.toml").read_text()][:1]
    held += [p for p in sorted(POOL.iterdir()) if 'split = "test"' in (p / "task.toml").read_text()][:1]
    assert len(held) == 2
    for path in held:
        with pytest.raises(ConfigError, match="train split only.*never become training data"):
            RSRRun(tmp_path / path.name, RSRConfig(tasks=[str(path)]))
    assert not any((tmp_path / p.name).exists() for p in held)
    with pytest.raises(ConfigError, match="unknown harness 'bogus'"):
        RSRRun(tmp_path / "h", RSRConfig(tasks=[str(POOL / A)], harnesses=["generic", "bogus"]))
    assert not (tmp_path / "h").exists()


# ---- end to end ------------------------------------------------------------------------------


@pytest.mark.docker
def test_rsr_end_to_end_on_bundled_train_tasks(client, base_image, tmp_path):
    out = tmp_path / "rsr"
    run = RSRRun(out, RSRConfig(tasks=[str(POOL / A), str(POOL / B)], concurrency=2), client=client)
    hidden = LeakChecks(POOL / A, instruction=load_task(POOL / A).instruction).hidden
    assert hidden, "the task's tests hold values its instruction does not"

    # Task B is solved only under Terminus (typed keystrokes); generic and tool-calling submit at once.
    async def b_attempts():
        async with RolloutPool(max_concurrency=2, client=client) as pool:
            for harness, model in (("generic", lambda: NopBackend()), ("tool-calling", None), ("terminus", "typed-oracle")):
                backend = model or (lambda: ScriptedBackend([{"content": "", "tool_calls": [
                    {"name": "submit", "arguments": {}}]}]))
                traj = await pool.rollout(backend, POOL / B, harness)
                path = run.path("collect", B, f"{harness}-1")
                path.parent.mkdir(parents=True, exist_ok=True)
                traj.save(path)
            # A memorising policy: it solves A and echoes a value only the tests hold.
            typed = typed_commands((POOL / A / "solution" / "solve.sh").read_text())
            leak = ScriptedBackend.of_actions([*typed, f"echo {json.dumps(hidden[0])} > /dev/null"])
            traj = await pool.rollout(lambda: leak, POOL / A, "generic", seed=2)
            path = run.path("collect", A, "generic-2")
            path.parent.mkdir(parents=True, exist_ok=True)
            traj.save(path)

    asyncio.run(b_attempts())
    masked = Trajectory(task=TaskRef(name=A), harness="tool-calling", model=ModelRef(name="x", backend="x"), masked=True)
    masked.save(run.path("collect", A, "tool-calling-1"))  # an infrastructure failure: played again
    run.collect()  # plays only what is missing or masked: task A under the three harnesses
    assert not Trajectory.load(run.path("collect", A, "tool-calling-1")).masked
    solved = {(t, k) for t, k, _ in run.kept()}
    assert solved == {(A, "generic-1"), (A, "terminus-1"), (A, "tool-calling-1"), (A, "generic-2"), (B, "terminus-1")}
    run.plan()
    # A playbook that lost a step: it was accepted, and must fail on re-run and be dropped.
    good = Playbook.load(run.path("playbooks", A, "generic-1"))
    broken = good.model_copy(update={"steps": good.steps[-1:]})
    broken.save(run.path("playbooks", A, "generic-3"))
    run.review()
    run.execute()
    funnel = run.build()

    leaky = json.loads(run.path("reviews", A, "generic-2").read_text())
    assert not leaky["accepted"] and leaky["reasons"][0].startswith("leaked-value")
    assert json.loads(run.path("reviews", A, "generic-3").read_text())["accepted"]
    assert not Trajectory.load(run.path("execute", A, "generic-3")).strict_success
    b_play = Playbook.load(run.path("playbooks", B, "terminus-1"))
    assert b_play.source.harness == "terminus"  # its keystrokes came back as the commands they typed
    assert b_play.commands() == typed_commands((POOL / B / "solution" / "solve.sh").read_text())

    import datasets

    data = datasets.load_dataset("json", data_files=str(out / "dataset" / "train.jsonl"), split="train")
    rows = list(data)
    assert {r["task"] for r in rows} == {A, B}
    assert all(r["kind"] == "rsr-rendered" and r["sampled_tokens"] is False for r in rows)
    assert all(r["review"]["accepted"] and r["verifier"]["strict_success"] for r in rows)
    assert not any(hidden[0] in json.dumps(r["messages"]) for r in rows)  # nothing leaky got through
    for r in rows:
        roles = [m["role"] for m in r["messages"]]
        assert r["loss_mask"] == [role == "assistant" for role in roles] and "tool" not in roles
        assert all(m["content"].lstrip().startswith("```") for m in r["messages"] if m["role"] == "assistant")
    (b_row,) = [r for r in rows if r["task"] == B]
    assert b_row["source_harness"] == "terminus"  # survived as generic commands
    assert len({(r["task"], json.dumps(r["playbook"])) for r in rows}) == len(rows)  # deduplicated
    assert funnel["strict_successes"] == {"generic": 2, "terminus": 2, "tool-calling": 1}
    assert funnel["rejected"] == {"leaked-value": 1}
    assert funnel["reruns"] == funnel["playbooks"] - 1 and funnel["reruns_verified"] == funnel["reruns"] - 1
    assert funnel["solved_only_under_other_harnesses"] == 1 == funnel["solved_only_under_other_harnesses_in_records"]
    assert funnel["records"] == len(rows)
    html = (out / "report" / "rsr.html").read_text()  # the funnel, each playbook beside source and re-run
    assert "Funnel" in html and html.count("<h3 id=") == funnel["playbooks"] and "leaked-value" in html

    # Resumed: nothing is played again, and the same dataset comes out.
    before = {p: p.stat().st_mtime_ns for p in (out / "collect").glob("*/*.json")}
    again = RSRRun(out, RSRConfig(tasks=[str(POOL / A), str(POOL / B)], concurrency=2), client=client)
    again.collect()
    again.execute()
    assert {p: p.stat().st_mtime_ns for p in (out / "collect").glob("*/*.json")} == before
    assert again.build()["records"] == len(rows)
    with pytest.raises(ConfigError, match="made with other settings \\(attempts"):
        RSRRun(out, RSRConfig(tasks=[str(POOL / A), str(POOL / B)], concurrency=2, attempts=3))
    shutil.rmtree(out / "dataset")
    from terminal_env.cli import main

    assert main(["rsr", "build", "--out", str(out)]) == 0
    assert len((out / "dataset" / "train.jsonl").read_text().splitlines()) == len(rows)


@pytest.mark.docker
def test_a_model_executor_sees_the_playbook_and_the_record_does_not(client, base_image):
    from terminal_env.models.simple import fenced
    from terminal_env.rsr.pipeline import GuidedBackend

    commands = typed_commands((POOL / A / "solution" / "solve.sh").read_text())
    pb = playbook(*commands, why="from the playbook")
    sent = []

    def model(messages):
        sent.append(messages)
        done = sum(m["role"] == "assistant" for m in messages)
        return fenced(commands[done] if done < len(commands) else "#!submit")

    async def play():
        async with RolloutPool(max_concurrency=1, client=client) as pool:
            return await pool.rollout(lambda: GuidedBackend(ScriptedBackend(model, name="exec"), pb), POOL / A,
                                      "generic")

    traj = asyncio.run(play())
    assert traj.strict_success and traj.model.name == "executor:exec"
    assert "A playbook that solved this task" in sent[0][1]["content"] and commands[0] in sent[0][1]["content"]
    assert not any("A playbook that solved this task" in (m.get("content") or "") for m in traj.messages)


def test_a_plugin_harness_action_becomes_the_commands_it_ran():
    rec = CommandRecord(action={"kind": "command", "command": "make -C /app"}, text="make -C /app", observation="ok")
    t = traj_of("run-done", [("RUN: make", [ActionResult(action=HarnessAction(tool="run", args={"cmd": "make"}),
                                                          commands=[rec])])])
    pb = DeterministicPlanner().plan(t, instruction="i", task_path="/t", task_digest="d", attempt=1, source_path="p")
    assert pb.commands() == ["make -C /app"] and pb.dropped == []


@pytest.mark.docker
def test_an_interactive_solution_reaches_the_data_as_keystrokes(client, base_image, tmp_path):
    """A Terminus agent solves a REPL task by typing into python3's prompt; the playbook keeps
    those lines as keystrokes (the shell's prompt was not back), the replay sends them with
    ``#!keys``, and the re-run is verified: interactive tasks reach the dataset."""
    task = POOL / "ia-pyrepl-ledger"
    lines = ["import json, ledgerkit", 'book = ledgerkit.load("/app/data/tx.bin", "/app/data/rates.json")',
             "balances = {}", "for tx in book.transactions:",
             "    if not tx.reversed: balances[tx.account] = balances.get(tx.account, 0) + book.to_eur(tx)", "",
             "top3 = sorted(balances, key=lambda a: (-balances[a], a))[:3]",
             'json.dump({"balances": {str(a): v for a, v in sorted(balances.items())}, "top3": top3, '
             '"total": sum(balances.values())}, open("/app/answer.json", "w"))']

    def reply(keystrokes: str, done: bool = False) -> str:
        return json.dumps({"analysis": "Work in the REPL.", "plan": "Type the next lines.", "task_complete": done,
                           "commands": [{"keystrokes": keystrokes, "duration": 2}] if keystrokes else []})

    replies = [reply("cd /app && PYTHONPATH=/app/lib python3 -q -i\n"), *(reply(line + "\n") for line in lines),
               reply("exit()\n"), reply("", True), reply("", True)]
    run = RSRRun(tmp_path / "rsr", RSRConfig(tasks=[str(task)], harnesses=["terminus"]), client=client)

    async def play():
        async with RolloutPool(max_concurrency=1, client=client) as pool:
            return await pool.rollout(lambda: ScriptedBackend(replies, name="typist"), task, "terminus")

    source = asyncio.run(play())
    assert source.strict_success, source.verification
    source.save(run.path("collect", task.name, "terminus-1"))
    run.plan()
    pb = Playbook.load(run.path("playbooks", task.name, "terminus-1"))
    assert pb.steps[0].keys == ["cd /app && PYTHONPATH=/app/lib python3 -q -i", "Enter"]
    assert all(s.keys for s in pb.steps) and pb.steps[-1].keys == ["exit()", "Enter"]
    run.review()
    assert json.loads(run.path("reviews", task.name, "terminus-1").read_text())["accepted"]
    run.execute()
    rerun = Trajectory.load(run.path("execute", task.name, "terminus-1"))
    assert rerun.strict_success, rerun.verification
    assert run.build()["records"] == 1
    record = json.loads((tmp_path / "rsr" / "dataset" / "train.jsonl").read_text())
    assert record["messages"][2]["content"].startswith("```") and "#!keys" in record["messages"][2]["content"]
