"""One episode by hand: a TerminalEnv, a harness and a model backend, and the trajectory.

    python examples/agent_loop.py                       # typed-oracle, generic harness
    python examples/agent_loop.py --harness terminus    # the same solution, in Terminus's JSON
    python examples/agent_loop.py --harness terminus --base-url URL --model NAME  # a real model

What it shows: ``run_agent(env, harness, backend)`` is the one agent loop. The harness turns
observations into chat messages and the model's replies into actions; every harness action
compiles to the generic actions (``Command``, ``Keys``, ``Submit``) that step the environment.
The result is a verified ``Trajectory``: the conversation, the token ids and log-probs when the
backend gives them, and for every harness action the generic commands it ran (what trainers and
the self-rewrite pipeline start from). It is saved as JSON and exports to chat JSONL or ATIF.

The default model is ``typed-oracle``: the task's reference solution typed command by command
in the chosen harness's own format (``generic``, ``terminus`` or ``tool-calling``; not ``react``,
whose ``<action>`` tags it does not write), so it runs without a model server. The default task
is the bundled ``td-csv-region-totals`` (train split). Needs the Docker engine and the base image
(``bash scripts/setup.sh``). Exits 1 unless the episode ends in a verified success (with a real
model: unless it was verified at all).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from terminal_env import TerminalEnv
from terminal_env.agent import run_agent
from terminal_env.harness import available_harnesses, get_harness
from terminal_env.models.base import SamplingParams
from terminal_env.models.registry import make_backend

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tasks" / "td-csv-region-totals"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default=str(TASK), help="a task directory (default: %(default)s)")
    ap.add_argument("--harness", default="generic", choices=available_harnesses())
    ap.add_argument("--base-url", help="an OpenAI-compatible server; with --model")
    ap.add_argument("--model", help="the model it serves (default: the typed-oracle, no server)")
    ap.add_argument("--save", help="where to write the trajectory (default: a temporary directory)")
    args = ap.parse_args()

    backend = (make_backend(f"openai:{args.model}", base_url=args.base_url) if args.model
               else make_backend("typed-oracle"))
    save = Path(args.save or Path(tempfile.mkdtemp(prefix="terminal-env-")) / "trajectory.json")
    env = TerminalEnv(args.task, reward="strict_success_first")
    try:
        traj = run_agent(env, get_harness(args.harness), backend,
                         params=SamplingParams(logprobs=True), max_turns=30, trajectory_path=save)
    finally:
        env.close()

    print(f"{traj.task.name} ({traj.harness} harness, model {traj.model.name}): "
          f"{traj.termination}, outcome {traj.outcome}, reward {traj.reward}, "
          f"{len(traj.turns)} turns")
    print("\nthe model's first reply:")
    print(traj.turns[0].completion.text if traj.turns and traj.turns[0].completion else "(none)")
    print("\nthe generic commands it ran:")
    for command in traj.generic_commands():
        first, *rest = command.splitlines()
        print(f"  {first}{f'  (+{len(rest)} lines)' if rest else ''}")
    print(f"\nsaved {save}; export with: terminal-env export {save} --format atif")
    if args.model:
        return 0 if traj.verification is not None else 1
    return 0 if traj.strict_success else 1


if __name__ == "__main__":
    sys.exit(main())
