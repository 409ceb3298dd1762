"""The training loop's page: the curve over its stages, each stage's kept checkpoint, the paired
differences between stages, and every candidate with the reason it was kept or abandoned.

Written by the loop (Base, RSR-1, RPR-1, RSR-2, RPR-2) to ``LOOP_DIR/report.html`` after each
stage, from its manifest, so a running loop has a page too (validation only: the test split is
scored once, at the end). One static file like the run reports: inline SVG, nothing fetched,
every value from the manifest escaped. The manifest::

    {"kind": "terminal-env-loop", "name": str, "status": "running" | "complete",
     "config": {...}, "config_digest": str,
     "stages": [
       {"name": "base" | "rsr-1" | ..., "kind": "base" | "rsr" | "rpr", "index": int,
        "parent": {"id": str, "path": str} | null,
        "kept": {"id": str, "path": str, "candidate": str, "reason": str} | null,
        "candidates": [{"name": str, "checkpoint": {"id": str, "path": str},
                        "validation": {"mean", "ci_low", "ci_high", "n_tasks", "reward_mean"},
                        "kept": bool, "reason": str}],
        "hyperparameters": {...}, "funnel": {...} | null,
        "status": "complete" | "running" | "pending"}
     ],
     "final": null | {"split": "test", "k": 3, "temperature": 0.6, "metric": "strict_success",
                      "scores": {...}, "paired": [...]}}

``final`` is :func:`terminal_env.train.evaluation.final_summary`'s output plus ``split``, ``k``
and ``temperature``: ``scores[stage]`` is ``{mean, ci_low, ci_high, n_tasks, per_task}`` (and
``episodes``, the masked counts, when the loop gave them), ``paired`` the comparisons in order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..fileio import write_atomic
from . import charts
from .html import badge, ci_text, esc, kv, page, pct, signed_pct, table

KIND = "terminal-env-loop"
STATUS_CLASSES = {"complete": "o-pass", "running": "o-partial", "pending": "o-pending"}
TEST_COLOUR, VALIDATION_COLOUR = "var(--accent)", "var(--tamp)"


def _num(value: Any) -> float | None:
    """A finite number or None: a damaged field shows as a dash instead of breaking the page."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _estimate(est: Any) -> tuple[float | None, float | None, float | None]:
    e = _map(est)
    return _num(e.get("mean")), _num(e.get("ci_low")), _num(e.get("ci_high"))


def _with_ci(est: Any) -> str:
    """``52.0% [40.0%, 63.3%] · 30 tasks``, or a dash when nothing was measured."""
    value, low, high = _estimate(est)
    if value is None:
        return '<span class="muted">—</span>'
    n = _map(est).get("n_tasks")
    tasks = f" · {esc(n)} tasks" if n is not None else ""
    return f'{esc(pct(value))} <span class="muted">{esc(ci_text(low, high))}{tasks}</span>'


def _ref(ref: Any) -> str:
    """A checkpoint by its short id; the full id and path in the tooltip."""
    r = _map(ref)
    if not r.get("id"):
        return '<span class="muted">—</span>'
    full = str(r["id"])
    short = full if len(full) <= 14 else full[:12] + "…"
    return f'<span class="mono" title="{esc(full)} · {esc(r.get("path"))}">{esc(short)}</span>'


def _status(status: Any) -> str:
    return badge(str(status or "unknown"), STATUS_CLASSES.get(str(status), "o-none"))


