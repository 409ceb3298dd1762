"""A minimal Gymnasium loop: reset, a few shell commands, submit, and the verifier's verdict.

    python examples/gym_loop.py

What it shows: ``TerminalEnv``, here on the bundled task ``td-csv-region-totals`` (train split),
is an ordinary ``gymnasium.Env`` over one Docker container and one persistent bash. Actions are
text (a shell command, or ``#!submit``) or the typed ``Command`` / ``Submit`` objects of
``terminal_env.actions``; the reward arrives on the step that ends the episode, once the task's
protected verifier has run its hidden tests. Here the commands are written by hand (they solve
the task); an agent or a trainer would choose them instead.

Needs the Docker engine and the base image (``bash scripts/setup.sh``); the task's image is built
on first use and cached. Exits 1 unless the episode ends in a verified success.
"""

from __future__ import annotations

import sys
from pathlib import Path

from terminal_env import Command, Submit, TerminalEnv

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tasks" / "td-csv-region-totals"  # a bundled task of the train split

# The solution, typed as an agent would: write the script (a here-document), make it executable,
# try it on the sample. awk sums per region; `sort` gives byte order under LC_ALL=C.
SCRIPT = r"""cat > /app/region_totals.sh <<'EOF'
#!/bin/bash
echo "region,orders,units,revenue"
awk -F, 'NR > 1 && NF >= 4 { n[$1]++; u[$1] += $3; r[$1] += $3 * $4 }
  END { for (k in n) printf "%s,%d,%d,%.2f\n", k, n[k], u[k], r[k] }' "$1" | LC_ALL=C sort -t, -k1,1
EOF"""
COMMANDS = [
    "head -3 /app/data/sales_sample.csv",  # look at the data first
    SCRIPT,  # multi-line commands are fine: they are sourced in the same shell
    "chmod +x /app/region_totals.sh",
    "/app/region_totals.sh /app/data/sales_sample.csv",
]


def main() -> int:
    # reward="binary": 1.0 for a strict success (every hidden check passed), else 0.0. Budgets
    # (max_steps, time_limit, command_timeout) are keyword arguments too.
    env = TerminalEnv(str(TASK), reward="binary", max_steps=10, command_timeout=30)
    try:
        obs, info = env.reset(seed=0)
        print(f"--- reset: task {info['task']} in container {info['container']}, "
              f"{info['timings']['reset_total']:.2f} s")
        print(obs)  # the instruction, and where the shell is

        for command in COMMANDS:
            # A plain string works as well: env.step(command). The typed form can carry its own
            # timeout: Command(command=..., timeout=10).
            obs, reward, terminated, truncated, info = env.step(Command(command=command))
            first, *rest = command.splitlines()
            print(f"\n$ {first}{' ...' if rest else ''}")
            print(obs.rstrip() or "(no output)")
            print(f"  [exit {info['exit_code']}, {info['duration']:.2f} s]")
            if terminated or truncated:  # out of budget: the episode was verified already
                break
        else:
            # Submitting ends the episode (terminated=True) and runs the hidden tests. The text
            # form is env.step("#!submit").
            obs, reward, terminated, truncated, info = env.step(Submit())
    finally:
        env.close()  # removes the container; always close, even after an error

    result = info["verification"]  # a terminal_env.verify.VerifierResult
    print(f"\n--- {obs}")
    print(f"reward {reward}  outcome {result.outcome.value}  progress {result.progress:.2f}")
    for check in result.checks:
        print(f"  {'PASS' if check.passed else 'FAIL'}  {check.name} (weight {check.weight:g})")
    return 0 if terminated and result.strict_success and reward == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
