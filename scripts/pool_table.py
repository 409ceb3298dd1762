"""docs/pool.md from the JSON rows of `terminal-env tasks check --json` (see pool-check.sh), with
the per-split difficulty mix and the cross-split similarity report of the pool."""

from __future__ import annotations

import json
import sys
from collections import Counter

from terminal_env.tasks.pool import SPLITS, load_pool
from terminal_env.tasks.similarity import THRESHOLD, similar_pairs


def cell(text: str, n: int = 90) -> str:
    return (text or "-").replace("|", "/")[:n]


def main(path: str) -> None:
    rows = json.load(open(path))
    ok = sum(r["ok"] for r in rows)
    build = sum(r["build_s"] or 0 for r in rows)
    check = sum(r["check_s"] or 0 for r in rows)
    print("# The bundled task pool\n")
    print(f"{len(rows)} tasks; {ok} pass the quality gate: oracle strict success, nop no success, "
          "snoop finds nothing, and the probes for foolable tests hold (`rewrite`: with the "
          "inputs shrunken, no passing check read them and the oracle's changed outputs do not "
          "pass every check; `constant`: knowledge-free answers earn under 0.3; `instance`: a "
          "second build without cache gives the same files). "
          f"Summed build time {build:.0f} s (cached afterwards), summed check time {check:.0f} s, "
          "measured by `bash scripts/pool-check.sh` on a 2-core machine.\n")
    for key in ("category", "difficulty", "split"):
        counts = Counter(r[key] for r in rows)
        print(f"- {key}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=str)))
    print("\nDifficulty by split (labels from the rubric in [difficulty.md](difficulty.md)):\n")
    print("| split | easy | medium | hard | categories |")
    print("|---|---|---|---|---|")
    for split in SPLITS:
        mine = [r for r in rows if r["split"] == split]
        d = Counter(r["difficulty"] for r in mine)
        cats = ", ".join(f"{k} {v}" for k, v in sorted(Counter(r["category"] for r in mine).items()))
        print(f"| {split} | {d['easy']} | {d['medium']} | {d['hard']} | {cats} |")
    pairs = similar_pairs(load_pool(splits=SPLITS, allow_test=True))
    over = [p for p in pairs if p.score >= THRESHOLD]
    print(f"\nCross-split similarity (`terminal-env tasks similar`): {len(over)} pair(s) at or above "
          f"the threshold {THRESHOLD}; the most alike pairs of different splits:\n")
    print("| similarity | task | split | task | split | shared |")
    print("|---|---|---|---|---|---|")
    for p in pairs[:8]:
        print(f"| {p.score:.3f} | {p.a} | {p.split_a} | {p.b} | {p.split_b} | "
              f"{', '.join(p.shared_files or p.words)} |")
    print("\n| task | category | difficulty | split | checks | build s | check s | rewrite | constant "
          "| instance | gate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["task"]):
        gate = "ok" if r["ok"] else "FAIL: " + cell(r["reason"], 120)
        print(f"| {r['task']} | {r['category']} | {r['difficulty']} | {r['split']} | {r['checks']} "
              f"| {r['build_s']} | {r['check_s']} | {cell(r.get('rewrite', '-'))} "
              f"| {cell(r.get('constant', '-'))} | {cell(r.get('instance', '-'))} | {gate} |")


if __name__ == "__main__":
    main(sys.argv[1])
