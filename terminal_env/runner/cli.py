"""``terminal-env run``, ``report``, ``export`` and ``play``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console

from ..agent import run_agent
from ..env import TerminalEnv
from ..errors import ConfigError
from ..harness import get_harness, harness_class
from ..models.simple import HumanBackend
from ..report import write_report
from ..rewards import reward_arg
from ..sandbox.cleanup import remove_all
from ..tasks.build import parse_base_map
from ..trajectory import Trajectory
from .config import RunConfig, leaderboard_problems, resolve_tasks
from .datasets import dataset_tasks
from .run import Runner
from .table import print_summary, print_trial


def _params(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "temperature": args.temperature, "max_new_tokens": args.max_new_tokens,
        "max_input_tokens": args.max_input_tokens, "thinking": args.thinking,
        "logprobs": args.logprobs,
    }
    if args.top_p is not None:
        out["top_p"] = args.top_p
    return out


def _model_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for key in ("base_url", "api_key_env", "request_timeout", "max_retries", "requests_per_minute"):
        value = getattr(args, key, None)
        if value is not None:
            opts["timeout" if key == "request_timeout" else key] = value
    return opts


def _tasks_of(args: argparse.Namespace) -> list[str]:
    """--tasks as given, or the task directories of --dataset NAME@VERSION."""
    if bool(args.tasks) == bool(args.dataset):
        raise ConfigError("give the tasks to run: --tasks PATH... or --dataset NAME@VERSION (one of them)")
    if args.dataset:
        return [str(p) for p in dataset_tasks(args.dataset, args.registry, pinned=args.leaderboard)]
    return args.tasks


def run_directory(args: argparse.Namespace, config: RunConfig) -> Path:
    """--out, or JOBS_DIR/JOB_NAME as Harbor lays out its jobs (default runs/<time>-<harness>-<model>)."""
    jobs_dir, job_name = getattr(args, "jobs_dir", None), getattr(args, "job_name", None)
    if args.out and (jobs_dir or job_name):
        raise ConfigError("give the run directory either as --out DIR or as -o/--jobs-dir DIR with --job-name "
                          "NAME (Harbor's spelling: the run lands in DIR/NAME), not both")
    if args.out:
        return Path(args.out)
    name = job_name or (
        time.strftime("%Y%m%d-%H%M%S") + f"-{config.harness}-{config.model.replace('/', '_').replace(':', '-')}")
    if not name or "/" in name or name in (".", ".."):
        raise ConfigError(f"--job-name {name!r}: give a plain directory name (no '/'), e.g. --job-name qwen3-k3")
    return Path(jobs_dir or "runs") / name


def cmd_run(args: argparse.Namespace) -> int:
    tasks = _tasks_of(args)
    try:
        config = RunConfig(
            tasks=tasks, dataset=args.dataset, harness=args.harness, model=args.model, model_options=_model_options(args),
            attempts=args.attempts, concurrency=args.concurrency, n_tasks=args.n_tasks,
            timeout_multiplier=args.timeout_multiplier, params=_params(args),
            max_turns=args.max_turns, max_steps=args.max_steps, command_timeout=args.command_timeout,
            episode_timeout=args.episode_timeout, verify_timeout=args.verify_timeout, reward=args.reward,
            infra_retries=args.retries, allow_test=args.allow_test, seed=args.seed,
            progress=not args.quiet, runtime=args.runtime, leaderboard=args.leaderboard,
            base_map=parse_base_map(args.base_map) if args.base_map else None, ca_bundle=args.ca_bundle,
        )
    except ValidationError as exc:
        raise ConfigError(f"invalid run options: {exc}") from None
    refused = leaderboard_problems(config)
    if refused:
        raise ConfigError("--leaderboard refuses " + "; ".join(refused))

    harness_class(config.harness)  # an unknown harness fails before anything starts
    out = run_directory(args, config)
    console = Console(stderr=True, highlight=False)
    console.print(f"run directory: {out}")
    try:
        summary = Runner(config, out, console=console, ray_address=args.ray_address,
                         ray_workers=args.ray_workers).run()
    except KeyboardInterrupt:
        # The runner removed the sandboxes and recorded no unfinished trial. Worker threads may
        # still wait on a model server; do not wait for them.

        remove_all()  # os._exit skips atexit: remove what a late worker may have started
        console.print(f"interrupted: finished trials are kept; resume with the same command (--out {out})")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    print_summary(summary, console=Console(highlight=False))
    if args.report:
        console.print(f"report: {write_report(out)}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    index = write_report(Path(args.run_dir), Path(args.other) if args.other else None,
                         Path(args.out) if args.out else None)
    print(index)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    src = Path(args.source)
    files = sorted(src.glob("trials/*/*/trajectory.json")) if src.is_dir() else [src]
    if not files:
        raise ConfigError(f"{src}: no trajectories found (expected a run directory or a trajectory.json)")
    out = open(args.output, "w") if args.output else sys.stdout
    try:
        for f in files:
            traj = Trajectory.load(f)
            if args.only_success and not traj.strict_success:
                continue
            record = traj.to_atif() if args.format == "atif" else traj.to_chat()
            out.write(json.dumps(record) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    """A human plays a task through the generic harness; the verifier scores it at the end."""
    (task,) = resolve_tasks([args.task], allow_test=args.allow_test)[:1]
    env = TerminalEnv(task, reward=args.reward, max_steps=10_000)
    try:
        traj = run_agent(env, get_harness("generic"), HumanBackend(), max_turns=10_000,
                         trajectory_path=args.save)
    finally:
        env.close()
    print_trial(traj)
    return 0


def add_run_parsers(sub: Any) -> None:
    r = sub.add_parser("run", help="score a model on tasks: attempts, concurrency, resumable run directory")
    # Harbor's `harbor run` spellings are accepted where they mean the same thing here (-d, -p,
    # -m, -k/--n-attempts, -n/--n-concurrent, -l, -o/--jobs-dir, --job-name, -q, --registry-path);
    # docs/benchmarking.md lists each one and the few that differ (defaults, model specs).
    r.add_argument("-d", "--dataset", metavar="NAME@VERSION",
                   help="the tasks of a dataset of the registry file (Harbor's registry.json format)")
    r.add_argument("--registry", "--registry-path", metavar="FILE",
                   help="the registry file, a local file (default $TERMINAL_ENV_REGISTRY, else ./registry.json)")
    r.add_argument("--leaderboard", action="store_true",
                   help="leaderboard mode: a --dataset pinned in Git, the tasks' own timeouts, the engine, "
                        "runtime and image digests recorded in run.json, trajectories also in ATIF")
    r.add_argument("--tasks", "-p", "--path", nargs="+", action="extend", metavar="TASKS",
                   help="task dirs, folders of tasks, bundled task names, or pool[:train|validation|test] "
                        "(repeatable; -p/--path is Harbor's spelling)")
    r.add_argument("--harness", default="generic", help="generic, terminus, tool-calling, react, or a plugin")
    r.add_argument("-m", "--model", required=True,
                   help="openai:NAME (with --base-url), hf:PATH, oracle, nop, replay:TRAJ.json, scripted:FILE.json")
    r.add_argument("-k", "--attempts", "--n-attempts", type=int, default=3,
                   help="attempts per task (Mean@k uses them; default 3, the paper's Mean@3; Harbor's is 1)")
    r.add_argument("-n", "--concurrency", "--n-concurrent", type=int, default=1,
                   help="trials at once (default 1: one after another; Harbor's is 4)")
    r.add_argument("-l", "--n-tasks", type=int, help="only the first N tasks by name (default all)")
    r.add_argument("--timeout-multiplier", type=float, default=1.0,
                   help="scale each task's agent and verifier timeouts (default 1)")
    r.add_argument("--out", help="run directory (default JOBS_DIR/JOB_NAME); an existing one is resumed")
    r.add_argument("-o", "--jobs-dir", help="where run directories go when --out is not given (default runs)")
    r.add_argument("--job-name", help="the run directory's name in --jobs-dir (default <time>-<harness>-<model>)")
    r.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    r.add_argument("--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    r.add_argument("--request-timeout", type=float, help="per model request, s")
    r.add_argument("--max-retries", type=int, help="model request retries")
    r.add_argument("--requests-per-minute", type=float, help="rate limit for the model server")
    r.add_argument("--temperature", type=float, default=0.6)
    r.add_argument("--top-p", type=float)
    r.add_argument("--max-new-tokens", type=int, default=8192, help="per turn")
    r.add_argument("--max-input-tokens", type=int, default=96_000, help="older output is trimmed beyond this")
    r.add_argument("--thinking", action="store_true", help="let reasoning models think (off by default)")
    r.add_argument("--logprobs", action="store_true", help="ask for token log-probs (kept in trajectories)")
    r.add_argument("--max-turns", type=int, default=100, help="model turns per episode")
    r.add_argument("--max-steps", type=int, default=200, help="terminal actions per episode")
    r.add_argument("--command-timeout", type=float, default=180.0, help="per command, s")
    r.add_argument("--episode-timeout", type=float, help="per episode, s (default: the task's agent timeout)")
    r.add_argument("--verify-timeout", type=float, help="per verification, s (default: the task's)")
    r.add_argument("--reward", default="binary", type=reward_arg,
                   help="binary, partial_progress, strict_success_first, metric:NAME (a metric of the task's reward.json) or metrics:NAME=W,NAME=W (a weighted mean of them)")
    r.add_argument("--retries", type=int, default=2, help="retries of a trial after an infrastructure error")
    r.add_argument("--allow-test", action="store_true", help="allow tasks of the protected test split")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--runtime", help="OCI runtime of every sandbox: runsc for gVisor (hardened mode; see "
                   "SECURITY.md), runc; default: each task's [environment] runtime, else the engine's")
    r.add_argument("--base-map", action="append", metavar="IMAGE=LOCAL",
                   help="build tasks FROM LOCAL instead of IMAGE (repeatable; default $TERMINAL_ENV_BASE_MAP)")
    r.add_argument("--ca-bundle", metavar="PATH",
                   help="inject this CA bundle into task builds (default $TERMINAL_ENV_CA_BUNDLE)")
    r.add_argument("--ray-address",
                   help="play the trials on a Ray cluster (HEAD:PORT, or auto): one worker per node, each "
                        "on its host's Docker engine; tasks must exist at the same path on every host")
    r.add_argument("--ray-workers", type=int, help="rollout workers on the Ray cluster (default: one per node)")
    r.add_argument("--report", action="store_true", help="write the HTML report at the end")
    r.add_argument("-q", "--quiet", "--silent", action="store_true", help="no live progress")
    r.set_defaults(func=cmd_run)

    rp = sub.add_parser("report", help="write the HTML report of a run (with a second run: compare them)")
    rp.add_argument("run_dir")
    rp.add_argument("other", nargs="?", help="a second run directory to compare against")
    rp.add_argument("--out", help="output directory (default RUN_DIR/report)")
    rp.set_defaults(func=cmd_report)

    ex = sub.add_parser("export", help="export trajectories as chat JSONL (SFT) or ATIF")
    ex.add_argument("source", help="a run directory or a trajectory.json")
    ex.add_argument("--format", choices=["chat", "atif"], default="chat")
    ex.add_argument("--only-success", action="store_true", help="strict successes only")
    ex.add_argument("-o", "--output", help="file (default stdout)")
    ex.set_defaults(func=cmd_export)

    pl = sub.add_parser("play", help="play a task yourself; the protected verifier scores you")
    pl.add_argument("task", help="a task directory or a bundled task's name")
    pl.add_argument("--reward", default="strict_success_first")
    pl.add_argument("--save", help="save the trajectory here")
    pl.add_argument("--allow-test", action="store_true")
    pl.set_defaults(func=cmd_play)
