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

from .errors import TerminalEnvError

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


# ---------------------------------------------------------------------------- commands
def cmd_doctor(args: argparse.Namespace) -> int:
    from . import engine, images

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
        table.add_row("runtimes", "[green]ok[/green]", ", ".join(status.get("runtimes") or []))
        client = engine.get_client()
        if args.fix:
            images.ensure_base_image(client, log=lambda m: console.print(f"[dim]{m}[/dim]"))
        has_base = images.image_exists(client, images.BASE_IMAGE)
        table.add_row(
            "base image",
            "[green]ok[/green]" if has_base else "[red]missing[/red]",
            images.BASE_IMAGE if has_base else "run `terminal-env images bootstrap`",
        )
        ok = ok and has_base
    console.print(table)
    if not ok:
        console.print("[yellow]fix it with: terminal-env doctor --fix[/yellow]")
    return 0 if ok else 1


def cmd_images_bootstrap(args: argparse.Namespace) -> int:
    from . import engine, images

    engine.ensure_engine(log=lambda m: console.print(f"[dim]{m}[/dim]"))
    t0 = time.monotonic()
    families = list(images.FAMILIES) if args.family == "all" else [args.family]
    for family in families:
        tag = images.ensure_base_image(
            force=args.force, family=family, log=lambda m: console.print(f"[dim]{m}[/dim]")
        )
        console.print(f"{family} image ready: [bold]{tag}[/bold] ({time.monotonic() - t0:.1f} s)")
    return 0


def cmd_gc(args: argparse.Namespace) -> int:
    from .cleanup import gc

    records = gc(everything=args.all, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    table = Table(title=f"terminal-env gc: {len(records)} container(s) of this project")
    for col in ("name", "task", "owner_pid", "action"):
        table.add_column(col)
    for r in records:
        table.add_row(r["name"], r["task"], r["owner_pid"], r["action"])
    console.print(table)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the bundled default task end to end with a scripted agent through TerminalEnv."""
    from .env import TerminalEnv
    from .task import hello_task

    script = [
        "pwd",
        "printf 'Hello, world!\\n' > hello.txt",
        "cat /app/hello.txt",
        "#!submit",
    ]
    task = hello_task()

    def verifier(sandbox: Any, _task: Any) -> dict[str, Any]:
        content = sandbox.exec(["cat", "/app/hello.txt"], timeout=10).stdout
        return {"reward": float(content == b"Hello, world!\n"), "content": content.decode()}

    env = TerminalEnv(task, verifier=verifier, reward=lambda r: r["reward"])
    try:
        obs, info = env.reset()
        console.rule(f"task {task.name} in {info['container']}")
        console.print(obs)
        reward = 0.0
        for action in script:
            console.print(f"[bold cyan]$ {action}[/bold cyan]")
            obs, reward, terminated, truncated, info = env.step(action)
            console.print(obs)
            if terminated or truncated:
                break
        console.rule(f"reward {reward}")
        return 0 if reward == 1.0 else 1
    finally:
        env.close()


def cmd_shell(args: argparse.Namespace) -> int:
    """Play an episode yourself: each line you type is one action (``#!keys``/``#!submit`` too)."""
    from .env import TerminalEnv
    from .task import TaskSpec

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
    b.set_defaults(func=cmd_images_bootstrap)

    g = sub.add_parser("gc", help="remove containers whose owning process is gone")
    g.add_argument("--all", action="store_true", help="remove every terminal-env container")
    g.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    g.add_argument("--json", action="store_true", help="print JSON")
    g.set_defaults(func=cmd_gc)

    dm = sub.add_parser("demo", help="run the bundled default task with a scripted agent")
    dm.set_defaults(func=cmd_demo)

    from .tasks.cli import add_tasks_parser

    add_tasks_parser(sub)

    sh = sub.add_parser("shell", help="play an episode yourself in a sandbox")
    sh.add_argument("--image", default="terminal-env/base:bookworm-1")
    sh.add_argument("--workdir", default="/app")
    sh.add_argument("--timeout", type=float, default=180.0, help="per-command timeout, s")
    sh.set_defaults(func=cmd_shell)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
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
