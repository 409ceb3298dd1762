"""Rewards: pure functions from a :class:`~terminal_env.verify.VerifierResult` to a float in [0, 1].

Only verifiers touch the sandbox after an episode; a reward just reads the verdict, so the same
episode can be rescored under another reward without running anything again. None of these
raises for a valid result.

- :func:`binary`: 1.0 for strict success, else 0.0. The benchmark number.
- :func:`partial_progress`: the weighted share of checks passed. Dense, but it can pay a
  near-miss almost as much as a success.
- :func:`strict_success_first`: 1.0 for strict success, else at most ``alpha`` < 1, so any
  success outranks any failure while partial credit still orders the failures.

Infrastructure errors score 0.0 here only so that every function is total; trainers must drop
them (:func:`is_masked`), never learn from them.

>>> from terminal_env.verify import Check, VerifierResult
>>> near = VerifierResult(outcome="partial", progress=0.75,
...                       checks=[Check(name="a", passed=True, weight=3), Check(name="b", passed=False)])
>>> binary(near), partial_progress(near), strict_success_first(near)
(0.0, 0.75, 0.375)
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

from .errors import ConfigError
from .verify.result import ZERO_OUTCOMES, Outcome, VerifierResult

RewardFn = Callable[[VerifierResult], float]


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


REWARDS: dict[str, RewardFn] = {
    "binary": binary,
    "partial_progress": partial_progress,
    "strict_success_first": strict_success_first,
}

# A result used to try a configured reward once, so bad options fail at configuration time
# instead of in the middle of a training run.
_PROBE = VerifierResult(outcome=Outcome.partial, progress=0.5)


def get_reward(name_or_callable: str | RewardFn, **kwargs: Any) -> RewardFn:
    """A reward function by registry name (``-`` and ``_`` alike) or a callable, with options bound.

    >>> get_reward("strict-success-first", alpha=0.2)(VerifierResult(outcome="failed"))
    0.0
    >>> get_reward("bogus")
    Traceback (most recent call last):
    ...
    terminal_env.errors.ConfigError: unknown reward 'bogus'; known rewards: binary, partial_progress, strict_success_first
    """
    if callable(name_or_callable):
        fn = name_or_callable
    elif isinstance(name_or_callable, str):
        key = name_or_callable.strip().replace("-", "_")
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
