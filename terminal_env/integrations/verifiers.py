"""Terminal tasks as an environment of the ``verifiers`` package, its v1 API (an optional install).

The extra ``[verifiers]`` installs it (tested with 0.4.0). That package pins ``openai<3`` and
``mcp==2.0.0``, which ``[openenv]`` cannot share, so it lives in a virtual environment of its own
(``scripts/setup.sh`` makes ``.venv-verifiers``; by hand: ``python -m venv .venv-verifiers &&
.venv-verifiers/bin/pip install -e '.[verifiers]'``). Its evaluation command loads this module by
the project's name (``terminal-env``: the package ``terminal_env`` hands over its taskset and
environment when asked, see the package's ``__getattr__``)::

    .venv-verifiers/bin/vf-eval terminal-env \\
        --env.taskset.tasks '["pool:train"]' --env.taskset.reward partial_progress \\
        -m MODEL --client.base-url http://127.0.0.1:8100/v1 -n 4 -r 2 --no-push --no-rich

The taskset (:class:`TerminalTaskset`) yields one task per terminal task (what ``terminal-env run
--tasks`` takes: task directories, folders, bundled names, ``pool[:SPLITS]``,
``pool:generated[:SPLITS]``; the protected test split only with ``allow_test``). The environment
(:class:`TerminalVerifiersEnv`) plays the user, as the package's own OpenEnv environment does:
it starts the task's sandbox on this machine's Docker engine, opens the model's conversation with
one of the project's harnesses' first messages (``generic`` by default: one fenced bash block per
reply, ``#!keys ...`` for keystrokes, ``#!submit`` when done), and answers each reply with what
running it printed, through the same :class:`~terminal_env.integrations.episode.TextEpisode` as
the SkyRL-Gym adapter. The model's seat is the package's ``null`` harness (a plain chat program)
in its ``subprocess`` runtime: commands run in the task's sandbox, never on the host.

When the model submits, when the episode's budget runs out or after ``max_turns`` replies, the
protected verifier runs once. Its reward is the trace's reward named ``terminal_env`` (the reward
function chosen by ``reward``); the per-check results, the outcome and the actions are on
``trace.info["terminal_env"]``, and passed/turns/commands/format errors are metrics. A failure
that is not the agent's (the sandbox could not start or vanished, the verifier could not run)
raises :class:`verifiers.v1.SandboxError`: the package marks the episode failed, retries it when
configured, and a trainer drops it; it is never scored 0.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ConfigError, TerminalEnvError
from ..rewards import get_reward
from .episode import EpisodeRecord, TextEpisode, load_tasks, text_harness

try:
    import verifiers.v1 as vf  # the optional install (its own virtual environment, see above)
except ImportError:  # the module still imports (documentation, doctests); using it says what to install
    vf = None

#: the name the verified reward is recorded under on each trace
REWARD_NAME = "terminal_env"
HOW = ("the verifiers environment needs the verifiers package (0.4, v1 API) in a virtual environment "
       "of its own: python -m venv .venv-verifiers && .venv-verifiers/bin/pip install -e '.[verifiers]' "
       "(scripts/setup.sh makes it)")


def record_info(record: EpisodeRecord | None) -> dict[str, Any]:
    """What a trace carries about its episode (``trace.info["terminal_env"]``): the task, its
    directory, the actions in plain-text form, the outcome, the reward, the per-check results and,
    when masked, why."""
    if record is None:
        return {}
    checks = []
    verification = record.verification
    for check in getattr(verification, "checks", None) or []:
        checks.append({"name": getattr(check, "name", ""), "passed": bool(getattr(check, "passed", False)),
                       "weight": float(getattr(check, "weight", 1.0) or 0.0)})
    return {"task": record.task, "path": record.path, "actions": list(record.actions),
            "outcome": record.outcome, "reward": record.reward, "masked": record.masked,
            "error": record.error, "checks": checks}


def record_from_info(info: dict[str, Any]) -> EpisodeRecord:
    """The :class:`EpisodeRecord` a trace's ``info["terminal_env"]`` describes, for
    :func:`terminal_env.integrations.episode.replay`."""
    return EpisodeRecord(task=info["task"], path=info.get("path"), actions=list(info.get("actions") or []),
                         reward=info.get("reward"), outcome=info.get("outcome"), masked=bool(info.get("masked")),
                         error=info.get("error"))


if vf is not None:
    from pydantic import Field, ValidationInfo, field_validator, model_validator

    class TerminalTasksetConfig(vf.TasksetConfig):
        """``--env.taskset.*``: which terminal tasks, the reward, the harness and the budgets."""

        tasks: list[str] = Field(default_factory=lambda: ["pool:train"])
        """What ``terminal-env run --tasks`` takes: task directories, folders of tasks, bundled
        task names, ``pool[:SPLITS]``, ``pool:generated[:SPLITS]``."""
        allow_test: bool = False
        """Admit the protected test split (never train or select checkpoints on it)."""
        reward: str = "binary"
        """The reward function: binary, partial_progress, strict_success_first, metric:NAME, ..."""
        harness: str = "generic"
        """The project harness that reads the model's replies and writes its first messages."""
        max_turns: int = Field(30, ge=1)
        """Replies before the work so far is verified."""
        episode: dict[str, Any] = Field(default_factory=dict)
        """The episode's budgets: ``terminal_env.env.EnvConfig``'s fields (max_steps, ...)."""

        @field_validator("reward", "harness")
        @classmethod
        def _known(cls, value: str, info: ValidationInfo) -> str:
            known = get_reward if info.field_name == "reward" else text_harness
            try:
                known(value)
            except (ConfigError, KeyError, ValueError) as exc:
                raise ValueError(str(exc)) from None
            return value

        @model_validator(mode="after")
        def _tasks_exist(self):
            try:  # refused while the command's settings are read, naming the setting, not mid-run
                found = load_tasks(self.tasks, allow_test=self.allow_test)
            except TerminalEnvError as exc:
                raise ValueError(f"tasks {self.tasks}: {exc}") from None
            if not found:
                raise ValueError(f"tasks {self.tasks}: no terminal task found there")
            return self


    class TerminalData(vf.TaskData):
        """One terminal task: its directory, split, category and difficulty. The prompt is None:
        the environment opens the conversation with the harness's first messages."""

        task_dir: str
        split: str = ""
        category: str = ""
        difficulty: str = ""

    class TerminalTask(vf.Task[TerminalData]):
        pass

    class TerminalTaskset(vf.Taskset[TerminalTask, TerminalTasksetConfig]):
        """The terminal tasks ``config.tasks`` names, sorted by name."""

        def load(self):
            try:
                tasks = load_tasks(self.config.tasks, allow_test=self.config.allow_test)
            except TerminalEnvError as exc:
                raise vf.TaskError(f"--env.taskset.tasks {self.config.tasks}: {exc}") from None
            for t in tasks:
                yield TerminalTask(
                    TerminalData(id=t.name, name=t.name, description=(t.instruction.strip().splitlines() or [""])[0],
                                 prompt=None, task_dir=str(t.path), split=t.split or "",
                                 category=t.category or "",
                                 difficulty=t.difficulty or ""),
                    self.config.task)

    class TerminalEnvConfig(vf.EnvConfig):
        """The model's seat: the package's plain chat program on this machine (its commands run
        in the task's sandbox, through the environment)."""

        player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig())

    class TerminalVerifiersEnv(vf.Env[TerminalEnvConfig]):
        """Plays the user: each reply of the model runs in the task's sandbox and what it printed
        is the next user turn; the protected verifier scores the episode once."""

        async def run(self, task, agents) -> None:
            cfg = self.taskset.config
            text = TextEpisode(harness=cfg.harness, reward=cfg.reward, config=cfg.episode or None,
                               max_turns=cfg.max_turns)
            try:
                await self._play(task, agents, text)
            finally:
                await asyncio.to_thread(text.close)

        async def _play(self, task, agents, text: TextEpisode) -> None:
            first = await asyncio.to_thread(text.begin, task.data.task_dir)
            record = text.record
            if record is None or record.masked:
                raise vf.SandboxError(f"{task.data.name}: {record.error if record else 'did not start'}")
            system = "\n\n".join(m["content"] for m in first if m["role"] == "system")
            opening = [m for m in first if m["role"] != "system"]
            seat = task.with_data(system_prompt=system) if system else task
            async with agents.player.interaction(seat) as interaction:
                segment = await interaction.turn(_as_turn(opening))
                while not segment.terminated and not text.over:
                    messages, _ = await asyncio.to_thread(text.reply, segment.last_reply)
                    if text.over:
                        break
                    segment = await interaction.turn(_as_turn(messages))
                if not text.over and interaction.trace.ok:
                    # the model's seat ended (its turn or token limits): the work so far is verified
                    await asyncio.to_thread(text.episode.finish)
            trace = interaction.trace
            if not text.over:  # the seat failed (the model server, its program): nothing to score
                return
            record = text.record
            assert record is not None
            trace.info[REWARD_NAME] = record_info(record)
            if record.masked:
                raise vf.SandboxError(f"{task.data.name}: {record.error}")
            trace.record_reward(REWARD_NAME, float(record.reward or 0.0))
            trace.record_metrics(text.metrics())

    def _as_turn(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        """A harness's messages as one user turn (the text of one message, else the messages)."""
        users = [m for m in messages if m.get("role") == "user"]
        if len(users) == len(messages) == 1 and isinstance(users[0].get("content"), str):
            return users[0]["content"]
        return [{"role": m["role"], "content": m["content"]} for m in messages]

    __all__ = ["TerminalTaskset", "TerminalVerifiersEnv", "TerminalTasksetConfig", "TerminalEnvConfig",
               "TerminalData", "TerminalTask", "record_info", "record_from_info", "REWARD_NAME"]
else:
    __all__ = ["record_info", "record_from_info", "REWARD_NAME", "HOW"]

