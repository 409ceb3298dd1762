"""Benchmark metrics over trial results: Mean@k, pass@k, partial progress, bootstrap intervals.

Definitions (a *task* is scored from its non-masked attempts; ``n`` of them, ``c`` successful):

* **Mean@k**: the mean over tasks of the task's mean strict success ``c / n``. With ``k``
  attempts per task this is the expected share of tasks solved by one attempt, estimated with
  all ``k`` of them (the headline number of the benchmark).
* **pass@k**: the mean over tasks of the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` (Chen et
  al. 2021), each task with its own ``n``; a task with fewer than ``k`` scored attempts cannot
  estimate pass@k and is left out of it (``n_tasks`` says how many tasks were used).
* **mean progress**: the mean over tasks of the task's mean partial progress (weighted share
  of checks passed).

Masked trials are infrastructure failures (engine, sandbox, model server): they say nothing about
the agent, so they are excluded from every score and counted apart (``n_masked``). A task whose
trials are all masked is listed with scores ``None`` and excluded from every aggregate.

Confidence intervals are percentile bootstraps over tasks (tasks are the unit of sampling: their
attempts are not independent). Everything is pure Python with a seeded :class:`random.Random`,
so a summary is exactly reproducible.
"""

from __future__ import annotations

import math
import operator
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .runner.records import TrialResult

OUTCOMES = ("passed", "failed", "partial", "timeout", "tampered", "infra_error")
#: Terminations that are infrastructure failures, masked even if a result forgot to say so.
MASKED_TERMINATIONS = frozenset({"model_error", "infra_error"})
#: The group name of tasks without a category (or difficulty).
UNKNOWN = "unknown"


