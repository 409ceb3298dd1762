"""``terminal-env rsr collect | plan | review | execute | build | all | funnel | report``.

    terminal-env rsr all --tasks tasks/ --only-train --out rsr/r1        # typed-oracle, model-free roles
    terminal-env rsr all --tasks my-train/ --out rsr/r2 --model hf:ckpt/actor --self -k 3
    terminal-env rsr collect --tasks my-train/ --out rsr/r3 --model openai:qwen --base-url URL -k 3
    terminal-env rsr plan --out rsr/r3 --planner openai:qwen --base-url URL

The first command of a run names its tasks (saved with every other setting in ``OUT/rsr.json``);
later commands read them from there, and any setting given again on a later command is applied
and saved, unless files already written depend on it (docs/rsr.md says which).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..errors import ConfigError
from ..report.rsr import funnel_rows
from ..tasks.load import find_tasks, read_task
from .config import ROLES, RSRConfig, apply_option, role_option
from .dataset import read_records
from .pipeline import STAGES, RSRRun, load_config

console = Console()
#: role values that mean "the model-free stand-in"
STAND_IN_WORDS = {"planner": ("deterministic", "none"), "reviewer": ("leak-checks", "none"),
                  "executor": ("replay", "none")}


def add_rsr_parser(sub: Any) -> None:
    r = sub.add_parser("rsr", help="self-rewrite: verified successes under several harnesses -> SFT data",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("stage", choices=[*STAGES, "all", "funnel", "report"],
                   help="the stage to run (all: every stage in order; funnel, report: show what is there)")
    r.add_argument("--out", required=True, help="the run directory (resumed when it exists)")
    r.add_argument("--tasks", nargs="+", help="task directories or folders of them (train split only)")
    r.add_argument("--only-train", action="store_true",
                   help="take the train tasks among --tasks and leave the others out (else they are refused)")
    g = r.add_argument_group("roles (each a model spec; saved in OUT/rsr.json)")
    g.add_argument("--model", help="the collecting policy (a new run's default: typed-oracle, the task's "
                                   "reference solution typed as an agent's commands: not self-rewrite)")
    g.add_argument("--self", dest="self_rewrite", action="store_true",
                   help="the policy plays every role (planner, reviewer, executor): self-rewrite, as the recipe")
    g.add_argument("--planner", help="a model spec, or 'deterministic' (default: the commands extracted)")
    g.add_argument("--reviewer", help="a model spec after the leak checks, or 'none' (default: the leak checks alone)")
    g.add_argument("--executor", help="a model spec guided by the playbook, or 'replay' (default: the steps replayed)")
    for role in ("planner", "reviewer", "executor"):
        g.add_argument(f"--{role}-prompt", help=f"the {role} model's prompt file (default: the bundled one)")
    g.add_argument("--base-url", help="the server of every openai: role (an --option ROLE.base_url on the same "
                                      "command overrides it for that role)")
    g.add_argument("--option", action="append", default=[], metavar="ROLE.KEY=VALUE",
                   help="a backend option or sampling parameter of one role (collector, planner, reviewer, "
                        "executor, or all), e.g. executor.temperature=0.6, planner.base_url=URL; repeatable")
    c = r.add_argument_group("collect")
    c.add_argument("--harness", help="harnesses to collect under, comma-separated (default generic,terminus,tool-calling)")
    c.add_argument("-k", "--attempts", type=int, help="attempts per task and harness (default 1)")
    c.add_argument("--max-turns", type=int, help="turns per episode (default 50)")
    c.add_argument("--seed", type=int, help="mixed with task, harness and attempt into each episode's seed (default 0)")
    c.add_argument("--round", help="a label every record carries (e.g. rsr-1)")
    c.add_argument("-n", "--concurrency", type=int, help="episodes at once (default 2; may change on resume)")
    c.add_argument("--ray-address", help="play the episodes on a Ray cluster (may change on resume)")
    b = r.add_argument_group("build (applied afresh on every build)")
    b.add_argument("--max-per-task", type=int, help="records per task at most (default 4; 0: no cap)")
    b.add_argument("--near-duplicate", type=float,
                   help="similarity of two records' normalised commands from which one is dropped (default 0.9)")
    b.add_argument("--with-reasons", action=argparse.BooleanOptionalAction, default=None,
                   help="the replay executor writes each step's reason before its command (default off)")
    b.add_argument("--mix", action="append", default=[], metavar="DATASET=RATIO",
                   help="mix in an earlier round's records: RATIO of them per record of this round, "
                        "e.g. rsr/r1/dataset/train.jsonl=0.5; repeatable")
    b.add_argument("--build-seed", type=int, help="seed of the records sampled by --mix (default 0)")
    r.set_defaults(func=cmd_rsr)


def config_from_args(args: argparse.Namespace) -> RSRConfig | None:
    """The run's settings: those saved in ``OUT/rsr.json`` with what this command gives on top
    (None when nothing is saved and nothing is given: :class:`RSRRun` says what to do)."""
    saved = Path(args.out) / "rsr.json"
    config = load_config(saved) if saved.is_file() else None
    if args.tasks:
        tasks = [str(p) for p in find_tasks(args.tasks)] if args.only_train else list(args.tasks)
        if args.only_train:
            train = [p for p in tasks if getattr(read_task(p)[0], "split", None) == "train"]
            console.print(f"[dim]--only-train: {len(train)} train task(s); {len(tasks) - len(train)} left out[/dim]")
            tasks = train
        config = config.model_copy(update={"tasks": tasks}) if config else RSRConfig(tasks=tasks)
    if config is None:
        return None
    plain = {"harnesses": [h.strip() for h in args.harness.split(",") if h.strip()] if args.harness else None,
             "attempts": args.attempts, "max_turns": args.max_turns, "seed": args.seed, "round": args.round,
             "concurrency": args.concurrency, "ray_address": args.ray_address}
    config = config.model_copy(update={k: v for k, v in plain.items() if v is not None})
    if args.model:
        config = config.model_copy(update={"collector": config.collector.model_copy(update={"spec": args.model})})
    for role in ROLES[1:]:
        spec, prompt = getattr(args, role), getattr(args, f"{role}_prompt")
        r = config.role(role)
        if spec is not None:
            r = r.model_copy(update={"spec": None if spec in STAND_IN_WORDS[role] else spec})
        if prompt is not None:
            if not Path(prompt).is_file():
                raise ConfigError(f"--{role}-prompt {prompt}: no such file")
            r = r.model_copy(update={"prompt": str(Path(prompt).resolve())})
        config = config.model_copy(update={role: r})
    if args.base_url:
        for role in ROLES:
            r = config.role(role)
            if r.spec and r.spec.startswith("openai:"):
                config = apply_option(config, role, "base_url", args.base_url)
    for item in args.option:
        config = apply_option(config, *role_option(item))
    if args.self_rewrite:
        config = config.with_self()
    build = {"max_per_task": (args.max_per_task or None) if args.max_per_task is not None else config.build.max_per_task,
             "near_duplicate": args.near_duplicate, "with_reasons": args.with_reasons, "seed": args.build_seed}
    if args.mix:
        build["mix"] = dict(_mix(item) for item in args.mix)
    data = config.model_dump()
    data["build"] = {**data["build"], **{k: v for k, v in build.items() if v is not None}}
    try:
        return RSRConfig.model_validate(data)  # model_copy does not validate: a bad value stops here
    except ValueError as exc:
        errors = getattr(exc, "errors", lambda: [])()
        where = ".".join(str(x) for x in errors[0]["loc"]) if errors else "settings"
        raise ConfigError(f"rsr: {where}: {errors[0]['msg'] if errors else exc}") from None


def _mix(item: str) -> tuple[str, float]:
    path, eq, ratio = item.rpartition("=")
    try:
        value = float(ratio)
    except ValueError:
        value = -1.0
    if not eq or not path or value < 0:
        raise ConfigError(f"--mix {item!r}: write DATASET=RATIO, e.g. rsr/r1/dataset/train.jsonl=0.5")
    read_records(path)  # an earlier round's dataset, or a clear refusal now
    return path, value


def cmd_rsr(args: argparse.Namespace) -> int:
    run = RSRRun(args.out, config_from_args(args), log=lambda m: console.print(f"[dim]{m}[/dim]"))
    stages = STAGES if args.stage == "all" else () if args.stage in ("funnel", "report") else (args.stage,)
    funnel = run.run(stages)
    print_funnel(funnel)
    if args.stage == "report":
        run.report()
    if (run.out / "report" / "rsr.html").is_file():
        console.print(f"report: {run.out / 'report' / 'rsr.html'}")
    return 0


def print_funnel(f: dict[str, Any]) -> None:
    table = Table(title="self-rewrite funnel")
    table.add_column("stage")
    table.add_column("count", justify="right")
    for name, n in funnel_rows(f):
        table.add_row(name, str(n))
    console.print(table)
    if f["stand_ins"]:
        console.print("[yellow]not self-rewrite: no model played " + "; ".join(f["stand_ins"])
                      + " (give --model and --self for the recipe's self-rewrite)[/yellow]")
