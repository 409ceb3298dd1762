"""The self-rewrite pipeline from Python: verified successes under three harnesses -> SFT data.

    python examples/rsr_pipeline.py                     # two bundled train tasks, typed-oracle
    python examples/rsr_pipeline.py --out rsr/r1 --tasks td-csv-region-totals td-fixed-width-ledger

What it shows: ``RSRRun`` runs the five stages of Recursive Self-Rewrite into one directory
(the same as ``terminal-env rsr all``), each stage resumable:

* collect: one policy plays each task under the generic, terminus and tool-calling harnesses;
  only strict successes of the protected verifier are kept;
* plan: each kept trajectory becomes a harness-neutral playbook (the shell steps that solved it);
* review: leak checks (does a step copy an answer out of the hidden tests?);
* execute: each accepted playbook is re-run from scratch under the generic harness and verified;
* build: the verified re-runs become chat JSONL with an assistant-only loss mask and provenance
  (``dataset/train.jsonl``), near duplicates removed, a dataset card, and the funnel
  (``dataset/funnel.json``).

The policy is ``typed-oracle`` (each task's reference solution typed as an agent's commands, in
each harness's own format) and every other role its model-free stand-in, so no model is needed
(the funnel and the records say so: ``mode: model-free``). For the recipe's self-rewrite, the
policy plays every role: ``RSRConfig(tasks=..., collector=Role(spec="openai:NAME",
options={"base_url": ...})).with_self()``. Only train-split tasks are accepted. Needs
the Docker engine and the base image (``bash scripts/setup.sh``). Prints the funnel and the first
record's provenance; exits 1 unless both tasks end up in the dataset.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from terminal_env.rsr import HARNESSES, Role, RSRConfig, RSRRun

ROOT = Path(__file__).resolve().parent.parent
TASKS = [str(ROOT / "tasks" / name) for name in ("td-csv-region-totals", "td-csv-customer-totals")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=TASKS, help="train-split task directories")
    ap.add_argument("--out", help="the run directory (default: a temporary one, removed after)")
    args = ap.parse_args()
    tasks = [str(ROOT / "tasks" / t) if not Path(t).exists() else t for t in args.tasks]

    with tempfile.TemporaryDirectory(prefix="rsr-") as tmp:
        out = Path(args.out or tmp)
        config = RSRConfig(tasks=tasks, harnesses=list(HARNESSES), collector=Role(spec="typed-oracle"),
                           attempts=1, concurrency=2)
        run = RSRRun(out, config, log=print)  # an existing run directory is resumed
        run.run()  # collect, plan, review, execute, build

        # The funnel as the build stage wrote it: how many episodes, playbooks, re-runs and
        # records each stage let through. (Records: near duplicates are removed per task; the
        # terminus playbook types the same commands as the generic one.)
        funnel = json.loads((out / "dataset" / "funnel.json").read_text())
        print("\nfunnel:")
        for key in ("mode", "tasks", "attempts", "strict_successes", "unique_tasks_solved", "playbooks",
                    "reviewed", "rejected", "reruns", "reruns_verified", "records"):
            print(f"  {key:20s} {funnel[key]}")

        lines = (out / "dataset" / "train.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        if not records:
            print("no record was written")
            return 1
        first = records[0]
        print(f"\n{len(records)} record(s) in {out / 'dataset' / 'train.jsonl'}; "
              "the first one's provenance:")
        keys = ("kind", "mode", "task", "task_digest", "source_harness", "source_attempt",
                "source_trajectory_id", "policy", "planner", "executor", "rerun_trajectory_id")
        provenance = {k: first[k] for k in keys}
        provenance["review"] = {k: first["review"][k] for k in ("accepted", "reviewers")}
        provenance["verifier"] = {k: first["verifier"][k] for k in ("outcome", "strict_success")}
        print(json.dumps(provenance, indent=1))
        roles = [m["role"] for m, trained in zip(first["messages"], first["loss_mask"]) if trained]
        print(f"{len(first['messages'])} messages, {len(roles)} of them trained on "
              f"(roles: {sorted(set(roles))})")
        print(f"playbook: {[(step.get('command') or str(step.get('keys'))).splitlines()[0] for step in first['playbook']]}")

        in_dataset = {r["task"] for r in records}
        expected = {Path(t).name for t in tasks}
        return 0 if in_dataset == expected else 1


if __name__ == "__main__":
    sys.exit(main())
