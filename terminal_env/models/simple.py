"""Agents that are not models: scripted replies or actions, replay of a saved trajectory, the
task's oracle, nop, and a human at the keyboard. They are model backends like any other and go
through the same harness and agent loop (:func:`terminal_env.agent.run_agent`), so what they
produce is an ordinary trajectory; there is no second kind of agent.

* ``NopBackend`` submits at once: a task it passes is a broken task.
* ``OracleBackend`` runs the task's reference solution. ``solution/`` is copied into the sandbox
  only here, only for the oracle, and removed again before verification.
* ``ScriptedBackend.of_actions([...])`` plays a fixed list of actions, then submits (the
  adversarial agents of the tests are these); ``ScriptedBackend([...])`` plays raw replies.

Oracle, nop, human and scripted actions speak the ``generic`` harness (one fenced ``bash`` block
per turn); the agent loop switches to it for them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from ..actions import Command, Keys, Submit, action_to_text, parse_action
from ..errors import ConfigError
from ..trajectory import Trajectory
from .base import Completion, EpisodeAware, ModelError, ToolCall, split_thinking

Reply = str | dict[str, Any] | Completion

#: where the oracle's copy of the task's ``solution/`` lives during its episode
SOLUTION_DIR = "/solution"


def fenced(command: str) -> str:
    """A generic-harness reply running ``command`` (its fence longer than any run of backticks
    in the command, so a command that holds a fence stays one block)."""
    longest = max((len(run) for run in re.findall(r"`+", command)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}bash\n{command}\n{fence}"


def to_completion(reply: Reply, n: int = 0) -> Completion:
    """A scripted reply as a Completion: a str is the assistant text; a dict may carry
    ``content`` and ``tool_calls`` ([{"name", "arguments"}]) like an API answer."""
    if isinstance(reply, Completion):
        return reply
    if isinstance(reply, str):
        text, reasoning = split_thinking(reply)
        return Completion(text=text, reasoning=reasoning, finish_reason="stop")
    if isinstance(reply, dict):
        calls = []
        for i, c in enumerate(reply.get("tool_calls") or []):
            args = c.get("arguments", "")
            calls.append(
                ToolCall(id=c.get("id") or f"call_{n}_{i}", name=c["name"],
                         arguments=args if isinstance(args, str) else json.dumps(args))
            )
        return Completion(text=reply.get("content") or "", tool_calls=calls,
                          finish_reason="tool_calls" if calls else "stop")
    raise ConfigError(f"a scripted reply must be a str, a dict or a Completion, got {type(reply).__name__}")


class ScriptedBackend(EpisodeAware):
    """Plays ``replies`` in order (rewound every episode). Running out is an error, so a test
    whose script is too short fails instead of passing quietly."""

    def __init__(self, replies: Iterable[Reply] | Callable[[list[dict[str, Any]]], Reply], *, name: str = "scripted"):
        self.name = name
        self._fn = replies if callable(replies) else None
        self._replies = [] if callable(replies) else list(replies)
        self._i = 0

    @classmethod
    def of_actions(cls, actions: Iterable[Any], *, name: str = "scripted") -> "ScriptedBackend":
        """Plays environment actions (a ``Command``, ``Keys``, ``Submit``, their dict form, or
        the text form: ``"ls"``, ``"#!keys C-c"``, ``"#!timeout 5\\nmake"``) one per turn in the
        generic harness, then submits."""
        replies = []
        for i, item in enumerate(actions):
            action = parse_action(item)
            if isinstance(action, Keys) and (action.literal, action.wait, action.quiet) != (False, 1.0, 0.15):
                raise ConfigError(
                    f"scripted action {i}: {action!r} sets literal/wait/quiet, which the generic "
                    "harness's text cannot carry; step the environment with it directly instead"
                )
            replies.append(fenced(action_to_text(action)))
            if isinstance(action, Submit):
                break
        else:
            replies.append(fenced(action_to_text(Submit())))
        backend = cls(replies, name=name)
        backend.native_harness = "generic"
        return backend

    def start_episode(self, env: Any, harness: Any) -> None:
        self._i = 0

    def complete(self, messages, *, tools=None, params=None) -> Completion:
        self._i += 1
        if self._fn is not None:
            return to_completion(self._fn(messages), self._i)
        if self._i > len(self._replies):
            raise ModelError(f"scripted backend {self.name!r}: the script of {len(self._replies)} replies is exhausted")
        return to_completion(self._replies[self._i - 1], self._i)


class ReplayBackend(ScriptedBackend):
    """Replays the completions of a saved trajectory, in its harness."""

    def __init__(self, path: str | Path):
        traj = Trajectory.load(path)
        comps = [t.completion for t in traj.turns if t.completion is not None]
        if not comps:
            raise ConfigError(f"{path}: the trajectory has no model turns to replay")
        super().__init__(comps, name=f"replay:{traj.model.name}")
        self.native_harness = traj.harness
        self.source = str(path)


class NopBackend(EpisodeAware):
    """Submits at once: a task it passes is a broken task."""

    name = "nop"
    native_harness = "generic"

    def complete(self, messages, *, tools=None, params=None) -> Completion:
        return Completion(text=fenced("#!submit"), finish_reason="stop")


class OracleBackend(EpisodeAware):
    """Runs the task's reference solution (copied in for this backend only, removed before
    verification), then submits. Its one command gets the task's whole agent timeout."""

    name = "oracle"
    native_harness = "generic"

    def __init__(self) -> None:
        self._env: Any = None
        self._ran: int | None = None  # the step whose solution ran last (0 for a one-step task)
        self._turn = 0  # replies given this episode

    def start_episode(self, env: Any, harness: Any) -> None:
        task = env.source_task
        if task is None:
            raise ConfigError("the oracle needs a task directory (it runs the task's solution/)")
        steps = list(getattr(task, "steps", None) or [])
        views = [task.step_task(i) for i in range(len(steps))] if steps else [task]
        for view in views:
            if not view.solution_files():
                where = f"steps/{steps[views.index(view)].name}/solution/" if steps else "solution/"
                raise ConfigError(f"task {task.name!r} has no {where}: the oracle cannot run")
        self._env, self._views, self._ran, self._turn = env, views, None, 0

    def _command(self, step: int) -> str:
        """Copy step ``step``'s solution in (for this backend only, removed when it ends) and
        the command that runs it within its agent timeout."""
        task = self._views[step]
        self._env.sandbox.write_files(
            {
                f"{SOLUTION_DIR}/{name.lstrip('/')}": src if isinstance(src, bytes) else Path(src).read_bytes()
                for name, src in task.solution_files().items()
            },
            mode=0o755,
        )
        timeout = float(getattr(task, "agent_timeout", 600) or 600)
        command = " ".join(task.solution_command) + f"; rm -rf {SOLUTION_DIR}"
        return action_to_text(Command(command=command, timeout=timeout))

    def complete(self, messages, *, tools=None, params=None) -> Completion:
        # each step: its solution once, then submit (a multi-step task's next step follows)
        self._turn += 1
        step = getattr(self._env, "step_index", 0) if len(self._views) > 1 else 0
        if self._ran != step:
            self._ran = step
            return Completion(text=fenced(self._command(step)), finish_reason="stop")
        return Completion(text=fenced("#!submit"), finish_reason="stop")


class HumanBackend(EpisodeAware):
    """You play: the observation is printed, you type the next command in your own terminal.

    A line is a shell command (end a line with ``\\`` to continue it), ``#!keys C-c`` sends
    keystrokes, ``#!submit`` (or end of input, Ctrl-D) ends the episode and runs the verifier."""

    name = "human"
    native_harness = "generic"

    def __init__(self, stdin: Any = None, stdout: Any = None):
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout

    def complete(self, messages, *, tools=None, params=None) -> Completion:
        last = next((m.get("content") or "" for m in reversed(messages) if m.get("role") != "assistant"), "")
        self.stdout.write("\n" + last.rstrip() + "\n")
        lines: list[str] = []
        while True:
            self.stdout.write("> " if not lines else "… ")
            self.stdout.flush()
            line = self.stdin.readline()
            if not line:  # end of input
                return Completion(text=fenced("#!submit"), finish_reason="stop")
            line = line.rstrip("\n")
            if line.endswith("\\"):
                lines.append(line)  # bash joins the lines itself
                continue
            lines.append(line)
            text = "\n".join(lines).strip()
            if text:
                return Completion(text=fenced(text), finish_reason="stop")
            lines = []
