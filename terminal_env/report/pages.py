"""The run's overview page (index.html) and the comparison page (compare.html)."""

from __future__ import annotations

import json
import time
from typing import Any

from ..metrics import is_masked
from ..runner.records import TrialResult
from . import charts
from .data import Run, trial_page
from .html import (
    badge,
    ci_text,
    esc,
    href,
    kv,
    num,
    outcome_class,
    page,
    pct,
    secs,
    signed_pct,
    table,
    when,
)

#: difficulty names in their natural order; others follow alphabetically
DIFFICULTY_ORDER = ("trivial", "easy", "medium", "hard", "expert")
OUTCOME_LABELS = [
    ("passed", "passed", "o-pass"),
    ("partial", "partial", "o-partial"),
    ("failed", "failed", "o-fail"),
    ("timeout", "timeout", "o-timeout"),
    ("tampered", "tampered", "o-tampered"),
    ("infra_error", "infra error (masked)", "o-masked"),
    ("none", "not verified", "o-none"),
]


def _legend() -> str:
    items = "".join(badge(label, cls) for _, label, cls in OUTCOME_LABELS)
    return f'<div class="legend">{items}{badge("not run yet", "o-pending")}</div>'


def _card(label: str, value: str, sub: str = "") -> str:
    return (f'<div class="card"><div class="label">{esc(label)}</div>'
            f'<div class="value">{esc(value)}</div><div class="ci">{esc(sub)}</div></div>')


def _est_card(label: str, est: dict[str, Any] | None, conf: float) -> str:
    if not est or est.get("value") is None:
        return _card(label, "—", "no scored task")
    sub = f"{conf:.0%} CI {ci_text(est['ci_low'], est['ci_high'])} · {est['n_tasks']} tasks"
    return _card(label, pct(est["value"]), sub)


def _metric_card(name: str, est: dict[str, Any], conf: float) -> str:
    """A named metric of the verifiers: any number, so shown as one (not as a percentage)."""
    if not est or est.get("value") is None:
        return _card(f"Metric {name}", "—", "no task reported it")
    lo, hi = est["ci_low"], est["ci_high"]
    return _card(f"Metric {name}", f"{est['value']:.3g}",
                 f"{conf:.0%} CI [{lo:.3g}, {hi:.3g}] · {est['n_tasks']} tasks reporting it")


def _difficulty_key(name: str) -> tuple[int, str]:
    if name in DIFFICULTY_ORDER:
        return DIFFICULTY_ORDER.index(name), ""
    return len(DIFFICULTY_ORDER), name


def _with_ci(est: dict[str, Any]) -> str:
    ci = ci_text(est["ci_low"], est["ci_high"])
    return f'{esc(pct(est["value"]))} <span class="muted">{esc(ci)}</span>'


def _chart(title: str, bars: list[charts.Bar], label: str) -> str:
    return f'<div class="chart"><h3>{esc(title)}</h3>{charts.bar_chart(bars, label=label)}</div>'


def _group_bars(groups: dict[str, Any], order: list[str]) -> list[charts.Bar]:
    bars = []
    for name in order:
        g = groups[name]
        m = g["mean_at_k"]
        bars.append(charts.Bar(
            label=name, value=m["value"], low=m["ci_low"], high=m["ci_high"],
            secondary=g["mean_progress"]["value"], note=f"{g['scored_tasks']} tasks",
        ))
    return bars


def _group_table(groups: dict[str, Any], order: list[str], title: str) -> str:
    rows = []
    for name in order:
        g = groups[name]
        m, p1, pr = g["mean_at_k"], g["pass_at_1"], g["mean_progress"]
        rows.append([
            esc(name),
            f'<span class="num">{g["scored_tasks"]}</span>'
            + (f' <span class="muted">(+{g["tasks"] - g["scored_tasks"]} unscored)</span>'
               if g["tasks"] > g["scored_tasks"] else ""),
            _with_ci(m),
            esc(pct(p1["value"])),
            _with_ci(pr),
        ])
    return table([esc(title), "Tasks", "Mean@k [CI]", "pass@1", "Progress [CI]"], rows)


def _cell(result: TrialResult | None, task: str, attempt: int) -> str:
    if result is None:
        return '<td class="cell"><span class="o-pending" title="not run yet">·</span></td>'
    masked = is_masked(result)
    cls = outcome_class(result.outcome, masked)
    text = "masked" if masked else pct(result.progress, 0)
    tip = (f"attempt {attempt}: {result.outcome or 'not verified'}"
           f"{' (masked: infrastructure error)' if masked else ''}, progress {pct(result.progress)}, "
           f"{result.termination}")
    return (f'<td class="cell"><a class="{cls}" href="{href(trial_page(task, attempt))}" '
            f'title="{esc(tip)}">{esc(text)}</a></td>')


