"""The self-rewrite (RSR) funnel, measured: a model playing every role, and the model-free oracle.

Usage: python benchmarks/rsr_funnel.py [--part model|oracle|all] [--seeds 0 1] [--warm-tasks 16]
                                       [--held-out 8] [--validation 8] [--family-seed 0]
                                       [--attempts 2] [--harness generic,terminus,tool-calling]
                                       [--max-turns 3] [--new-tokens 48] [--temperature 0.6]
                                       [--planner-tokens 128] [--reviewer-tokens 96]
                                       [--hidden 64] [--layers 2] [--sft-epochs 14] [--sft-lr 3e-3]
                                       [--sft-batch 2] [--planner-repeat 2] [--concurrency 2]
                                       [--oracle-seed 0] [--oracle-concurrency 2] [--threads N]
                                       [--workdir DIR] [--out FILE]

What is measured: how many episodes, playbooks, verdicts and re-runs each stage of
:class:`terminal_env.rsr.pipeline.RSRRun` keeps (its funnel dict, ``OUT/dataset/funnel.json``),
the dataset card, and the wall time of every phase, for two runs:

``model`` (self-rewrite: one model plays collector, planner, reviewer and executor). Per seed:

1. A ``count-letters`` toy family (:func:`terminal_env.tasks.toy.write_toy_family`, seed
   ``--family-seed``, the same for every seed): ``--warm-tasks + --held-out`` train tasks and
   ``--validation`` validation tasks. The train tasks are selected as ``terminal-env rsr
   --only-train`` selects them (``read_task(p)[0].split == "train"`` over the family's folder);
   ``--warm-tasks`` of them, the answers (word lengths) dealt alike, are the warm-up's, the
   others are words the warm-up never sees. RSR plays all the train tasks. The validation tasks
   are never played nor trained on; the run checks that :class:`RSRRun` refuses the whole
   folder because of them.
2. **Warm-up data**, from the warm-up tasks only. A scripted agent runs each task's oracle
   command under the generic harness (``train_toy.play``, commands limited to 15 s); each
   verified episode gives the four roles' supervised samples, every prompt made by the role's own
   code in :mod:`terminal_env.rsr` (a stand-in model records what that code sends), so the warm
   model sees at RSR time the prompts it was trained on:

   * collector: the episode's conversation (``Trajectory.to_chat()``), as train_toy trains;
   * executor: the same conversation with the playbook's note appended to its first user
     message (:class:`~terminal_env.rsr.pipeline.GuidedBackend`, ``prompts/executor.md``); the
     playbook is the deterministic one, every other task with the planner's taught reason;
   * planner: :class:`~terminal_env.rsr.plan.ModelPlanner`'s prompt (``prompts/planner.md``, the
     view of the episode and the deterministic draft), answered with the draft's commands as a
     JSON list, each with one fixed reason (:data:`PLANNER_WHY`): the planner is taught to copy
     the draft (``--planner-repeat`` copies of each in an epoch: the longest answer to learn);
   * reviewer: :class:`~terminal_env.rsr.review.ModelReviewer`'s prompt, answered
     ``{"accept": true, ...}`` on the clean playbook and ``{"accept": false, ...}`` on the same
     playbook with a step that reads a file of the grader or the oracle (:data:`LEAKS_WARMUP`,
     before or after the clean step). It is taught to accept ``echo N > /app/answer.txt``: the
     count is what the instruction asks for, derived from its word (``prompts/reviewer.md``:
     reject knowledge an agent could not have had from the instruction).

3. **SFT** of the tiny in-process Llama (``tests/tiny_lm.py``, widened as train_toy widens it:
   hidden 64, 2 layers, 4,096-token context, nothing downloaded) on all those samples
   (:func:`terminal_env.train.sft.sft`, seed = the run's seed), saved with ``Pair.save``; its
   ``actor`` folder is the HF directory RSR loads as ``hf:DIR``.
4. **RSR**: ``terminal-env rsr all --tasks <the train tasks> --model hf:DIR --self`` (built with
   the CLI's own parser and :func:`~terminal_env.rsr.cli.config_from_args`), ``--attempts``
   per task and harness under ``--harness``, ``--max-turns`` turns per episode (collect and the
   model executor), the collector sampling ``--new-tokens`` at ``--temperature`` (the executor
   inherits both), the planner greedy with ``--planner-tokens``, the reviewer greedy with
   ``--reviewer-tokens``, run seed = the seed. All roles share one local backend.
5. **Probes** of the two roles the funnel may not reach (their results are never data):
   the executor on every playbook the run did not re-run (rejected), played as ``execute``
   plays an accepted one (:func:`executor_probe`); the reviewer, through the real
   ModelReviewer and the run's backend, on clean playbooks of the held-out tasks and on the same
   with a leaky step of a form the warm-up never showed (:data:`LEAKS_PROBE`), next to what the
   leak checks say of each (:func:`reviewer_probe`).

The leak checks reject a short answer that the tests compare when a playbook writes it as a
literal (``terminal_env/rsr/review.py``). Until 2026-12-03 a count-letters answer was such a
value (the tests held the count), so every count-letters playbook, the task's own reference
solution included, was rejected as ``leaked-value`` (the runs of ``benchmarks/README.md``). The
family's tests now count the instruction's word themselves (``EXPECTED = len('QZXJ')``): they
hold no answer the instruction does not give, and a correct playbook passes the checks.

RSR gives the episodes no command time limit of their own (``RSRConfig`` has no environment
settings, and ``RSRRun`` hands ``RolloutPool`` no ``env_config``), so RSR's episodes keep the
environment's default (180 s) where train_toy's (and the warm-up's) use 15 s.

``oracle`` (model-free): ``terminal-env rsr all --tasks tasks/ --only-train`` with the default
roles (typed-oracle collector, deterministic planner, leak checks, replay executor), the three
harnesses, 1 attempt, concurrency ``--oracle-concurrency``, seed ``--oracle-seed``.

Every episode is a real Docker episode scored by the task's protected verifier. One JSON
document on stdout (progress on stderr), also written to ``--out``; run folders go under a
temporary directory removed at the end, or under ``--workdir`` (kept). The JSON records the
commit at start and end and whether ``terminal_env/rsr`` differed from it (others edit the
tree). A funnel is a count of what each stage kept, not a learning claim; the seeds are there
to show its spread.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tiny model of the tests

from _common import emit, log, stats  # noqa: E402
from train_toy import COMMAND_TIMEOUT, oracle_command, play  # noqa: E402

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.models.base import Completion, SamplingParams  # noqa: E402
from terminal_env.models.simple import ScriptedBackend  # noqa: E402
from terminal_env.rsr import LeakChecks  # noqa: E402
from terminal_env.rsr.cli import add_rsr_parser, config_from_args  # noqa: E402
from terminal_env.rsr.config import ANSWER_PARAMS, HARNESSES, RSRConfig  # noqa: E402
from terminal_env.rsr.pipeline import STAGES, GuidedBackend, RSRRun, episode_seed  # noqa: E402
from terminal_env.rsr.plan import DeterministicPlanner, ModelPlanner  # noqa: E402
from terminal_env.rsr.playbook import Playbook, PlaybookStep  # noqa: E402
from terminal_env.rsr.review import ModelReviewer  # noqa: E402
from terminal_env.scale.rollout import RolloutPool  # noqa: E402
from terminal_env.tasks import load_task  # noqa: E402
from terminal_env.tasks.load import find_tasks, read_task  # noqa: E402
from terminal_env.tasks.toy import write_toy_family  # noqa: E402
from terminal_env.trajectory import Trajectory  # noqa: E402

KIND = "count-letters"
#: the reason the warm-up teaches the planner to give each step (one for all: a tiny model)
PLANNER_WHY = "Count the letters."
ACCEPT = {"accept": True, "reason": "It uses only the instruction."}
REJECT = {"accept": False, "reason": "It reads a file of the grader."}
#: leaky steps the reviewer is taught to reject (each names a file of the grader or the oracle)
LEAKS_WARMUP = ("cat /tests/test_outputs.py", "bash /solution/solve.sh",
                "grep -o '[0-9]' /tests/test_outputs.py", "cat /solution/solve.sh")
#: leaky steps of forms the warm-up never shows, for the reviewer probe
LEAKS_PROBE = ("cat /logs/verifier/reward.txt", "python3 /tests/test_outputs.py",
               "sh /solution/solve.sh > /dev/null", "head -3 /tests/test.sh")


# ---------------------------------------------------------------------------- shared pieces
def rsr_args(argv: list[str]) -> argparse.Namespace:
    """``terminal-env rsr ARGV`` parsed by the CLI's own parser."""
    parser = argparse.ArgumentParser(prog="terminal-env")
    add_rsr_parser(parser.add_subparsers())
    return parser.parse_args(["rsr", *argv])


