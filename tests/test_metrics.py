"""Metrics: pass@k against enumeration, Mean@k by hand, masking, bootstrap intervals."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from terminal_env.metrics import (
    bootstrap_ci,
    compare,
    mean,
    mean_at_k,
    mean_pass_at_k,
    mean_progress,
    paired_bootstrap,
    pass_at_k,
    summarize,
    task_table,
)
from terminal_env.runner.records import TrialResult

FAST = {"n_resamples": 300}


def trial(task, attempt, *, ok=False, progress=None, masked=False, outcome=None, **kw):
    if masked:
        outcome = outcome or "infra_error"
        progress = 0.0 if progress is None else progress
    elif ok:
        outcome, progress = "passed", 1.0
    else:
        progress = 0.0 if progress is None else progress
        outcome = outcome or ("partial" if progress > 0 else "failed")
    return TrialResult(task=task, attempt=attempt, strict_success=ok, progress=progress,
                       masked=masked, outcome=outcome, **kw)


def brute_pass_at_k(n, c, k):
    attempts = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(attempts[i] for i in s) for s in subsets) / len(subsets)


# ---------------------------------------------------------------------------- pass@k
@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_edges():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0  # k = n: any success is in the one subset
    assert pass_at_k(1, 1, 1) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the success rate
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)  # large n stays finite and exact
    assert 0 < pass_at_k(10_000, 1, 1) < 1e-3


@pytest.mark.parametrize("n,c,k", [(3, 1, 4), (0, 0, 1), (5, 1, 0), (5, 6, 1), (5, -1, 1)])
def test_pass_at_k_invalid(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_rejects_floats():
    with pytest.raises(TypeError):
        pass_at_k(5.0, 1, 1)


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_properties(nck):
    n, c, k = nck
    p = pass_at_k(n, c, k)
    assert 0.0 <= p <= 1.0
    if c < n:
        assert pass_at_k(n, c + 1, k) >= p  # monotone in successes
    if k < n:
        assert pass_at_k(n, c, k + 1) >= p  # monotone in k
    if c == 0:
        assert p == 0.0
    if k == 1:
        assert p == pytest.approx(c / n)


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.integers(0, 10_000))
def test_bootstrap_interval_properties(values, seed):
    lo, hi = bootstrap_ci(values, n_resamples=200, seed=seed)
    assert min(values) - 1e-12 <= lo <= hi <= max(values) + 1e-12
    paired = paired_bootstrap({str(i): 0.0 for i in range(len(values))},
                              {str(i): v for i, v in enumerate(values)}, n_resamples=200, seed=seed)
    assert paired["ci_low"] <= paired["ci_high"] and 0 <= paired["share_positive"] <= 1
    assert paired["mean_diff"] == pytest.approx(mean(values))


# ---------------------------------------------------------------------------- tables
def hand_example():
    # A: 2 of 3, B: 0 of 3, C: 3 of 3  ->  Mean@3 = (2/3 + 0 + 1) / 3 = 5/9
    return [
        trial("A", 1, ok=True), trial("A", 2, progress=0.5), trial("A", 3, ok=True),
        trial("B", 1), trial("B", 2, progress=0.25), trial("B", 3),
        trial("C", 1, ok=True), trial("C", 2, ok=True), trial("C", 3, ok=True),
    ]


def test_mean_at_k_by_hand():
    results = hand_example()
    assert mean_at_k(results) == pytest.approx(5 / 9)
    assert mean_pass_at_k(results, 1) == pytest.approx(5 / 9)
    # pass@2: A 1 - C(1,2)/C(3,2) = 1, B 0, C 1
    assert mean_pass_at_k(results, 2) == pytest.approx(2 / 3)
    assert mean_pass_at_k(results, 3) == pytest.approx(2 / 3)
    # progress: A (1 + .5 + 1)/3, B .25/3, C 1
    assert mean_progress(results) == pytest.approx(((2.5 / 3) + (0.25 / 3) + 1) / 3)


def test_masked_trials_are_excluded_everywhere():
    base = hand_example()
    noisy = base + [
        # an infra error claiming success must not count; nor its progress
        trial("B", 4, ok=False, masked=True, progress=0.0),
        trial("D", 1, masked=True), trial("D", 2, masked=True),
        TrialResult(task="E", attempt=1, termination="model_error", outcome=None),
    ]
    assert mean_at_k(noisy) == pytest.approx(mean_at_k(base))
    assert mean_progress(noisy) == pytest.approx(mean_progress(base))
    rows = {r["task"]: r for r in task_table(noisy)}
    assert rows["B"]["attempts"] == 3 and rows["B"]["masked"] == 1
    assert rows["D"]["attempts"] == 0 and rows["D"]["masked"] == 2
    assert rows["D"]["mean_success"] is None and rows["D"]["mean_progress"] is None
    assert rows["E"]["mean_success"] is None  # model_error termination: masked
    s = summarize(noisy, attempts=3, **FAST)
    assert s["n_tasks"] == 5 and s["n_scored_tasks"] == 3
    assert s["n_trials"] == 13 and s["n_masked"] == 4
    assert s["outcomes"]["infra_error"] == 3 and s["outcomes"]["none"] == 1
    assert s["mean_at_k"]["value"] == pytest.approx(5 / 9)
    assert s["mean_at_k"]["n_tasks"] == 3


def test_pass_at_k_skips_tasks_with_too_few_attempts():
    results = [trial("A", 1, ok=True), trial("A", 2), trial("B", 1), trial("B", 2, masked=True)]
    s = summarize(results, attempts=2, **FAST)
    assert s["pass_at_k"]["1"]["value"] == pytest.approx(0.25)  # A 1/2, B 0/1
    assert s["pass_at_k"]["2"]["n_tasks"] == 1  # B has one scored attempt only
    assert s["pass_at_k"]["2"]["value"] == 1.0


def test_summarize_is_json_ready_and_complete():
    results = [
        trial("a", 1, ok=True, category="git", difficulty="easy", duration=10, prompt_tokens=100,
              completion_tokens=20, termination="submitted"),
        trial("a", 2, progress=0.5, category="git", difficulty="easy", termination="max_turns"),
        trial("b", 1, category="sys", difficulty="hard", outcome="timeout", termination="time_limit"),
        trial("b", 2, category="sys", difficulty="hard", outcome="tampered", termination="submitted"),
        trial("c", 1, masked=True, category="sys", difficulty="hard", duration=5),
    ]
    s = summarize(results, **FAST)
    json.dumps(s)  # JSON-ready
    assert s["attempts"] == 2 and set(s["pass_at_k"]) == {"1", "2"}
    assert s["outcomes"] == {"passed": 1, "failed": 0, "partial": 1, "timeout": 1, "tampered": 1,
                             "infra_error": 1, "none": 0}
    assert s["terminations"] == {"max_turns": 1, "running": 1, "submitted": 2, "time_limit": 1}
    assert s["per_category"]["git"]["mean_at_k"]["value"] == 0.5
    assert s["per_category"]["sys"]["tasks"] == 2 and s["per_category"]["sys"]["scored_tasks"] == 1
    assert s["per_category"]["sys"]["mean_at_k"]["value"] == 0.0
    assert s["per_difficulty"]["hard"]["pass_at_1"]["value"] == 0.0
    assert s["totals"]["duration"] == 15 and s["totals"]["tokens"] == 120
    assert [r["task"] for r in s["tasks"]] == ["a", "b", "c"]


def test_summarize_empty():
    s = summarize([], **FAST)
    assert s["n_tasks"] == 0 and s["mean_at_k"]["value"] is None and s["pass_at_k"] == {}
    json.dumps(s)


# ---------------------------------------------------------------------------- bootstrap
def test_bootstrap_contains_mean_and_narrows():
    small = [0, 1, 1, 0, 1, 0.5, 0, 1]
    large = small * 12
    lo_s, hi_s = bootstrap_ci(small, seed=3)
    lo_l, hi_l = bootstrap_ci(large, seed=3)
    assert lo_s <= mean(small) <= hi_s
    assert lo_l <= mean(large) <= hi_l
    assert hi_l - lo_l < (hi_s - lo_s) / 2  # ~ 1/sqrt(12) as wide


def test_bootstrap_deterministic_by_seed():
    values = [0.1, 0.9, 0.4, 0.7, 0.0, 1.0, 0.3]
    assert bootstrap_ci(values, seed=7) == bootstrap_ci(values, seed=7)
    assert bootstrap_ci(values, seed=7) != bootstrap_ci(values, seed=8)
    results = hand_example()
    assert summarize(results, seed=1, **FAST) == summarize(results, seed=1, **FAST)


def test_bootstrap_degenerate_and_invalid():
    assert bootstrap_ci([1.0]) == (1.0, 1.0)
    assert bootstrap_ci([0.5] * 10) == (0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], alpha=0)
    lo, hi = bootstrap_ci([0, 1] * 20, stat=lambda v: max(v))
    assert (lo, hi) == (1.0, 1.0)


def test_paired_bootstrap_sign():
    a = {f"t{i}": 0.2 + 0.05 * (i % 3) for i in range(12)}
    b = {t: v + 0.3 for t, v in a.items()}
    up = paired_bootstrap(a, b, **FAST)
    assert up["n_paired"] == 12
    assert up["mean_diff"] == pytest.approx(0.3)
    assert up["ci_low"] == pytest.approx(0.3) and up["share_positive"] == 1.0
    down = paired_bootstrap(b, a, **FAST)
    assert down["mean_diff"] == pytest.approx(-0.3) and down["ci_high"] < 0
    assert down["share_positive"] == 0.0
    mixed = paired_bootstrap({"x": 0, "y": 1, "z": 0.5, "w": 0}, {"x": 1, "y": 0, "z": 0.5, "q": 1},
                             **FAST)
    assert mixed["n_paired"] == 3 and mixed["mean_diff"] == 0
    assert mixed["ci_low"] < 0 < mixed["ci_high"] and 0 < mixed["share_positive"] < 1
    none = paired_bootstrap({"x": 1}, {"y": 1})
    assert none["n_paired"] == 0 and none["mean_diff"] is None


def test_compare_runs():
    a = [trial("x", 1), trial("x", 2), trial("y", 1, ok=True), trial("y", 2, ok=True),
         trial("z", 1, progress=0.5), trial("z", 2), trial("only-a", 1), trial("dead", 1, masked=True)]
    b = [trial("x", 1, ok=True), trial("x", 2, ok=True), trial("y", 1, ok=True), trial("y", 2),
         trial("z", 1, progress=0.5), trial("z", 2, progress=0.5), trial("only-b", 1, ok=True),
         trial("dead", 1)]
    c = compare(a, b, **FAST)
    assert c["n_paired"] == 3
    assert [r["task"] for r in c["tasks"]] == ["x", "z", "y"]  # by Δ success, then Δ progress
    rows = {r["task"]: r for r in c["tasks"]}
    assert rows["x"]["diff_success"] == 1.0 and rows["y"]["diff_success"] == -0.5
    assert rows["z"]["diff_success"] == 0 and rows["z"]["diff_progress"] == 0.25
    assert c["strict_success"]["mean_diff"] == pytest.approx(0.5 / 3)
    assert c["strict_success"]["mean_a"] == pytest.approx(1 / 3)
    assert c["progress"]["mean_diff"] == pytest.approx((1.0 + 0.25 - 0.5) / 3)
    assert c["only_a"] == ["only-a"] and c["only_b"] == ["dead", "only-b"]
    json.dumps(c)
    assert math.isfinite(c["strict_success"]["ci_low"])
