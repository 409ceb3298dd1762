"""One page per trial: the score, the verifier's checks, the recording, the transcript."""

from __future__ import annotations

import json
from typing import Any

from ..harness.base import ActionResult
from ..metrics import is_masked
from ..runner.records import TrialResult
from ..trajectory import Trajectory, Turn
from ..verify.result import VerifierResult
from .cast import PLAYER_JS, Cast, player_html
from .data import Run, TrialFiles
from .html import badge, cap, esc, href, kv, num, outcome_class, page, pct, secs, table, when

#: the most characters of one message or observation shown
MAX_TEXT = 100_000


def _pre(text: str, cls: str = "") -> str:
    c = f' class="{esc(cls)}"' if cls else ""
    return f"<pre{c}>{esc(cap(text, MAX_TEXT))}</pre>"


def _content(content: Any) -> str:
    """A message's content: text, or a list of parts (text parts shown, others as JSON)."""
    if content is None or content == "":
        return '<p class="muted">(empty)</p>'
    if isinstance(content, str):
        return _pre(content)
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                out.append(_pre(str(part.get("text", ""))))
            else:
                out.append(_pre(json.dumps(part, indent=1, default=str)))
        return "".join(out)
    return _pre(json.dumps(content, indent=1, default=str))


def _tool_calls(calls: Any) -> str:
    if not isinstance(calls, list) or not calls:
        return ""
    out = []
    for c in calls:
        fn = (c.get("function") or {}) if isinstance(c, dict) else {}
        name = fn.get("name") if isinstance(fn, dict) else None
        args = fn.get("arguments") if isinstance(fn, dict) else None
        cid = c.get("id") if isinstance(c, dict) else None
        out.append(f'<div class="action">{badge(str(name or "call"), "o-none")} '
                   f'<span class="muted mono">{esc(cid)}</span>{_pre(str(args or ""))}</div>')
    return "<div><b>tool calls</b>" + "".join(out) + "</div>"


def _action(res: ActionResult) -> str:
    args = json.dumps(res.action.args, ensure_ascii=False, default=str)
    parts = [f'<div class="action">{badge(res.action.tool, "o-none")} <code>{esc(cap(args, 2000))}</code>']
    if res.action.call_id:
        parts.append(f' <span class="muted mono">{esc(res.action.call_id)}</span>')
    if res.error:
        parts.append(f'<div class="ferr"><b>refused:</b> {esc(res.error)}</div>')
    for cmd in res.commands:
        meta = []
        if cmd.exit_code is not None:
            meta.append(f"exit {cmd.exit_code}")
        meta.append(secs(cmd.duration))
        if cmd.timed_out:
            meta.append("timed out")
        if cmd.truncated:
            meta.append("output truncated")
        lines = cmd.observation.count("\n") + 1 if cmd.observation else 0
        out = (f"<details><summary>output ({lines} line{'s' if lines != 1 else ''})</summary>"
               f"{_pre(cmd.observation)}</details>" if cmd.observation else
               '<div class="muted">(no output)</div>')
        bad = " neg" if cmd.timed_out or (cmd.exit_code not in (None, 0)) else ""
        parts.append(f'<div class="cmd"><code>{esc(cap(cmd.text, 4000))}</code> '
                     f'<span class="muted{bad}">{esc(" · ".join(meta))}</span>{out}</div>')
    parts.append("</div>")
    return "".join(parts)


def _turn(turn: Turn) -> str:
    meta = [f"turn {turn.index}", f"started {when(turn.started)}",
            f"model {secs(turn.model_seconds)}", f"env {secs(turn.env_seconds)}"]
    comp = turn.completion
    if comp is not None:
        if comp.usage.prompt_tokens is not None:
            meta.append(f"{num(comp.usage.prompt_tokens)} prompt tokens")
        if comp.usage.completion_tokens is not None:
            meta.append(f"{num(comp.usage.completion_tokens)} completion tokens")
        if comp.finish_reason:
            meta.append(f"finish: {comp.finish_reason}")
        if comp.retries:
            meta.append(f"{comp.retries} retries")
    parts = [f'<div class="turn"><div class="meta">{esc(" · ".join(meta))}</div>']
    if comp is not None and comp.reasoning:
        parts.append(f"<details><summary>reasoning</summary>{_pre(comp.reasoning)}</details>")
    if turn.format_error:
        parts.append(f'<div class="ferr"><b>format error:</b> {esc(cap(turn.format_error, 4000))}</div>')
    if turn.actions:
        parts.extend(_action(a) for a in turn.actions)
    elif not turn.format_error:
        parts.append('<div class="muted">no actions</div>')
    parts.append("</div>")
    return "".join(parts)


