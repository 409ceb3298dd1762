"""One task played through tool calls: what every trainer adapter shares.

A trainer's environment object lives across many episodes (TRL keeps a pool of them and resets
each for a new rollout); :class:`ToolEpisode` is the part that does the work, the same for every
adapter:

- :meth:`ToolEpisode.start` loads a task (a task directory, a bundled task's name or a loaded
  task), starts its sandbox through :class:`~terminal_env.env.TerminalEnv` (a warm pool when one
  is given) and returns the first observation;
- :meth:`ToolEpisode.command` and :meth:`ToolEpisode.keys` are ``TerminalEnv.step`` with a typed
  action: the same session, budgets and guards as every other way of playing a task;
- :meth:`ToolEpisode.finish` submits once, runs the protected verifier once and returns the
  reward, or ``None`` when the episode failed for a reason that is not the agent's (the engine
  went away, the sandbox could not start, the verifier could not run): a trainer drops such a
  sample instead of learning from a reward of 0.

Every finished episode becomes an :class:`EpisodeRecord` (the actions in their plain-text form,
the reward and the verdict), handed to ``on_episode`` when given, so that what a trainer was told
can be checked against a replay of the same actions.

Trainers that hand the environment the model's text rather than tool calls (SkyRL-Gym, the
``verifiers`` package) use :class:`TextEpisode`: a :class:`ToolEpisode` whose actions come from
one of the project's harnesses reading each reply, through the same
:func:`terminal_env.agent.apply_completion` as the agent loop, with a bound on the replies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..actions import Command, Keys, Submit, action_to_text, parse_action
from ..agent import apply_completion
from ..env import EnvConfig, TerminalEnv
from ..errors import ConfigError, InfraError
from ..harness import Harness, get_harness
from ..harness.base import CommandRecord
from ..models.base import Completion
from ..prepare import prepare_task
from ..rewards import get_reward
from ..runner.config import resolve_tasks
from ..tasks import Task, load_task
from ..tasks.load import is_task_dir
from ..tasks.pool import pool_dir

log = logging.getLogger(__name__)

#: what an episode that ended tells the agent when it keeps calling tools
OVER = "[terminal-env] the episode is over; no more commands run."


@dataclass
class EpisodeRecord:
    """What happened in one episode, as a trainer was told it."""

    task: str
    path: str | None
    #: every action in its plain-text form (``terminal_env.actions``), in order; the last one is
    #: ``#!submit`` when the agent's episode ended by :meth:`ToolEpisode.finish`
    actions: list[str] = field(default_factory=list)
    #: what the trainer got: the reward, or None when the sample is to be dropped
    reward: float | None = None
    #: the verifier's outcome (passed, partial, failed, error, ...), None when it never ran
    outcome: str | None = None
    #: the failure was not the agent's (engine, sandbox start, verifier infrastructure)
    masked: bool = False
    #: why the episode was masked, in words
    error: str | None = None
    #: the protected verifier's result (a VerifierResult), when it ran
    verification: Any = None


def resolve_task(task: Any) -> Any:
    """A task directory, a bundled task's name or a loaded task, as something ``prepare_task``
    takes; a path that is not a task is refused with what to pass instead."""
    if isinstance(task, Task) or not isinstance(task, (str, Path)):
        return task
    path = Path(task)
    if not path.exists() and isinstance(task, str) and (pool_dir() / task).is_dir():
        path = pool_dir() / task  # a bundled task by name
    if not path.is_dir() or not is_task_dir(path):
        raise ConfigError(
            f"task {str(task)!r} is not a task directory (one with task.toml and instruction.md, or a "
            "Terminal-Bench task.yaml) nor a bundled task's name; pass a task directory, or build the "
            "rows with terminal_env.integrations.trl.task_rows(...)"
        )
    return load_task(path)


def load_tasks(tasks: str | Path | list[str | Path], *, allow_test: bool = False) -> list[Task]:
    """The tasks ``tasks`` names, as ``terminal-env run --tasks`` takes them: task directories,
    folders of tasks, bundled task names, ``pool[:SPLITS]`` or ``pool:generated[:SPLITS]``. The
    protected test split needs ``allow_test=True`` (never train or select checkpoints on it)."""
    specs = [tasks] if isinstance(tasks, (str, Path)) else list(tasks)
    return resolve_tasks([str(s) for s in specs], allow_test=allow_test)


def replay(record: EpisodeRecord, *, reward: str | Callable[[Any], float] = "binary") -> float | None:
    """Play ``record``'s actions again in a fresh sandbox of its task and return what the
    protected verifier gives them (None when that episode was masked): an audit of what a trainer
    was told, one episode at a time."""
    if record.path is None:
        raise ConfigError(f"the episode of {record.task!r} has no task directory to replay it in")
    episode = ToolEpisode(reward=reward)
    try:
        episode.start(record.path)
        for action in record.actions:
            if episode.over:
                break
            episode.act(parse_action(action))
        return episode.finish()
    finally:
        episode.close()


class ToolEpisode:
    """One task at a time, played through tool calls. Reusable: :meth:`start` ends the last
    episode (without verifying it: an episode nobody finished has no reward) and begins the next.

    ``reward`` names the reward function (``binary``, ``partial_progress``,
    ``strict_success_first``, ``metric:NAME``, ...; see :mod:`terminal_env.rewards`) or is one.
    ``config`` holds the episode's budgets (:class:`~terminal_env.env.EnvConfig`), ``pool`` a
    shared :class:`~terminal_env.scale.warm.WarmPool`."""

    def __init__(self, *, reward: str | Callable[[Any], float] = "binary",
                 config: EnvConfig | dict[str, Any] | None = None, pool: Any = None, client: Any = None,
                 build_options: dict[str, Any] | None = None,
                 on_episode: Callable[[EpisodeRecord], Any] | None = None):
        self.reward_fn = get_reward(reward) if isinstance(reward, str) else reward
        if config is not None and not isinstance(config, EnvConfig):
            try:  # refused now, by name, not at the first reset; kept as given (a dict leaves the
                EnvConfig.model_validate(config)  # task's own time budget in force unless it sets one)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ConfigError(f"invalid episode config: {problems} (the fields are EnvConfig's)") from None
        self._config = config
        self._pool = pool
        self._client = client
        self._build_options = build_options
        self.on_episode = on_episode
        self.env: TerminalEnv | None = None
        self.record: EpisodeRecord | None = None
        #: the exit code of the last command (None for keystrokes, a timeout, or no command yet)
        self.last_exit_code: int | None = None
        self._over = True
        self._prepared: dict[str, Any] = {}  # task directory -> PreparedTask (built once)

    # ------------------------------------------------------------------ the episode
    def start(self, task: Any) -> str:
        """Begin an episode of ``task`` and return the first observation (the instruction and the
        shell's working directory). A task that is not a task raises :class:`ConfigError`; an
        infrastructure failure is kept: the tools then say so and :meth:`finish` returns None."""
        self.end()
        loaded = resolve_task(task)
        name = getattr(loaded, "name", None) or str(task)
        path = str(loaded.path) if isinstance(loaded, Task) else None
        self.record = EpisodeRecord(task=name, path=path)
        self._over = False
        try:
            prepared = self._prepare(loaded, path)
            if self.env is None:
                self.env = TerminalEnv(prepared, config=self._config, reward=self.reward_fn, pool=self._pool,
                                       client=self._client)
                obs, _ = self.env.reset()
            else:
                obs, _ = self.env.reset(options={"task": prepared})
        except InfraError as exc:
            return self._mask(f"the sandbox could not start: {exc}")
        return obs

    def command(self, command: str, timeout: float | None = None) -> str:
        """Run a shell command in the episode's terminal and return what it printed."""
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"command must be a non-empty string, got {command!r}")
        return self.act(Command(command=command, timeout=timeout))

    def keys(self, keys: list[str]) -> str:
        """Send keystrokes (key names such as C-c, Enter, Up, or literal text) and return the
        screen's new output."""
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
            raise ConfigError(f"keys must be a non-empty list of key names or text, got {keys!r}")
        return self.act(Keys(keys=keys))

    def finish(self) -> float | None:
        """Submit (once), run the protected verifier and return the reward; None when the sample
        is to be dropped (masked). Calling it again returns the same value."""
        record = self._require_record()
        if not self._over:
            # a multi-step task ends here: its later steps, not reached, score 0
            self.act(Submit(final=bool(getattr(self.env, "task_steps", None))))
        return record.reward

    def end(self) -> None:
        """Give back the sandbox of an unfinished episode (no verification, no record)."""
        self._over = True
        if self.env is not None:
            self.env.close()  # the sandbox goes; the environment can be reset again

    def close(self) -> None:
        """End the episode and release everything (the sandbox; a shared pool stays open)."""
        self._over = True
        if self.env is not None:
            self.env.close()
            self.env = None

    # ------------------------------------------------------------------ helpers
    def _prepare(self, loaded: Any, path: str | None) -> Any:
        if path is None:
            return prepare_task(loaded, build=self._build_options, client=self._client)
        if path not in self._prepared:
            self._prepared[path] = prepare_task(loaded, build=self._build_options, client=self._client)
        return self._prepared[path]

    def _require_record(self) -> EpisodeRecord:
        if self.record is None:
            raise ConfigError("no episode has started: reset the environment with a task first")
        return self.record

    @property
    def over(self) -> bool:
        """The episode ended (verified, masked or never started)."""
        return self._over

    def act(self, action: Command | Keys | Submit) -> str:
        """One typed action through the environment; the observation. After the end, the reason
        the episode is over (nothing runs)."""
        record = self._require_record()
        if self._over:
            return OVER if not record.masked else f"[terminal-env] {record.error}"
        assert self.env is not None
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except ConfigError as exc:  # refused before it ran (too long, ...): the agent is told, as in the agent loop
            return f"[terminal-env] action refused: {exc}"
        except InfraError as exc:
            record.actions.append(action_to_text(action))
            return self._mask(f"the sandbox failed during the episode: {exc}")
        record.actions.append(action_to_text(action))
        self.last_exit_code = info.get("exit_code")
        if terminated or truncated:
            self._over = True
            verification = info.get("verification")
            record.verification = verification
            outcome = getattr(verification, "outcome", None)
            record.outcome = None if outcome is None else str(getattr(outcome, "value", outcome))
            if info.get("masked"):
                record.masked = True
                record.error = f"the verifier could not run: {getattr(verification, 'message', '')}".rstrip(": ")
                record.reward = None
            else:
                record.reward = float(reward)
            self.env.close()  # verified: the sandbox goes now, not at the next reset
            self._emit()
        return obs

    def _mask(self, why: str) -> str:
        """An infrastructure failure: the sample is dropped, the sandbox given back."""
        log.warning("episode of %s masked: %s", self.record.task if self.record else "?", why)
        record = self._require_record()
        record.masked, record.error, record.reward = True, why, None
        self._over = True
        if self.env is not None:
            try:
                self.env.close()
            except InfraError as exc:
                log.warning("%s", exc)
        self._emit()
        return f"[terminal-env] {why}"

    def _emit(self) -> None:
        if self.on_episode is not None and self.record is not None:
            self.on_episode(self.record)


