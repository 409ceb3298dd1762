"""What a verifier run concluded, as one validated value.

A verifier writes files (``reward.txt``, ``ctrf.json``, ...); :mod:`terminal_env.verify.parse`
turns them into a :class:`VerifierResult`. Everything downstream (rewards, trainers, runners,
reports) reads only this model, so its invariants are enforced here, once:

- ``strict_success`` is exactly ``outcome == passed``;
- a passed result has ``progress == 1.0`` (so the binary reward never exceeds partial progress);
- ``tampered``, ``timeout`` and ``infra_error`` results carry no progress and no success.

``infra_error`` is the one outcome that is nobody's fault in the episode: trainers mask it and
runners retry it (see :attr:`VerifierResult.masked`). ``tampered`` and ``timeout`` are the
agent's doing and are scored (as zero), not masked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Longest message kept on a result or a check; verifier output is untrusted and may be huge.
MAX_MESSAGE_CHARS = 2000
#: Longest check name kept (test ids are short; a huge one is a broken or hostile report).
MAX_NAME_CHARS = 500
#: Longest log tail kept on a result (the end of a log is where the verdict usually is).
MAX_LOG_CHARS = 8000

#: Where a result's verdict came from.
Source = Literal[
    "checks.json", "ctrf", "junit", "reward.json", "reward.txt", "pytest-output", "steps", "none"
]


class Outcome(str, Enum):
    """The verdict of one verification."""

    passed = "passed"  # every check passed and any reported reward is 1.0
    failed = "failed"  # nothing passed, or the verifier's output was missing or invalid
    partial = "partial"  # some checks passed, or a reward strictly between 0 and 1
    timeout = "timeout"  # the verifier ran out of time (the agent's state made it hang)
    tampered = "tampered"  # the agent modified something the verifier relies on
    infra_error = "infra_error"  # the infrastructure failed: mask, retry, never score


#: Outcomes that carry no progress whatever the checks say.
ZERO_OUTCOMES = frozenset({Outcome.timeout, Outcome.tampered, Outcome.infra_error})


def cap_head(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Keep the start of ``text`` (a message says what went wrong first)."""
    if len(text) <= limit:
        return text
    marker = f" ...[{len(text) - limit} chars cut]"
    return text[: max(0, limit - len(marker))] + marker


def cap_tail(text: str, limit: int = MAX_LOG_CHARS) -> str:
    """Keep the end of ``text`` (a log's verdict is at its end)."""
    if len(text) <= limit:
        return text
    marker = f"[{len(text) - limit} chars cut]... "
    return marker + text[len(text) - max(0, limit - len(marker)):]


