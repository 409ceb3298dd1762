"""The HTML report of a run directory: a self-contained static site.

::

    REPORT_DIR/                 (default RUN_DIR/report)
      index.html                headline metrics with intervals, charts, tasks x attempts
      compare.html              with a second run: per-task differences, paired bootstrap
      trials/<task>/<n>.html    one page per trial: checks, recording player, transcript

Nothing is fetched: styles and the player script are inlined, charts are inline SVG, and every
value read from the run is escaped (a model's output is untrusted text).

Replaying recordings in a terminal emulator is the expensive part (pyte draws ~0.5 MB/s), so
trial pages are rendered in worker processes when there are many.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ..metrics import compare, summarize
from ..runner.records import TrialResult
from .cast import CastError, read_cast
from .data import Run, load_run, read_trial, trial_path
from .data import trial_page as trial_page_path
from .pages import compare_page, index_page
from .trial import trial_page

__all__ = ["write_report", "load_run", "Run"]

#: below this many trials the pages are rendered in this process
PARALLEL_MIN_TRIALS = 8


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _render_trial(run: Run, result: TrialResult, out: Path) -> None:
    files = read_trial(trial_path(run, result))
    cast = cast_error = None
    if files.cast is not None:
        try:
            cast = read_cast(files.cast)
        except CastError as exc:
            cast_error = str(exc)
    siblings = [r for r in run.results if r.task == result.task]
    html = trial_page(run, result, files, cast=cast, cast_error=cast_error, siblings=siblings)
    _write(out / trial_page_path(result.task, result.attempt), html)


_worker_run: Run | None = None


def _worker_init(run: Run) -> None:
    global _worker_run
    _worker_run = run


def _worker_render(index: int, out: Path) -> None:
    assert _worker_run is not None
    _render_trial(_worker_run, _worker_run.results[index], out)


def _default_workers() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def _render_trials(run: Run, out: Path, workers: int) -> None:
    n = len(run.results)
    if workers > 1 and n >= PARALLEL_MIN_TRIALS:
        try:
            with ProcessPoolExecutor(max_workers=min(workers, n), initializer=_worker_init,
                                     initargs=(run,)) as pool:
                for fut in [pool.submit(_worker_render, i, out) for i in range(n)]:
                    fut.result()
            return
        except (OSError, BrokenProcessPool):
            pass  # no processes here (sandboxed, out of resources): render in this one
    for r in run.results:
        _render_trial(run, r, out)


def write_report(
    run_dir: str | Path,
    other_run_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    *,
    seed: int = 0,
    workers: int | None = None,
) -> Path:
    """Write the report of ``run_dir`` (with ``other_run_dir`` also compare.html, whose
    differences are other run - this run); return the path of index.html.

    Raises :class:`~terminal_env.errors.ConfigError` when a run directory is not readable
    (no run.json, damaged JSON, a damaged result.json); damage local to one trial (missing or
    broken trajectory, verifier result or recording) is shown on that trial's page instead.
    ``workers``: processes rendering trial pages (default: the usable CPUs, at most 8).
    """
    run = load_run(run_dir)
    other = load_run(other_run_dir) if other_run_dir is not None else None
    out = Path(out_dir) if out_dir is not None else run.dir / "report"
    out.mkdir(parents=True, exist_ok=True)

    summary = summarize(run.results, attempts=run.attempts, seed=seed)
    _render_trials(run, out, _default_workers() if workers is None else workers)
    if other is not None:
        comparison = compare(run.results, other.results, seed=seed)
        _write(out / "compare.html", compare_page(run, other, comparison))
    index = out / "index.html"
    _write(index, index_page(run, summary, compare_with=other))
    return index
