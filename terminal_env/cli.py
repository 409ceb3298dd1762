"""The ``terminal-env`` command line.

Every user mistake and infrastructure failure ends in one clear message and a non-zero exit
status, never a traceback (set TERMINAL_ENV_DEBUG=1 to see one anyway).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .agent import run_episode
from .env import TerminalEnv
from .errors import ConfigError, TerminalEnvError
from .models.simple import NopBackend, OracleBackend
from .rewards import reward_arg
from .rsr.cli import add_rsr_parser
from .runner.cli import add_run_parsers
from .sandbox import engine, images
from .sandbox.cleanup import gc, install_signal_handlers
from .sandbox.runtimes import RUNSC_ARGS, runtime_of, statx_fix_library
from .sandbox.stack import compose_command, firewall_problem
from .sandbox.sweep import host_sweep_possible
from .task import TaskSpec
from .tasks import load_task
from .tasks.cli import add_tasks_parser
from .tasks.pool import load_pool, pool_dir
from .train.cli import add_train_parser

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


# ---------------------------------------------------------------------------- commands
def cmd_doctor(args: argparse.Namespace) -> int:
    if args.fix:
        engine.ensure_engine(log=lambda m: console.print(f"[dim]{m}[/dim]"))
    status = engine.engine_status()
    table = Table(title="terminal-env doctor", show_header=True)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail")
    ok = bool(status.get("reachable"))
    table.add_row(
        "docker engine",
        "[green]ok[/green]" if ok else "[red]missing[/red]",
        f"server {status.get('version')}, api {status.get('api_version')}" if ok else str(status.get("error")),
    )
    if ok:
        runtimes = status.get("runtimes") or []
        table.add_row(
            "runtimes",
            "[green]ok[/green]",
            ", ".join(runtimes) + ("" if "runsc" in runtimes else " (no runsc: the gVisor hardened mode is unavailable; SECURITY.md)"),
        )
        if "runsc" in runtimes:
            try:
                runtime_of("runsc", engine.get_client())
                statx_fix_library()
                table.add_row(
                    "gVisor (runsc)", "[green]ok[/green]",
                    f"registered with {' '.join(RUNSC_ARGS)}; its processes are stopped from inside "
                    "with shell built-ins (SECURITY.md)",
                )
            except ConfigError as exc:
                table.add_row("gVisor (runsc)", "[red]misconfigured[/red]", str(exc))

        host = host_sweep_possible()
        table.add_row(
            "verifier freeze",
            "[green]host[/green]" if host else "[yellow]inside[/yellow]",
            "the agent's processes are stopped from the host" if host else
            "not root or a remote engine: processes are stopped from inside the sandbox with shell "
            "built-ins (still protected by the tamper check; SECURITY.md)",
        )
        try:
            tool = " ".join(compose_command())
            problem = firewall_problem()
        except ConfigError as exc:
            tool, problem = None, str(exc)
        table.add_row(
            "multi-container tasks",
            "[green]ok[/green]" if tool and not problem else "[yellow]unavailable[/yellow]",
            f"services started by `{tool}` on internal networks cut off from this host"
            if tool and not problem else f"{problem} (tasks with environment/docker-compose.yaml will not run)",
        )
        client = engine.get_client()
        if args.fix:
            images.ensure_base_image(client, log=lambda m: console.print(f"[dim]{m}[/dim]"))
        has_base = images.image_exists(client, images.BASE_IMAGE)
        table.add_row(
            "base image",
            "[green]ok[/green]" if has_base else "[red]missing[/red]",
            f"{images.BASE_IMAGE} (made by {images.image_source(client, images.BASE_IMAGE)})"
            if has_base else "run `terminal-env images bootstrap`",
        )
        ok = ok and has_base
    console.print(table)
    if not ok:
        console.print("[yellow]fix it with: terminal-env doctor --fix[/yellow]")
    return 0 if ok else 1


def cmd_images_bootstrap(args: argparse.Namespace) -> int:
    engine.ensure_engine(log=lambda m: console.print(f"[dim]{m}[/dim]"))
    t0 = time.monotonic()
    families = list(images.FAMILIES) if args.family == "all" else [args.family]
    client = engine.get_client()
    for family in families:
        tag = images.FAMILIES[family][0] + args.tag_suffix
        images.ensure_base_image(
            client, force=args.force, family=family, tag=tag, source=args.source,
            log=lambda m: console.print(f"[dim]{m}[/dim]"),
        )
        made = images.image_source(client, tag, family)
        console.print(f"{family} image ready: [bold]{tag}[/bold] (made by {made}; "
                      f"{time.monotonic() - t0:.1f} s)")
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    records = gc(everything=args.all, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    table = Table(title=f"terminal-env gc: {len(records)} container(s), network(s) and volume(s) of this project")
    for col in ("kind", "name", "task", "owner_pid", "action"):
        table.add_column(col)
    for r in records:
        table.add_row(r["kind"], r["name"], r["task"], r["owner_pid"], r["action"])
    console.print(table)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run one bundled task end to end through TerminalEnv with protected verification."""
    if args.task:
        candidate = pool_dir() / args.task
        task = load_task(candidate if candidate.is_dir() else args.task)
    else:
        easy = [t for t in load_pool() if t.difficulty == "easy"]
        if not easy:
            raise TerminalEnvError(f"no bundled tasks under {pool_dir()}; pass --task DIR")
        task = easy[0]
    agent = OracleBackend() if args.policy == "oracle" else NopBackend()
    console.print(f"building {task.name} (cached by content) ...")
    env = TerminalEnv(task, reward=args.reward)

    def show(action: Any, observation: str, info: dict[str, Any]) -> None:
        console.print(f"[bold cyan]> {escape(getattr(action, 'command', None) or action.kind)}[/bold cyan]")
        console.print(escape(observation))

    try:
        console.rule(f"{task.name} [{task.category}, {task.difficulty}, {task.split}]")
        console.print(escape(task.instruction.strip()))
        reward, info = run_episode(env, agent, on_step=show)
        result = info["verification"]
        table = Table(title=f"verification: {result.outcome.value}  ({args.reward} reward {reward:.2f})")
        for col in ("check", "weight", "passed", "message"):
            table.add_column(col, overflow="fold")
        for c in result.checks:
            table.add_row(escape(c.name), f"{c.weight:g}", "yes" if c.passed else "no", escape(c.message[:120]))
        console.print(table)
        expected_ok = result.strict_success if args.policy == "oracle" else not result.strict_success
        return 0 if expected_ok else 1
    finally:
        env.close()


