"""Rewards: pure functions from a :class:`~terminal_env.verify.VerifierResult` to a float in [0, 1].

Only verifiers touch the sandbox after an episode; a reward just reads the verdict, so the same
episode can be rescored under another reward without running anything again. None of these
raises for a valid result.

- :func:`binary`: 1.0 for strict success, else 0.0. The benchmark number.
- :func:`partial_progress`: the weighted share of checks passed. Dense, but it can pay a
  near-miss almost as much as a success.
- :func:`strict_success_first`: 1.0 for strict success, else at most ``alpha`` < 1, so any
  success outranks any failure while partial credit still orders the failures.
- :func:`metric` (``"metric:NAME"``) and :func:`metrics` (``weights={...}``): one of the named
  metrics a Harbor verifier writes to ``reward.json``, or a declared combination of them.

Infrastructure errors score 0.0 here only so that every function is total; trainers must drop
them (:func:`is_masked`), never learn from them.

>>> from terminal_env.verify import Check, VerifierResult
>>> near = VerifierResult(outcome="partial", progress=0.75,
...                       checks=[Check(name="a", passed=True, weight=3), Check(name="b", passed=False)])
>>> binary(near), partial_progress(near), strict_success_first(near)
(0.0, 0.75, 0.375)
"""

from __future__ import annotations

import argparse
import functools
import inspect
import math
import re
from collections.abc import Callable
from typing import Any

from .errors import ConfigError
from .verify.result import ZERO_OUTCOMES, Outcome, VerifierResult