# ---------------------------------------------------------------------------- estimators
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` attempts of which ``c`` succeeded: ``1 - C(n-c,k)/C(n,k)``.

    Computed as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``, which never forms a huge binomial
    coefficient; the factors are multiplied from ``i = n`` down, so one more success only
    appends a factor and the result is monotone in ``c`` (and in ``k``) even in floating point.

    >>> pass_at_k(5, 0, 1)
    0.0
    >>> pass_at_k(5, 5, 5)
    1.0
    >>> pass_at_k(4, 1, 2)
    0.5
    >>> round(pass_at_k(10, 3, 1), 12)
    0.3
    >>> pass_at_k(2, 1, 3)
    Traceback (most recent call last):
    ...
    ValueError: pass@k needs k <= n (k=3, n=2): a task with fewer attempts cannot estimate it
    """
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if k < 1:
        raise ValueError(f"pass@k needs k >= 1, got k={k}")
    if k > n:
        raise ValueError(
            f"pass@k needs k <= n (k={k}, n={n}): a task with fewer attempts cannot estimate it"
        )
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    if n - c < k:  # every k-subset holds a success
        return 1.0
    fail = 1.0
    for i in range(n, n - c, -1):
        fail *= 1.0 - k / i
    return min(1.0, max(0.0, 1.0 - fail))


def mean(values: Sequence[float]) -> float:
    """Exactly rounded mean (``math.fsum``); ValueError when empty.

    >>> mean([0.25, 0.5, 1.0])
    0.5833333333333334
    """
    if not values:
        raise ValueError("mean of no values")
    return math.fsum(values) / len(values)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default ``linear`` method)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def _check_bootstrap(n_resamples: int, alpha: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float] = mean,
    n_resamples: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap ``(low, high)`` interval of ``stat`` over ``values`` (one per task).

    Deterministic for a given ``seed``. ValueError when ``values`` is empty.

    >>> bootstrap_ci([0.5, 0.5, 0.5])
    (0.5, 0.5)
    >>> low, high = bootstrap_ci([0, 1, 0, 1, 1, 0, 1, 1], seed=1)
    >>> 0 <= low < mean([0, 1, 0, 1, 1, 0, 1, 1]) < high <= 1
    True
    """
    _check_bootstrap(n_resamples, alpha)
    values = [float(v) for v in values]
    if not values:
        raise ValueError("bootstrap of no values")
    rng = random.Random(seed)
    n = len(values)
    stats = sorted(stat(rng.choices(values, k=n)) for _ in range(n_resamples))
    return _quantile(stats, alpha / 2), _quantile(stats, 1 - alpha / 2)


def paired_bootstrap(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    n_resamples: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean difference ``b - a`` over the tasks present in both, with a paired bootstrap.

    Tasks are resampled as pairs, so what the two runs share (the task's difficulty) cancels.
    ``share_positive`` is the share of resamples whose mean difference is > 0 (a one-sided
    bootstrap "probability" that B is better). With no task in common every number is None.

    >>> r = paired_bootstrap({"x": 0.0, "y": 0.5, "z": 0.0}, {"x": 1.0, "y": 1.0, "w": 0.0})
    >>> r["n_paired"], r["mean_diff"], r["share_positive"]
    (2, 0.75, 1.0)
    """
    _check_bootstrap(n_resamples, alpha)
    common = sorted(set(a) & set(b))
    diffs = [float(b[t]) - float(a[t]) for t in common]
    if not diffs:
        return {"n_paired": 0, "mean_diff": None, "ci_low": None, "ci_high": None,
                "share_positive": None}
    rng = random.Random(seed)
    n = len(diffs)
    stats = sorted(mean(rng.choices(diffs, k=n)) for _ in range(n_resamples))
    return {
        "n_paired": n,
        "mean_diff": mean(diffs),
        "ci_low": _quantile(stats, alpha / 2),
        "ci_high": _quantile(stats, 1 - alpha / 2),
        "share_positive": sum(s > 0 for s in stats) / len(stats),
    }


# ---------------------------------------------------------------------------- per task
def is_masked(result: TrialResult) -> bool:
    """An infrastructure failure: the result's flag, an ``infra_error`` verdict, or a
    ``model_error``/``infra_error`` termination (any of them means the agent was not scored)."""
    return bool(
        result.masked or result.outcome == "infra_error" or result.termination in MASKED_TERMINATIONS
    )


def _first(values: Iterable[str | None]) -> str | None:
    return next((v for v in values if v is not None), None)


def task_table(results: Iterable[TrialResult]) -> list[dict[str, Any]]:
    """One row per task, sorted by name.

    ``attempts`` counts the non-masked trials (``masked`` the others); ``successes`` the
    strictly successful ones; ``mean_success``/``mean_progress`` are None when every trial of
    the task is masked.

    >>> rows = task_table([
    ...     TrialResult(task="t", attempt=1, strict_success=True, progress=1.0, outcome="passed"),
    ...     TrialResult(task="t", attempt=2, progress=0.5, outcome="partial"),
    ...     TrialResult(task="t", attempt=3, masked=True, outcome="infra_error"),
    ... ])
    >>> {k: rows[0][k] for k in ("attempts", "successes", "masked", "mean_success", "mean_progress")}
    {'attempts': 2, 'successes': 1, 'masked': 1, 'mean_success': 0.5, 'mean_progress': 0.75}
    """
    groups: dict[str, list[TrialResult]] = {}
    for r in results:
        groups.setdefault(r.task, []).append(r)
    rows = []
    for task in sorted(groups):
        trials = sorted(groups[task], key=lambda r: r.attempt)
        scored = [r for r in trials if not is_masked(r)]
        n = len(scored)
        successes = sum(1 for r in scored if r.strict_success)
        rows.append({
            "task": task,
            "category": _first(r.category for r in trials),
            "difficulty": _first(r.difficulty for r in trials),
            "split": _first(r.split for r in trials),
            "attempts": n,
            "successes": successes,
            "masked": len(trials) - n,
            "mean_success": successes / n if n else None,
            "mean_progress": mean([r.progress for r in scored]) if n else None,
            "metrics": _task_metrics(scored),
            "duration": math.fsum(r.duration for r in trials),
        })
    return rows


def _task_metrics(scored: list[TrialResult]) -> dict[str, float]:
    """The mean of each named metric over a task's scored trials; a trial that did not report
    a metric the others did (its verifier failed before writing it) counts 0 for it."""
    names = sorted({name for r in scored for name in r.metrics})
    return {name: mean([r.metrics.get(name, 0.0) for r in scored]) for name in names}


def _scored(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if r["attempts"] > 0]


def mean_at_k(results: Iterable[TrialResult]) -> float | None:
    """Mean over tasks of each task's mean strict success (None with no scored task).

    >>> mean_at_k([TrialResult(task="a", attempt=1, strict_success=True, outcome="passed"),
    ...            TrialResult(task="a", attempt=2, outcome="failed"),
    ...            TrialResult(task="b", attempt=1, outcome="failed")])
    0.25
    """
    rows = _scored(task_table(results))
    return mean([r["mean_success"] for r in rows]) if rows else None


def task_pass_at_k(rows: Iterable[Mapping[str, Any]], k: int) -> dict[str, float]:
    """pass@k per task, for the tasks with at least ``k`` scored attempts."""
    return {r["task"]: pass_at_k(r["attempts"], r["successes"], k)
            for r in rows if r["attempts"] >= k}


def mean_pass_at_k(results: Iterable[TrialResult], k: int) -> float | None:
    """pass@k averaged over the tasks with at least ``k`` scored attempts (None if none).

    >>> mean_pass_at_k([TrialResult(task="a", attempt=1, strict_success=True, outcome="passed"),
    ...                 TrialResult(task="a", attempt=2, outcome="failed")], 2)
    1.0
    """
    per_task = task_pass_at_k(task_table(results), k)
    return mean(list(per_task.values())) if per_task else None


def mean_progress(results: Iterable[TrialResult]) -> float | None:
    """Mean over tasks of each task's mean partial progress (None with no scored task)."""
    rows = _scored(task_table(results))
    return mean([r["mean_progress"] for r in rows]) if rows else None


# ---------------------------------------------------------------------------- summaries
def _estimate(values: Sequence[float], *, seed: int, n_resamples: int, alpha: float) -> dict[str, Any]:
    """``{value, ci_low, ci_high, n_tasks}`` of the mean of per-task ``values``."""
    if not values:
        return {"value": None, "ci_low": None, "ci_high": None, "n_tasks": 0}
    low, high = bootstrap_ci(values, n_resamples=n_resamples, alpha=alpha, seed=seed)
    return {"value": mean(values), "ci_low": low, "ci_high": high, "n_tasks": len(values)}


def _group_summary(rows: list[Mapping[str, Any]], key: str, **boot: Any) -> dict[str, Any]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r[key] or UNKNOWN, []).append(r)
    out = {}
    for name in sorted(groups):
        members = groups[name]
        scored = _scored(members)
        out[name] = {
            "tasks": len(members),
            "scored_tasks": len(scored),
            "mean_at_k": _estimate([r["mean_success"] for r in scored], **boot),
            "pass_at_1": _estimate(list(task_pass_at_k(scored, 1).values()), **boot),
            "mean_progress": _estimate([r["mean_progress"] for r in scored], **boot),
        }
    return out


def summarize(
    results: Iterable[TrialResult],
    *,
    attempts: int | None = None,
    seed: int = 0,
    n_resamples: int = 2000,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """A JSON-ready summary of a run's results.

    ``attempts`` is the planned number of attempts per task (``k``); by default the largest
    number of scored attempts of any task. pass@k is reported for every k in 1..attempts.
    Outcome, termination and cost totals count every trial, masked ones included (their cost
    was spent); scores never include masked trials.

    >>> s = summarize([TrialResult(task="a", attempt=1, strict_success=True, progress=1.0,
    ...                            outcome="passed")], n_resamples=10)
    >>> s["mean_at_k"]["value"], s["pass_at_k"]["1"]["value"], s["n_masked"]
    (1.0, 1.0, 0)
    """
    results = list(results)
    boot = {"seed": seed, "n_resamples": n_resamples, "alpha": alpha}
    rows = task_table(results)
    scored = _scored(rows)
    k_max = attempts if attempts is not None else max((r["attempts"] for r in scored), default=0)
    if k_max < 0:
        raise ValueError(f"attempts must be >= 0, got {attempts}")
    outcomes = {name: 0 for name in (*OUTCOMES, "none")}
    terminations: dict[str, int] = {}
    for r in results:
        key = r.outcome if r.outcome is not None else "none"
        outcomes[key] = outcomes.get(key, 0) + 1
        terminations[r.termination] = terminations.get(r.termination, 0) + 1
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(r.completion_tokens for r in results)
    mean_k = _estimate([r["mean_success"] for r in scored], **boot)
    return {
        "n_tasks": len(rows),
        "n_scored_tasks": len(scored),
        "n_trials": len(results),
        "n_masked": sum(1 for r in results if is_masked(r)),
        "attempts": k_max,
        "confidence": 1 - alpha,
        "n_resamples": n_resamples,
        "seed": seed,
        "mean_at_k": {**mean_k, "k": k_max},
        "pass_at_k": {
            str(k): _estimate(list(task_pass_at_k(scored, k).values()), **boot)
            for k in range(1, k_max + 1)
        },
        "mean_progress": _estimate([r["mean_progress"] for r in scored], **boot),
        # each named metric of the tasks' verifiers: the mean over the tasks that report it
        "metrics": {name: _estimate([r["metrics"][name] for r in scored if name in r["metrics"]], **boot)
                    for name in sorted({n for r in scored for n in r["metrics"]})},
        "outcomes": outcomes,
        "terminations": dict(sorted(terminations.items())),
        "per_category": _group_summary(rows, "category", **boot),
        "per_difficulty": _group_summary(rows, "difficulty", **boot),
        "totals": {
            "duration": math.fsum(r.duration for r in results),
            "model_seconds": math.fsum(r.model_seconds for r in results),
            "env_seconds": math.fsum(r.env_seconds for r in results),
            "verify_seconds": math.fsum(r.verify_seconds for r in results),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "tokens": prompt + completion,
            "turns": sum(r.turns for r in results),
            "commands": sum(r.commands for r in results),
            "format_errors": sum(r.format_errors for r in results),
            "tries": sum(r.tries for r in results),
        },
        "tasks": rows,
    }


def compare(
    results_a: Iterable[TrialResult],
    results_b: Iterable[TrialResult],
    seed: int = 0,
    *,
    n_resamples: int = 2000,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Run B against run A, task by task (differences are ``b - a``).

    ``tasks`` holds the tasks scored in both runs, sorted by the difference of mean strict
    success (largest gain first), then of progress; ``strict_success`` and ``progress`` give
    the mean difference over those tasks with a paired bootstrap interval; ``only_a`` and
    ``only_b`` list the tasks scored in one run only (never compared).

    >>> a = [TrialResult(task="x", attempt=1, outcome="failed")]
    >>> b = [TrialResult(task="x", attempt=1, strict_success=True, progress=1.0, outcome="passed"),
    ...      TrialResult(task="y", attempt=1, outcome="failed")]
    >>> c = compare(a, b, n_resamples=10)
    >>> c["tasks"][0]["diff_success"], c["strict_success"]["mean_diff"], c["only_b"]
    (1.0, 1.0, ['y'])
    """
    boot = {"seed": seed, "n_resamples": n_resamples, "alpha": alpha}
    ta = {r["task"]: r for r in _scored(task_table(results_a))}
    tb = {r["task"]: r for r in _scored(task_table(results_b))}
    common = sorted(set(ta) & set(tb))
    rows = []
    for t in common:
        ra, rb = ta[t], tb[t]
        rows.append({
            "task": t,
            "category": ra["category"] or rb["category"],
            "difficulty": ra["difficulty"] or rb["difficulty"],
            "a_attempts": ra["attempts"],
            "b_attempts": rb["attempts"],
            "a_success": ra["mean_success"],
            "b_success": rb["mean_success"],
            "diff_success": rb["mean_success"] - ra["mean_success"],
            "a_progress": ra["mean_progress"],
            "b_progress": rb["mean_progress"],
            "diff_progress": rb["mean_progress"] - ra["mean_progress"],
        })
    rows.sort(key=lambda r: (-r["diff_success"], -r["diff_progress"], r["task"]))

    def overall(key: str) -> dict[str, Any]:
        a = {t: ta[t][key] for t in common}
        b = {t: tb[t][key] for t in common}
        out = paired_bootstrap(a, b, **boot)
        out["mean_a"] = mean(list(a.values())) if common else None
        out["mean_b"] = mean(list(b.values())) if common else None
        return out

    return {
        "n_paired": len(common),
        "confidence": 1 - alpha,
        "strict_success": overall("mean_success"),
        "progress": overall("mean_progress"),
        "tasks": rows,
        "only_a": sorted(set(ta) - set(tb)),
        "only_b": sorted(set(tb) - set(ta)),
    }