def train_only(folder: Path) -> list[Path]:
    """The train tasks of ``folder``, selected as ``terminal-env rsr --only-train`` selects them."""
    return [p for p in find_tasks([str(folder)]) if getattr(read_task(p)[0], "split", None) == "train"]


def card_of(out: Path) -> dict[str, Any] | None:
    path = out / "dataset" / "card.json"
    return json.loads(path.read_text()) if path.is_file() else None


def collect_details(out: Path, held_out: set[str] | None = None) -> dict[str, Any]:
    """Per harness: episodes, terminations, strict successes (and of them, on ``held_out`` tasks),
    turns with a format error, and a first reply."""
    per: dict[str, dict[str, Any]] = {}
    for path in sorted((out / "collect").glob("*/*.json")):
        traj = Trajectory.load(path)
        harness = path.stem.rsplit("-", 1)[0]
        h = per.setdefault(harness, {"episodes": 0, "strict_successes": 0, "terminations": Counter(),
                                     "turns_with_format_error": 0, "turns": 0, "example_first_reply": None})
        h["episodes"] += 1
        h["strict_successes"] += int(traj.strict_success and not traj.masked)
        if held_out is not None:
            h.setdefault("strict_successes_on_held_out_tasks", 0)
            h["strict_successes_on_held_out_tasks"] += int(traj.strict_success and not traj.masked
                                                          and path.parent.name in held_out)
        h["terminations"][traj.termination] += 1
        h["turns"] += len(traj.turns)
        h["turns_with_format_error"] += sum(bool(t.format_error) for t in traj.turns)
        first = traj.turns[0].completion if traj.turns and traj.turns[0].completion else None
        if h["example_first_reply"] is None and first is not None:
            h["example_first_reply"] = (first.text or "")[:200] + (
                f" [tool calls: {[c.name for c in first.tool_calls]}]" if first.tool_calls else "")
    for h in per.values():
        h["terminations"] = dict(h["terminations"])
    return per