class Check(BaseModel):
    """One named requirement of a task and whether the agent met it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    passed: bool
    #: relative importance; 0 makes a check informational (it cannot move progress)
    weight: float = Field(1.0, ge=0, allow_inf_nan=False)
    message: str = ""

    @field_validator("message")
    @classmethod
    def _cap_message(cls, value: str) -> str:
        return cap_head(value)

    @field_validator("name")
    @classmethod
    def _cap_name(cls, value: str) -> str:
        return cap_head(value, MAX_NAME_CHARS)


def _valid_reward(reward: float | None) -> bool:
    return reward is not None and math.isfinite(reward) and 0.0 <= reward <= 1.0


def check_progress(checks: Sequence[Check]) -> float:
    """Weighted share of passed checks in [0, 1].

    Weights are divided by the largest one first so their sum cannot overflow, and summed with
    ``math.fsum`` (exactly rounded) so passing one more check can never lower the share by a
    rounding accident. When every weight is 0 each check counts as 1.

    >>> check_progress([Check(name="a", passed=True, weight=3), Check(name="b", passed=False)])
    0.75
    >>> check_progress([Check(name="a", passed=True, weight=0), Check(name="b", passed=False, weight=0)])
    0.5
    """
    if not checks:
        return 0.0
    top = max(c.weight for c in checks)
    weights = [c.weight / top if top > 0 else 1.0 for c in checks]
    total = math.fsum(weights)
    won = math.fsum(w for w, c in zip(weights, checks) if c.passed)
    return min(1.0, max(0.0, won / total))


def classify(checks: Sequence[Check], reward_reported: float | None) -> tuple[Outcome, float]:
    """The outcome and progress of a verification from its checks and its reported reward.

    With checks, the checks decide: all passed -> ``passed`` (progress 1.0), none passed ->
    ``failed`` (0.0), otherwise ``partial`` with the weighted share of passed checks.
    One exception, because the verifier's explicit verdict wins for success: when every check
    passed but a reported reward is below 1, the result is not a success (``failed`` if the
    reward is 0, else ``partial``); progress stays the checks' share, so partial progress stays
    monotone in the passed checks while the strict-success signal is withheld.

    Without checks the reported reward decides: 1.0 -> ``passed``, 0 or nothing -> ``failed``,
    in between -> ``partial`` with that progress. An invalid reward (NaN, infinite, outside
    [0, 1]) is a failure with no progress.

    >>> classify([Check(name="a", passed=True), Check(name="b", passed=False)], None)
    (<Outcome.partial: 'partial'>, 0.5)
    >>> classify([Check(name="a", passed=True)], 0.0)
    (<Outcome.failed: 'failed'>, 1.0)
    >>> classify([], 0.25)
    (<Outcome.partial: 'partial'>, 0.25)
    >>> classify([], None)
    (<Outcome.failed: 'failed'>, 0.0)
    """
    if reward_reported is not None and not _valid_reward(reward_reported):
        return Outcome.failed, 0.0
    if checks:
        progress = check_progress(checks)
        n_passed = sum(c.passed for c in checks)
        if n_passed == len(checks):
            if reward_reported is None or reward_reported == 1.0:
                return Outcome.passed, 1.0
            return (Outcome.failed if reward_reported == 0.0 else Outcome.partial), progress
        if n_passed == 0:
            return Outcome.failed, 0.0
        return Outcome.partial, progress
    if reward_reported is None or reward_reported == 0.0:
        return Outcome.failed, 0.0
    if reward_reported == 1.0:
        return Outcome.passed, 1.0
    return Outcome.partial, float(reward_reported)


class VerifierResult(BaseModel):
    """The structured verdict of one verification, with enough context to debug it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Outcome
    checks: list[Check] = Field(default_factory=list)
    #: what reward.txt / reward.json said, when it was a valid number in [0, 1]
    reward_reported: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    #: the named numbers of reward.json (and reward.txt's as "reward" when reward.json has none):
    #: Harbor's several reward metrics, any finite number; a trainer picks one by name
    #: (:func:`terminal_env.rewards.metric`)
    metrics: dict[str, float] = Field(default_factory=dict)
    #: weighted share of checks passed; without checks, the reported reward (see classify)
    progress: float = Field(0.0, ge=0, le=1, allow_inf_nan=False)
    #: outcome == passed; derived when omitted, refused when contradictory
    strict_success: bool = False
    source: Source = "none"
    message: str = ""
    #: digest of the test files the verifier ran, so results of different tests never mix
    tests_digest: str = ""
    duration: float = Field(0.0, ge=0, allow_inf_nan=False)
    exit_code: int | None = None
    log_tail: str = ""
    tampered_paths: list[str] = Field(default_factory=list)
    #: the task's ``[[verifier.collect]]`` commands as they ran before the tests: command,
    #: exit_code, timed_out, duration, the tail of their output
    collect: list[dict[str, Any]] = Field(default_factory=list)
    #: what the guarded test run concluded (see :mod:`terminal_env.verify.guard`): "checked: ...",
    #: "unchecked: ..." or the reason the run was failed; empty when the tests did not run
    guard: str = ""
    #: modules the test process imported from outside the interpreter and the tests (the agent's
    #: code loaded into the test process; ``tasks check`` reports tasks that do this)
    guard_modules: list[str] = Field(default_factory=list)
    #: files outside the interpreter and the tests that the test process read itself while
    #: collecting or running tests that passed (where passing checks took their expectations
    #: from; ``tasks check`` asks whether they are agent-writable inputs)
    guard_opened: list[str] = Field(default_factory=list)
    #: a multi-step task's steps as each was verified (name, outcome, reward, progress, metrics,
    #: message, ...), in order; this result is then their combination (terminal_env.steps)
    steps: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        # Fill what follows from the outcome, so callers state the outcome once.
        if isinstance(data, dict) and "outcome" in data:
            data = dict(data)
            passed = Outcome(data["outcome"]) == Outcome.passed
            data.setdefault("strict_success", passed)
            if passed:
                data.setdefault("progress", 1.0)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "VerifierResult":
        if self.strict_success != (self.outcome == Outcome.passed):
            raise ValueError(
                f"strict_success={self.strict_success} contradicts outcome={self.outcome.value}"
            )
        if self.outcome == Outcome.passed and self.progress != 1.0:
            raise ValueError(f"a passed result has progress 1.0, not {self.progress}")
        if self.outcome in ZERO_OUTCOMES and self.progress != 0.0:
            raise ValueError(f"a {self.outcome.value} result has progress 0, not {self.progress}")
        return self

    @field_validator("message")
    @classmethod
    def _cap_message(cls, value: str) -> str:
        return cap_head(value)

    @field_validator("log_tail")
    @classmethod
    def _cap_log(cls, value: str) -> str:
        return cap_tail(value)

    @property
    def infra(self) -> bool:
        """The infrastructure failed; this result says nothing about the agent."""
        return self.outcome == Outcome.infra_error

    @property
    def masked(self) -> bool:
        """Trainers must mask this result and runners should retry it (same as :attr:`infra`)."""
        return self.infra

    @classmethod
    def infra_error(cls, message: str, **kw: Any) -> "VerifierResult":
        """The verifier could not run for reasons outside the episode (engine, container)."""
        return cls(outcome=Outcome.infra_error, progress=0.0, message=message, **kw)

    @classmethod
    def tampered(cls, paths: Iterable[str], message: str = "", **kw: Any) -> "VerifierResult":
        """The agent changed files the verifier depends on; scored as zero, never masked."""
        paths = list(paths)
        message = message or "protected paths were modified: " + ", ".join(paths)
        return cls(
            outcome=Outcome.tampered, progress=0.0, tampered_paths=paths, message=message, **kw
        )

    @classmethod
    def timeout(cls, message: str, **kw: Any) -> "VerifierResult":
        """The verifier did not finish in time; scored as zero."""
        return cls(outcome=Outcome.timeout, progress=0.0, message=message, **kw)


def exhausted_result(message: str) -> VerifierResult:
    """The verdict of an episode whose agent exhausted a limit of its sandbox (disk budget,
    memory): ``failed`` (the agent's doing, scored as zero, never masked), without the tests."""
    return VerifierResult(outcome=Outcome.failed, progress=0.0, message=f"{message}; the tests were not run")


def disk_budget_result(message: str) -> VerifierResult:
    """:func:`exhausted_result` for the disk budget (its processes were killed)."""
    return exhausted_result(f"{message}: the agent's processes were killed")
