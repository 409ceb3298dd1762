"""The funnel of a self-rewrite run: how many episodes, playbooks and re-runs each stage kept,
why the others went, the time each stage took and the tokens each role used; read from the run's
files, so it is right after any resume."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from ..trajectory import Trajectory
from .playbook import Playbook, Verdict, reason_kinds

if TYPE_CHECKING:
    from .pipeline import RSRRun


def _tokens(trajs: list[Trajectory]) -> dict[str, int]:
    prompt = sum((t.completion.usage.prompt_tokens or 0) for tr in trajs for t in tr.turns if t.completion)
    completion = sum((t.completion.usage.completion_tokens or 0) for tr in trajs for t in tr.turns if t.completion)
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def _usage(objs: list[Any]) -> dict[str, int]:
    return {k: sum(int(o.usage.get(k) or 0) for o in objs) for k in ("prompt_tokens", "completion_tokens")}


def funnel(run: "RSRRun") -> dict[str, Any]:
    cfg = run.config
    attempts = {h: 0 for h in cfg.harnesses}
    successes = {h: 0 for h in cfg.harnesses}
    solved_by: dict[str, set[str]] = {}
    collect_dir = run.out / "collect"
    unplayable = sorted(collect_dir.glob("*/*.error")) if collect_dir.is_dir() else []
    collected = [(task, key, Trajectory.load(path)) for task, key, path in run._items("collect")]
    masked = 0
    for task, key, traj in collected:
        harness = key.rsplit("-", 1)[0]
        attempts[harness] = attempts.get(harness, 0) + 1
        masked += traj.masked
        if traj.strict_success and not traj.masked:
            successes[harness] = successes.get(harness, 0) + 1
            solved_by.setdefault(task, set()).add(harness)
    playbooks = [Playbook.load(p) for _, _, p in run._items("playbooks")]
    verdicts = [Verdict.load(p) for _, _, p in run._items("reviews")]
    rejected: dict[str, int] = {}
    for v in verdicts:
        for kind in set(reason_kinds(v.reasons)):
            rejected[kind] = rejected.get(kind, 0) + 1
    reruns = [Trajectory.load(p) for _, _, p in run._items("execute")]
    only_other = sorted(t for t, hs in solved_by.items() if "generic" not in hs)
    in_records: set[str] = set()
    written = 0
    data = run.out / "dataset" / "train.jsonl"
    if data.is_file():
        for line in data.open():
            row = json.loads(line)
            if not row.get("mixed_from"):
                in_records.add(row["task"])
                written += 1
    times_path = run.out / "stages.json"
    times = json.loads(times_path.read_text()) if times_path.is_file() else {}
    card_path = run.out / "dataset" / "card.json"
    build = json.loads(card_path.read_text()).get("left_out", {}) if card_path.is_file() else {}
    errors = {stage: len(list((run.out / stage).glob("*/*.error"))) if (run.out / stage).is_dir() else 0
              for stage in ("playbooks", "reviews")}
    return {
        "tasks": len(run.tasks),
        "mode": cfg.mode(),
        "roles": {r: cfg.role(r).describe(r) for r in ("collector", "planner", "reviewer", "executor")},
        "stand_ins": cfg.stand_ins(),
        "round": cfg.round,
        "seed": cfg.seed,
        "attempts": attempts,
        "unplayable_attempts": len(unplayable),
        "unplayable_tasks": len({p.parent.name for p in unplayable}),
        "masked": masked,
        "strict_successes": successes,
        "unique_tasks_solved": len(solved_by),
        "playbooks": len(playbooks),
        "plan_errors": errors["playbooks"],
        "reviewed": len(verdicts),
        "review_errors": errors["reviews"],
        "rejected": rejected,
        "reruns": len(reruns),
        "reruns_verified": sum(t.strict_success and not t.masked for t in reruns),
        "reruns_masked": sum(t.masked for t in reruns),
        "built": build,
        "records": written,
        "tasks_in_records": len(in_records),
        "solved_only_under_other_harnesses": len(only_other),
        "solved_only_under_other_harnesses_in_records": len(set(only_other) & in_records),
        "stages": {
            "collect": {**times.get("collect", {}), **_tokens([t for _, _, t in collected])},
            "plan": {**times.get("plan", {}), **_usage(playbooks)},
            "review": {**times.get("review", {}), **_usage(verdicts)},
            "execute": {**times.get("execute", {}), **_tokens(reruns)},
            "build": times.get("build", {}),
        },
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

