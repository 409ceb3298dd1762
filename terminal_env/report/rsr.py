"""The self-rewrite page: the funnel, then each playbook next to the run it came from and its re-run.

Written by ``terminal-env rsr build`` (and ``rsr report``) to ``OUT/report/rsr.html``
(:meth:`terminal_env.rsr.RSRRun.report` gathers the entries); one static file, like the run reports.
"""

from __future__ import annotations

from typing import Any

from .html import badge, cap, esc, page, table


def funnel_rows(f: dict[str, Any]) -> list[tuple[str, Any]]:
    """The funnel as (label, value) rows, in the order a reader follows it (the CLI's table and
    the report's show the same)."""
    rows: list[tuple[str, Any]] = [("mode", f["mode"])]
    rows += [(f"role: {r}", d) for r, d in f["roles"].items()]
    rows += [("tasks", f["tasks"]), ("attempts the policy could not play", f["unplayable_attempts"]),
             ("... their tasks", f["unplayable_tasks"]), ("masked (infrastructure)", f["masked"])]
    rows += [(f"attempts: {h}", n) for h, n in f["attempts"].items()]
    rows += [(f"strict successes: {h}", n) for h, n in f["strict_successes"].items()]
    rows += [("unique tasks solved", f["unique_tasks_solved"]), ("playbooks", f["playbooks"]),
             ("planner errors", f["plan_errors"]), ("reviewed", f["reviewed"]), ("reviewer errors", f["review_errors"])]
    rows += [(f"rejected: {kind}", n) for kind, n in sorted(f["rejected"].items())]
    rows += [("re-runs", f["reruns"]), ("re-runs verified", f["reruns_verified"])]
    rows += [(f"left out at build: {k}", n) for k, n in sorted(f["built"].items())]
    rows += [("records written (this round)", f["records"]), ("tasks in the records", f["tasks_in_records"]),
             ("tasks solved only under a non-generic harness", f["solved_only_under_other_harnesses"]),
             ("... of them in the records", f["solved_only_under_other_harnesses_in_records"])]
    for stage, s in f["stages"].items():
        if s.get("seconds") is not None or s.get("prompt_tokens") or s.get("completion_tokens"):
            tokens = s.get("prompt_tokens", 0) + s.get("completion_tokens", 0)
            rows.append((f"{stage}: wall time, tokens", f"{s.get('seconds', 0):.1f} s, {tokens}"))
    return rows


def _funnel(f: dict[str, Any]) -> str:
    return table(["stage", "count"], [[esc(label), esc(value)] for label, value in funnel_rows(f)])


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
        steps = "".join(f"<li>{'<p>' + esc(s.why) + '</p>' if s.why else ''}<pre>{esc(cap(s.text(), 2000))}</pre></li>"
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