def cmd_shell(args: argparse.Namespace) -> int:
    """Play an episode yourself: each line you type is one action (``#!keys``/``#!submit`` too)."""
    task = TaskSpec(name="shell", instruction="Interactive shell.", image=args.image, workdir=args.workdir)
    env = TerminalEnv(task, command_timeout=args.timeout, max_steps=10_000, time_limit=None)
    try:
        obs, _ = env.reset()
        console.print(obs)
        while True:
            try:
                line = input("te$ ")
            except EOFError:
                break
            obs, _, terminated, truncated, info = env.step(line)
            console.print(obs, markup=False)
            if terminated or truncated:
                break
    finally:
        env.close()
    return 0


# ---------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="terminal-env",
        description="Sandboxed, verifiable terminal tasks for agents, RL and benchmarks.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("doctor", help="check (and with --fix, set up) the engine and base image")
    d.add_argument("--fix", action="store_true", help="install/start the engine, bootstrap the image")
    d.set_defaults(func=cmd_doctor)

    im = sub.add_parser("images", help="manage the project's images")
    im_sub = im.add_subparsers(dest="images_command", required=True, metavar="ACTION")
    b = im_sub.add_parser("bootstrap", help="build the base image from Debian packages (no registry)")
    b.add_argument("--force", action="store_true", help="rebuild even if present")
    b.add_argument(
        "--family", default="all", choices=["all", "base", "dev"],
        help="which image family (default: all; the bundled tasks use both)",
    )
    b.add_argument(
        "--source", default="auto", choices=["auto", "debootstrap", "host"],
        help="debootstrap from the Debian mirror, the host's installed Debian packages, or auto "
        "(debootstrap when the mirror answers, else the host's packages)",
    )
    b.add_argument(
        "--tag-suffix", default="", metavar="SUFFIX",
        help="build into scratch tags (e.g. -host: terminal-env/base:bookworm-1-host) instead of "
        "the ones tasks use",
    )
    b.set_defaults(func=cmd_images_bootstrap)

    g = sub.add_parser("gc", help="remove containers whose owning process is gone")
    g.add_argument("--all", action="store_true", help="remove every terminal-env container")
    g.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    g.add_argument("--json", action="store_true", help="print JSON")
    g.set_defaults(func=cmd_gc)

    dm = sub.add_parser("demo", help="run a bundled task end to end (oracle by default)")
    dm.add_argument("--task", help="a task name in the bundled pool, or a task directory")
    dm.add_argument("--policy", choices=["oracle", "nop"], default="oracle")
    dm.add_argument("--reward", default="strict_success_first", type=reward_arg,
                   help="binary, partial_progress, strict_success_first, metric:NAME (a metric of the task's reward.json) or metrics:NAME=W,NAME=W (a weighted mean of them)")
    dm.set_defaults(func=cmd_demo)


    add_tasks_parser(sub)
    add_run_parsers(sub)
    add_rsr_parser(sub)
    add_train_parser(sub)

    sh = sub.add_parser("shell", help="play an episode yourself in a sandbox")
    sh.add_argument("--image", default="terminal-env/base:bookworm-1")
    sh.add_argument("--workdir", default="/app")
    sh.add_argument("--timeout", type=float, default=180.0, help="per-command timeout, s")
    sh.set_defaults(func=cmd_shell)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    install_signal_handlers()  # sandboxes started in worker threads are removed on SIGTERM too
    try:
        return func(args)
    except TerminalEnvError as exc:
        if os.environ.get("TERMINAL_ENV_DEBUG"):
            raise
        err_console.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