def text_harness(harness: str | Harness) -> Harness:
    """``harness`` (a name or a harness) when it reads plain text replies; a harness that reads
    the model's tool calls is refused, naming the ones that fit (a text episode has only text)."""
    found = get_harness(harness) if isinstance(harness, str) else harness
    if found.tools():
        name = harness if isinstance(harness, str) else type(harness).__name__
        raise ConfigError(f"harness {name!r} reads the model's tool calls, and a text episode has only "
                          "the reply's text: use generic, terminus or react")
    return found


class TextEpisode:
    """One task played by a model's replies as text: one of the project's harnesses (``generic``
    by default: one fenced bash block per reply, ``#!keys ...`` for keystrokes, ``#!submit`` when
    done) reads each reply, and what it asks for runs through a :class:`ToolEpisode`.

    :meth:`begin` starts the task and returns the harness's first messages (its system prompt,
    the instruction, where the shell is); :meth:`reply` applies one reply and returns the messages
    that report back. The episode ends when the model submits, when the environment's step or
    time budget runs out, or after ``max_turns`` replies (then the work so far is verified):
    :attr:`over` turns true and :attr:`record` holds the reward, or ``masked`` when the failure was
    not the agent's."""

    def __init__(self, *, harness: str | Harness = "generic", reward: str | Callable[[Any], float] = "binary",
                 config: EnvConfig | dict[str, Any] | None = None, max_turns: int = 30, pool: Any = None,
                 on_episode: Callable[[EpisodeRecord], Any] | None = None):
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            raise ConfigError(f"max_turns must be a whole number of at least 1, got {max_turns!r}")
        self.harness = text_harness(harness)
        self.episode = ToolEpisode(reward=reward, config=config, pool=pool, on_episode=on_episode)
        self.max_turns = max_turns
        #: the replies applied so far in this episode
        self.turns = 0
        #: the replies the harness could not read
        self.format_errors = 0

    def begin(self, task: Any) -> list[dict[str, Any]]:
        """Start an episode of ``task``; the harness's first messages. An infrastructure failure
        leaves the episode over and masked (see :attr:`record`)."""
        self.harness.reset()
        self.turns = self.format_errors = 0
        obs = self.episode.start(task)
        env = self.episode.env
        instruction = env.task.instruction if env is not None else ""
        return list(self.harness.initial_messages(instruction, obs))

    def reply(self, text: str) -> tuple[list[dict[str, Any]], str | None]:
        """Apply one model reply: the messages that report back, and the harness's feedback when
        it could not read the reply (None when it could)."""
        if not isinstance(text, str):
            raise ConfigError(f"a reply is the model's text, got {type(text).__name__}")
        self.episode._require_record()
        if self.episode.over:
            raise ConfigError("the episode is over: begin() the next one")
        self.turns += 1
        _, messages, format_error = apply_completion(
            self.harness, Completion(text=text, finish_reason="stop"), self._run, lambda: self.episode.over)
        self.format_errors += format_error is not None
        if not self.episode.over and self.turns >= self.max_turns:
            self.episode.finish()  # out of turns: the work so far is verified
        return messages, format_error

    @property
    def over(self) -> bool:
        return self.episode.over

    @property
    def record(self) -> EpisodeRecord | None:
        return self.episode.record

    def metrics(self) -> dict[str, float]:
        """Counts of this episode: turns, commands run, unreadable replies, passed, masked."""
        record = self.episode.record
        return {
            "turns": float(self.turns),
            "commands": float(sum(1 for a in record.actions if not isinstance(parse_action(a), Submit)))
            if record else 0.0,
            "format_errors": float(self.format_errors),
            "passed": float(bool(record and record.outcome == "passed")),
            "masked": float(bool(record and record.masked)),
        }

    def close(self) -> None:
        self.episode.close()

    def _run(self, action: Command | Keys | Submit) -> CommandRecord:
        observation = self.episode.act(action)
        return CommandRecord(action=action.model_dump(), text=action_to_text(action), observation=observation)
