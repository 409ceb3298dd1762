"""``build``: verified re-runs of reviewed playbooks -> the SFT dataset, its card and its counts.

A re-run becomes a record only if it is a strict success of the protected verifier, it is a re-run
of the playbook now on disk (its key), and that playbook's verdict, given to that same playbook,
accepts it. The text that is trained is the re-run's own conversation under the generic harness:
the executor's replies as it wrote them (a model's reasoning kept as ``reasoning_content``), checked
again by the leak checks (a model executor may add what the playbook did not say). A model
executor's sentences about the playbook, which the trained model will never see, are taken out
of its replies; a reply whose command refers to it drops the record.

Then, per task, near duplicates are removed (commands compared after normalising the spellings
that differ only in form: ``write_file``'s here-document against a plain one, whitespace, ``;``
against ``&&``), at most ``max_per_task`` records are kept (the most different from each other),
and earlier rounds' records are mixed in at the stated ratios. ``dataset/train.jsonl`` loads
with ``datasets.load_dataset("json", ...)`` and is in TRL's conversational SFT format
(``messages`` of ``role``/``content``); ``loss_mask`` marks the assistant messages for
``terminal-env train sft``. ``dataset/card.json`` and ``dataset/README.md`` count it all.
"""

from __future__ import annotations

import difflib
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..fileio import write_atomic
from ..harness.generic import fenced_blocks
from ..trajectory import Trajectory
from .playbook import Playbook, Verdict

if TYPE_CHECKING:
    from .pipeline import RSRRun

#: a sentence of an executor's reply that speaks of the playbook it was shown
_PLAYBOOK_REF = re.compile(r"\bplay ?book\b|\b(step|steps) \d+\b|\bas (planned|instructed|given)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_MKDIR = re.compile(r'mkdir -p "\$\(dirname [^)]*\)" && ')
_RESTORE = re.compile(r'^printf %s "\$\(cat [^)]*\)" > \S+$')


def conversation(rerun: Trajectory, model_executor: bool) -> tuple[list[dict[str, Any]], int] | None:
    """The messages to train on and how many replies were rewritten, or None when a reply's
    command refers to the playbook (the record cannot be made clean)."""
    reasoning = {t.message_index: t.completion.reasoning for t in rerun.turns
                 if t.message_index is not None and t.completion is not None and t.completion.reasoning}
    messages, rewritten = [], 0
    for i, m in enumerate(rerun.messages):
        m = {"role": m.get("role"), "content": m.get("content") or ""}
        if m["role"] == "assistant":
            if model_executor:
                text, changed = _without_playbook_talk(m["content"])
                if text is None:
                    return None
                m["content"], rewritten = text, rewritten + changed
            if reasoning.get(i):
                m["reasoning_content"] = reasoning[i]
        messages.append(m)
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()  # nothing is learnt from what follows the last reply
    return messages, rewritten


def _without_playbook_talk(text: str) -> tuple[str | None, int]:
    blocks, _ = fenced_blocks(text)
    if any(_PLAYBOOK_REF.search(body) for _, body, _ in blocks):
        return None, 0
    parts = re.split(r"(`{3,}[^\n]*\n.*?`{3,})", text, flags=re.S)
    changed = 0
    for n in range(0, len(parts), 2):  # the prose between the fenced blocks
        sentences = _SENTENCE.split(parts[n])
        kept = [s for s in sentences if not _PLAYBOOK_REF.search(s)]
        if len(kept) != len(sentences):
            changed = 1
            parts[n] = " ".join(s.strip() for s in kept if s.strip()) + ("\n\n" if n + 1 < len(parts) else "")
    return "".join(parts).strip(), changed


def normalised_commands(messages: list[dict[str, Any]]) -> list[str]:
    """The commands of the assistant's replies in one spelling, for comparing two records."""
    out = []
    for m in messages:
        if m["role"] != "assistant":
            continue
        blocks, _ = fenced_blocks(m["content"])
        for _, body, _ in blocks:
            for line in re.split(r"\n|;|&&", _MKDIR.sub("", body)):
                line = " ".join(line.split())
                if line and not _RESTORE.match(line) and line != "#!submit":
                    out.append(line)
    return out


