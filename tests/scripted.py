"""One episode of a scripted agent on a task, for the tests that attack tasks."""

from __future__ import annotations

from pathlib import Path

from terminal_env.actions import Command
from terminal_env.agent import run_episode
from terminal_env.env import TerminalEnv
from terminal_env.models.simple import ScriptedBackend
from terminal_env.tasks import load_task

POOL = Path(__file__).resolve().parents[1] / "tasks"


def play(task: str | Path, commands: list[str], *, timeout: float = 120, seen: list[str] | None = None):
    """(reward, verifier result) of one episode that runs ``commands`` and submits; ``task`` is
    a bundled task's name or a task directory. Rewarded by partial progress. ``seen`` receives
    each command's output, so that an attack test can show that the attack really ran."""
    path = POOL / task if isinstance(task, str) else Path(task)
    env = TerminalEnv(load_task(path), reward="partial_progress", max_steps=len(commands) + 5)

    def record(action, observation, info):
        if seen is not None:
            seen.append(observation)

    try:
        reward, info = run_episode(
            env, ScriptedBackend.of_actions([Command(command=c, timeout=timeout) for c in commands]),
            on_step=record)
    finally:
        env.close()
    result = info["verification"]
    assert result is not None, "no verifier ran"
    print(f"{path.name}: reward {reward:.2f}, {result.outcome.value}, "
          + ", ".join(f"{c.name}={'ok' if c.passed else 'FAIL'}" for c in result.checks))
    return reward, result