def transcript(traj: Trajectory) -> str:
    by_message: dict[int, list[Turn]] = {}
    orphans = []
    for t in traj.turns:
        if t.message_index is not None and 0 <= t.message_index < len(traj.messages):
            by_message.setdefault(t.message_index, []).append(t)
        else:
            orphans.append(t)
    parts = [kv([
        ("Harness", esc(traj.harness)),
        ("Model", esc(f"{traj.model.name} ({traj.model.backend})")),
        ("Started", esc(when(traj.created))),
        ("Termination", esc(traj.termination)),
        ("Messages", str(len(traj.messages))),
        ("Turns", str(len(traj.turns))),
    ])]
    if traj.error:
        parts.append(f'<div class="ferr"><b>error:</b> {esc(traj.error)}</div>')
    for ev in traj.context_events:
        parts.append(f'<div class="note">before turn {ev.turn}: {esc(ev.kind)} '
                     f"{len(ev.messages)} message(s) to fit the input budget "
                     f"({num(ev.tokens_before)} → {num(ev.tokens_after)} tokens)</div>")
    for i, msg in enumerate(traj.messages):
        msg = msg if isinstance(msg, dict) else {"role": "?", "content": msg}
        role = str(msg.get("role") or "?")
        cls = role if role in ("system", "user", "assistant", "tool") else ""
        head = f'<div class="role">{esc(role)}</div>'
        if msg.get("tool_call_id"):
            head += f'<div class="muted mono">answers {esc(msg["tool_call_id"])}</div>'
        body = _content(msg.get("content")) + _tool_calls(msg.get("tool_calls"))
        if role == "system":
            body = f"<details><summary>system prompt</summary>{body}</details>"
        parts.append(f'<div class="msg {cls}" id="m{i}">{head}{body}</div>')
        parts.extend(_turn(t) for t in by_message.get(i, []))
    if orphans:
        parts.append("<h3>Turns without an assistant message</h3>")
        parts.extend(_turn(t) for t in orphans)
    return "".join(parts)


def _verifier(v: VerifierResult | None, raw: dict[str, Any] | None, log: str | None) -> str:
    if v is None and raw is None:
        return '<div class="note">No verifier result was recorded for this trial.</div>'
    parts = []
    if v is None:
        parts.append('<div class="note">The recorded verification does not validate; shown as '
                     "recorded.</div>" + _pre(json.dumps(raw, indent=1, default=str)))
    else:
        parts.append(kv([
            ("Outcome", badge(v.outcome.value, outcome_class(v.outcome.value))),
            ("Progress", esc(pct(v.progress))),
            ("Source", esc(v.source)),
            ("Reported reward", esc(num(v.reward_reported))),
            ("Duration", esc(secs(v.duration))),
            ("Exit code", esc(v.exit_code)),
        ]))
        if v.message:
            parts.append(_pre(v.message))
        if v.tampered_paths:
            parts.append('<div class="ferr"><b>tampered paths:</b> '
                         + esc(", ".join(v.tampered_paths)) + "</div>")
        if v.checks:
            rows = [[badge("pass" if c.passed else "fail", "o-pass" if c.passed else "o-fail"),
                     f"<code>{esc(c.name)}</code>", f'<span class="num">{c.weight:g}</span>',
                     f'<span class="mono">{esc(c.message)}</span>' if c.message else ""]
                    for c in v.checks]
            parts.append(table(["", "Check", "Weight", "Message"], rows))
        else:
            parts.append('<p class="muted">The verifier reported no individual checks.</p>')
        log = log if log is not None else (v.log_tail or None)
    if log:
        parts.append(f"<details open><summary>verifier log (end)</summary>{_pre(log)}</details>")
    return "".join(parts)


