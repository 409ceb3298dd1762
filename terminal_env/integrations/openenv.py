"""Terminal tasks served over OpenEnv's protocol (extra ``[openenv]``: ``pip install 'terminal-env[openenv]'``).

Serve (one sandbox per client session, each session its own episode)::

    python -m terminal_env.integrations.openenv --tasks pool:generated:train --port 8000
    # or in Python: uvicorn.run(make_app(["pool:generated:train"]), host="127.0.0.1", port=8000)

Play, from anywhere OpenEnv's client runs::

    from terminal_env.integrations.openenv import TerminalAction, TerminalEnvClient

    with TerminalEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(task="toy-write-number-train-000")   # or seed=N: the N-th task
        result = env.step(TerminalAction(action="ls -la"))
        result = env.step(TerminalAction(action="#!submit"))     # verified: result.reward

An action is the environment's own plain-text action (:mod:`terminal_env.actions`): a shell
command, ``#!keys ...`` keystrokes, ``#!timeout N`` on a first line, or ``#!submit``; the episode is
``TerminalEnv`` on the server, so budgets, guards and the protected verifier are the same as
everywhere else in the project. The observation carries the terminal's output, the task's name and,
at the end, the verifier's outcome; an episode that failed for a reason that is not the agent's
ends with ``reward=None`` and ``masked=True`` (drop it; never train on it as 0).

The server binds to the address it is given (``127.0.0.1`` by default): it runs commands in
sandboxes for whoever can reach it, so do not expose it beyond machines you trust.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any
from uuid import uuid4

from pydantic import Field

from ..actions import parse_action
from ..errors import ConfigError, TerminalEnvError
from ..tasks import Task
from .episode import ToolEpisode, load_tasks

try:
    from openenv.core import EnvClient  # the optional extra [openenv]
    from openenv.core.client_types import StepResult
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State
except ImportError:  # the module still imports (documentation, doctests); using it says what to install
    EnvClient = Environment = None

#: the name the server reports
ENV_NAME = "terminal-env"


def _require_openenv() -> None:
    if Environment is None:
        raise ConfigError("the OpenEnv server and client need openenv-core: pip install 'terminal-env[openenv]'")


if Environment is not None:

    class TerminalAction(Action):
        """One action in the environment's plain-text form (see :mod:`terminal_env.actions`)."""

        action: str = Field(..., description="a shell command, '#!keys ...', '#!timeout N' + newline + command, "
                                             "or '#!submit'")

    class TerminalObservation(Observation):
        """What the agent sees after reset or a step."""

        output: str = Field("", description="the instruction (after reset) or the terminal's output")
        task: str = Field("", description="the task's name")
        outcome: str | None = Field(None, description="the verifier's outcome, once the episode ended")
        masked: bool = Field(False, description="the episode failed for a reason that is not the agent's")

    class TerminalState(State):
        """The session's episode."""

        task: str = ""
        done: bool = False

    class TerminalOpenEnv(Environment):
        """The server side: one instance per client session (OpenEnv's factory mode)."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self, tasks: list[Task], reward: str = "binary", config: dict[str, Any] | None = None):
            super().__init__()
            if not tasks:
                raise ConfigError("the OpenEnv server needs at least one task")
            self.tasks = {t.name: t for t in tasks}
            self._order = sorted(self.tasks)
            self._episode = ToolEpisode(reward=reward, config=config)
            self._state = TerminalState(episode_id=None, step_count=0)

        def reset(self, seed: int | None = None, episode_id: str | None = None, task: str | None = None,
                  **kwargs: Any) -> TerminalObservation:
            if kwargs:
                raise ConfigError(f"unknown reset argument(s) {sorted(kwargs)}; known: seed, episode_id, task")
            if task is None:
                name = self._order[(seed or 0) % len(self._order)]
            elif task in self.tasks:
                name = task
            else:
                raise ConfigError(f"no task {task!r} on this server; it serves {len(self._order)} task(s), "
                                  f"e.g. {self._order[:5]}")
            output = self._episode.start(self.tasks[name])
            record = self._episode.record
            self._state = TerminalState(episode_id=episode_id or uuid4().hex, step_count=0, task=name,
                                        done=self._episode.over)
            return self._observation(output, name, record)

        def step(self, action: TerminalAction, timeout_s: float | None = None, **kwargs: Any) -> TerminalObservation:
            if self._episode.record is None:
                raise ConfigError("reset before step: no episode has started in this session")
            output = self._episode.act(parse_action(action.action))
            self._state.step_count += 1
            self._state.done = self._episode.over
            return self._observation(output, self._state.task, self._episode.record)

        @property
        def state(self) -> TerminalState:
            return self._state

        def close(self) -> None:
            self._episode.close()

        def _observation(self, output: str, name: str, record: Any) -> TerminalObservation:
            over = self._episode.over
            return TerminalObservation(
                output=output, task=name, done=over,
                reward=(record.reward if over else 0.0) if record is not None else None,
                outcome=record.outcome if (over and record is not None) else None,
                masked=bool(record is not None and record.masked),
            )

    class TerminalEnvClient(EnvClient[TerminalAction, TerminalObservation, TerminalState]):
        """OpenEnv's client for this server (async; ``.sync()`` for a synchronous one)."""

        def _step_payload(self, action: TerminalAction) -> dict[str, Any]:
            return {"action": action.action}

        def _parse_result(self, payload: dict[str, Any]) -> StepResult[TerminalObservation]:
            obs = payload.get("observation", {})
            observation = TerminalObservation(
                output=obs.get("output", ""), task=obs.get("task", ""), outcome=obs.get("outcome"),
                masked=bool(obs.get("masked", False)), done=payload.get("done", False),
                reward=payload.get("reward"), metadata=obs.get("metadata", {}),
            )
            return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

        def _parse_state(self, payload: dict[str, Any]) -> TerminalState:
            return TerminalState(**payload)


