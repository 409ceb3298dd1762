"""Final tables of a run and of one trial, printed with rich."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _ci(stat: Any) -> str:
    if not isinstance(stat, dict) or stat.get("value") is None:
        return "-"
    lo, hi = stat.get("ci_low"), stat.get("ci_high")
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    return f"{stat['value']:.3f}{ci}"


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console(highlight=False)
    tasks = Table(title="tasks", show_lines=False)
    for col in ("task", "category", "difficulty", "attempts", "successes", "mean success", "mean progress", "masked"):
        tasks.add_column(col, justify="left" if col in ("task", "category", "difficulty") else "right")
    for row in summary.get("tasks", []):
        ms, mp = row.get("mean_success"), row.get("mean_progress")
        tasks.add_row(
            escape(str(row.get("task"))), str(row.get("category") or "-"), str(row.get("difficulty") or "-"),
            str(row.get("attempts", "-")), str(row.get("successes", "-")),
            "-" if ms is None else f"{ms:.2f}", "-" if mp is None else f"{mp:.2f}", str(row.get("masked", 0)),
        )
    console.print(tasks)
    head = Table(title="summary (95% bootstrap intervals over tasks)", show_header=False)
    head.add_column("metric")
    head.add_column("value", justify="right")
    k = (summary.get("mean_at_k") or {}).get("k")
    head.add_row(f"Mean@{k}", _ci(summary.get("mean_at_k")))
    for kk, stat in (summary.get("pass_at_k") or {}).items():
        head.add_row(f"pass@{kk}", _ci(stat))
    head.add_row("mean partial progress", _ci(summary.get("mean_progress")))
    for name, stat in (summary.get("metrics") or {}).items():  # the verifiers' named metrics
        n = stat.get("n_tasks") if isinstance(stat, dict) else None
        head.add_row(f"metric {escape(name)} ({n} tasks)", _ci(stat))
    head.add_row("tasks / trials", f"{summary.get('n_tasks')} / {summary.get('n_trials')}")
    head.add_row("infrastructure errors (excluded)", str(summary.get("n_masked", 0)))
    console.print(head)
    cats = summary.get("per_category") or {}
    if cats:
        t = Table(title="per category")
        for col in ("category", "tasks", "Mean@k", "pass@1", "progress"):
            t.add_column(col)
        for name, row in sorted(cats.items()):
            def f(v: Any) -> str:
                v = v.get("value") if isinstance(v, dict) else v
                return "-" if v is None else f"{v:.2f}"
            t.add_row(escape(str(name)), str(row.get("tasks")), f(row.get("mean_at_k")), f(row.get("pass_at_1")),
                      f(row.get("mean_progress")))
        console.print(t)


def print_trial(traj: Any, console: Console | None = None) -> None:
    console = console or Console(highlight=False)
    v = traj.verification or {}
    console.print(f"[bold]{escape(traj.task.name)}[/]: {v.get('outcome', traj.termination)}, "
                  f"progress {float(v.get('progress') or 0):.2f}, reward {traj.reward}")
    checks = v.get("checks") or []
    if checks:
        t = Table()
        t.add_column("check")
        t.add_column("result")
        for c in checks:
            t.add_row(escape(c["name"]), "[green]pass[/]" if c["passed"] else "[red]fail[/]")
        console.print(t)
