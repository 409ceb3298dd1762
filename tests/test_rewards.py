"""Rewards: the orderings they promise, proved over arbitrary valid results (hypothesis)."""

from __future__ import annotations

import re

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from terminal_env.errors import ConfigError
from terminal_env.rewards import (
    REWARDS,
    binary,
    get_reward,
    is_masked,
    partial_progress,
    strict_success_first,
)
from terminal_env.verify import Check, Outcome, VerifierResult, classify
from terminal_env.verify.result import ZERO_OUTCOMES

# --- strategies ------------------------------------------------------------------------------

weights = st.one_of(
    st.just(0.0), st.just(1.0),
    st.floats(min_value=0, max_value=1e308, allow_nan=False, allow_infinity=False),
)
checks_st = st.lists(
    st.builds(Check, name=st.text(max_size=8), passed=st.booleans(), weight=weights),
    max_size=12,
)
rewards_st = st.one_of(st.none(), st.sampled_from([0.0, 1.0]), st.floats(0, 1))
alphas = st.floats(min_value=0, max_value=1, exclude_max=True)


@st.composite
def results(draw, outcomes=tuple(Outcome)):
    """Any valid VerifierResult: from the classifier, or hand-built with any legal progress."""
    if draw(st.booleans()):
        checks, reward = draw(checks_st), draw(rewards_st)
        outcome, progress = classify(checks, reward)
        assume(outcome in outcomes)
        return VerifierResult(outcome=outcome, progress=progress, checks=checks,
                              reward_reported=reward)
    outcome = draw(st.sampled_from(outcomes))
    if outcome == Outcome.passed:
        progress = 1.0
    elif outcome in ZERO_OUTCOMES:
        progress = 0.0
    else:
        progress = draw(st.floats(0, 1))
    return VerifierResult(outcome=outcome, progress=progress, checks=draw(checks_st))


not_success = [o for o in Outcome if o != Outcome.passed]
scored = [o for o in Outcome if o not in ZERO_OUTCOMES]

# --- properties ------------------------------------------------------------------------------


@given(results(outcomes=(Outcome.passed,)), results(outcomes=tuple(not_success)), alphas)
def test_any_success_outranks_any_failure(r_success, r_fail, alpha):
    assert strict_success_first(r_success, alpha) > strict_success_first(r_fail, alpha)


@given(results(), alphas)
def test_rewards_lie_in_unit_interval(result, alpha):
    for fn in (binary, partial_progress, lambda r: strict_success_first(r, alpha)):
        value = fn(result)
        assert isinstance(value, float) and 0.0 <= value <= 1.0


@given(results(outcomes=tuple(scored)))
def test_binary_never_exceeds_partial_progress(result):
    # Holds because a strict success always has progress 1.0 (the model refuses anything else).
    assert binary(result) <= partial_progress(result)


@given(results(outcomes=tuple(ZERO_OUTCOMES)), alphas)
def test_tampered_timeout_infra_score_zero(result, alpha):
    assert binary(result) == partial_progress(result) == strict_success_first(result, alpha) == 0
    assert is_masked(result) == (result.outcome == Outcome.infra_error)


@st.composite
def one_more_pass(draw):
    """Checks with at least one failure, and the index of a failed one to flip to passed."""
    checks = draw(checks_st.filter(lambda cs: any(not c.passed for c in cs)))
    index = draw(st.sampled_from([i for i, c in enumerate(checks) if not c.passed]))
    better = list(checks)
    better[index] = checks[index].model_copy(update={"passed": True})
    return checks, better


@given(one_more_pass(), rewards_st, alphas)
def test_passing_one_more_check_never_lowers_progress(pair, reward, alpha):
    worse, better = pair

    def result(checks):
        outcome, progress = classify(checks, reward)
        return VerifierResult(outcome=outcome, progress=progress, checks=checks)

    r_worse, r_better = result(worse), result(better)
    assert partial_progress(r_better) >= partial_progress(r_worse)
    assert strict_success_first(r_better, alpha) >= strict_success_first(r_worse, alpha)
    assert binary(r_better) >= binary(r_worse)


# --- examples --------------------------------------------------------------------------------


def test_strict_success_first_values():
    partial = VerifierResult(outcome="partial", progress=0.8)
    assert strict_success_first(partial) == pytest.approx(0.4)
    assert strict_success_first(partial, alpha=0.0) == 0.0
    assert strict_success_first(VerifierResult(outcome="passed"), alpha=0.0) == 1.0


@pytest.mark.parametrize("alpha", [1.0, 1.5, -0.1, math.nan, math.inf, "0.5", True])
def test_bad_alpha_is_a_config_error_naming_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        strict_success_first(VerifierResult(outcome="failed"), alpha=alpha)
    with pytest.raises(ConfigError, match="alpha"):
        get_reward("strict_success_first", alpha=alpha)


