"""The harness seam: observations -> chat messages, model text -> typed actions.

A harness owns the conversation format and nothing else. It never touches the sandbox: every
action it offers (a shell command, keystrokes, a file edit, a search) *compiles* to the generic
actions of :mod:`terminal_env.actions` (``Command``, ``Keys``, ``Submit``), which the agent loop
runs through :class:`~terminal_env.env.TerminalEnv`. The trajectory records both the harness action
and the generic actions actually run, so that any trace can be rewritten for the generic harness.

Malformed model output is never a crash: :meth:`Harness.parse` raises :class:`FormatError` whose
message is what the model reads next (:meth:`Harness.error_messages`).

A harness instance holds the state of one episode (the Terminus harness counts confirmations);
the agent loop calls :meth:`Harness.reset` at the start of every episode.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from ..actions import Command, Keys, Submit
from ..errors import ConfigError
from ..models.base import Completion


class FormatError(Exception):
    """The model's output could not be turned into actions; ``str(error)`` is the feedback."""

    def __init__(self, feedback: str, *, call_ids: list[str] | None = None):
        super().__init__(feedback)
        self.feedback = feedback
        #: tool-call ids that still need an answer (tool-calling harnesses must answer each)
        self.call_ids = list(call_ids or [])


class HarnessAction(BaseModel):
    """One action in the harness's own vocabulary, e.g. ``bash``, ``keys``, ``edit``, ``submit``."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    #: the tool-call id this action answers (tool-calling harness), else None
    call_id: str | None = None


class CommandRecord(BaseModel):
    """One generic action as run, with what the environment returned for it."""

    model_config = ConfigDict(extra="forbid")

    action: dict[str, Any]  # Command/Keys/Submit .model_dump()
    text: str  # its plain-text form (actions.action_to_text): the generic harness's syntax
    observation: str = ""
    exit_code: int | None = None
    duration: float = 0.0
    timed_out: bool = False
    truncated: bool = False


class ActionResult(BaseModel):
    """A harness action and the generic commands it compiled to, run."""

    model_config = ConfigDict(extra="forbid")

    action: HarnessAction
    commands: list[CommandRecord] = Field(default_factory=list)
    #: the text the harness shows the model for this action
    observation: str = ""
    #: set when the action was refused before running (bad arguments): the text explains
    error: str | None = None


class Harness:
    """Base class. Subclasses set ``name`` and implement :meth:`parse` and :meth:`compile`;
    most also override the message methods to match their format."""

    name: ClassVar[str] = "harness"
    #: the tool schemas passed to the model (tool-calling harnesses), else None
    tool_schemas: ClassVar[list[dict[str, Any]] | None] = None

    def __init__(self, **options: Any):
        if options:
            raise ConfigError(f"harness {self.name!r} takes no options, got {sorted(options)}")

    # -- episode -------------------------------------------------------------------------
    def reset(self) -> None:  # noqa: B027 - optional hook
        """Forget the previous episode."""

    def tools(self) -> list[dict[str, Any]] | None:
        return self.tool_schemas

    # -- messages ------------------------------------------------------------------------
    def system_prompt(self) -> str:
        raise NotImplementedError

    def initial_messages(self, instruction: str, observation: str) -> list[dict[str, Any]]:
        """The conversation's start: system prompt and the task. ``observation`` is the
        environment's first observation (the instruction plus where the shell is)."""
        return [
            {"role": "system", "content": self.system_prompt()},
            {"role": "user", "content": observation},
        ]

    def result_messages(self, results: list[ActionResult], completion: Completion) -> list[dict[str, Any]]:
        """Messages that report what the actions of one turn did."""
        text = "\n\n".join(r.observation for r in results) or "(no output)"
        return [{"role": "user", "content": text}]

    def error_messages(self, error: FormatError, completion: Completion) -> list[dict[str, Any]]:
        """Messages that tell the model its output could not be used, and how to fix it."""
        return [{"role": "user", "content": error.feedback}]

    # -- actions -------------------------------------------------------------------------
    def parse(self, completion: Completion) -> list[HarnessAction]:
        """The actions of one model turn, in order; raise :class:`FormatError` if none can be
        read. An empty list is allowed (e.g. a first, unconfirmed ``task_complete``)."""
        raise NotImplementedError

    def compile(self, action: HarnessAction) -> list[Command | Keys | Submit]:
        """The generic actions that carry out ``action``; raise :class:`FormatError` for bad
        arguments (the model is told, nothing runs)."""
        raise NotImplementedError

    def observe(self, action: HarnessAction, commands: list[CommandRecord]) -> str:
        """The text shown for one action, from its commands' observations."""
        return "\n".join(c.observation for c in commands if c.observation)


def tool_result_messages(results: list[ActionResult], extra: str | None = None) -> list[dict[str, Any]]:
    """``tool`` messages answering each call id in order (helper for tool-calling harnesses);
    ``extra`` text, if any, goes in a trailing user message."""
    msgs: list[dict[str, Any]] = []
    for r in results:
        if r.action.call_id is not None:
            msgs.append({"role": "tool", "tool_call_id": r.action.call_id, "content": r.observation or "(no output)"})
    if extra:
        msgs.append({"role": "user", "content": extra})
    return msgs


def loads_lenient(text: str) -> Any:
    """JSON from model text: the whole text, else the first ``{...}`` object in it (models wrap
    JSON in prose or code fences). Raises ``ValueError`` with a short reason."""
    text = text.strip()
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError:
        pass
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object found")
    decoder = json.JSONDecoder()
    while start >= 0:
        try:
            obj, _ = decoder.raw_decode(text, start)
            return obj
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
        except ValueError:
            start = text.find("{", start + 1)
    raise ValueError("no valid JSON object found")