else:

    def __getattr__(name: str) -> Any:  # the classes above, asked for without the extra
        if name in ("TerminalAction", "TerminalObservation", "TerminalState", "TerminalOpenEnv", "TerminalEnvClient"):
            raise ImportError(f"{name} needs openenv-core: pip install 'terminal-env[openenv]'")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_app(tasks: Any, *, reward: str = "binary", config: dict[str, Any] | None = None,
             max_concurrent_envs: int = 8, allow_test: bool = False) -> Any:
    """The FastAPI app serving ``tasks`` (what ``terminal-env run --tasks`` takes) over OpenEnv's
    protocol: each WebSocket session gets its own environment and sandbox, at most
    ``max_concurrent_envs`` at a time. ``reward`` names the reward function; ``config`` holds
    :class:`~terminal_env.env.EnvConfig`'s fields for every episode."""
    _require_openenv()
    from openenv.core.env_server.http_server import create_app  # the optional extra [openenv]

    if isinstance(max_concurrent_envs, bool) or not isinstance(max_concurrent_envs, int) or max_concurrent_envs < 1:
        raise ConfigError(f"max_concurrent_envs (--sessions) must be a whole number of at least 1, "
                          f"got {max_concurrent_envs!r}")

    loaded = load_tasks(tasks, allow_test=allow_test)
    ToolEpisode(reward=reward, config=config)  # a bad reward or config fails here, not per session
    lock = threading.Lock()

    def factory() -> TerminalOpenEnv:
        with lock:
            return TerminalOpenEnv(loaded, reward=reward, config=config)

    return create_app(factory, TerminalAction, TerminalObservation, env_name=ENV_NAME,
                      max_concurrent_envs=max_concurrent_envs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m terminal_env.integrations.openenv",
                                 description="Serve terminal tasks over OpenEnv's protocol.")
    ap.add_argument("--tasks", nargs="+", required=True, help="what `terminal-env run --tasks` takes")
    ap.add_argument("--reward", default="binary", help="a reward of terminal_env.rewards (default binary)")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--sessions", type=int, default=8, help="concurrent sessions (sandboxes) at most")
    ap.add_argument("--allow-test", action="store_true",
                    help="serve tasks of the protected test split (never select checkpoints on them)")
    args = ap.parse_args(argv)
    try:
        app = make_app(args.tasks, reward=args.reward, max_concurrent_envs=args.sessions,
                       allow_test=args.allow_test)
    except TerminalEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import uvicorn  # installed with the optional extra [openenv]

    uvicorn.run(app, host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
