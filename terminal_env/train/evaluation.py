"""The loop's final evaluation statistics: per-task scores, bootstrap intervals, paired differences.

The five-stage loop (Base, RSR-1, RPR-1, RSR-2, RPR-2) scores each stage's kept checkpoint once,
on the test split: every task is played ``k`` times with fixed episode seeds, and a task's score
is the mean of its episodes (strict success 0/1, or reward). Tasks are the unit of sampling (a
task's episodes are not independent draws), so every interval here is a bootstrap over tasks.

Every stage plays the same tasks with the same seeds, so two stages can be compared task by task:
a paired bootstrap resamples tasks as pairs and the tasks' shared difficulty cancels, which makes
the interval of a difference much narrower than the two marginal intervals suggest.

Masked episodes (infrastructure failures: engine, sandbox, model server) say nothing about the
policy: they are left out of every score and counted apart. A task whose every episode is masked
has no score; it is absent from :func:`task_scores` and listed by :func:`episode_summary`, and a
pair of stages is compared on the tasks scored in both only (``n_paired`` says how many).

Pure Python over :mod:`terminal_env.metrics` (no torch): the loop's report and its tests run
without the ``[train]`` extra.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..metrics import bootstrap_ci, mean, paired_bootstrap

#: the scores a task row carries (the metrics :func:`final_summary` can compare)
METRICS = ("strict_success", "reward")


def _check_bootstrap(n_resamples: Any, alpha: Any) -> None:
    """The bootstrap's settings, refused as the user's error (metrics would raise a ValueError)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ConfigError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha!r}")


def _number(value: Any, field: str) -> float:
    """A finite float, or a ConfigError naming ``field`` (a NaN would poison every mean)."""
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{field} must be a finite number, got {value!r}")
    return float(value)


# ---------------------------------------------------------------------------- episodes -> tasks
def _rows(episodes: Iterable[Mapping[str, Any]]) -> list[tuple[str, Any, bool, Mapping[str, Any]]]:
    """``(task, seed, masked, row)`` of every episode, checked once for both readers below."""
    out = []
    for i, row in enumerate(episodes):
        if not isinstance(row, Mapping):
            raise ConfigError(f"episodes[{i}] must be a mapping, got {type(row).__name__}")
        task = row.get("task")
        if not isinstance(task, str) or not task:
            raise ConfigError(f"episodes[{i}].task must be a non-empty string, got {task!r}")
        out.append((task, row.get("seed"), bool(row.get("masked", False)), row))
    return out