def _task_grid(run: Run, summary: dict[str, Any]) -> str:
    k = run.attempts
    by_key = {(r.task, r.attempt): r for r in run.results}
    rows_by_task = {row["task"]: row for row in summary["tasks"]}

    def meta(name: str, key: str) -> str | None:
        return (rows_by_task.get(name) or {}).get(key) or run.tasks.get(name, {}).get(key)

    names = sorted(run.task_names, key=lambda n: (meta(n, "category") or "~", n))
    head = ["Task", "Category", "Difficulty"] + [f'<span class="num">#{i}</span>' for i in range(1, k + 1)]
    head += ['<span class="num">Success</span>', '<span class="num">Progress</span>']
    body = []
    for name in names:
        row = rows_by_task.get(name)
        cells = "".join(_cell(by_key.get((name, i)), name, i) for i in range(1, k + 1))
        succ = (f"{row['successes']}/{row['attempts']}" if row and row["attempts"] else "—")
        body.append(
            f"<tr><td>{esc(name)}</td><td>{esc(meta(name, 'category'))}</td>"
            f"<td>{esc(meta(name, 'difficulty'))}</td>{cells}"
            f'<td class="num">{esc(succ)}</td>'
            f'<td class="num">{esc(pct(row["mean_progress"] if row else None))}</td></tr>'
        )
    thead = "".join(f"<th>{h}</th>" for h in head)
    return (f'<div class="scroll"><table class="grid"><thead><tr>{thead}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def index_page(run: Run, summary: dict[str, Any], *, compare_with: Run | None = None) -> str:
    conf = summary["confidence"]
    k = summary["mean_at_k"]["k"]
    created = run.manifest.get("created")
    finished = run.manifest.get("finished") or run.manifest.get("updated")
    sub = [f"harness <b>{esc(run.harness)}</b>", f"{k} attempt{'s' if k != 1 else ''} per task",
           f"{len(run.task_names)} tasks"]
    if created is not None:
        sub.append(f"started {esc(when(created))}")
    if finished is not None:
        sub.append(f"finished {esc(when(finished))}")
    parts = [
        '<div class="crumbs">terminal-env report</div>',
        f"<h1>{esc(run.model)}</h1>",
        f'<p class="sub">{" · ".join(sub)} · <span class="mono">{esc(str(run.dir))}</span></p>',
    ]
    if compare_with is not None:
        parts.append(f'<p><a href="compare.html">Compare with {esc(compare_with.label)} →</a></p>')

    passk = summary["pass_at_k"]
    cards = [_est_card(f"Mean@{k}", summary["mean_at_k"], conf), _est_card("pass@1", passk.get("1"), conf)]
    if k > 1 and str(k) in passk:
        cards.append(_est_card(f"pass@{k}", passk[str(k)], conf))
    cards.append(_est_card("Mean progress", summary["mean_progress"], conf))
    for name, stat in (summary.get("metrics") or {}).items():  # the verifiers' named metrics
        cards.append(_metric_card(name, stat, conf))
    cards.append(_card("Infra errors", str(summary["n_masked"]),
                       f"masked trials of {summary['n_trials']}, excluded from scores"))
    cards.append(_card("Trials", str(summary["n_trials"]),
                       f"{summary['n_scored_tasks']} of {summary['n_tasks']} tasks scored"))
    parts.append(f'<div class="cards">{"".join(cards)}</div>')

    outcomes = summary["outcomes"]
    parts.append("<h2>Outcomes</h2>")
    parts.append(charts.stacked([(label, outcomes.get(key, 0), cls) for key, label, cls in OUTCOME_LABELS]))
    parts.append(_legend())

    cats = summary["per_category"]
    diffs = summary["per_difficulty"]
    cat_order = sorted(cats)
    diff_order = sorted(diffs, key=_difficulty_key)
    pass_bars = [charts.Bar(label=f"pass@{kk}", value=e["value"], low=e["ci_low"], high=e["ci_high"],
                            note=f"{e['n_tasks']} tasks") for kk, e in passk.items()]
    parts.append("<h2>Success</h2>")
    parts.append(
        '<p class="muted">Bars: Mean@k (mean strict success per task) with its '
        f"{conf:.0%} bootstrap interval; thin light bars: mean partial progress.</p>"
        '<div class="charts">'
        + _chart("By category", _group_bars(cats, cat_order), "success by category")
        + _chart("By difficulty", _group_bars(diffs, diff_order), "success by difficulty")
        + _chart("pass@k", pass_bars, "pass at k")
        + "</div>"
    )
    parts.append("<h2>Tasks × attempts</h2>")
    parts.append('<p class="muted">Each cell is one trial, coloured by outcome, showing its partial '
                 "progress; click for the transcript, the verifier's checks and the recording.</p>")
    parts.append(_legend())
    parts.append(_task_grid(run, summary))
    parts.append("<h2>By category</h2>" + _group_table(cats, cat_order, "Category"))
    parts.append("<h2>By difficulty</h2>" + _group_table(diffs, diff_order, "Difficulty"))

    totals = summary["totals"]
    terms = "".join(f"<li>{esc(name)}: {n}</li>" for name, n in summary["terminations"].items())
    parts.append("<h2>Run</h2>")
    parts.append(kv([
        ("Terminations", f"<ul>{terms}</ul>" if terms else "—"),
        ("Trial time (sum)", esc(secs(totals["duration"]))),
        ("Model time", esc(secs(totals["model_seconds"]))),
        ("Environment time", esc(secs(totals["env_seconds"]))),
        ("Verifier time", esc(secs(totals["verify_seconds"]))),
        ("Prompt tokens", esc(num(totals["prompt_tokens"]))),
        ("Completion tokens", esc(num(totals["completion_tokens"]))),
        ("Turns", esc(num(totals["turns"]))),
        ("Commands", esc(num(totals["commands"]))),
        ("Format errors", esc(num(totals["format_errors"]))),
        ("Starts (with retries)", esc(num(totals["tries"]))),
        ("Bootstrap", esc(f"{summary['n_resamples']} resamples over tasks, seed {summary['seed']}")),
    ]))
    parts.append("<details><summary>run configuration (run.json)</summary>"
                 f"<pre>{esc(json.dumps(run.config, indent=1, default=str, sort_keys=True))}</pre>"
                 "</details>")
    parts.append(f'<p class="muted">report generated {esc(when(time.time()))}</p>')
    return page(f"{run.model} · {run.harness} · terminal-env report", "".join(parts))


def compare_page(a: Run, b: Run, comparison: dict[str, Any]) -> str:
    conf = comparison["confidence"]
    parts = [
        '<div class="crumbs"><a href="index.html">← report</a></div>',
        "<h1>Comparison</h1>",
        f'<p class="sub">A = {esc(a.label)}<br>B = {esc(b.label)}<br>'
        f"Differences are B − A over the {comparison['n_paired']} tasks scored in both runs, "
        f"with {conf:.0%} paired bootstrap intervals (tasks resampled as pairs).</p>",
    ]
    cards = []
    for key, label in (("strict_success", "strict success"), ("progress", "progress")):
        o = comparison[key]
        if o["mean_diff"] is None:
            cards.append(_card(f"Δ {label}", "—", "no task in common"))
            continue
        cards.append(_card(
            f"Δ {label}", signed_pct(o["mean_diff"]),
            f"CI {ci_text(o['ci_low'], o['ci_high'], signed=True)} · A {pct(o['mean_a'])} → "
            f"B {pct(o['mean_b'])} · B better in {o['share_positive']:.0%} of resamples",
        ))
    parts.append(f'<div class="cards">{"".join(cards)}</div>')

    first: dict[str, int] = {}
    for res in a.results:
        first[res.task] = min(first.get(res.task, res.attempt), res.attempt)
    rows = []
    for r in comparison["tasks"]:
        ds, dp = r["diff_success"], r["diff_progress"]
        name = esc(r["task"])
        if r["task"] in first:  # this report is run A's: its trial pages are here
            name = f'<a href="{href(trial_page(r["task"], first[r["task"]]))}">{name}</a>'
        rows.append([
            name, esc(r["category"]),
            f'<span class="num">{esc(pct(r["a_success"]))}</span>',
            f'<span class="num">{esc(pct(r["b_success"]))}</span>',
            f'{charts.diverging(ds)} <span class="{_sign(ds)}">{esc(signed_pct(ds))}</span>',
            f'<span class="num">{esc(pct(r["a_progress"]))}</span>',
            f'<span class="num">{esc(pct(r["b_progress"]))}</span>',
            f'{charts.diverging(dp)} <span class="{_sign(dp)}">{esc(signed_pct(dp))}</span>',
        ])
    s, p = comparison["strict_success"], comparison["progress"]
    if comparison["tasks"]:
        rows.append([
            "<b>mean</b>", "", esc(pct(s["mean_a"])), esc(pct(s["mean_b"])),
            f'{charts.diverging(s["mean_diff"], s["ci_low"], s["ci_high"])} '
            f'<b class="{_sign(s["mean_diff"])}">{esc(signed_pct(s["mean_diff"]))}</b> '
            f'<span class="muted">{esc(ci_text(s["ci_low"], s["ci_high"], signed=True))}</span>',
            esc(pct(p["mean_a"])), esc(pct(p["mean_b"])),
            f'{charts.diverging(p["mean_diff"], p["ci_low"], p["ci_high"])} '
            f'<b class="{_sign(p["mean_diff"])}">{esc(signed_pct(p["mean_diff"]))}</b> '
            f'<span class="muted">{esc(ci_text(p["ci_low"], p["ci_high"], signed=True))}</span>',
        ])
    parts.append("<h2>Per task</h2>")
    parts.append('<p class="muted">Sorted by the difference of mean strict success (largest gain '
                 "first), then of progress.</p>")
    parts.append('<div class="scroll">' + table(
        ["Task", "Category", "A success", "B success", "Δ success", "A progress", "B progress",
         "Δ progress"], rows, cls="compare") + "</div>")
    for key, run in (("only_a", a), ("only_b", b)):
        names = comparison[key]
        if names:
            parts.append(f"<h2>Scored only in {'A' if key == 'only_a' else 'B'} ({esc(run.label)})</h2>")
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in names) + "</ul>")
    return page(f"Comparison · {a.label} vs {b.label}", "".join(parts))


def _sign(value: float | None) -> str:
    if value is None or abs(value) < 1e-12:
        return "muted"
    return "pos" if value > 0 else "neg"