def trial_page(
    run: Run,
    result: TrialResult,
    files: TrialFiles,
    *,
    cast: Cast | None,
    cast_error: str | None,
    siblings: list[TrialResult],
) -> str:
    """The page, written at ``trials/<task>/<attempt>.html`` (so the index is ``../../``)."""
    masked = is_masked(result)
    title = f"{result.task} · attempt {result.attempt}"
    outcome = result.outcome or "not verified"
    nav = " ".join(
        f'<a class="badge {outcome_class(s.outcome, is_masked(s))}" href="{href(f"{s.attempt}.html")}"'
        f' title="{esc(s.outcome or "not verified")}">#{s.attempt}</a>' if s.attempt != result.attempt
        else f'<span class="badge {outcome_class(s.outcome, is_masked(s))}"><u>#{s.attempt}</u></span>'
        for s in siblings
    )
    parts = [
        f'<div class="crumbs"><a href="../../index.html">← report</a> · {esc(run.model)} · '
        f"{esc(run.harness)}</div>",
        f"<h1>{esc(result.task)} <span class=\"muted\">· attempt {result.attempt}</span></h1>",
        f'<p class="sub">{badge(outcome, outcome_class(result.outcome, masked))} '
        + (badge("masked: infrastructure error, not scored", "o-masked") if masked else "")
        + f" &nbsp;attempts: {nav}</p>",
    ]
    rewards = ", ".join(f"{k} {v:.3g}" for k, v in sorted(result.rewards.items())) or "—"
    pairs = [
        ("Outcome", esc(outcome)),
        ("Strict success", "yes" if result.strict_success else "no"),
        ("Progress", esc(pct(result.progress))),
        ("Reward", esc(f"{result.reward:.3g}")),
        ("Rewards", esc(rewards)),
        ("Metrics", esc(", ".join(f"{k} {v:.3g}" for k, v in sorted(result.metrics.items())) or "—")),
        ("Termination", esc(result.termination)),
        ("Category", esc(result.category or "—")),
        ("Difficulty", esc(result.difficulty or "—")),
        ("Split", esc(result.split or "—")),
        ("Turns", esc(result.turns)),
        ("Commands", esc(result.commands)),
        ("Format errors", esc(result.format_errors)),
        ("Duration", esc(secs(result.duration))),
        ("Model time", esc(secs(result.model_seconds))),
        ("Environment time", esc(secs(result.env_seconds))),
        ("Verifier time", esc(secs(result.verify_seconds))),
        ("Prompt tokens", esc(num(result.prompt_tokens))),
        ("Completion tokens", esc(num(result.completion_tokens))),
        ("Starts", esc(f"{result.tries} (retried after infrastructure errors)" if result.tries > 1
                       else result.tries)),
    ]
    parts.append(kv(pairs))
    if result.error:
        parts.append(f'<div class="ferr"><b>error:</b> {esc(cap(result.error, 4000))}</div>')
    for problem in files.problems:
        parts.append(f'<div class="note">{esc(problem)}</div>')

    if result.steps:
        parts.append("<h2>Steps</h2>")
        parts.append('<p class="muted">A multi-step task: each step verified by its own tests, the reward '
                     'from the steps as its <code>multi_step_reward_strategy</code> says.</p>')
        parts.append(table(["Step", "", "Reward", "Progress"], [
            [f"<code>{esc(s.get('name'))}</code>", badge(str(s.get("outcome")), outcome_class(s.get("outcome"), False)),
             '<span class="num">' + esc(format(float(s.get("reward") or 0), ".3g")) + "</span>",
             esc(pct(float(s.get("progress") or 0)))] for s in result.steps]))

    parts.append("<h2>Verifier</h2>")
    parts.append(_verifier(files.verifier, files.verification_raw, files.log))

    if files.artifacts:
        parts.append("<h2>Artifacts</h2>")
        parts.append('<p class="muted">Copied out of the sandbox after the run, into '
                     f'<code>trials/{esc(result.task)}/{result.attempt}/artifacts/</code> of the run directory.</p>')
        rows = [[f"<code>{esc(a.get('source', ''))}</code>", f"<code>{esc(a.get('destination') or '.')}</code>",
                 badge(str(a.get("status", "?")), "o-pass" if a.get("status") == "collected" else "o-fail"),
                 esc(", ".join(str(f) for f in (a.get("files") or [])[:20])
                     + (" ..." if len(a.get("files") or []) > 20 else "")),
                 f'<span class="num">{esc(num(a.get("bytes", 0)))}</span>', esc(a.get("reason") or "")]
                for a in files.artifacts]
        parts.append(table(["Source", "Saved as", "", "Files", "Bytes", "Reason"], rows))

    parts.append("<h2>Terminal recording</h2>")
    script = ""
    if cast is not None:
        parts.append(player_html(cast))
        script = PLAYER_JS
    elif cast_error:
        parts.append(f'<div class="note">The recording could not be replayed: {esc(cast_error)}</div>')
    else:
        parts.append('<div class="note">No terminal recording (recording.cast) for this trial.</div>')

    parts.append("<h2>Transcript</h2>")
    if files.trajectory is not None:
        parts.append(transcript(files.trajectory))
    else:
        parts.append('<div class="note">No trajectory (trajectory.json) for this trial'
                     + (" could be read." if any("trajectory" in p for p in files.problems) else ".")
                     + "</div>")
    return page(f"{title} · terminal-env report", "".join(parts), script=script)