def task_scores(episodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per task, the mean strict success and mean reward of its unmasked episodes.

    An unmasked episode whose ``strict_success`` or ``reward`` is None was not verified: it
    counts as a failure worth 0, as in :func:`terminal_env.metrics.task_table` (the policy played
    it; only infrastructure failures are masked). Two unmasked episodes of a task with the same
    seed are refused: with fixed seeds that is one episode recorded twice, and it would weigh
    double (a masked episode retried with its own seed is fine). Tasks come sorted by name.

    >>> rows = [{"task": "a", "seed": 0, "strict_success": True, "reward": 1.0, "masked": False},
    ...         {"task": "a", "seed": 1, "strict_success": False, "reward": 0.5, "masked": False},
    ...         {"task": "a", "seed": 2, "strict_success": None, "reward": None, "masked": True},
    ...         {"task": "b", "seed": 0, "strict_success": None, "reward": None, "masked": True}]
    >>> task_scores(rows)
    {'a': {'strict_success': 0.5, 'reward': 0.75, 'episodes': 2, 'masked': 1}}
    """
    groups: dict[str, list[tuple[Any, bool, Mapping[str, Any]]]] = {}
    for task, seed, masked, row in _rows(episodes):
        groups.setdefault(task, []).append((seed, masked, row))
    out: dict[str, dict[str, float]] = {}
    for task in sorted(groups):
        scored = [(seed, row) for seed, masked, row in groups[task] if not masked]
        if not scored:
            continue
        seeds = [seed for seed, _ in scored if seed is not None]
        if len(seeds) != len(set(seeds)):
            twice = sorted({s for s in seeds if seeds.count(s) > 1}, key=repr)
            raise ConfigError(f"episodes of task {task!r}: seed {twice[0]!r} scored twice "
                              "(one episode recorded twice would weigh double)")
        success = [_number(row.get("strict_success") or False, f"{task}.strict_success")
                   for _, row in scored]
        reward = [_number(0.0 if row.get("reward") is None else row["reward"], f"{task}.reward")
                  for _, row in scored]
        out[task] = {"strict_success": mean(success), "reward": mean(reward),
                     "episodes": len(scored), "masked": len(groups[task]) - len(scored)}
    return out


def episode_summary(episodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The counts :func:`task_scores` leaves out: masked episodes, and tasks with no score.

    The loop stores this beside a stage's score (``final_summary(counts=...)``) so the report
    says how many tasks the mean is over and which were lost to the infrastructure.

    >>> episode_summary([{"task": "a", "masked": False}, {"task": "b", "masked": True},
    ...                  {"task": "a", "masked": True}])
    {'episodes': 3, 'masked_episodes': 2, 'tasks': 2, 'scored_tasks': 1, 'masked_tasks': ['b']}
    """
    rows = _rows(episodes)
    tasks = {task for task, _, _, _ in rows}
    scored = {task for task, _, masked, _ in rows if not masked}
    return {"episodes": len(rows), "masked_episodes": sum(masked for _, _, masked, _ in rows),
            "tasks": len(tasks), "scored_tasks": len(scored), "masked_tasks": sorted(tasks - scored)}


# ---------------------------------------------------------------------------- intervals
def score(
    per_task: Mapping[str, float], *, seed: int = 0, n_resamples: int = 2000, alpha: float = 0.05
) -> dict[str, Any]:
    """The mean over tasks of one value per task, with a percentile bootstrap over tasks.

    Every field but ``n_tasks`` is None with no task (a stage whose every episode was masked):
    a number there would be invented.

    >>> score({"a": 1.0, "b": 0.0, "c": 0.5}, n_resamples=100)["mean"]
    0.5
    >>> score({"a": 0.25, "b": 0.25})
    {'mean': 0.25, 'ci_low': 0.25, 'ci_high': 0.25, 'n_tasks': 2}
    >>> score({})
    {'mean': None, 'ci_low': None, 'ci_high': None, 'n_tasks': 0}
    """
    _check_bootstrap(n_resamples, alpha)
    values = [_number(per_task[t], f"per_task[{t!r}]") for t in sorted(per_task)]
    if not values:
        return {"mean": None, "ci_low": None, "ci_high": None, "n_tasks": 0}
    low, high = bootstrap_ci(values, n_resamples=n_resamples, alpha=alpha, seed=seed)
    return {"mean": mean(values), "ci_low": low, "ci_high": high, "n_tasks": len(values)}


def _pair(a: str, b: str, kind: str, va: Mapping[str, float], vb: Mapping[str, float],
          boot: Mapping[str, Any]) -> dict[str, Any]:
    """One paired comparison ``b - a``; ``excludes_zero`` is what a reader looks for first."""
    r = paired_bootstrap(va, vb, **boot)
    common = sorted(set(va) & set(vb))
    low, high = r["ci_low"], r["ci_high"]
    return {
        "a": a, "b": b, "kind": kind, "n_paired": r["n_paired"], "mean_diff": r["mean_diff"],
        "ci_low": low, "ci_high": high, "share_positive": r["share_positive"],
        "excludes_zero": low is not None and high is not None and (low > 0 or high < 0),
        "mean_a": mean([va[t] for t in common]) if common else None,
        "mean_b": mean([vb[t] for t in common]) if common else None,
    }


def final_summary(
    stages: Sequence[str],
    per_stage: Mapping[str, Mapping[str, Mapping[str, float]]],
    *,
    metric: str = "strict_success",
    seed: int = 0,
    n_resamples: int = 2000,
    alpha: float = 0.05,
    counts: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Each stage's test score, and the paired differences a reader of the loop asks about.

    ``per_stage[stage]`` is :func:`task_scores` of the stage's test episodes; ``metric`` picks
    the value compared. Pairs are every consecutive pair of stages in ``stages`` order (did this
    stage help?), then the first against the last (did the loop help?), which is left out with
    two stages (it would be the consecutive pair again). Differences are later minus earlier.
    ``counts[stage]`` (optional, :func:`episode_summary`) is kept as the stage's ``episodes``.
    The same bootstrap seed serves every stage, so all of them resample the same task indices.

    >>> per_stage = {"base": {"x": {"strict_success": 0.0}, "y": {"strict_success": 1/3}},
    ...              "rsr-1": {"x": {"strict_success": 1/3}, "y": {"strict_success": 2/3}}}
    >>> s = final_summary(["base", "rsr-1"], per_stage, n_resamples=200)
    >>> s["scores"]["base"]["per_task"]
    {'x': 0.0, 'y': 0.3333333333333333}
    >>> p = s["paired"]
    >>> len(p), p[0]["kind"], p[0]["n_paired"], round(p[0]["mean_diff"], 6), p[0]["excludes_zero"]
    (1, 'consecutive', 2, 0.333333, True)
    """
    _check_bootstrap(n_resamples, alpha)
    if metric not in METRICS:
        raise ConfigError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    stages = list(stages)
    for name in stages:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"stages: every stage needs a non-empty name, got {name!r}")
    if len(set(stages)) != len(stages):
        raise ConfigError(f"stages: a stage is named twice in {stages}")
    missing, extra = set(stages) - set(per_stage), set(per_stage) - set(stages)
    if missing or extra:
        raise ConfigError(f"per_stage must hold exactly the stages: missing {sorted(missing)}, "
                          f"not a stage {sorted(extra)}")
    boot = {"seed": seed, "n_resamples": n_resamples, "alpha": alpha}
    values: dict[str, dict[str, float]] = {}
    scores: dict[str, dict[str, Any]] = {}
    for name in stages:
        rows = per_stage[name]
        per_task = {}
        for task in sorted(rows):
            row = rows[task]
            if not isinstance(row, Mapping) or metric not in row:
                raise ConfigError(f"per_stage[{name!r}][{task!r}] needs a {metric!r} score")
            per_task[task] = _number(row[metric], f"per_stage[{name!r}][{task!r}][{metric!r}]")
        values[name] = per_task
        scores[name] = {**score(per_task, **boot), "per_task": per_task}
        if counts is not None and name in counts:
            scores[name]["episodes"] = dict(counts[name])
    pairs = [(a, b, "consecutive") for a, b in zip(stages, stages[1:])]
    if len(stages) > 2:
        pairs.append((stages[0], stages[-1], "first_vs_last"))
    return {
        "metric": metric, "confidence": 1 - alpha, "n_resamples": n_resamples, "seed": seed,
        "scores": scores,
        "paired": [_pair(a, b, kind, values[a], values[b], boot) for a, b, kind in pairs],
    }
