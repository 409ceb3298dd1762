"""Verification overhead: what protected verification costs beyond the tests' own run time.

Usage: python benchmarks/verify_overhead.py [--n 10] [--task DIR]

For each of n oracle episodes of a small task (default: the test fixture `word-stats`), the
protected verifier's phases are timed: freezing the agent's processes, the tamper check
(`docker diff` against the image), resetting and copying the tests, the tests themselves, and
reading the results back. Overhead = total verification time - the tests' own run time.
Baseline, measured in the same run on a fresh container of the same image: `docker exec` of the
same test command with the tests already in place (the cheapest possible unprotected verifier),
whose own cost beyond an empty exec is the floor any verifier pays.

Target: overhead under 1.5 s per episode. Prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

from _common import log, stats

from terminal_env import Sandbox, SandboxConfig, TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.models.simple import OracleBackend
from terminal_env.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TASK = ROOT / "tests" / "data" / "protected" / "word-stats"

#: seconds in, {n, median_s, p90_s, mean_s, max_s} out
summary = partial(stats, fields=("n", "median", "p90", "mean", "max"), digits=4, suffix="_s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--task", type=Path, default=DEFAULT_TASK)
    args = ap.parse_args()
    task = load_task(args.task)
    env = TerminalEnv(task, reward="binary", max_steps=5)
    phases: dict[str, list[float]] = {}
    overhead, rewards = [], []
    try:
        for i in range(args.n):
            reward, info = run_episode(env, OracleBackend())
            rewards.append(reward)
            t = dict(env.verifier.last_timings)
            for k, v in t.items():
                phases.setdefault(k, []).append(v)
            overhead.append(t["total"] - t.get("tests", 0.0))
            log(f"episode {i}: reward {reward}, verify {t['total']:.3f} s")
        image = env.task.image
    finally:
        env.close()

    # Baseline: the same tests with no protection, in a fresh container of the same image.
    base_total, base_empty = [], []
    with Sandbox(SandboxConfig(image=image, task="verify-baseline")) as sb:
        sb.exec(["mkdir", "-p", "/tests", "/logs/verifier"], user="root")
        sb.write_files(
            {f"/tests/{n}": p if isinstance(p, bytes) else open(p, "rb").read()
             for n, p in task.verifier_files().items()},
            mode=0o755,
        )
        for _ in range(args.n):
            t0 = time.perf_counter()
            sb.exec(list(task.test_command), user="root", timeout=task.verifier_timeout)
            base_total.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            sb.exec(["true"], user="root")
            base_empty.append(time.perf_counter() - t0)

    out = {
        "benchmark": "verify_overhead",
        "task": task.name,
        "rewards": rewards,
        "protected": {k: summary(v) for k, v in phases.items()},
        "overhead_beyond_tests": summary(overhead),
        "baseline_unprotected_exec_of_tests": summary(base_total),
        "baseline_empty_exec": summary(base_empty),
        "target_overhead_lt_1_5_s": statistics.median(overhead) < 1.5,
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
