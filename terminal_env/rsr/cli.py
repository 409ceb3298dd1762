"""``terminal-env rsr collect | plan | review | execute | build | all``: the self-rewrite pipeline.

    terminal-env rsr all --tasks tasks/ --out rsr/r1                      # typed-oracle, 3 harnesses
    terminal-env rsr collect --tasks tasks/ --out rsr/r1 --model openai:qwen --base-url URL -k 3
    terminal-env rsr plan --out rsr/r1 --planner openai:qwen --base-url URL

The first command of a run names its tasks and policy (saved in ``OUT/rsr.json``); later ones read
them from there, and refuse different ones.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from ..tasks.load import find_tasks, read_task
from .pipeline import HARNESSES, STAGES, RSRConfig, RSRRun

console = Console()


def add_rsr_parser(sub: Any) -> None:
    r = sub.add_parser("rsr", help="self-rewrite: verified successes under several harnesses -> SFT data")
    r.add_argument("stage", choices=[*STAGES, "all", "funnel", "report"],
                   help="the stage to run (all: every stage in order; funnel, report: show what is there)")
    r.add_argument("--out", required=True, help="the run directory (resumed when it exists)")
    r.add_argument("--tasks", nargs="+", help="task directories or folders of them (train split only)")
    r.add_argument("--only-train", action="store_true",
                   help="take the train tasks among --tasks and leave the others out (else they are refused)")
    r.add_argument("--model", default="typed-oracle", help="the collecting policy (default typed-oracle)")
    r.add_argument("--base-url", help="for openai:MODEL")
    r.add_argument("--harness", default=",".join(HARNESSES),
                   help=f"harnesses to collect under, comma-separated (default {','.join(HARNESSES)})")
    r.add_argument("-k", "--attempts", type=int, default=1)
    r.add_argument("-n", "--concurrency", type=int, default=2)
    r.add_argument("--max-turns", type=int, default=50)
    r.add_argument("--ray-address", help="play the episodes on a Ray cluster")
    r.add_argument("--planner", help="a model spec for the planner (default: the deterministic planner)")
    r.add_argument("--planner-prompt", help="the planner model's prompt file (default: the bundled one)")
    r.add_argument("--reviewer", help="a model spec for a reviewer after the leak checks")
    r.add_argument("--reviewer-prompt", help="the reviewer model's prompt file")
    r.add_argument("--executor", help="a model spec that carries out each playbook (default: the steps are replayed)")
    r.add_argument("--executor-prompt", help="the executor model's prompt file ({steps} marks the playbook)")
    r.set_defaults(func=cmd_rsr)


def cmd_rsr(args: argparse.Namespace) -> int:
    config = None
    if args.tasks:
        tasks = [str(p) for p in find_tasks(args.tasks)] if args.only_train else list(args.tasks)
        if args.only_train:
            train = [p for p in tasks if getattr(read_task(p)[0], "split", None) == "train"]
            console.print(f"[dim]--only-train: {len(train)} train task(s); {len(tasks) - len(train)} left out[/dim]")
            tasks = train
        config = RSRConfig(
            tasks=tasks, harnesses=[h.strip() for h in args.harness.split(",") if h.strip()],
            model=args.model, backend_options={"base_url": args.base_url} if args.base_url else {},
            attempts=args.attempts, concurrency=args.concurrency, max_turns=args.max_turns,
            ray_address=args.ray_address, planner=args.planner, planner_prompt=args.planner_prompt,
            reviewer=args.reviewer, reviewer_prompt=args.reviewer_prompt, executor=args.executor,
            executor_prompt=args.executor_prompt)
    run = RSRRun(args.out, config, log=lambda m: console.print(f"[dim]{m}[/dim]"))
    stages = STAGES if args.stage == "all" else () if args.stage == "funnel" else (args.stage,)
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
    rows = [("tasks", f["tasks"]), ("unplayable by the policy", f["unplayable"]), ("masked (infrastructure)", f["masked"])]
    rows += [(f"attempts: {h}", n) for h, n in f["attempts"].items()]
    rows += [(f"strict successes: {h}", n) for h, n in f["strict_successes"].items()]
    rows += [("unique tasks solved", f["unique_tasks_solved"]), ("playbooks", f["playbooks"])]
    rows += [(f"rejected: {kind}", n) for kind, n in sorted(f["rejected"].items())]
    rows += [("re-runs", f["reruns"]), ("re-runs verified", f["reruns_verified"]),
             ("records written", f["records"]), ("tasks in the records", f.get("tasks_in_records", "")),
             ("tasks solved only under a non-generic harness", f["solved_only_under_other_harnesses"]),
             ("... of them in the records", f["solved_only_under_other_harnesses_in_records"])]
    for name, n in rows:
        table.add_row(name, str(n))
    console.print(table)