def _kept_candidate(stage: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The candidate the stage kept: flagged ``kept``, else named by ``kept.candidate``."""
    candidates = [c for c in stage.get("candidates") or [] if isinstance(c, Mapping)]
    flagged = [c for c in candidates if c.get("kept") is True]
    if flagged:
        return flagged[0]
    name = _map(stage.get("kept")).get("candidate")
    return next((c for c in candidates if name is not None and c.get("name") == name), None)


def _stages(manifest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The manifest's stages, checked where the page depends on them (names key every table)."""
    if manifest.get("kind") != KIND:
        raise ConfigError(f"kind must be {KIND!r}, got {manifest.get('kind')!r}: not a loop manifest")
    stages = manifest.get("stages")
    if not isinstance(stages, list):
        raise ConfigError(f"stages must be a list, got {type(stages).__name__}")
    for i, stage in enumerate(stages):
        if not isinstance(stage, Mapping) or not isinstance(stage.get("name"), str):
            raise ConfigError(f"stages[{i}].name must be a string")
    final = manifest.get("final")
    if final is not None and not isinstance(final, Mapping):
        raise ConfigError(f"final must be null or a mapping, got {type(final).__name__}")
    return stages


# ---------------------------------------------------------------------------- sections
def _curve(stages: list[Mapping[str, Any]], final: Mapping[str, Any] | None) -> str:
    """Test (kept checkpoint) and validation (kept candidate) per stage, with their intervals."""
    names = [s["name"] for s in stages]
    validation = []
    for s in stages:
        kept = _kept_candidate(s)
        validation.append(_estimate(kept.get("validation")) if kept is not None else None)
    series = []
    if final is not None:
        scores = _map(final.get("scores"))
        series.append(charts.Series("test (kept checkpoint)", [_estimate(scores.get(n)) for n in names],
                                    colour=TEST_COLOUR))
    series.append(charts.Series("validation (kept candidate)", validation, colour=VALIDATION_COLOUR,
                                dashed=True))
    return f'<div class="chart">{charts.line_chart(names, series, label="score by stage")}</div>'


def _stage_table(stages: list[Mapping[str, Any]], final: Mapping[str, Any] | None) -> str:
    scores = _map(final.get("scores")) if final is not None else {}
    rows = []
    for s in stages:
        kept, cand = _map(s.get("kept")), _kept_candidate(s)
        kept_cell = _ref(kept) if kept else '<span class="muted">none yet</span>'
        if kept.get("candidate") is not None:
            kept_cell += f' <span class="muted">({esc(kept["candidate"])})</span>'
        if kept.get("reason"):
            kept_cell += f'<br><span class="muted">{esc(kept["reason"])}</span>'
        test = '<span class="muted">not scored yet</span>'
        if final is not None:
            est = _map(scores.get(s["name"]))
            test = _with_ci(est)
            counts = _map(est.get("episodes"))
            if counts.get("masked_episodes") or counts.get("masked_tasks"):
                lost = counts.get("masked_tasks") or []
                test += (f'<br><span class="muted">{esc(counts.get("masked_episodes"))} masked episodes'
                         + (f"; no score: {esc(', '.join(map(str, lost)))}" if lost else "") + "</span>")
        rows.append([
            f"<b>{esc(s['name'])}</b>", esc(s.get("kind")), _status(s.get("status")), kept_cell,
            _ref(s.get("parent")), _with_ci(cand.get("validation")) if cand is not None else "—", test,
        ])
    return table(["Stage", "Kind", "Status", "Kept checkpoint", "Parent", "Validation (kept)",
                  "Test (kept)"], rows)


def _paired_table(final: Mapping[str, Any]) -> str:
    rows = []
    for p in final.get("paired") or []:
        p = _map(p)
        diff, low, high = _num(p.get("mean_diff")), _num(p.get("ci_low")), _num(p.get("ci_high"))
        share = _num(p.get("share_positive"))
        if p.get("excludes_zero") is True and diff is not None:
            mark = badge("excludes 0: " + ("gain" if diff > 0 else "loss"), "o-pass" if diff > 0 else "o-fail")
        else:
            mark = badge("includes 0", "o-none")
        sign = "muted" if diff is None or abs(diff) < 1e-12 else "pos" if diff > 0 else "neg"
        rows.append([
            esc(p.get("a")), esc(p.get("b")),
            esc("base vs last" if p.get("kind") == "first_vs_last" else p.get("kind")),
            f'<span class="num">{esc(p.get("n_paired"))}</span>',
            f'{charts.diverging(diff, low, high)} <span class="{sign}">{esc(signed_pct(diff))}</span>',
            esc(ci_text(low, high, signed=True)), esc(pct(share, 0)), mark,
        ])
    if not rows:
        return '<p class="muted">no pair of stages to compare</p>'
    return table(["A", "B", "Pair", "Tasks", "Δ = B − A", "CI", "B better in", ""], rows)


def _candidates(stage: Mapping[str, Any]) -> str:
    """One stage's candidates: the kept one and the abandoned branches, each with its reason."""
    candidates = stage.get("candidates") or []
    if not candidates:
        why = "the stage has not run yet" if stage.get("status") == "pending" else "no candidates"
        return f'<p class="muted">{esc(why)}</p>'
    rows = []
    for c in candidates:
        c = _map(c)
        v = _map(c.get("validation"))
        decision = badge("kept", "o-pass") if c.get("kept") is True else badge("abandoned", "o-none")
        rows.append([esc(c.get("name")), _ref(c.get("checkpoint")), _with_ci(v),
                     esc(pct(_num(v.get("reward_mean")))), decision, esc(c.get("reason"))])
    return table(["Candidate", "Checkpoint", "Validation [CI]", "Mean reward", "Decision", "Reason"], rows)


def _details(summary: str, data: Any) -> str:
    if not data:
        return ""
    text = json.dumps(data, indent=1, default=str, sort_keys=True)
    return f"<details><summary>{esc(summary)}</summary><pre>{esc(text)}</pre></details>"


# ---------------------------------------------------------------------------- page
def loop_page(manifest: Mapping[str, Any]) -> str:
    """The whole page of a loop manifest (see the module docstring); ConfigError naming the
    field when it is not one."""
    if not isinstance(manifest, Mapping):
        raise ConfigError(f"a loop manifest must be a mapping, got {type(manifest).__name__}")
    stages = _stages(manifest)
    final = manifest.get("final")
    name = str(manifest.get("name") or "training loop")
    done = sum(1 for s in stages if s.get("status") == "complete")
    parts = [
        '<div class="crumbs">terminal-env training loop</div>',
        f"<h1>{esc(name)}</h1>",
        f'<p class="sub">{_status(manifest.get("status"))} · {done} of {len(stages)} stages complete · '
        f'config <span class="mono">{esc(manifest.get("config_digest") or "—")}</span></p>',
    ]
    if final is not None:
        conf = _num(final.get("confidence")) or 0.95
        metric = str(final.get("metric") or "strict_success").replace("_", " ")
        parts.append(kv([
            ("Test split", esc(final.get("split"))), ("Episodes per task", esc(final.get("k"))),
            ("Temperature", esc(final.get("temperature"))), ("Metric", esc(metric)),
            ("Intervals", esc(f"{conf:.0%} bootstrap over tasks")),
        ]))
        caption = (f"Test: Mean@{esc(final.get('k'))} {esc(metric)} of each stage's kept checkpoint on the "
                   f"{esc(final.get('split'))} split, each task played {esc(final.get('k'))} times with "
                   f"fixed seeds at temperature {esc(final.get('temperature'))}. Validation: the kept "
                   f"candidate's score, the only split selection reads. Bars: {conf:.0%} bootstrap "
                   "intervals over tasks.")
    else:
        caption = ("The loop is still running: the test split is scored once, after the last stage. "
                   "Shown: the validation score of each stage's kept candidate, with its bootstrap "
                   "interval over tasks.")
    parts += ["<h2>Curve</h2>", f'<p class="muted">{caption}</p>', _curve(stages, final),
              "<h2>Stages</h2>", '<div class="scroll">' + _stage_table(stages, final) + "</div>"]
    if final is not None:
        parts += ["<h2>Paired differences</h2>",
                  '<p class="muted">Every stage played the same test tasks with the same seeds, so '
                  "differences are paired by task (tasks resampled as pairs): consecutive stages, "
                  "then the base against the last stage.</p>",
                  '<div class="scroll">' + _paired_table(final) + "</div>"]
    parts.append("<h2>Candidates</h2>")
    for s in stages:
        parts.append(f"<h3>{esc(s['name'])} {_status(s.get('status'))}</h3>")
        parts.append('<div class="scroll">' + _candidates(s) + "</div>")
        parts.append(_details("hyperparameters", s.get("hyperparameters")))
        parts.append(_details("funnel", s.get("funnel")))
    parts.append(_details("loop configuration", manifest.get("config")))
    return page(f"{name} · terminal-env loop", "".join(parts))


def write_loop_report(directory: str | Path, manifest: Mapping[str, Any]) -> Path:
    """Write ``directory/report.html`` atomically (a browser reloading it mid-run never sees
    half a page) and return its path."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return write_atomic(out / "report.html", loop_page(manifest))
