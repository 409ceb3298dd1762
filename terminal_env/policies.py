"""The simplest policies, used to check tasks and to test the pipeline end to end.

* ``NopPolicy`` does nothing and submits: a task it passes is a broken task.
* ``OraclePolicy`` runs the task's reference solution. ``solution/`` is copied into the sandbox
  only here, only for the oracle, and removed again before verification.
* ``ScriptedPolicy`` plays a fixed list of actions (the adversarial agents in the tests are these).

A policy sees the observation and the info dict and returns an action; ``on_reset(env)`` gives
policies that need it (the oracle) a look at the environment once per episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from .actions import Command, Submit

SOLUTION_DIR = "/solution"


class Policy:
    name = "policy"

    def on_reset(self, env: Any) -> None:  # noqa: B027 - optional hook
        pass

    def act(self, observation: str, info: dict[str, Any]) -> Any:
        raise NotImplementedError


class NopPolicy(Policy):
    name = "nop"

    def act(self, observation: str, info: dict[str, Any]) -> Any:
        return Submit()


class ScriptedPolicy(Policy):
    """Plays ``actions`` in order, then submits."""

    name = "scripted"

    def __init__(self, actions: Iterable[Any]):
        self.actions = list(actions)
        self._i = 0

    def on_reset(self, env: Any) -> None:
        self._i = 0

    def act(self, observation: str, info: dict[str, Any]) -> Any:
        if self._i >= len(self.actions):
            return Submit()
        self._i += 1
        return self.actions[self._i - 1]


class OraclePolicy(Policy):
    """Copies the task's solution in, runs it through the terminal, removes it, submits."""

    name = "oracle"

    def __init__(self, task: Any, timeout: float | None = None):
        self.task = task
        self.timeout = timeout or float(getattr(task, "agent_timeout", 600) or 600)
        self._step = 0

    def on_reset(self, env: Any) -> None:
        self._step = 0
        files = self.task.solution_files()
        if not files:
            raise ValueError(f"task {self.task.name!r} has no solution: the oracle cannot run")
        env.sandbox.write_files(
            {
                f"{SOLUTION_DIR}/{name.lstrip('/')}": src if isinstance(src, bytes) else Path(src).read_bytes()
                for name, src in files.items()
            },
            mode=0o755,
        )

    def act(self, observation: str, info: dict[str, Any]) -> Any:
        self._step += 1
        if self._step == 1:
            cmd = " ".join(self.task.solution_command)
            return Command(command=f"{cmd}; rm -rf {SOLUTION_DIR}", timeout=self.timeout)
        return Submit()


def run_episode(env: Any, policy: Policy, *, seed: int | None = None) -> tuple[float, dict[str, Any]]:
    """Reset, let ``policy`` act until the episode ends; return the final reward and info."""
    obs, info = env.reset(seed=seed)
    policy.on_reset(env)
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            return reward, info
