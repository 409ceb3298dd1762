"""A custom training loop around TerminalEnv: REINFORCE on generated toy tasks, no ML library.

    python examples/policy_gradient.py                   # 20 episodes, about 30 s
    python examples/policy_gradient.py --episodes 40 --lr 1.0 --seed 7

What it shows: the environment is all a trainer needs. The "policy" here is a table of six logits,
one per command template, and a softmax over them; each episode it samples a template, fills it
in from the observation (the number and the file the instruction names), runs it in a fresh
container, submits, and gets the reward of the task's real verifier. The logits are then moved
by REINFORCE: ``logits += lr * (reward - baseline) * grad log pi(action)``, where for a softmax
``grad log pi(action) = onehot(action) - pi``. The baseline is a moving average of the rewards.

The tasks are a generated toy family (``terminal_env.tasks.toy.write_toy_family``, the family the
reference trainer's benchmark uses): "Write the number 6411 to /app/answer.txt.", three of them,
one per episode in turn. Their hidden tests give partial credit (the file exists: 1, it holds one
number: 1, it is the right number: 2), and the reward ``strict_success_first`` turns that into
1.0 for a success and at most 0.5 * progress otherwise, so near misses are ordered but any
success outranks them. The policy must find the one template that solves every task.

A bandit this small can also get stuck on a near miss (about 7 seeds in 100 with these
defaults): the example exits 1 unless, at the end, the solving template is the most probable one
and the second half of the episodes earned more reward than the first.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import tempfile
import time

from terminal_env import Command, Submit, TerminalEnv
from terminal_env.tasks.toy import write_toy_family

# The action set: command templates; {n} and {path} come from the instruction.
TEMPLATES = [
    "touch {path}",  # the file exists, but is empty: 1/4 of the checks' weight
    "echo $(({n} + 1)) > {path}",  # one number, the wrong one: 2/4
    "echo {n} > /tmp/answer.txt",  # the wrong file: nothing
    "echo {n} > {path}",  # the solution
    "echo {n} {n} > {path}",  # two numbers where one is asked for: 1/4
    "cat {path}",  # only looks: nothing
]
SOLUTION = 3
INSTRUCTION = re.compile(r"Write the number (\d+) to (\S+)\.")


def softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1.5, help="step size of the logits")
    ap.add_argument("--seed", type=int, default=1, help="seeds the policy's sampling")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    logits = [0.0] * len(TEMPLATES)
    baseline = 0.0
    rewards: list[float] = []

    with tempfile.TemporaryDirectory(prefix="toy-tasks-") as tmp:
        # Three ordinary task directories (instruction, Dockerfile, hidden tests, solution).
        paths = write_toy_family(tmp, n_train=3, n_validation=0, kind="write-number", seed=0)
        tasks = [str(p) for p in paths]
        env = TerminalEnv(tasks[0], reward="strict_success_first", max_steps=4, command_timeout=10)
        try:
            for episode in range(args.episodes):
                t0 = time.monotonic()
                # reset() starts a fresh container; options={"task": ...} switches the task.
                obs, _ = env.reset(options={"task": tasks[episode % len(tasks)]})
                match = INSTRUCTION.search(obs)
                if match is None:
                    print(f"unexpected instruction: {obs!r}")
                    return 1
                n, path = match.groups()

                # Act: sample a template from the policy, run it, submit.
                probs = softmax(logits)
                action = rng.choices(range(len(TEMPLATES)), weights=probs)[0]
                command = TEMPLATES[action].format(n=n, path=path)
                env.step(Command(command=command))
                _, reward, _, _, info = env.step(Submit())
                if info["masked"]:  # the infrastructure failed, not the policy: never learn from it
                    print(f"episode {episode + 1:2d}  masked: {info['verification'].message}")
                    continue
                rewards.append(reward)

                # Learn: REINFORCE, one episode at a time; the baseline: a moving average.
                advantage = reward - baseline
                for i in range(len(logits)):
                    logits[i] += args.lr * advantage * ((i == action) - probs[i])
                baseline = 0.5 * baseline + 0.5 * reward

                outcome = info["verification"].outcome.value
                print(f"episode {episode + 1:2d}  reward {reward:.3f} ({outcome:7s})  "
                      f"p(solution) {softmax(logits)[SOLUTION]:.2f}  {command!r}  "
                      f"{time.monotonic() - t0:.1f} s")
        finally:
            env.close()

    half = len(rewards) // 2
    first = sum(rewards[:half]) / max(half, 1)
    second = sum(rewards[half:]) / max(len(rewards) - half, 1)
    probs = softmax(logits)
    print(f"\nmean reward: first half {first:.3f}, second half {second:.3f}")
    print("final policy:")
    for p, template in sorted(zip(probs, TEMPLATES), reverse=True):
        print(f"  {p:.3f}  {template}")
    learned = max(range(len(probs)), key=probs.__getitem__) == SOLUTION and second > first
    print("learned the solving command" if learned else "did NOT learn the solving command")
    return 0 if learned else 1


if __name__ == "__main__":
    sys.exit(main())
