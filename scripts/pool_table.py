"""docs/pool.md from the JSON rows of `terminal-env tasks check --json` (see pool-check.sh)."""

from __future__ import annotations

import json
import sys
from collections import Counter


def main(path: str) -> None:
    rows = json.load(open(path))
    ok = sum(r["ok"] for r in rows)
    build = sum(r["build_s"] or 0 for r in rows)
    check = sum(r["check_s"] or 0 for r in rows)
    print("# The bundled task pool\n")
    print(f"{len(rows)} tasks; {ok} pass the quality gate (oracle strict success, nop no success, "
          f"snoop finds nothing). Summed build time {build:.0f} s (cached afterwards), summed "
          f"check time {check:.0f} s, measured by `bash scripts/pool-check.sh` on a 2-core machine.\n")
    for key in ("category", "difficulty", "split"):
        counts = Counter(r[key] for r in rows)
        print(f"- {key}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=str)))
    print("\n| task | category | difficulty | split | checks | build s | check s | gate |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["task"]):
        gate = "ok" if r["ok"] else "FAIL: " + r["reason"].replace("|", "/")[:120]
        print(f"| {r['task']} | {r['category']} | {r['difficulty']} | {r['split']} | {r['checks']} "
              f"| {r['build_s']} | {r['check_s']} | {gate} |")


if __name__ == "__main__":
    main(sys.argv[1])