def test_registry_and_get_reward():
    assert set(REWARDS) == {"binary", "partial_progress", "strict_success_first", "metric", "metrics"}
    assert get_reward("binary") is binary
    assert get_reward("partial-progress") is partial_progress
    fn = get_reward("strict_success_first", alpha=0.25)
    assert fn(VerifierResult(outcome="partial", progress=1.0)) == 0.25

    def custom(result):
        return 0.5

    assert get_reward(custom) is custom
    with pytest.raises(ConfigError, match="binary, metric, metrics, partial_progress, strict_success_first"):
        get_reward("nope")
    with pytest.raises(ConfigError, match="binary"):
        get_reward("binary", alpha=0.5)  # binary takes no options
    with pytest.raises(ConfigError):
        get_reward(42)


def test_a_metric_or_a_declared_combination_is_picked_by_name():
    r = VerifierResult(outcome="partial", progress=0.5, metrics={"reward": 0.5, "accuracy": 0.8, "f1": 0.4})
    assert get_reward("metric:accuracy")(r) == 0.8
    assert get_reward("metric", name="f1")(r) == 0.4
    assert get_reward("metric:reward")(r) == 0.5
    assert get_reward("metrics:accuracy=3,f1=1")(r) == pytest.approx(0.7)
    assert get_reward("metrics", weights={"accuracy": 1, "missing": 1})(r) == pytest.approx(0.4)
    for zero in (VerifierResult.tampered(["/tests"], metrics={"accuracy": 1.0}),
                 VerifierResult.timeout("late", metrics={"accuracy": 1.0}),
                 VerifierResult.infra_error("engine", metrics={"accuracy": 1.0})):
        assert get_reward("metric:accuracy")(zero) == 0.0
    for bad, says in [("metric", "needs options"), ("metrics", "needs options"), ("metric:", "metric name ''"),
                      ("metrics:accuracy", "is not NAME=WEIGHT"), ("metrics:a=-1", "is not NAME=WEIGHT"),
                      ("metrics:a=0", "must be a positive number")]:
        with pytest.raises(ConfigError, match=re.escape(says)):
            get_reward(bad)
    with pytest.raises(ConfigError, match="must be a positive number"):
        get_reward("metrics", weights={"a": float("nan")})


def test_result_invariants_are_enforced():
    assert VerifierResult(outcome="passed").strict_success
    assert VerifierResult(outcome="passed").progress == 1.0
    with pytest.raises(ValueError):
        VerifierResult(outcome="passed", progress=0.5)
    with pytest.raises(ValueError):
        VerifierResult(outcome="failed", strict_success=True)
    with pytest.raises(ValueError):
        VerifierResult(outcome="timeout", progress=0.3)
    with pytest.raises(ValueError):
        VerifierResult(outcome="failed", unknown_field=1)
    with pytest.raises(ValueError):
        Check(name="a", passed=True, weight=math.inf)
    with pytest.raises(ValueError):
        Check(name="a", passed=True, weight=-1)


def test_constructors():
    infra = VerifierResult.infra_error("engine gone", duration=1.5)
    assert infra.infra and infra.masked and is_masked(infra) and infra.duration == 1.5
    tampered = VerifierResult.tampered(["/tests/x.py"], "tests were edited")
    assert tampered.outcome == Outcome.tampered and tampered.tampered_paths == ["/tests/x.py"]
    assert not tampered.masked and not tampered.strict_success
    timeout = VerifierResult.timeout("verifier ran past 60 s")
    assert (timeout.outcome, timeout.progress, timeout.strict_success) == ("timeout", 0.0, False)


def test_classify_rules():
    def c(passed, weight=1.0):
        return Check(name="x", passed=passed, weight=weight)

    assert classify([c(True), c(True)], None) == (Outcome.passed, 1.0)
    assert classify([c(False), c(False)], None) == (Outcome.failed, 0.0)
    assert classify([c(True, 1), c(False, 3)], None) == (Outcome.partial, 0.25)
    assert classify([c(True, 0), c(False, 0), c(False, 0), c(False, 0)], None) == (
        Outcome.partial, 0.25)  # all weights 0: count instead
    assert classify([c(True), c(True)], 0.0) == (Outcome.failed, 1.0)  # the verifier's veto
    assert classify([c(True)], 0.5) == (Outcome.partial, 1.0)
    assert classify([c(True)], 1.0) == (Outcome.passed, 1.0)
    assert classify([], 1.0) == (Outcome.passed, 1.0)
    assert classify([], 0.0) == (Outcome.failed, 0.0)
    assert classify([], 0.3) == (Outcome.partial, 0.3)
    assert classify([], None) == (Outcome.failed, 0.0)
    assert classify([c(True)], math.nan) == (Outcome.failed, 0.0)


def test_huge_weights_do_not_overflow():
    checks = [Check(name="a", passed=True, weight=1e308), Check(name="b", passed=False,
                                                                 weight=1e308)]
    assert classify(checks, None) == (Outcome.partial, 0.5)
