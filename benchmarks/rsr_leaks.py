"""The RSR leak checks against a labelled set of playbooks, and against the reference solutions.

Usage: python benchmarks/rsr_leaks.py [--part tune|heldout|fresh|all] [--out FILE] [--no-solutions]

The labelled set (tests/data/rsr_leaks/cases.json) holds playbooks over small tasks of that
folder, each labelled leak or not, in parts split by task: ``tune`` (the rules were adjusted while
looking at it), ``heldout`` (measured once; two defects it showed were then fixed, so it is no
longer unseen) and ``fresh`` (written after those fixes, measured only). For each part: tp, fp,
fn, tn (a positive is a rejected playbook), precision and recall of the rejections, and the
misclassified case ids with the check's reasons.

Then the reference solutions of the bundled tasks of the train split (tasks/*/solution/solve.sh,
typed into commands as the typed oracle types them) are reviewed as playbooks: how many the
checks reject, and why. A solution that hard-codes an answer is a leak by the rule: the count
is reported as it is. Prints one JSON document on stdout (docs/rsr-leak-check.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _common import emit, log

from terminal_env.models.typed import UntypeableSolution, typed_commands
from terminal_env.rsr import LeakChecks, Playbook, PlaybookStep
from terminal_env.rsr.playbook import Source
from terminal_env.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
LABELLED = ROOT / "tests" / "data" / "rsr_leaks"
#: tune: looked at while writing the rules; heldout: measured once, then two defects it showed
#: were fixed; fresh: written after that, measured only (docs/rsr-leak-check.md)
PARTS = ["tune", "heldout", "fresh"]


def as_playbook(task: str, instruction: str, steps: list[dict]) -> Playbook:
    return Playbook(task=task, task_path=task, task_digest="-", instruction=instruction,
                    source=Source(trajectory_id="labelled", harness="generic", attempt=1, policy="-", path="-"),
                    steps=[PlaybookStep(command=s["command"], why=s.get("why", "")) for s in steps])


def labelled(part: str) -> dict:
    """Confusion counts per part of the labelled set."""
    cases = json.loads((LABELLED / "cases.json").read_text())["cases"]
    checks: dict[str, LeakChecks] = {}
    out = {}
    parts = sorted({c["part"] for c in cases}, key=PARTS.index)
    for name in (parts if part == "all" else [part]):
        counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
        wrong = []
        for case in (c for c in cases if c["part"] == name):
            task = LABELLED / case["task"]
            instruction = (task / "instruction.md").read_text()
            if case["task"] not in checks:
                checks[case["task"]] = LeakChecks(task, instruction=instruction)
            reasons = checks[case["task"]].review(as_playbook(case["task"], instruction, case["steps"]))
            rejected = bool(reasons)
            key = ("t" if rejected == case["leak"] else "f") + ("p" if rejected else "n")
            counts[key] += 1
            if key in ("fp", "fn"):
                wrong.append({"id": case["id"], "as": key, "label": case["reason"], "reasons": reasons[:3]})
        tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
        out[name] = {"cases": sum(counts.values()), **counts,
                     "precision": round(tp / (tp + fp), 3) if tp + fp else None,
                     "recall": round(tp / (tp + fn), 3) if tp + fn else None,
                     "misclassified": wrong}
    return out


def solutions() -> dict:
    """The bundled train tasks' reference solutions, reviewed as playbooks."""
    rejected, untypeable, reviewed = [], [], 0
    for task_dir in sorted(p.parent for p in (ROOT / "tasks").glob("*/task.toml")):
        task = load_task(task_dir)
        if task.split != "train":
            continue
        try:
            commands = typed_commands((task_dir / "solution" / "solve.sh").read_text())
        except UntypeableSolution as exc:
            untypeable.append({"task": task_dir.name, "why": str(exc)[:200]})
            continue
        checks = LeakChecks(task.path, tests_dir=task.tests_dir, environment_dir=task.environment_dir,
                            instruction=task.instruction)
        reasons = checks.review(as_playbook(task_dir.name, task.instruction, [{"command": c} for c in commands]))
        reviewed += 1
        if reasons:
            rejected.append({"task": task_dir.name, "reasons": reasons})
        log(f"{task_dir.name}: {'rejected' if reasons else 'accepted'}")
    return {"reviewed": reviewed, "rejected": len(rejected), "untypeable": untypeable, "rejections": rejected}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=[*PARTS, "all"], default="all")
    ap.add_argument("--no-solutions", action="store_true", help="skip the reference solutions")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    doc = {"commit": commit.stdout.strip() or None, "labelled": labelled(args.part)}
    if not args.no_solutions:
        doc["train_solutions"] = solutions()
    emit(doc, args.out)


if __name__ == "__main__":
    sys.exit(main())
