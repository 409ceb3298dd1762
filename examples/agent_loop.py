"""One episode by hand: a TerminalEnv, a harness and a model backend, and the trajectory.

    python examples/agent_loop.py                      # the task's oracle, in the generic harness
    python examples/agent_loop.py --harness terminus --base-url http://127.0.0.1:8000/v1 --model NAME

The trajectory keeps the conversation, the token ids and log-probs when the backend gives them,
and for every harness action the generic commands it ran: what trainers and the self-rewrite
pipeline start from.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from terminal_env import TerminalEnv
from terminal_env.agent import run_agent
from terminal_env.harness import get_harness
from terminal_env.models.base import SamplingParams
from terminal_env.models.registry import make_backend

TASK = str(Path(__file__).resolve().parent.parent / "tests/data/tasks/harbor-sum")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default=TASK)
    ap.add_argument("--harness", default="generic")
    ap.add_argument("--base-url")
    ap.add_argument("--model")
    args = ap.parse_args()
    backend = (make_backend(f"openai:{args.model}", base_url=args.base_url) if args.model
               else make_backend("oracle"))
    env = TerminalEnv(args.task, reward="strict_success_first")
    try:
        traj = run_agent(env, get_harness(args.harness), backend, params=SamplingParams(logprobs=True),
                         trajectory_path="trajectory.json")
    finally:
        env.close()
    print(f"{traj.task.name}: {traj.termination}, outcome {traj.outcome}, reward {traj.reward}")
    print("generic commands:", traj.generic_commands())
    print("saved trajectory.json; export with: terminal-env export trajectory.json --format atif")


if __name__ == "__main__":
    main()