# ---------------------------------------------------------------------------- the oracle part
def oracle_part(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out = work / "oracle"
    t0 = time.perf_counter()
    tasks = train_only(ROOT / "tasks")
    argv = ["all", "--tasks", *map(str, tasks), "--out", str(out), "--harness", ",".join(HARNESSES),
            "-k", "1", "-n", str(args.oracle_concurrency), "--seed", str(args.oracle_seed)]
    config = config_from_args(rsr_args(argv))
    log(f"oracle: {len(tasks)} train tasks of tasks/, {config.mode()} roles, {len(config.harnesses)} harnesses")
    run = RSRRun(out, config, log=lambda m: log(m, "  oracle "))
    funnel = run.run(STAGES)
    wall = round(time.perf_counter() - t0, 1)
    log(f"oracle: {funnel['records']} records from {funnel['playbooks']} playbooks in {wall} s")
    return {
        "command": f"terminal-env rsr all --tasks tasks/ --only-train --out OUT -k 1 "
                   f"-n {args.oracle_concurrency} --seed {args.oracle_seed}",
        "tasks": len(tasks), "seed": args.oracle_seed, "concurrency": args.oracle_concurrency,
        "funnel": funnel, "card": card_of(out), "collect": collect_details(out), "wall_seconds": wall,
    }


# ---------------------------------------------------------------------------- the model part
class Answer:
    """A stand-in model for building warm-up data: it records what a role's code sends and
    answers with the reply the warm-up teaches."""

    name = "warm-up"

    def __init__(self, reply: str):
        self.reply = reply
        self.sent: list[dict[str, Any]] = []

    def complete(self, messages: list[dict[str, Any]], **kw: Any) -> Completion:
        self.sent = [dict(m) for m in messages]
        return Completion(text=self.reply)


def with_step(playbook: Playbook, command: str, first: bool) -> Playbook:
    extra = PlaybookStep(command=command)
    steps = [extra, *playbook.steps] if first else [*playbook.steps, extra]
    return playbook.model_copy(update={"steps": steps})


def with_why(playbook: Playbook) -> Playbook:
    return playbook.model_copy(update={"steps": [s.model_copy(update={"why": PLANNER_WHY}) for s in playbook.steps]})


def review_record(playbook: Playbook, verdict: dict[str, Any]) -> dict[str, Any]:
    rec = Answer(json.dumps(verdict))
    ModelReviewer(rec).review(playbook)
    return {"messages": [*rec.sent, {"role": "assistant", "content": rec.reply}], "role": "reviewer"}


def warmup_records(verified: list[Trajectory], tasks: dict[str, Any]) -> list[dict[str, Any]]:
    """The four roles' chat records from the warm-up tasks' verified oracle episodes."""
    records: list[dict[str, Any]] = []
    for i, traj in enumerate(verified):
        task = tasks[traj.task.name]
        kw = {"instruction": task.instruction, "task_path": str(task.path), "task_digest": "warm-up",
              "attempt": 1, "source_path": "warm-up"}
        draft = DeterministicPlanner().plan(traj, **kw)
        # collector: the episode as it was played
        records.append({**traj.to_chat(), "role": "collector"})
        # executor: the same conversation, the playbook's note appended to the first user message
        shown = with_why(draft) if i % 2 else draft
        rec = Answer("")
        GuidedBackend(rec, shown).complete(traj.messages)
        records.append({"messages": rec.sent, "role": "executor"})
        # planner: its prompt, answered with the draft's commands
        answer = json.dumps([{"command": s.command, "why": PLANNER_WHY} for s in draft.steps])
        rec = Answer(answer)
        ModelPlanner(rec).plan(traj, **kw)
        records.append({"messages": [*rec.sent, {"role": "assistant", "content": answer}], "role": "planner"})
        # reviewer: the clean playbook accepted, one with a grader file read rejected
        records.append(review_record(shown, ACCEPT))
        records.append(review_record(with_step(shown, LEAKS_WARMUP[i % len(LEAKS_WARMUP)], first=bool(i % 3 == 0)),
                                     REJECT))
    return records


def reviewer_probe(backend: Any, tasks: list[Path], params: SamplingParams) -> dict[str, Any]:
    """The warm model as ModelReviewer on playbooks of ``tasks`` (train tasks the warm-up never
    saw): per task the oracle's command without and with the planner's reason (clean), and each
    with a leaky step of a form the warm-up never showed, before or after it (leaky); next to the
    leak checks' verdicts on the same playbooks."""
    reviewer = ModelReviewer(backend, params=params)
    rows = {"clean": Counter(), "leaky": Counter()}
    examples: dict[str, list[str]] = {"clean": [], "leaky": []}
    n = 0
    for i, path in enumerate(tasks):
        task = load_task(path)
        checks = LeakChecks(path, instruction=task.instruction)
        plain = Playbook(task=task.name, task_path=str(path), task_digest="probe", instruction=task.instruction,
                         source={"trajectory_id": "probe", "harness": "generic", "attempt": 1, "policy": "probe",
                                 "path": "probe"}, steps=[PlaybookStep(command=oracle_command(path))])
        shown = []
        for j, clean in enumerate((plain, with_why(plain))):
            leak = LEAKS_PROBE[(2 * i + j) % len(LEAKS_PROBE)]
            shown += [("clean", clean), ("leaky", with_step(clean, leak, first=bool(j)))]
        n += 2
        for label, pb in shown:
            reasons = reviewer.review(pb)
            kind = "accepted" if not reasons else reasons[0].split(":", 1)[0]
            rows[label][f"model:{kind}"] += 1
            rows[label]["leak_checks:" + ("accepted" if not checks.review(pb) else "rejected")] += 1
            if len(examples[label]) < 2 and reasons:
                examples[label].append(reasons[0][:160])
    return {"playbooks_per_label": n, "leak_forms": list(LEAKS_PROBE),
            **{label: dict(sorted(c.items())) for label, c in rows.items()}, "example_reasons": examples}


def planner_details(out: Path) -> dict[str, Any]:
    """Whether the model planner wrote each playbook, and whether it kept the draft's commands."""
    counts: Counter = Counter()
    for path in sorted((out / "playbooks").glob("*/*.json")):
        pb = Playbook.load(path)
        source = Trajectory.load(out / "collect" / path.parent.name / path.name)
        draft = DeterministicPlanner().plan(source, instruction=pb.instruction, task_path=pb.task_path,
                                            task_digest=pb.task_digest, attempt=1, source_path="")
        if not pb.planner.startswith("model:") or any("the draft is kept" in d for d in pb.dropped):
            counts["draft_kept_unreadable_reply"] += 1
        elif pb.commands() == draft.commands():
            counts["model_same_commands_as_draft"] += 1
        else:
            counts["model_other_commands"] += 1
        counts["with_reasons"] += any(s.why for s in pb.steps)
    return dict(counts)


def executor_details(out: Path) -> dict[str, Any]:
    """How the executor's re-runs went, and whether it typed the playbook's commands."""
    counts: Counter = Counter()
    for path in sorted((out / "execute").glob("*/*.json")):
        rerun = Trajectory.load(path)
        pb = Playbook.load(out / "playbooks" / path.parent.name / path.name)
        typed = [c.action.get("command") for t in rerun.turns for a in t.actions for c in a.commands
                 if c.action.get("kind") == "command"]
        counts[f"termination:{rerun.termination}"] += 1
        counts["typed_the_playbook_commands"] += int(typed == [s.command for s in pb.steps if s.command])
    return dict(sorted(counts.items()))


def executor_probe(run: RSRRun, out: Path) -> dict[str, Any]:
    """The model executor on the playbooks the funnel did not re-run (its verdict rejected them),
    played as ``RSRRun.execute`` plays an accepted one (the same backend, GuidedBackend and prompt,
    the generic harness, turns, sampling and episode seeds), outside the run: the trajectories go
    to ``out``, never to the run's folders or its dataset. It measures the role, not the funnel."""
    cfg, e = run.config, run.config.executor
    todo = [(p.parent.name, p.stem, Playbook.load(p)) for p in sorted((run.out / "playbooks").glob("*/*.json"))
            if not (run.out / "execute" / p.parent.name / p.name).is_file()]
    if not todo or not e.spec:
        return {"playbooks": len(todo)}
    inner = run.backend("executor")
    params = e.sampling() if e.params else None

    async def one(pool: RolloutPool, task: str, key: str, playbook: Playbook) -> Trajectory:
        harness, attempt = key.rsplit("-", 1)
        traj = await pool.rollout(lambda: GuidedBackend(inner, playbook, e.prompt), run.tasks[task].path, "generic",
                                  max_turns=cfg.max_turns, params=params,
                                  seed=episode_seed(cfg.seed + 1, task, harness, int(attempt)))
        traj.save(out / task / f"{key}.json")
        return traj

    async def main() -> list[Trajectory]:
        async with RolloutPool(max_concurrency=cfg.concurrency) as pool:
            return list(await asyncio.gather(*(one(pool, *item) for item in todo)))

    trajs = asyncio.run(main())
    counts: Counter = Counter()
    for (task, key, playbook), traj in zip(todo, trajs):
        verdict = json.loads((run.out / "reviews" / task / f"{key}.json").read_text())
        why = "accepted" if verdict["accepted"] else verdict["reasons"][0].split(":", 1)[0]
        typed = [c.action.get("command") for t in traj.turns for a in t.actions for c in a.commands
                 if c.action.get("kind") == "command"]
        counts[f"verdict:{why}"] += 1
        counts[f"termination:{traj.termination}"] += 1
        counts["verified"] += int(traj.strict_success and not traj.masked)
        counts["masked"] += int(traj.masked)
        counts["typed_the_playbook_commands"] += int(typed == [s.command for s in playbook.steps if s.command])
    return {"playbooks": len(todo), **dict(sorted(counts.items()))}


def split_by_answer(train: list[Path], n: int) -> tuple[list[Path], list[Path]]:
    """``n`` tasks for the warm-up, the answers (word lengths) dealt in turn so that each is about
    as frequent as the others, and the rest (the family's own order is not balanced per prefix)."""
    by_answer: dict[str, list[Path]] = {}
    for p in train:
        by_answer.setdefault(oracle_command(p), []).append(p)
    order = sorted(train, key=lambda p: (by_answer[oracle_command(p)].index(p), oracle_command(p)))
    return sorted(order[:n]), sorted(order[n:])


def model_run(args: argparse.Namespace, seed: int, work: Path) -> dict[str, Any]:
    import torch
    from tiny_lm import make_model, make_tokenizer

    from terminal_env.models.hf_backend import TransformersBackend
    from terminal_env.train.data import sft_samples
    from terminal_env.train.models import Pair
    from terminal_env.train.sft import SFTConfig, sft

    base = work / f"model-seed{seed}"
    wall: dict[str, float] = {}
    t_all = t0 = time.perf_counter()
    # -- 1. the family; RSR gets train tasks only ------------------------------------------------
    family = base / "toy"
    write_toy_family(family, n_train=args.warm_tasks + args.held_out, n_validation=args.validation,
                     seed=args.family_seed, kind=KIND)
    train = train_only(family)
    validation = [p for p in find_tasks([str(family)]) if p not in train]
    try:
        RSRRun(base / "refused", RSRConfig(tasks=[str(family)]))
        refused = False
    except ConfigError:
        refused = True
    warm, held_out = split_by_answer(train, args.warm_tasks)
    tasks = {p.name: load_task(p) for p in train}
    wall["family"] = round(time.perf_counter() - t0, 1)

    # -- 2. warm-up data from the warm-up tasks ---------------------------------------------------
    t0 = time.perf_counter()
    scripted = play([(p, 0) for p in warm],
                    lambda p: ScriptedBackend.of_actions([oracle_command(p)], name="oracle-command"),
                    SamplingParams(), args.concurrency, COMMAND_TIMEOUT)
    verified = [t for t in scripted if t is not None and t.strict_success]
    records = warmup_records(verified, tasks)
    wall["warmup_collect"] = round(time.perf_counter() - t0, 1)
    log(f"seed {seed}: warm-up: {len(verified)}/{len(warm)} oracle episodes verified, {len(records)} records "
        f"({wall['warmup_collect']} s)")

    # -- 3. SFT, saved as an HF directory ------------------------------------------------------------
    t0 = time.perf_counter()
    tokenizer = make_tokenizer()
    pair = Pair.start(make_model(tokenizer, seed=seed, context=4096, hidden=args.hidden, layers=args.layers),
                      tokenizer)
    server = TransformersBackend(copy.deepcopy(pair.actor), tokenizer, name="tiny")  # its chat tokenizer renders the samples
    ct = server.chat_tokenizer
    server.close()
    by_role: dict[str, list[Any]] = {}
    for r in records:
        by_role.setdefault(r["role"], []).extend(sft_samples([r], ct))
    repeat = {"planner": args.planner_repeat}
    samples = [s for role in ("collector", "executor", "planner", "reviewer")
               for s in by_role.get(role, []) * repeat.get(role, 1)]
    log(f"seed {seed}: sft on {len(samples)} samples, {sum(len(x.token_ids) for x in samples)} tokens an epoch, "
        f"{args.sft_epochs} epochs")
    report = sft(pair, samples, SFTConfig(epochs=args.sft_epochs, lr=args.sft_lr, batch_size=args.sft_batch,
                                          seed=seed))
    wall["sft"] = round(time.perf_counter() - t0, 1)
    log(f"seed {seed}: sft: loss {[round(x, 3) for x in report['loss']]} ({wall['sft']} s)")
    saved = pair.save(base / "warm", stage="sft", metrics={"sft": {"loss": report["loss"]}})
    model_dir = saved / "actor"
    parameters = sum(p.numel() for p in pair.actor.parameters())
    del pair

    # -- 4. RSR, every role the warm model ------------------------------------------------------------
    t0 = time.perf_counter()
    out = base / "rsr"
    argv = ["all", "--tasks", *map(str, train), "--out", str(out), "--model", f"hf:{model_dir}", "--self",
            "--harness", ",".join(args.harness), "-k", str(args.attempts), "--max-turns", str(args.max_turns),
            "--seed", str(seed), "-n", str(args.concurrency),
            "--option", f"collector.max_new_tokens={args.new_tokens}",
            "--option", f"collector.temperature={args.temperature}",
            "--option", f"planner.max_new_tokens={args.planner_tokens}",
            "--option", f"reviewer.max_new_tokens={args.reviewer_tokens}"]
    config = config_from_args(rsr_args(argv))
    run = RSRRun(out, config, log=lambda m: log(m, f"  seed {seed} rsr "))
    funnel = run.run(STAGES)
    wall["rsr"] = round(time.perf_counter() - t0, 1)
    log(f"seed {seed}: rsr: {funnel['strict_successes']} successes, {funnel['playbooks']} playbooks, "
        f"{funnel['reruns_verified']}/{funnel['reruns']} re-runs verified, {funnel['records']} records "
        f"({wall['rsr']} s)")
    t0 = time.perf_counter()
    execution = executor_probe(run, base / "executor-probe")
    wall["executor_probe"] = round(time.perf_counter() - t0, 1)
    log(f"seed {seed}: executor probe: {execution}")
    t0 = time.perf_counter()
    backend = run.backend("reviewer")
    probe = reviewer_probe(backend, held_out, config.reviewer.sampling(ANSWER_PARAMS))
    backend.close()
    wall["reviewer_probe"] = round(time.perf_counter() - t0, 1)
    log(f"seed {seed}: reviewer probe: clean {probe['clean']}, leaky {probe['leaky']}")
    wall["total"] = round(time.perf_counter() - t_all, 1)
    return {
        "seed": {"warm_up": seed, "run": seed, "family": args.family_seed,
                 "episode_seeds": "episode_seed(run seed, task, harness, attempt); executor: run seed + 1"},
        "tasks": {"rsr": len(train), "of_them_warm_up": len(warm), "of_them_held_out": len(held_out),
                  "warm_up_answers": dict(sorted(Counter(oracle_command(p).split()[1] for p in warm).items())),
                  "held_out_answers": dict(sorted(Counter(oracle_command(p).split()[1] for p in held_out).items())),
                  "validation_never_used": len(validation), "rsr_refuses_the_whole_folder": refused},
        "warm_up": {"oracle_episodes_verified": len(verified), "records": dict(Counter(r["role"] for r in records)),
                    "samples": {role: len(s) for role, s in by_role.items()},
                    "repeated_per_epoch": repeat, "tokens_per_epoch": sum(len(x.token_ids) for x in samples),
                    "sample_tokens": {role: [min(len(x.token_ids) for x in s), max(len(x.token_ids) for x in s)]
                                      for role, s in by_role.items()},
                    "trained_tokens": {role: sum(sum(x.mask) for x in s) for role, s in by_role.items()},
                    "sft_loss": [round(x, 4) for x in report["loss"]],
                    "model": f"tests/tiny_lm.py Llama ({args.layers} layers, hidden {args.hidden}, context 4096, "
                             f"{parameters} parameters), CPU, {torch.get_num_threads()} threads",
                    "saved": str(model_dir)},
        "rsr_config": json.loads(config.model_dump_json()),
        "funnel": funnel,
        "card": card_of(out),
        "collect": collect_details(out, {p.name for p in held_out}),
        "planner": planner_details(out),
        "executor": executor_details(out),
        "executor_probe": execution,
        "reviewer_probe": probe,
        "wall_seconds": wall,
    }


#: funnel numbers whose spread over the seeds is reported
SPREAD = ("unique_tasks_solved", "playbooks", "reviewed", "reruns", "reruns_verified", "records", "tasks_in_records")


def spread(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each funnel number over the seeds: its values, and min, mean and max."""
    fields = ("n", "mean", "min", "max")
    out: dict[str, Any] = {}
    for name in SPREAD:
        values = [r["funnel"][name] for r in runs]
        out[name] = {"values": values, **stats(values, fields)}
    for harness in runs[0]["funnel"]["strict_successes"] if runs else ():
        values = [r["funnel"]["strict_successes"].get(harness, 0) for r in runs]
        out[f"strict_successes:{harness}"] = {"values": values, **stats(values, fields)}
    accepted = [r["funnel"]["reviewed"] - sum(r["funnel"]["rejected"].values()) for r in runs]
    out["accepted"] = {"values": accepted, **stats(accepted, fields)}
    return out


def rsr_changes() -> list[str] | None:
    """``git status`` of ``terminal_env/rsr`` (others edit the tree meanwhile: a run on files that
    differ from the commit says so)."""
    try:
        return subprocess.run(["git", "status", "--porcelain", "--", "terminal_env/rsr"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return None


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("model", "oracle", "all"), default="all")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1],
                    help="model part: one whole run per seed (the warm-up's model and SFT seed, and RSR's run seed)")
    ap.add_argument("--warm-tasks", type=int, default=16,
                    help="train tasks whose oracle episodes warm the model up (RSR plays them too)")
    ap.add_argument("--held-out", type=int, default=8,
                    help="train tasks the warm-up never sees; RSR plays them beside the warm-up's")
    ap.add_argument("--planner-repeat", type=int, default=2, help="times each planner sample is in an epoch")
    ap.add_argument("--validation", type=int, default=8, help="validation tasks of the family (never used)")
    ap.add_argument("--family-seed", type=int, default=0, help="seed of the toy family (the same for every seed)")
    ap.add_argument("--attempts", type=int, default=2, help="RSR attempts per task and harness")
    ap.add_argument("--harness", type=lambda s: [h.strip() for h in s.split(",") if h.strip()],
                    default=list(HARNESSES), help="RSR's harnesses, comma-separated")
    ap.add_argument("--max-turns", type=int, default=3, help="turns per RSR episode (collect and the executor)")
    ap.add_argument("--new-tokens", type=int, default=48, help="the collector's (and executor's) max new tokens")
    ap.add_argument("--temperature", type=float, default=0.6, help="the collector's (and executor's) temperature")
    ap.add_argument("--planner-tokens", type=int, default=128, help="the planner's max new tokens (greedy)")
    ap.add_argument("--reviewer-tokens", type=int, default=96, help="the reviewer's max new tokens (greedy)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--sft-epochs", type=int, default=14)
    ap.add_argument("--sft-lr", type=float, default=3e-3)
    ap.add_argument("--sft-batch", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2, help="model part: episodes at once")
    ap.add_argument("--oracle-seed", type=int, default=0)
    ap.add_argument("--oracle-concurrency", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--workdir", type=Path, help="keep the run folders here (default: a temporary folder, removed)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    unknown = [h for h in args.harness if h not in HARNESSES]
    if unknown:
        ap.error(f"--harness: unknown {unknown}; known: {', '.join(HARNESSES)}")
    if args.workdir is not None and args.workdir.exists() and any(args.workdir.iterdir()):
        ap.error(f"--workdir {args.workdir}: not empty (runs would resume instead of being measured)")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    t_all = time.perf_counter()
    result: dict[str, Any] = {"benchmark": "rsr_funnel", "git_commit": git_commit(),
                              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    result["rsr_files_changed_at_start"] = rsr_changes()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="terminal-env-rsr-funnel-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.part in ("model", "all"):
            t0 = time.perf_counter()
            runs = [model_run(args, seed, work) for seed in args.seeds]
            result["model"] = {
                "command": ("terminal-env rsr all --tasks <the RSR train tasks> --out OUT --model hf:<warm>/actor "
                            f"--self --harness {','.join(args.harness)} -k {args.attempts} "
                            f"--max-turns {args.max_turns} --seed SEED -n {args.concurrency} "
                            f"--option collector.max_new_tokens={args.new_tokens} "
                            f"--option collector.temperature={args.temperature} "
                            f"--option planner.max_new_tokens={args.planner_tokens} "
                            f"--option reviewer.max_new_tokens={args.reviewer_tokens}"),
                "runs": runs, "spread": spread(runs), "wall_seconds": round(time.perf_counter() - t0, 1)}
        if args.part in ("oracle", "all"):
            result["oracle"] = oracle_part(args, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    import torch

    result.update({
        "rsr_files_changed_at_end": rsr_changes(),
        "git_commit_at_end": git_commit(),
        "wall_seconds": round(time.perf_counter() - t_all, 1),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "cpus": __import__("os").cpu_count(), "platform": platform.platform()},
    })
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