RewardFn = Callable[[VerifierResult], float]
_NUMBER_TEXT = re.compile(r"[+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def is_masked(result: VerifierResult) -> bool:
    """Whether trainers must drop this episode (the infrastructure failed, not the agent).

    >>> is_masked(VerifierResult.infra_error("docker daemon went away"))
    True
    >>> is_masked(VerifierResult.timeout("tests ran past 600 s"))
    False
    """
    return result.masked


def binary(result: VerifierResult) -> float:
    """1.0 iff the result is a strict success (every check passed and any reward is 1.0).

    >>> binary(VerifierResult(outcome="passed"))
    1.0
    >>> binary(VerifierResult(outcome="partial", progress=0.99))
    0.0
    """
    return 1.0 if result.strict_success else 0.0


def partial_progress(result: VerifierResult) -> float:
    """The result's progress; 0.0 for tampered, timed-out and infrastructure-failed results.

    A strict success is always 1.0 here, so ``binary(r) <= partial_progress(r)`` for every
    result (the model also enforces that a passed result has progress 1.0).

    >>> partial_progress(VerifierResult(outcome="partial", progress=0.5))
    0.5
    >>> partial_progress(VerifierResult.tampered(["/tests/test_outputs.py"]))
    0.0
    """
    if result.outcome in ZERO_OUTCOMES:
        return 0.0
    if result.strict_success:
        return 1.0
    progress = result.progress
    return min(1.0, max(0.0, progress)) if math.isfinite(progress) else 0.0


def _check_alpha(alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
            or not (0.0 <= alpha < 1.0):  # also false for NaN
        raise ConfigError(
            f"alpha={alpha!r} is out of range: strict_success_first needs 0 <= alpha < 1 "
            "(at 1 a near-miss would score like a success)"
        )
    return float(alpha)


def strict_success_first(result: VerifierResult, alpha: float = 0.5) -> float:
    """1.0 for strict success; otherwise ``alpha * partial_progress(result)``.

    Since ``alpha < 1``, every success scores above every non-success, whatever its progress.

    >>> strict_success_first(VerifierResult(outcome="passed"))
    1.0
    >>> strict_success_first(VerifierResult(outcome="partial", progress=0.5), alpha=0.2)
    0.1
    >>> strict_success_first(VerifierResult(outcome="failed"), alpha=1.0)
    Traceback (most recent call last):
    ...
    terminal_env.errors.ConfigError: alpha=1.0 is out of range: strict_success_first needs 0 <= alpha < 1 (at 1 a near-miss would score like a success)
    """
    alpha = _check_alpha(alpha)
    if result.strict_success:
        return 1.0
    return alpha * partial_progress(result)


def _check_metric_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"metric name {name!r}: give the name of a number the task's verifier "
                          "writes to reward.json (e.g. reward='metric:accuracy')")
    return name


def metric(result: VerifierResult, name: str = "reward") -> float:
    """The named metric of the result (Harbor's several rewards, from ``reward.json``), clamped
    to [0, 1]; 0.0 for tampered, timed-out and infrastructure-failed results, and when the
    verifier did not report it (a verifier that failed before writing its metrics).

    >>> r = VerifierResult(outcome="partial", progress=0.5, metrics={"accuracy": 0.8, "loss": 3.0})
    >>> metric(r, "accuracy"), metric(r, "loss"), metric(r, "f1")
    (0.8, 1.0, 0.0)
    >>> metric(VerifierResult.tampered(["/tests"], metrics={"accuracy": 1.0}), "accuracy")
    0.0
    """
    name = _check_metric_name(name)
    if result.outcome in ZERO_OUTCOMES:
        return 0.0
    value = result.metrics.get(name, 0.0)
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0


def metrics(result: VerifierResult, weights: dict[str, float] | None = None) -> float:
    """A declared combination of metrics: ``sum(w * metric(name)) / sum(w)`` over ``weights``
    ({metric name: weight > 0}).

    >>> r = VerifierResult(outcome="partial", progress=0.5, metrics={"accuracy": 0.8, "f1": 0.4})
    >>> round(metrics(r, {"accuracy": 3, "f1": 1}), 6)
    0.7
    """
    if not isinstance(weights, dict) or not weights:
        raise ConfigError("reward 'metrics' needs weights={metric name: weight}, e.g. "
                          "{'accuracy': 0.7, 'f1': 0.3}")
    for name, w in weights.items():
        _check_metric_name(name)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (math.isfinite(w) and w > 0):
            raise ConfigError(f"reward 'metrics': weight {w!r} of {name!r} must be a positive number")
    total = math.fsum(weights.values())
    return math.fsum(w * metric(result, n) for n, w in weights.items()) / total


REWARDS: dict[str, RewardFn] = {
    "binary": binary,
    "partial_progress": partial_progress,
    "strict_success_first": strict_success_first,
    "metric": metric,
    "metrics": metrics,
}
#: rewards that need their options (``metric`` its name, ``metrics`` its weights): not among
#: the rewards every trajectory records
NEEDS_OPTIONS = ("metric", "metrics")

# A result used to try a configured reward once, so bad options fail at configuration time
# instead of in the middle of a training run.
_PROBE = VerifierResult(outcome=Outcome.partial, progress=0.5)


def _spelled_options(text: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The options of ``metric:NAME`` and ``metrics:NAME=WEIGHT,NAME=WEIGHT`` (the spellings a
    command line or a config file can carry)."""
    head, _, rest = text.partition(":")
    if head.replace("-", "_") == "metric":
        return "metric", {**kwargs, "name": rest}
    weights: dict[str, float] = {}
    for part in rest.split(","):
        name, eq, w = part.partition("=")
        if not eq or not _NUMBER_TEXT.fullmatch(w.strip()):
            raise ConfigError(f"reward {text!r}: {part!r} is not NAME=WEIGHT; write e.g. "
                              "'metrics:accuracy=0.7,f1=0.3'")
        weights[name.strip()] = float(w)
    return "metrics", {**kwargs, "weights": weights}


def reward_arg(text: str) -> str:
    """An argparse ``type`` for ``--reward``: a registry name or a ``metric:``/``metrics:``
    spelling, checked now (the run would otherwise fail later)."""
    try:
        get_reward(text)
    except ConfigError as e:  # argparse shows this one's message, not a generic line
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def get_reward(name_or_callable: str | RewardFn, **kwargs: Any) -> RewardFn:
    """A reward function by registry name (``-`` and ``_`` alike) or a callable, with options bound.

    >>> get_reward("strict-success-first", alpha=0.2)(VerifierResult(outcome="failed"))
    0.0
    >>> get_reward("bogus")
    Traceback (most recent call last):
    ...
    terminal_env.errors.ConfigError: unknown reward 'bogus'; known rewards: binary, metric, metrics, partial_progress, strict_success_first
    """
    if callable(name_or_callable):
        fn = name_or_callable
    elif isinstance(name_or_callable, str):
        key = name_or_callable.strip().replace("-", "_")
        if ":" in key and key.split(":", 1)[0] in NEEDS_OPTIONS:  # "metric:NAME", "metrics:A=W,..."
            key, kwargs = _spelled_options(name_or_callable.strip(), kwargs)
        elif key in NEEDS_OPTIONS and not kwargs:
            raise ConfigError(f"reward {name_or_callable!r} needs options: "
                              + ("'metric:NAME' or name=NAME" if key == "metric"
                                 else "weights={metric name: weight}"))
        if key not in REWARDS:
            raise ConfigError(
                f"unknown reward {name_or_callable!r}; known rewards: {', '.join(sorted(REWARDS))}"
            )
        fn = REWARDS[key]
    else:
        raise ConfigError(f"a reward is a name or a callable, not {type(name_or_callable).__name__}")
    if not kwargs:
        return fn
    try:
        inspect.signature(fn).bind(_PROBE, **kwargs)
    except TypeError as e:
        raise ConfigError(f"bad options for reward {getattr(fn, '__name__', fn)!r}: {e}") from None
    except ValueError:
        pass  # no signature to inspect (some builtins); the probe below still runs
    bound = functools.update_wrapper(functools.partial(fn, **kwargs), fn)
    if fn in REWARDS.values():
        bound(_PROBE)  # our own rewards are pure: trying one validates its options (ConfigError)
    return bound
