"""The self-rewrite run's settings, stages and dataset, without Docker: roles and what a resume
may change, the replay executor's replies, the planner on long or failing trajectories, and
``build`` on files written here (stale re-runs and verdicts, an executor that leaks or speaks of
the playbook, near duplicates, caps, mixing, the card). The Docker end to end is in test_rsr.py."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from terminal_env.errors import ConfigError
from terminal_env.harness.base import ActionResult, CommandRecord, HarnessAction
from terminal_env.models.base import Completion, Usage
from terminal_env.models.registry import BACKEND_KINDS, register_backend
from terminal_env.models.simple import ScriptedBackend, fenced
from terminal_env.rsr import LeakChecks, Playbook, PlaybookStep, RSRConfig, RSRRun, Verdict
from terminal_env.rsr.cli import add_rsr_parser, config_from_args
from terminal_env.rsr.config import Role
from terminal_env.rsr.dataset import normalised_commands, read_records, similarity
from terminal_env.rsr.pipeline import episode_seed, replay_replies
from terminal_env.rsr.plan import heredoc
from terminal_env.rsr.playbook import Source
from terminal_env.trajectory import ModelRef, TaskRef, Trajectory, Turn

ROOT = Path(__file__).resolve().parent.parent
A = ROOT / "tasks" / "td-csv-region-totals"  # train split


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_rsr_parser(parser.add_subparsers())
    return parser.parse_args(["rsr", *argv])


# ---- roles, --self, resume -------------------------------------------------------------------


def test_a_run_without_a_model_says_it_is_not_self_rewrite_and_self_puts_the_policy_in_every_role():
    plain = RSRConfig(tasks=[str(A)])
    assert plain.collector.spec == "typed-oracle" and plain.mode() == "model-free"
    assert plain.stand_ins() == [
        "collector: typed-oracle (model-free)", "planner: stand-in: deterministic (the commands extracted and normalised)",
        "reviewer: stand-in: leak checks alone", "executor: stand-in: replay (the playbook's steps as they are)"]
    with pytest.raises(ConfigError, match="--self needs a model as the policy"):
        plain.with_self()
    policy = Role(spec="openai:actor", options={"base_url": "http://127.0.0.1:9/v1"}, params={"temperature": 1.0})
    selfish = RSRConfig(tasks=[str(A)], collector=policy).with_self()
    assert selfish.mode() == "self" and selfish.stand_ins() == []
    for role in ("planner", "reviewer", "executor"):
        assert selfish.role(role).spec == "openai:actor" and selfish.role(role).options == policy.options
    assert selfish.executor.params == {"temperature": 1.0} and selfish.planner.params == {}  # planner: greedy
    mixed = RSRConfig(tasks=[str(A)], collector=policy, executor=Role(spec="openai:actor"))
    assert mixed.mode() == "mixed" and len(mixed.stand_ins()) == 2


def test_role_flags_given_on_a_later_command_are_applied_and_saved(tmp_path):
    out = tmp_path / "run"
    first = config_from_args(parse("collect", "--out", str(out), "--tasks", str(A)))
    RSRRun(out, first)  # saves rsr.json; nothing collected yet
    # The README's second command: the planner and its server, on a run that exists.
    later = config_from_args(parse("plan", "--out", str(out), "--planner", "openai:qwen",
                                   "--base-url", "http://127.0.0.1:9/v1", "--option", "planner.temperature=0.2"))
    assert later.planner.spec == "openai:qwen" and later.planner.options == {"base_url": "http://127.0.0.1:9/v1"}
    assert later.planner.params == {"temperature": 0.2}
    assert later.collector.options == {}  # typed-oracle is no server: the URL is not its option
    run = RSRRun(out, later)
    assert json.loads((out / "rsr.json").read_text())["planner"]["spec"] == "openai:qwen"
    assert run.config.planner.spec == "openai:qwen"
    # --tasks given again, the same: accepted (the flags left out keep their saved values).
    again = config_from_args(parse("collect", "--out", str(out), "--tasks", str(A), "-n", "4"))
    assert again.planner.spec == "openai:qwen" and again.concurrency == 4
    RSRRun(out, again)


def test_each_role_gets_its_own_options_and_a_model_free_collector_none(tmp_path):
    cfg = config_from_args(parse(
        "all", "--out", str(tmp_path / "r"), "--tasks", str(A), "--executor", "openai:exec",
        "--option", "executor.base_url=http://127.0.0.1:9/v1", "--option", "executor.temperature=0.6",
        "--reviewer", "openai:rev", "--option", "reviewer.api_key=k"))
    assert cfg.collector.spec == "typed-oracle" and cfg.collector.options == {}
    assert cfg.executor.options == {"base_url": "http://127.0.0.1:9/v1"} and cfg.executor.params == {"temperature": 0.6}
    assert cfg.reviewer.options == {"api_key": "k"} and cfg.planner.spec is None
    with pytest.raises(ConfigError, match="ROLE.KEY=VALUE"):
        config_from_args(parse("all", "--out", str(tmp_path / "r"), "--tasks", str(A), "--option", "judge.x=1"))
    with pytest.raises(ConfigError, match="executor.temperature"):
        config_from_args(parse("all", "--out", str(tmp_path / "r"), "--tasks", str(A), "--option", "executor.temperature=-1"))
    with pytest.raises(ConfigError, match="attempts"):
        config_from_args(parse("all", "--out", str(tmp_path / "r"), "--tasks", str(A), "-k", "0"))


def _traj(task: str = "td-csv-region-totals", *, success: bool = True, masked: bool = False,
          replies: tuple[str, ...] = ("```bash\necho hi\n```",), model: str = "m") -> Trajectory:
    t = Trajectory(task=TaskRef(name=task), harness="generic", model=ModelRef(name=model, backend="ScriptedBackend"))
    t.messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]
    for i, r in enumerate(replies):
        t.messages += [{"role": "assistant", "content": r}, {"role": "user", "content": "ok"}]
        t.turns.append(Turn(index=i, started=0.0, message_index=len(t.messages) - 2,
                            completion=Completion(text=r, usage=Usage(prompt_tokens=10, completion_tokens=5)),
                            actions=[ActionResult(action=HarnessAction(tool="bash", args={"command": "echo hi"}),
                                                  commands=[CommandRecord(action={"kind": "command", "command": "echo hi"},
                                                                          text="echo hi", exit_code=0)])]))
    t.verification = {"outcome": "passed" if success else "failed", "strict_success": success, "progress": 1.0}
    t.masked = masked
    return t


def test_a_resume_may_change_where_and_how_fast_but_not_what_made_the_files(tmp_path):
    out = tmp_path / "run"
    cfg = RSRConfig(tasks=[str(A)], collector=Role(spec="openai:p", options={"base_url": "http://127.0.0.1:1/v1"}))
    run = RSRRun(out, cfg)
    _traj().save(run.path("collect", "td-csv-region-totals", "generic-1"))
    moved = cfg.model_copy(update={"concurrency": 8, "ray_address": "127.0.0.1:6379",
                                   "collector": Role(spec="openai:p", options={"base_url": "http://127.0.0.1:2/v1"}),
                                   "planner": Role(spec="openai:planner")})  # nothing planned yet: may change
    assert RSRRun(out, moved).config.concurrency == 8
    for change in ({"attempts": 3}, {"seed": 1}, {"collector": Role(spec="openai:other")},
                   {"collector": Role(spec="openai:p", params={"temperature": 1.0})}):
        with pytest.raises(ConfigError, match="files of this run were made with other settings"):
            RSRRun(out, moved.model_copy(update=change))


def test_seeds_differ_by_task_harness_and_attempt_and_task_keys_never_collide(tmp_path):
    seeds = {episode_seed(0, t, h, k) for t in ("a", "b") for h in ("generic", "terminus") for k in (1, 2)}
    assert len(seeds) == 8 and episode_seed(0, "a", "generic", 1) == episode_seed(0, "a", "generic", 1)
    for parent in ("one", "two"):  # two tasks with the same directory name
        shutil.copytree(A, tmp_path / parent / A.name)
    run = RSRRun(tmp_path / "run", RSRConfig(tasks=[str(tmp_path / "one"), str(tmp_path / "two")]))
    assert len(run.tasks) == 2 and all(k.startswith(A.name + "-") for k in run.tasks)


def test_an_untypeable_solution_is_recorded_before_anything_is_played(tmp_path):
    task = tmp_path / "tasks" / A.name
    shutil.copytree(A, task)
    (task / "solution" / "solve.sh").write_text('#!/bin/bash\ncp "$(dirname "$0")/data" /app/\n')
    run = RSRRun(tmp_path / "run", RSRConfig(tasks=[str(task)], ray_address="127.0.0.1:1"))
    run.collect()  # no episode to play: no pool, no Ray, no engine
    errors = sorted((tmp_path / "run" / "collect" / A.name).glob("*.error"))
    assert [p.stem for p in errors] == ["generic-1", "terminus-1", "tool-calling-1"]
    f = run.funnel()
    assert f["unplayable_attempts"] == 3 and f["unplayable_tasks"] == 1


def test_one_backend_per_role_spec_is_built_and_shared(tmp_path):
    built = []

    def factory(rest, **options):
        built.append(rest)
        return ScriptedBackend(["x"], name=rest)

    register_backend("counting", factory)
    try:
        cfg = RSRConfig(tasks=[str(A)], collector=Role(spec="counting:actor")).with_self()
        run = RSRRun(tmp_path / "run", cfg)
        assert run.backend("executor") is run.backend("planner") is run.backend("collector")
        assert built == ["actor"]
    finally:  # the registry is global: a kind left behind shows in other tests' lists of kinds
        del BACKEND_KINDS["counting"]
    with pytest.raises(ConfigError, match="the planner 'hf:/nonexistent/model' cannot be built"):
        RSRRun(tmp_path / "r2", RSRConfig(tasks=[str(A)], planner=Role(spec="hf:/nonexistent/model"))).backend("planner")


# ---- executor replies and the planner ---------------------------------------------------------


def _playbook(*steps: PlaybookStep, task: str = "td-csv-region-totals") -> Playbook:
    return Playbook(task=task, task_path=str(A), task_digest="d", instruction="i",
                    source=Source(trajectory_id="t", harness="terminus", attempt=1, policy="p", path="p"),
                    steps=list(steps))


def test_replayed_replies_carry_no_timeout_artefact_and_keys_survive():
    pb = _playbook(PlaybookStep(command="make", why="Build it."), PlaybookStep(command="sleep 5", timeout=30),
                   PlaybookStep(keys=["C-c"]), PlaybookStep(keys=["hello", "Enter", "C-d"]))
    replies = replay_replies(pb, with_reasons=False)
    assert replies == [fenced("make"), fenced("#!timeout 30\nsleep 5"), fenced("#!keys C-c"),
                       fenced("#!keys hello Enter C-d"), fenced("#!submit")]
    assert "#!timeout" not in replies[0]  # only where the source itself gave one
    assert replay_replies(pb, with_reasons=True)[0] == "Build it.\n\n" + fenced("make")


def test_the_model_planner_sees_a_long_trajectory_cut_and_its_errors_do_not_stop_the_stage(tmp_path):
    from terminal_env.rsr.plan import ModelPlanner

    sent = []

    def model(messages):
        sent.append(len(messages[1]["content"]))
        if len(sent) == 2:
            raise RuntimeError("the server went away")
        return '[{"command": "echo done", "why": "finish"}]'

    long = _traj(replies=("```bash\necho hi\n```",) * 60)
    for turn in long.turns:
        turn.actions[0].commands[0].observation = "x" * 5000
    run = RSRRun(tmp_path / "run", RSRConfig(tasks=[str(A)], planner=Role(spec="openai:p")))
    run._backends[json.dumps(["openai:p", {}], sort_keys=True)] = ScriptedBackend(model, name="planner")
    for k in (1, 2):
        long.save(run.path("collect", "td-csv-region-totals", f"generic-{k}"))
    run.plan()
    assert max(sent) < 45_000  # 300 kB of output, cut to the planner's budget
    playbooks = sorted((tmp_path / "run" / "playbooks" / "td-csv-region-totals").iterdir())
    assert [p.name for p in playbooks] == ["generic-1.json", "generic-2.error"]
    pb = Playbook.load(playbooks[0])
    assert pb.commands() == ["echo done"] and any("planner model's view: outputs" in d for d in pb.dropped)
    assert "server went away" in playbooks[1].read_text() and run.funnel()["plan_errors"] == 1
    assert isinstance(ModelPlanner(ScriptedBackend([]), max_chars=10).max_chars, int)


def test_interactive_keystrokes_become_key_steps():
    from terminal_env.rsr import DeterministicPlanner

    def keys(text: str, code: int | None) -> ActionResult:
        return ActionResult(action=HarnessAction(tool="keystrokes", args={"keystrokes": text, "duration": 1}),
                            commands=[CommandRecord(action={"kind": "keys"}, text="", exit_code=code)])

    t = _traj()
    t.harness = "terminus"
    script = [("python3\n", None), ("print(6*7)\n", None), ("exit()\n", 0), ("ls\n", 0)]
    t.turns = [Turn(index=i, started=0.0, completion=Completion(text="{}"), actions=[keys(k, c)])
               for i, (k, c) in enumerate(script)]
    pb = DeterministicPlanner().plan(t, instruction="i", task_path="/t", task_digest="d", attempt=1, source_path="p")
    assert [s.keys or s.command for s in pb.steps] == [["python3", "Enter"], ["print(6*7)", "Enter"],
                                                       ["exit()", "Enter"], "ls"]


# ---- build -----------------------------------------------------------------------------------


def _stage(run: RSRRun, key: str, pb: Playbook, *, accepted: bool = True, verdict_key: str | None = None,
           rerun: Trajectory | None = None, rerun_key: str | None = None, executor: str = "replay") -> None:
    task = pb.task
    pb.save(run.path("playbooks", task, key))
    Verdict(accepted=accepted, reasons=[] if accepted else ["leaked-value: x"], reviewers=["leak-checks"],
            playbook_key=verdict_key or pb.key).save(run.path("reviews", task, key))
    rerun = rerun or _traj(replies=tuple(fenced(c) for c in pb.commands()))
    rerun.extra["rsr"] = {"key": rerun_key or pb.key, "executor": executor}
    rerun.save(run.path("execute", task, key))


def test_build_keeps_only_verified_reruns_of_the_reviewed_playbook_on_disk(tmp_path):
    run = RSRRun(tmp_path / "run", RSRConfig(tasks=[str(A)], round="rsr-1"))
    hidden = LeakChecks(A, instruction=run.tasks[A.name].instruction).hidden
    assert hidden
    good = _playbook(PlaybookStep(command="cd /app && ls"), PlaybookStep(command="echo one > /app/x"))
    _stage(run, "generic-1", good)
    _stage(run, "generic-2", _playbook(PlaybookStep(command="echo rejected")), accepted=False)
    _stage(run, "generic-3", _playbook(PlaybookStep(command="echo old-verdict")), verdict_key="0" * 16)
    _stage(run, "generic-4", _playbook(PlaybookStep(command="echo old-rerun")), rerun_key="1" * 16)
    leak = _traj(replies=("I will print the total.\n\n" + fenced(f"echo {json.dumps(hidden[0])}"),), model="exec")
    _stage(run, "terminus-1", _playbook(PlaybookStep(command="echo clean")), rerun=leak, executor="openai:e")
    talk = _traj(replies=("Following step 2 of the playbook. Now list the files.\n\n" + fenced("ls -la /app"),
                          "Done.\n\n" + fenced("echo fine")), model="exec")
    _stage(run, "tool-calling-1", _playbook(PlaybookStep(command="ls -la /app")), rerun=talk, executor="openai:e")
    refers = _traj(replies=(fenced("cat playbook.md"),), model="exec")
    _stage(run, "tool-calling-2", _playbook(PlaybookStep(command="echo x")), rerun=refers, executor="openai:e")
    funnel = run.build()
    rows = read_records(tmp_path / "run")
    assert [(r["playbook_key"], r["executor"]) for r in rows] == [(good.key, "m"), (_playbook(
        PlaybookStep(command="ls -la /app")).key, "exec")]
    talked = rows[1]["messages"][2]["content"]
    assert "playbook" not in talked.lower() and talked.startswith("Now list the files.") and "ls -la /app" in talked
    assert funnel["built"] == {"verified": 7, "rejected_by_review": 1, "stale": 2, "executor_leaks": 1,
                               "refers_to_playbook": 1, "rewritten_replies": 1, "near_duplicates": 0, "over_cap": 0}
    assert all(r["round"] == "rsr-1" and r["mode"] == "model-free" and r["stand_ins"] for r in rows)
    assert all(r["messages"][-1]["role"] == "assistant" for r in rows)
    card = json.loads((tmp_path / "run" / "dataset" / "card.json").read_text())
    assert card["per_task"] == {A.name: 2} and card["per_category"] == {"text-data": 2}
    assert "model-free" in (tmp_path / "run" / "dataset" / "README.md").read_text()

    import datasets

    data = datasets.load_dataset("json", data_files=str(tmp_path / "run" / "dataset" / "train.jsonl"), split="train")
    assert len(data) == 2
    for row in data:  # TRL's conversational format: messages of role and content, ending on the assistant
        assert all(set(m) <= {"role", "content", "reasoning_content"} and isinstance(m["content"], str)
                   for m in row["messages"])
        assert row["messages"][0]["role"] == "system" and row["messages"][-1]["role"] == "assistant"


def test_near_duplicates_go_the_cap_keeps_the_most_different_and_earlier_rounds_mix_in(tmp_path):
    write = _playbook(PlaybookStep(command=heredoc("/app/a.txt", "x = 1\n")))
    plain = _playbook(PlaybookStep(command="cat > /app/a.txt <<'EOF'\nx = 1\nEOF"))
    assert similarity(normalised_commands([{"role": "assistant", "content": fenced(write.steps[0].command)}]),
                      normalised_commands([{"role": "assistant", "content": fenced(plain.steps[0].command)}])) > 0.9
    semi = _playbook(PlaybookStep(command="cd /app; make"))
    amp = _playbook(PlaybookStep(command="cd /app &&   make"))
    others = [_playbook(PlaybookStep(command=f"cut -d, -f{i + 1} /app/data/sales_sample.csv | sort | uniq -c"),
                        PlaybookStep(command=f"awk -F, '{{print ${i + 1}}}' /app/data/sales_sample.csv | tail -n {i + 1}"))
              for i in range(5)]
    run = RSRRun(tmp_path / "r2", RSRConfig(tasks=[str(A)], round="rsr-2"))
    for i, pb in enumerate([write, plain, semi, amp, *others]):
        _stage(run, f"generic-{i + 1}", pb)
    run.config = run.config.model_copy(update={"build": run.config.build.model_copy(update={"max_per_task": 3})})
    f = run.build()
    assert f["built"]["near_duplicates"] == 2 and f["built"]["over_cap"] == 4 and f["records"] == 3
    # An earlier round, mixed in at half this round's size.
    earlier = tmp_path / "r1.jsonl"
    earlier.write_text("".join(json.dumps({"messages": [], "kind": "rsr-rendered", "task": f"t{i}", "round": "rsr-1"})
                               + "\n" for i in range(10)))
    run.config = run.config.model_copy(update={"build": run.config.build.model_copy(update={"mix": {str(earlier): 0.5}})})
    f = run.build()
    rows = read_records(tmp_path / "r2")
    assert f["records"] == 3 and len(rows) == 5 and sum(r["round"] == "rsr-1" for r in rows) == 2
    assert json.loads((tmp_path / "r2" / "dataset" / "card.json").read_text())["per_round"] == {"rsr-1": 2, "rsr-2": 3}
    not_rsr = tmp_path / "chat.jsonl"
    not_rsr.write_text(json.dumps({"messages": []}) + "\n")
    with pytest.raises(ConfigError, match="not a self-rewrite record"):
        read_records(not_rsr)
    with pytest.raises(ConfigError, match="--mix .*DATASET=RATIO"):
        config_from_args(parse("build", "--out", str(tmp_path / "r2"), "--mix", "x"))


def test_the_funnel_has_time_and_tokens_per_stage_and_collect_files_serve_the_critic(tmp_path):
    from terminal_env.train.data import load_trajectories

    run = RSRRun(tmp_path / "run", RSRConfig(tasks=[str(A)]))
    _traj().save(run.path("collect", A.name, "generic-1"))
    _traj(masked=True).save(run.path("collect", A.name, "terminus-1"))
    run.run(("plan", "review", "build"))
    f = json.loads((tmp_path / "run" / "dataset" / "funnel.json").read_text())
    assert f["stages"]["collect"]["completion_tokens"] == 10 and f["stages"]["plan"]["runs"] == 1
    assert f["stages"]["build"]["seconds"] >= 0 and f["masked"] == 1
    assert len(load_trajectories([tmp_path / "run"])) == 2  # an RSR run's collected episodes


def test_train_sft_says_when_records_were_made_without_a_model():
    from terminal_env.train.data import stand_in_note

    rows = [{"kind": "rsr-rendered", "stand_ins": ["collector: typed-oracle (model-free)"], "messages": []},
            {"kind": "rsr-rendered", "stand_ins": [], "messages": []}, {"messages": []}]
    note = stand_in_note(rows)
    assert note.startswith("1 of 2 self-rewrite records were made with model-free stand-ins") and "typed-oracle" in note
    assert stand_in_note(rows[1:]) is None


def test_records_train_with_trl_sft_trainer_when_trl_is_installed(tmp_path):
    """TRL's SFTTrainer takes the dataset as it is (its conversational format: the ``messages``
    column) and trains a step on the tiny model. TRL is not a dependency: this runs where it is
    installed (``pip install trl``), and is skipped elsewhere."""
    trl = pytest.importorskip("trl")
    import datasets
    from tiny_lm import make_model, make_tokenizer

    run = RSRRun(tmp_path / "run", RSRConfig(tasks=[str(A)]))
    for i in range(3):
        _stage(run, f"generic-{i + 1}", _playbook(PlaybookStep(command=f"date > /app/out{i}"),
                                                  PlaybookStep(keys=["C-c"])))
    assert run.build()["records"] == 3
    data = datasets.load_dataset("json", data_files=str(tmp_path / "run" / "dataset" / "train.jsonl"), split="train")
    tokenizer = make_tokenizer()
    tokenizer.pad_token = "<|endoftext|>"
    args = trl.SFTConfig(output_dir=str(tmp_path / "trl"), max_steps=1, per_device_train_batch_size=1,
                         report_to=[], use_cpu=True, max_length=512, save_strategy="no")
    trainer = trl.SFTTrainer(model=make_model(tokenizer, context=1024), args=args, train_dataset=data,
                             processing_class=tokenizer)
    result = trainer.train()
    assert result.global_step == 1 and result.training_loss > 0


def test_self_keeps_a_roles_own_options():
    cfg = config_from_args(parse("all", "--out", "/tmp/none-such-rsr-run", "--tasks", str(A), "--model", "openai:a",
                                 "--base-url", "http://127.0.0.1:1/v1", "--option", "planner.base_url=http://127.0.0.1:2/v1",
                                 "--self"))
    assert cfg.mode() == "self" and cfg.executor.options == {"base_url": "http://127.0.0.1:1/v1"}
    assert cfg.planner.options == {"base_url": "http://127.0.0.1:2/v1"}  # its own, set before --self applied