def similarity(a: list[str], b: list[str]) -> float:
    """How alike two normalised command lists are (1.0: the same)."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _dedupe_and_cap(records: list[dict[str, Any]], threshold: float, cap: int | None) -> tuple[list, int, int]:
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_task.setdefault(r["task"], []).append(r)
    kept, near, over = [], 0, 0
    for rows in by_task.values():
        unique: list[tuple[dict[str, Any], list[str]]] = []
        for r in rows:
            cmds = normalised_commands(r["messages"])
            if any(similarity(cmds, c) >= threshold for _, c in unique):
                near += 1
            else:
                unique.append((r, cmds))
        chosen = unique[:1]
        rest = unique[1:]
        while rest and (cap is None or len(chosen) < cap):  # the one least like those chosen, next
            best = min(rest, key=lambda x: max(similarity(x[1], c) for _, c in chosen))
            chosen.append(best)
            rest.remove(best)
        over += len(rest)
        kept += [r for r, _ in sorted(chosen, key=lambda x: rows.index(x[0]))]
    return kept, near, over


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """An RSR dataset's records (``train.jsonl``, or a run directory holding one); anything else
    is refused with what to give instead."""
    p = Path(path)
    if p.is_dir():
        p = p / "dataset" / "train.jsonl" if (p / "dataset").is_dir() else p / "train.jsonl"
    if not p.is_file():
        raise ConfigError(f"{path}: no self-rewrite dataset there (give OUT/dataset/train.jsonl of an 'rsr build')")
    rows = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict) or row.get("kind") != "rsr-rendered":
            raise ConfigError(f"{p}:{n}: not a self-rewrite record (no \"kind\": \"rsr-rendered\"); "
                              "--mix takes the dataset an earlier 'rsr build' wrote")
        rows.append(row)
    return rows


def build_dataset(run: "RSRRun") -> dict[str, Any]:
    cfg = run.config
    order = {h: i for i, h in enumerate(cfg.harnesses)}
    stats: Counter = Counter()
    candidates = []
    for task, key, path in run._items("execute"):
        rerun = Trajectory.load(path)
        if not rerun.strict_success or rerun.masked:
            continue
        stats["verified"] += 1
        pb_path, verdict_path = run.path("playbooks", task, key), run.path("reviews", task, key)
        if not pb_path.is_file() or not verdict_path.is_file():
            stats["stale"] += 1
            continue
        playbook, verdict = Playbook.load(pb_path), Verdict.load(verdict_path)
        if (rerun.extra.get("rsr") or {}).get("key") != playbook.key or verdict.playbook_key != playbook.key:
            stats["stale"] += 1  # a re-run or verdict of another playbook than the one on disk
            continue
        if not verdict.accepted:
            stats["rejected_by_review"] += 1
            continue
        model_executor = (rerun.extra.get("rsr") or {}).get("executor", "replay") != "replay"
        conv = conversation(rerun, model_executor)
        if conv is None:
            stats["refers_to_playbook"] += 1
            continue
        messages, rewritten = conv
        checks = run.leak_checks(task)
        leaks = [r for i, m in enumerate(messages) if m["role"] == "assistant"
                 for r in checks.review_text(f"{m['content']}\n{m.get('reasoning_content') or ''}", f"message {i}")]
        if leaks:
            stats["executor_leaks"] += 1
            continue
        stats["rewritten_replies"] += rewritten
        candidates.append((task, key, rerun, playbook, verdict, messages))
    candidates.sort(key=lambda x: (x[0], order.get(x[1].rsplit("-", 1)[0], 99), int(x[1].rsplit("-", 1)[1])))
    records = [_record(run, *c) for c in candidates]
    records, stats["near_duplicates"], stats["over_cap"] = _dedupe_and_cap(
        records, cfg.build.near_duplicate, cfg.build.max_per_task)
    this_round = len(records)
    rng = random.Random(cfg.build.seed)
    for source, ratio in sorted(cfg.build.mix.items()):
        earlier = read_records(source)
        want = round(ratio * this_round)
        taken = rng.sample(earlier, min(want, len(earlier)))
        for r in taken:
            r["mixed_from"] = str(source)
        stats[f"mixed_in:{source}"] = len(taken)
        if want > len(earlier):
            stats[f"mixed_short:{source}"] = want - len(earlier)
        records += taken
    out = run.out / "dataset"
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "train.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    card = dataset_card(run, records, dict(stats))
    write_atomic(out / "card.json", json.dumps(card, indent=1))
    write_atomic(out / "README.md", card_markdown(card))
    return {**dict(stats), "records": len(records), "records_this_round": this_round}


def _record(run: "RSRRun", task: str, key: str, rerun: Trajectory, playbook: Playbook, verdict: Verdict,
            messages: list[dict[str, Any]]) -> dict[str, Any]:
    cfg, t = run.config, run.tasks[task]
    return {
        "messages": messages,
        "loss_mask": [m["role"] == "assistant" for m in messages],
        "kind": "rsr-rendered",
        "sampled_tokens": False,
        "round": cfg.round,
        "mode": cfg.mode(),
        "stand_ins": cfg.stand_ins(),
        "task": task,
        "task_name": t.name,
        "category": t.category,
        "task_digest": playbook.task_digest,
        "source_harness": playbook.source.harness,
        "source_trajectory_id": playbook.source.trajectory_id,
        "source_attempt": playbook.source.attempt,
        "policy": playbook.source.policy,
        "weights": playbook.source.weights,
        "playbook": [s.model_dump(exclude_defaults=True) for s in playbook.steps],
        "playbook_key": playbook.key,
        "planner": playbook.planner,
        "review": verdict.model_dump(),
        "executor": rerun.model.name,
        "executor_weights": sorted({tr.completion.weights for tr in rerun.turns
                                    if tr.completion is not None and tr.completion.weights}) or None,
        "with_reasons": bool((rerun.extra.get("rsr") or {}).get("with_reasons")),
        "verifier": rerun.verification,
        "rerun_trajectory_id": rerun.id,
    }


def dataset_card(run: "RSRRun", records: list[dict[str, Any]], stats: dict[str, Any]) -> dict[str, Any]:
    cfg = run.config

    def count(field: str) -> dict[str, int]:
        return dict(sorted(Counter(str(r.get(field)) for r in records).items()))

    return {
        "records": len(records),
        "round": cfg.round,
        "mode": cfg.mode(),
        "stand_ins": cfg.stand_ins(),
        "roles": {r: cfg.role(r).describe(r) for r in ("collector", "planner", "reviewer", "executor")},
        "seed": cfg.seed,
        "build": cfg.build.model_dump(),
        "per_task": count("task"),
        "per_category": count("category"),
        "per_source_harness": count("source_harness"),
        "per_round": count("round"),
        "left_out": stats,
    }


def card_markdown(card: dict[str, Any]) -> str:
    lines = [f"# Self-rewrite dataset ({card['round'] or 'unnamed round'})", "",
             f"{card['records']} records, mode **{card['mode']}**, seed {card['seed']}.", ""]
    if card["stand_ins"]:
        lines += ["Roles played without a model (this is not self-rewrite data for them):", ""]
        lines += [f"- {s}" for s in card["stand_ins"]] + [""]
    lines += ["Roles:", ""] + [f"- {r}: {d}" for r, d in card["roles"].items()] + [""]
    for title, field in (("Per task", "per_task"), ("Per category", "per_category"),
                         ("Per source harness", "per_source_harness"), ("Per round", "per_round"),
                         ("Left out", "left_out")):
        lines += [f"## {title}", "", "| | records |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in card[field].items()] + [""]
    lines += ["Load with `datasets.load_dataset(\"json\", data_files=\"train.jsonl\")`; train with "
              "`terminal-env train sft --data train.jsonl` or TRL's SFTTrainer (the `messages` column).", ""]
    return "\n".join(lines)
