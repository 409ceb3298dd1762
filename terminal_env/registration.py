"""Gymnasium registration: ``gymnasium.make("terminal_env:TerminalEnv-v0", task=...)``.

A terminal is not deterministic (timings, process ids, clocks), so the spec says so; Gymnasium's
checker then skips its step-determinism check instead of us silencing it.
"""

from __future__ import annotations

import gymnasium as gym

ENV_ID = "TerminalEnv-v0"


def register_envs() -> None:
    if ENV_ID not in gym.registry:
        gym.register(
            id=ENV_ID,
            entry_point="terminal_env.env:TerminalEnv",
            nondeterministic=True,
            disable_env_checker=False,
        )
