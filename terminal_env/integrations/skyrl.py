"""Terminal tasks as a SkyRL-Gym text environment (extra ``[skyrl]``: ``pip install 'terminal-env[skyrl]'``).

::

    import skyrl_gym
    import terminal_env.integrations.skyrl as te_skyrl      # registers "terminal-env"

    rows = te_skyrl.task_rows("pool:generated:train")         # SkyRL dataset rows
    env = skyrl_gym.make("terminal-env", env_config={"reward": "partial_progress"}, extras=rows[0])
    messages, _ = env.init(rows[0]["prompt"])
    out = env.step(model_reply)          # {"observations", "reward", "done", "metadata"}

One environment is one episode of one task (SkyRL makes a new one per trajectory), played as a
:class:`~terminal_env.integrations.episode.TextEpisode`: the model's text is read by one of the
project's harnesses (``env_config["harness"]``, default ``generic``: one fenced bash block per
reply, ``#!keys ...`` for keystrokes, ``#!submit`` when done), through the same
:func:`terminal_env.agent.apply_completion` as every rollout of the project, so a reply means the
same here as in ``terminal-env run``. ``init`` replaces the row's prompt with the
harness's own first messages (its system prompt, the instruction, where the shell is).

The episode ends when the model submits, when the environment's step or time budget runs out, or
after ``max_turns`` replies (SkyRL's ``generator.max_turns``, passed in ``extras``): then the
protected verifier runs once and the last step carries its reward; every other step's reward is 0.

SkyRL-Gym has no way to drop one sample, so an episode that failed for a reason that is not the
agent's (the sandbox could not start or vanished, the verifier could not run) raises
:class:`~terminal_env.errors.InfraError` by default (``env_config["on_infra_error"] = "raise"``);
``"zero"`` gives reward 0 with ``metadata["masked"] = True`` and counts it in ``get_metrics()``,
for a trainer that filters on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InfraError
from .episode import EpisodeRecord, TextEpisode, load_tasks

try:
    import skyrl_gym  # the optional extra [skyrl]
    from skyrl_gym.envs.base_text_env import BaseTextEnv
except ImportError:  # the module still imports (documentation, doctests); using it says what to install
    skyrl_gym = None
    BaseTextEnv = object

#: the name the environment is registered under (``env_class`` of the dataset rows)
ENV_ID = "terminal-env"
#: what ``env_config`` may hold
CONFIG_KEYS = ("harness", "reward", "max_turns", "on_infra_error", "env")
INFRA_MODES = ("raise", "zero")


def _require_skyrl() -> None:
    if skyrl_gym is None:
        raise ConfigError("the SkyRL-Gym environment needs skyrl-gym: pip install 'terminal-env[skyrl]'")


def _config(env_config: Any) -> dict[str, Any]:
    """``env_config`` as a plain dict (SkyRL passes an OmegaConf DictConfig), unknown keys refused."""
    if env_config is None:
        return {}
    if not isinstance(env_config, dict):
        try:
            from omegaconf import OmegaConf  # skyrl-gym's own dependency (the optional extra [skyrl])

            env_config = OmegaConf.to_container(env_config, resolve=True)
        except (ImportError, ValueError):
            env_config = dict(env_config)
    unknown = sorted(set(env_config) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"env_config of {ENV_ID!r}: unknown key(s) {unknown}; known: {list(CONFIG_KEYS)}")
    mode = env_config.get("on_infra_error", "raise")
    if mode not in INFRA_MODES:
        raise ConfigError(f"env_config.on_infra_error={mode!r}: use one of {list(INFRA_MODES)}")
    return dict(env_config)


class TerminalTextEnv(BaseTextEnv):
    """One terminal task, one episode, text in and text out (see the module's documentation).

    ``extras`` is the dataset row: its ``task`` (or ``extra_info.task``) names the task directory;
    ``max_turns`` (SkyRL sets it from ``generator.max_turns``) bounds the model's replies.
    ``env_config``: ``harness`` (default ``generic``), ``reward`` (default ``binary``),
    ``max_turns`` (when ``extras`` has none; default 30), ``on_infra_error`` (``raise`` or
    ``zero``), ``env`` (the episode's budgets: :class:`~terminal_env.env.EnvConfig`'s fields)."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None,
                 on_episode: Callable[[EpisodeRecord], Any] | None = None):
        _require_skyrl()
        super().__init__()
        cfg = _config(env_config)
        extras = dict(extras or {})
        info = extras.get("extra_info") if isinstance(extras.get("extra_info"), dict) else {}
        self.task = extras.get("task") or info.get("task")
        if not self.task:
            raise ConfigError(
                f"{ENV_ID}: the row has no 'task' (nor extra_info.task) naming a task directory; it has "
                f"{sorted(extras)}. Build the rows with terminal_env.integrations.skyrl.task_rows(...)"
            )
        self.max_turns = int(extras.get("max_turns") or cfg.get("max_turns") or 30)
        if self.max_turns < 1:
            raise ConfigError(f"{ENV_ID}: max_turns must be at least 1, got {self.max_turns}")
        self.on_infra_error = cfg.get("on_infra_error", "raise")
        self._text = TextEpisode(harness=cfg.get("harness", "generic"), reward=cfg.get("reward", "binary"),
                                 config=cfg.get("env"), max_turns=self.max_turns, on_episode=on_episode)
        self.harness = self._text.harness

    # ------------------------------------------------------------------ SkyRL-Gym's API
    def init(self, prompt: Any = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Start the task's sandbox; the harness's first messages, and the task's name."""
        messages = self._text.begin(self.task)
        record = self._text.record
        if record is not None and record.masked:
            self._infra_failure()  # raises, or the episode is over with reward 0
        return messages, {"task": record.task if record else str(self.task)}

    def step(self, action: str) -> dict[str, Any]:
        """One model reply: run what it asks for; the next observation, or the verified reward."""
        if not isinstance(action, str):
            raise ConfigError(f"{ENV_ID}: an action is the model's reply as text, got {type(action).__name__}")
        if self._text.record is None:
            raise ConfigError(f"{ENV_ID}: call init() before step()")
        messages, format_error = self._text.reply(action)
        self.turns = self._text.turns
        if not self._text.over:
            return {"observations": messages, "reward": 0.0, "done": False,
                    "metadata": {"format_error": format_error}}
        record = self._text.record
        assert record is not None
        if record.masked:
            self._infra_failure()
        return {"observations": [], "reward": float(record.reward or 0.0), "done": True,
                "metadata": {"outcome": record.outcome, "masked": record.masked, "task": record.task}}

    def close(self) -> None:
        self._text.close()

    def get_metrics(self) -> dict[str, Any]:
        metrics = self._text.metrics()
        return {**metrics, "turns": int(metrics["turns"]), "commands": int(metrics["commands"]),
                "format_errors": int(metrics["format_errors"])}

    # ------------------------------------------------------------------ helpers
    def _infra_failure(self) -> None:
        record = self._text.record
        why = record.error if record is not None else "unknown"
        if self.on_infra_error == "raise":
            raise InfraError(f"{ENV_ID}: the episode of {self.task} failed for a reason that is not the agent's: "
                             f"{why} (env_config.on_infra_error='zero' scores it 0 with metadata.masked)")


def task_rows(tasks: str | Path | list[str | Path], *, allow_test: bool = False) -> list[dict[str, Any]]:
    """One SkyRL dataset row per task: ``prompt`` (the instruction as a user message; ``init``
    gives the harness's own), ``env_class`` (``terminal-env``), ``task`` (the task directory),
    ``reward_spec`` and ``extra_info`` (name, split, task). ``tasks``: what
    ``terminal-env run --tasks`` takes."""
    return [
        {"prompt": [{"role": "user", "content": t.instruction.rstrip()}], "env_class": ENV_ID,
         "task": str(t.path), "reward_spec": {"method": "terminal-env protected verifier"},
         "extra_info": {"task": str(t.path), "name": t.name, "split": t.split or ""}}
        for t in load_tasks(tasks, allow_test=allow_test)
    ]


def register(env_id: str = ENV_ID) -> str:
    """Register :class:`TerminalTextEnv` with SkyRL-Gym under ``env_id`` (done on import as
    ``terminal-env``); returns the id. Registering the same id again is harmless."""
    _require_skyrl()
    registry = skyrl_gym.envs.registration.registry
    if env_id not in registry:
        skyrl_gym.envs.register(id=env_id, entry_point=f"{__name__}:TerminalTextEnv")
    return env_id


if skyrl_gym is not None:
    register()
