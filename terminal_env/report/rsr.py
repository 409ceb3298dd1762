"""The self-rewrite page: the funnel, then each playbook next to the run it came from and its re-run.

Written by ``terminal-env rsr build`` (and ``rsr report``) to ``OUT/report/rsr.html``
(:meth:`terminal_env.rsr.RSRRun.report` gathers the entries); one static file, like the run reports.
"""

from __future__ import annotations

from typing import Any

from .html import badge, cap, esc, page, table

_FUNNEL_ROWS = (
    ("tasks", "tasks"), ("unplayable", "unplayable by the policy"), ("masked", "masked (infrastructure)"),
    ("unique_tasks_solved", "unique tasks solved"), ("playbooks", "playbooks"), ("reruns", "re-runs"),
    ("reruns_verified", "re-runs verified"), ("records", "records written"),
    ("solved_only_under_other_harnesses", "tasks solved only under a non-generic harness"),
    ("solved_only_under_other_harnesses_in_records", "... of them in the records"),
)


def _funnel(f: dict[str, Any]) -> str:
    rows = [[esc(label), esc(f.get(key, ""))] for key, label in _FUNNEL_ROWS[:3]]
    rows += [[esc(f"attempts: {h}"), esc(n)] for h, n in f.get("attempts", {}).items()]
    rows += [[esc(f"strict successes: {h}"), esc(n)] for h, n in f.get("strict_successes", {}).items()]
    rows += [[esc(label), esc(f.get(key, ""))] for key, label in _FUNNEL_ROWS[3:5]]
    rows += [[esc(f"rejected: {k}"), esc(n)] for k, n in sorted(f.get("rejected", {}).items())]
    rows += [[esc(label), esc(f.get(key, ""))] for key, label in _FUNNEL_ROWS[5:]]
    return table(["stage", "count"], rows)


def _commands(traj: Any) -> str:
    if traj is None:
        return '<p class="muted">none</p>'
    return "".join(f"<pre>{esc(cap(c, 2000))}</pre>" for c in traj.generic_commands()) or '<p class="muted">no commands</p>'


def _outcome(traj: Any) -> str:
    if traj is None:
        return badge("not run", "o-none")
    if traj.masked:
        return badge("masked", "o-masked")
    return badge("verified", "o-passed") if traj.strict_success else badge(traj.outcome or "failed", "o-failed")


def rsr_page(entries: list[dict[str, Any]], funnel: dict[str, Any]) -> str:
    """``entries``: per playbook, its ``task``, ``key``, ``playbook``, ``verdict``, ``source`` and
    ``rerun`` (trajectories, or None)."""
    parts = ["<h1>Self-rewrite</h1>", '<p class="sub">verified successes under several harnesses, '
             "rewritten as generic playbooks, reviewed for leaks, and re-run from scratch</p>",
             "<h2>Funnel</h2>", _funnel(funnel), "<h2>Playbooks</h2>"]
    for e in entries:
        pb, verdict = e["playbook"], e["verdict"]
        status = (badge("accepted", "o-passed") if verdict and verdict.accepted
                  else badge("rejected", "o-failed") if verdict else badge("not reviewed", "o-none"))
        reasons = "".join(f"<li>{esc(r)}</li>" for r in (verdict.reasons if verdict else []))
        steps = "".join(f"<li>{'<p>' + esc(s.why) + '</p>' if s.why else ''}<pre>{esc(cap(s.command, 2000))}</pre></li>"
                        for s in pb.steps)
        dropped = "".join(f"<li>{esc(d)}</li>" for d in pb.dropped)
        parts.append(
            f'<h3 id="{esc(e["task"])}-{esc(e["key"])}">{esc(e["task"])} · {esc(pb.source.harness)} '
            f"attempt {pb.source.attempt} {status} {_outcome(e['rerun'])}</h3>"
            + (f"<ul>{reasons}</ul>" if reasons else "")
            + '<div class="cols" style="display:grid;grid-template-columns:1fr 1fr 1fr;gap:12px">'
            f"<div><h4>source ({esc(pb.source.harness)})</h4>{_commands(e['source'])}</div>"
            f"<div><h4>playbook ({esc(pb.planner)})</h4><ol>{steps}</ol>"
            + (f'<p class="muted">dropped:</p><ul>{dropped}</ul>' if dropped else "")
            + f"</div><div><h4>re-run (generic)</h4>{_commands(e['rerun'])}</div></div>"
        )
    return page("self-rewrite", "".join(parts))
