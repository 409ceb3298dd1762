"""The loop's final evaluation statistics (terminal_env.train.evaluation) against hand-computed
values, and its HTML page (terminal_env.report.loop) from synthetic manifests: a finished loop,
a running one, and hostile text in every field a person or a model wrote."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from terminal_env.errors import ConfigError
from terminal_env.report.loop import loop_page, write_loop_report
from terminal_env.train.evaluation import episode_summary, final_summary, score, task_scores

STAGES = ["base", "rsr-1", "rpr-1", "rsr-2", "rpr-2"]
HOSTILE = '<script>alert("x")</script>'


def ep(task, seed, success, reward=None, masked=False):
    return {"task": task, "seed": seed, "strict_success": success,
            "reward": (1.0 if success else 0.0) if reward is None else reward, "masked": masked}


def rows(values: dict[str, float]) -> dict[str, dict[str, float]]:
    return {t: {"strict_success": v, "reward": v, "episodes": 3, "masked": 0} for t, v in values.items()}


# ---------------------------------------------------------------------------- task_scores
def test_task_scores_mean_each_tasks_unmasked_episodes():
    episodes = [
        ep("t1", 0, True), ep("t1", 1, False, reward=0.5), ep("t1", 2, True),
        ep("t2", 0, True, masked=True), ep("t2", 1, False, reward=0.25), ep("t2", 2, True, reward=0.75),
        ep("t3", 0, None, reward=None, masked=True), ep("t3", 1, None, reward=None, masked=True),
    ]
    got = task_scores(episodes)
    # t1: successes 1,0,1 -> 2/3; rewards 1, 0.5, 1 -> 2.5/3. t2: the masked success is not
    # counted: 0,1 -> 1/2; rewards 0.25, 0.75 -> 0.5. t3: every episode masked -> no score.
    assert got == {
        "t1": {"strict_success": pytest.approx(2 / 3), "reward": pytest.approx(2.5 / 3),
               "episodes": 3, "masked": 0},
        "t2": {"strict_success": 0.5, "reward": 0.5, "episodes": 2, "masked": 1},
    }
    assert episode_summary(episodes) == {"episodes": 8, "masked_episodes": 3, "tasks": 3,
                                         "scored_tasks": 2, "masked_tasks": ["t3"]}


def test_task_scores_count_an_unverified_unmasked_episode_as_a_failure():
    got = task_scores([{"task": "a", "seed": 0, "strict_success": None, "reward": None, "masked": False},
                       {"task": "a", "seed": 1, "strict_success": True, "reward": 1.0, "masked": False}])
    assert got == {"a": {"strict_success": 0.5, "reward": 0.5, "episodes": 2, "masked": 0}}


def test_task_scores_refuse_one_seed_scored_twice_but_not_a_masked_retry():
    retried = [ep("a", 0, False, masked=True), ep("a", 0, True)]
    assert task_scores(retried)["a"]["strict_success"] == 1.0
    with pytest.raises(ConfigError, match="seed 0 scored twice"):
        task_scores([ep("a", 0, True), ep("a", 0, False)])


def test_task_scores_empty_and_malformed():
    assert task_scores([]) == {}
    assert episode_summary([]) == {"episodes": 0, "masked_episodes": 0, "tasks": 0, "scored_tasks": 0,
                                   "masked_tasks": []}
    with pytest.raises(ConfigError, match=r"episodes\[1\].task"):
        task_scores([ep("a", 0, True), {"seed": 1, "strict_success": True}])
    with pytest.raises(ConfigError, match="a.reward"):
        task_scores([ep("a", 0, True, reward=float("nan"))])


# ---------------------------------------------------------------------------- score
def test_score_is_the_mean_over_tasks_with_a_bootstrap_interval():
    s = score({"a": 1.0, "b": 0.0, "c": 0.5, "d": 0.5})
    assert s["mean"] == 0.5 and s["n_tasks"] == 4
    assert 0.0 <= s["ci_low"] < 0.5 < s["ci_high"] <= 1.0
    # every resample of equal values has their mean: the interval is the point
    assert score({"a": 0.25, "b": 0.25, "c": 0.25}) == {"mean": 0.25, "ci_low": 0.25, "ci_high": 0.25,
                                                        "n_tasks": 3}
    assert score({}) == {"mean": None, "ci_low": None, "ci_high": None, "n_tasks": 0}
    # the tasks' order does not change the interval (they are sorted before resampling)
    assert score({"b": 0.0, "a": 1.0, "c": 0.5}) == score({"a": 1.0, "b": 0.0, "c": 0.5})


def test_score_refuses_bad_settings_naming_them():
    with pytest.raises(ConfigError, match="n_resamples"):
        score({"a": 1.0}, n_resamples=0)
    with pytest.raises(ConfigError, match="alpha"):
        score({"a": 1.0}, alpha=1.5)
    with pytest.raises(ConfigError, match=r"per_task\['a'\]"):
        score({"a": float("inf")})


# ---------------------------------------------------------------------------- final_summary
def test_a_paired_interval_that_excludes_zero():
    base = {"t1": 0.0, "t2": 1 / 3, "t3": 0.0, "t4": 1 / 3, "t5": 2 / 3}
    last = {"t1": 1 / 3, "t2": 2 / 3, "t3": 2 / 3, "t4": 2 / 3, "t5": 1.0}
    # differences 1/3, 1/3, 2/3, 1/3, 1/3: mean 6/15 = 0.4; every resample's mean lies in
    # [1/3, 2/3], so the interval does too and excludes zero; every resample is positive
    s = final_summary(["base", "rpr-1"], {"base": rows(base), "rpr-1": rows(last)})
    assert s["metric"] == "strict_success"
    assert s["scores"]["base"]["mean"] == pytest.approx(4 / 15)
    assert s["scores"]["rpr-1"]["mean"] == pytest.approx(10 / 15)
    assert s["scores"]["rpr-1"]["per_task"] == last
    [p] = s["paired"]
    assert (p["a"], p["b"], p["kind"], p["n_paired"]) == ("base", "rpr-1", "consecutive", 5)
    assert p["mean_diff"] == pytest.approx(0.4)
    assert 1 / 3 - 1e-12 <= p["ci_low"] < 0.4 < p["ci_high"] <= 2 / 3 + 1e-12
    assert p["share_positive"] == 1.0 and p["excludes_zero"] is True
    assert p["mean_a"] == pytest.approx(4 / 15) and p["mean_b"] == pytest.approx(10 / 15)


def test_a_paired_interval_that_does_not_exclude_zero():
    a = {f"t{i}": 0.5 for i in range(8)}
    # differences +1/2, -1/2 four times each: mean 0, and the resampled means spread both ways
    b = {f"t{i}": (1.0 if i % 2 else 0.0) for i in range(8)}
    [p] = final_summary(["a", "b"], {"a": rows(a), "b": rows(b)})["paired"]
    assert p["mean_diff"] == 0.0 and p["n_paired"] == 8
    assert p["ci_low"] < 0 < p["ci_high"] and p["excludes_zero"] is False
    assert 0.2 < p["share_positive"] < 0.6
    # an interval that is exactly zero (no task changed) does not exclude it either
    [same] = final_summary(["a", "b"], {"a": rows(a), "b": rows(a)})["paired"]
    assert (same["ci_low"], same["ci_high"], same["excludes_zero"]) == (0.0, 0.0, False)


def test_final_summary_pairs_consecutive_stages_then_first_against_last():
    per_stage = {name: rows({"x": i / 4, "y": i / 4}) for i, name in enumerate(STAGES)}
    s = final_summary(STAGES, per_stage, n_resamples=50)
    assert list(s["scores"]) == STAGES
    assert [(p["a"], p["b"], p["kind"]) for p in s["paired"]] == [
        ("base", "rsr-1", "consecutive"), ("rsr-1", "rpr-1", "consecutive"),
        ("rpr-1", "rsr-2", "consecutive"), ("rsr-2", "rpr-2", "consecutive"),
        ("base", "rpr-2", "first_vs_last")]
    assert s["paired"][-1]["mean_diff"] == 1.0
    assert final_summary(["base"], {"base": rows({"x": 1.0})})["paired"] == []
    assert final_summary([], {}) == {"metric": "strict_success", "confidence": 0.95, "n_resamples": 2000,
                                     "seed": 0, "scores": {}, "paired": []}


def test_final_summary_pairs_only_tasks_scored_in_both_and_survives_an_all_masked_stage():
    a = task_scores([ep("x", 0, False), ep("y", 0, False), ep("z", 0, False, masked=True)])
    b = task_scores([ep("x", 0, True), ep("y", 0, False, masked=True), ep("z", 0, True)])
    c = task_scores([ep("x", 0, True, masked=True)])
    counts = {"c": episode_summary([ep("x", 0, True, masked=True)])}
    s = final_summary(["a", "b", "c"], {"a": a, "b": b, "c": c}, counts=counts, n_resamples=100)
    ab = s["paired"][0]
    assert (ab["n_paired"], ab["mean_diff"], ab["excludes_zero"]) == (1, 1.0, True)  # only x
    assert s["scores"]["c"] == {"mean": None, "ci_low": None, "ci_high": None, "n_tasks": 0,
                                "per_task": {}, "episodes": counts["c"]}
    for p in s["paired"][1:]:
        assert (p["n_paired"], p["mean_diff"], p["ci_low"], p["excludes_zero"]) == (0, None, None, False)


def test_final_summary_compares_mean_reward_too():
    a = {"x": {"strict_success": 0.0, "reward": 0.25}}
    b = {"x": {"strict_success": 0.0, "reward": 0.75}}
    s = final_summary(["a", "b"], {"a": a, "b": b}, metric="reward")
    assert s["metric"] == "reward" and s["paired"][0]["mean_diff"] == 0.5


def test_final_summary_refuses_what_it_cannot_score_naming_the_field():
    good = rows({"x": 1.0})
    with pytest.raises(ConfigError, match="missing"):
        final_summary(["a", "b"], {"a": good})
    with pytest.raises(ConfigError, match="named twice"):
        final_summary(["a", "a"], {"a": good})
    with pytest.raises(ConfigError, match="metric"):
        final_summary(["a"], {"a": good}, metric="progress")
    with pytest.raises(ConfigError, match=r"per_stage\['a'\]\['x'\]"):
        final_summary(["a"], {"a": {"x": {"reward": 1.0}}})


# ---------------------------------------------------------------------------- the page
def _candidate(name, kept, value, reason, cid):
    return {"name": name, "checkpoint": {"id": cid, "path": f"/loop/{name}"},
            "validation": {"mean": value, "ci_low": max(0.0, value - 0.1),
                           "ci_high": min(1.0, value + 0.1), "n_tasks": 20, "reward_mean": value},
            "kept": kept, "reason": reason}


def manifest(final=True, status="complete"):
    stages = []
    parent = None
    for i, name in enumerate(STAGES):
        kept_id = f"ckpt-{name}-0123456789abcdef"
        candidates = [] if name == "base" else [
            _candidate(f"{name}-lr1e-5", True, 0.2 + 0.1 * i, "best validation", kept_id),
            _candidate(f"{name}-lr3e-5", False, 0.1 + 0.1 * i,
                       HOSTILE if name == "rpr-1" else "lower validation", f"ckpt-{name}-abandoned"),
        ]
        stages.append({
            "name": name, "kind": name.split("-")[0], "index": i, "parent": parent,
            "kept": {"id": kept_id, "path": f"/loop/{name}",
                     "candidate": None if name == "base" else f"{name}-lr1e-5",
                     "reason": "the starting model" if name == "base" else "best validation"},
            "candidates": candidates, "hyperparameters": {"lr": 1e-5, "note": HOSTILE},
            "funnel": {"records": 3} if name.startswith("rsr") else None, "status": "complete",
        })
        parent = {"id": kept_id, "path": f"/loop/{name}"}
    out = {"kind": "terminal-env-loop", "name": f"loop {HOSTILE}", "status": status,
           "config": {"seed": 0, "why": HOSTILE}, "config_digest": "sha256:abc123", "stages": stages,
           "final": None}
    if final:
        per_stage = {name: rows({f"t{j}": min(1.0, (i + (j % 3)) / 6) for j in range(12)})
                     for i, name in enumerate(STAGES)}
        out["final"] = {"split": "test", "k": 3, "temperature": 0.6,
                        **final_summary(STAGES, per_stage, n_resamples=200)}
    return out


def test_the_page_of_a_finished_loop():
    m = manifest()
    html = loop_page(m)
    for name in STAGES:
        assert f"<b>{name}</b>" in html and f"<h3>{name} " in html
    [svg] = re.findall(r"<svg viewBox=\"0 0 560 .*?</svg>", html)
    points, bars = svg.count('class="pt"'), svg.count("errbar")
    # base has no candidate, so no validation point: 5 test + 4 validation points
    assert points == 9 and bars == points
    assert "test (kept checkpoint)" in svg and "validation (kept candidate)" in svg
    assert "0%" in svg and "100%" in svg
    assert "Paired differences" in html and "base vs last" in html
    n_excluding = sum(p["excludes_zero"] for p in m["final"]["paired"])
    assert 0 < n_excluding and html.count("excludes 0: gain") == n_excluding
    assert html.count("includes 0") == len(m["final"]["paired"]) - n_excluding
    assert "ckpt-base-01…" in html and "sha256:abc123" in html  # short ids, the digest
    assert "abandoned" in html and "lower validation" in html


def test_the_page_escapes_everything_the_manifest_holds():
    m = manifest()
    m["stages"][2]["name"] = m["stages"][2]["name"] + HOSTILE
    m["final"]["scores"][m["stages"][2]["name"]] = m["final"]["scores"].pop("rpr-1")
    html = loop_page(m)
    assert "<script>" not in html and "alert(\"x\")" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_the_page_of_a_running_loop_shows_validation_only():
    m = manifest(final=False, status="running")
    m["stages"][3]["status"] = "running"
    m["stages"][3]["kept"] = None
    for s in m["stages"][3:]:
        s["candidates"] = [] if s["name"] == "rpr-2" else s["candidates"]
    m["stages"][3]["candidates"][0]["kept"] = False
    m["stages"][4].update(status="pending", kept=None, parent=None)
    html = loop_page(m)
    svg = re.search(r"<svg viewBox=\"0 0 560 .*?</svg>", html).group(0)
    # validation points for rsr-1 and rpr-1 only (base has no candidate, rsr-2 kept none yet)
    assert svg.count('class="pt"') == svg.count("errbar") == 2
    assert "test (kept checkpoint)" not in svg
    assert "Paired differences" not in html and "not scored yet" in html
    assert "the stage has not run yet" in html and "none yet" in html
    assert "running" in html and "pending" in html


def test_the_page_refuses_what_is_not_a_loop_manifest():
    with pytest.raises(ConfigError, match="kind"):
        loop_page({"kind": "terminal-env-run", "stages": []})
    with pytest.raises(ConfigError, match="stages"):
        loop_page({"kind": "terminal-env-loop", "stages": None})
    with pytest.raises(ConfigError, match=r"stages\[0\].name"):
        loop_page({"kind": "terminal-env-loop", "stages": [{"kind": "base"}]})
    empty = loop_page({"kind": "terminal-env-loop", "name": "empty", "stages": [], "final": None})
    assert "no data" in empty


def test_write_loop_report_writes_report_html_atomically(tmp_path):
    out = write_loop_report(tmp_path / "loop" / "a", manifest())
    assert out == tmp_path / "loop" / "a" / "report.html"
    assert out.read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.html"]  # no temporary left


def test_neither_module_imports_torch():
    code = ("import sys, terminal_env.train.evaluation, terminal_env.report.loop; "
            "print(sorted(m for m in ('torch', 'transformers', 'safetensors') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
