"""Fit a growing conversation into the model's input budget.

The full conversation is always kept in the trajectory; what is cut here only changes what one
request sends, and the cut is recorded (:class:`~terminal_env.trajectory.ContextEvent`):

1. the oldest observations (user and tool messages after the task statement, except the most
   recent ones) have their content replaced by a short note saying how much was elided;
2. if that is not enough, the oldest whole turns (an assistant message and the observations that
   answer it) are left out, and the task statement says how many;
3. if that is still too much, the recent observations are elided too and the newest one is cut in
   the middle;
4. if the system prompt, the task and the last model reply alone do not fit,
   :class:`ContextOverflowError`.

The system prompt and the first user message (the task) are never cut, and a ``tool`` message is
never separated from the assistant message whose call it answers.
"""

from __future__ import annotations

from typing import Any, Callable

from .models.base import ContextOverflowError, count_tokens_approx

Counter = Callable[[list[dict[str, Any]]], int]

ELIDED = "[terminal-env: {n} characters of earlier output elided to fit the context window]"
DROPPED = "\n\n[terminal-env: {n} earlier turns were left out to fit the context window]"


def _head_len(messages: list[dict[str, Any]]) -> int:
    """System prompt(s) and the first user message: never cut."""
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            return i + 1
    return len(messages)


def fit_messages(
    messages: list[dict[str, Any]],
    budget: int,
    *,
    count: Counter | None = None,
    keep_recent: int = 3,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Messages to send within ``budget`` tokens, and a description of the cut (None if none).

    >>> msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    >>> msgs += [{"role": "assistant", "content": "ls"}, {"role": "user", "content": "x" * 4000}] * 3
    >>> sent, event = fit_messages(msgs, 2500)
    >>> event["kind"], event["messages"]
    ('elided', [3])
    >>> "elided" in sent[3]["content"], sent[-1]["content"] == "x" * 4000
    (True, True)
    """
    count = count or (lambda ms: count_tokens_approx(ms))
    before = count(messages)
    if before <= budget:
        return messages, None
    out = [dict(m) for m in messages]
    head = _head_len(out)
    sizes = [count([m]) for m in out]
    total = before
    elided: list[int] = []
    last_protected = max(head, len(out) - keep_recent)
    for i in range(head, last_protected):
        if total <= budget:
            break
        m = out[i]
        if m.get("role") in ("user", "tool") and len(m.get("content") or "") > 200:
            m["content"] = ELIDED.format(n=len(m["content"]))
            new = count([m])
            total -= sizes[i] - new
            sizes[i] = new
            elided.append(i)
    if total <= budget:
        return out, {"kind": "elided", "messages": elided, "tokens_before": before, "tokens_after": total}

    # Drop whole turns, oldest first: a turn starts at an assistant message.
    starts = [i for i in range(head, len(out)) if out[i].get("role") == "assistant"]
    dropped_until = head
    n_turns = 0
    for k, start in enumerate(starts[:-1]):  # never the last turn
        end = starts[k + 1]
        total -= sum(sizes[start:end])
        dropped_until, n_turns = end, n_turns + 1
        if total <= budget:
            break
    kept = out[:head] + out[dropped_until:]
    if n_turns:
        kept[head - 1] = dict(kept[head - 1])
        kept[head - 1]["content"] = (kept[head - 1].get("content") or "") + DROPPED.format(n=n_turns)
    after = count(kept)
    last_notes: list[int] = []
    if after > budget:
        # Even the recent observations must go (all but the newest), then the newest is cut
        # in the middle: the model still sees how the last command began and ended.
        offset = dropped_until - head
        for j in range(head, len(kept) - 1):
            m = kept[j]
            if after <= budget:
                break
            if m.get("role") in ("user", "tool") and len(m.get("content") or "") > 200:
                old = count([m])
                m["content"] = ELIDED.format(n=len(m["content"]))
                after -= old - count([m])
                last_notes.append(j + offset)
        last = kept[-1]
        if after > budget and last.get("role") in ("user", "tool"):
            text = last.get("content") or ""
            excess_chars = int((after - budget) * 3.5) + 200
            keep = max(0, len(text) - excess_chars)
            if keep > 0:
                note = f"\n[terminal-env: {len(text) - keep} characters elided to fit the context window]\n"
                last["content"] = text[: keep // 2] + note + text[len(text) - keep // 2 :]
                last_notes.append(len(out) - 1)
                after = count(kept)
    if after > budget:
        raise ContextOverflowError(
            f"the conversation needs ~{after} input tokens even after cutting old turns; the budget "
            f"is {budget} (max_input_tokens). Raise the budget or shorten the task's instruction."
        )
    dropped = list(range(head, dropped_until))
    return kept, {
        "kind": "dropped" if n_turns else "elided",
        "messages": sorted((set(elided) | set(last_notes)) - set(dropped)) + dropped,
        "tokens_before": before,
        "tokens_after": after,
    }
