"""Live progress of a run with rich: a bar, running trials, one line per finished trial."""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .records import TrialResult

_STYLE = {"passed": "green", "partial": "yellow", "failed": "red", "timeout": "red",
          "tampered": "magenta", "infra_error": "bright_black"}


class RunProgress:
    def __init__(self, total: int, done: int, *, enabled: bool = True, console: Any = None):
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.total, self.done = total, done
        self.passed = self.masked = 0
        self._lock = threading.Lock()
        self._progress = None
        self._bar = None

    def __enter__(self) -> "RunProgress":
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=self.console,
                transient=False,
            )
            self._progress.__enter__()
            self._bar = self._progress.add_task("trials", total=self.total, completed=self.done,
                                                stats=self._stats())
            if self.done:
                self.console.print(f"resuming: {self.done} of {self.total} trials already finished")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def _stats(self) -> str:
        return f"[green]{self.passed} passed[/] [bright_black]{self.masked} infra[/]"

    def started(self, task: str, attempt: int) -> None:
        pass

    def finished(self, r: TrialResult) -> None:
        with self._lock:
            self.done += 1
            self.passed += int(r.strict_success and not r.masked)
            self.masked += int(r.masked)
            if not self.enabled:
                return
            outcome = "infra_error" if r.masked else (r.outcome or r.termination)
            style = _STYLE.get(outcome, "white")
            note = f" [bright_black]{escape(r.error[:100])}[/]" if r.error else ""
            self.console.print(
                f"[{style}]{outcome:<11}[/] {escape(r.task)} #{r.attempt}  progress {r.progress:.2f}  "
                f"{r.turns} turns  {r.duration:.1f}s{note}", markup=True, highlight=False,
            )
            assert self._progress is not None and self._bar is not None
            self._progress.update(self._bar, completed=self.done, stats=self._stats())
