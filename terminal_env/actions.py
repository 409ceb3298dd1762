"""Typed actions, and their plain-text form.

An action is a shell command, keystrokes, or submit. The environment also accepts plain text,
so that its action space can honestly be a Gymnasium ``Text`` space:

* ``"ls -la"``: a shell command (anything not starting with ``#!``);
* ``"#!timeout 30\\nmake test"``: a shell command with its own time limit in seconds, on the
  first line (bounded by the episode's time left, like every command);
* ``"#!keys C-c"`` / ``"#!keys ':wq' Enter"``: keystrokes, shell-quoted tokens, each a key name
  (``C-c``, ``Up``, ``Enter``, ``M-x``, ...) or literal text;
* ``"#!submit"``: the agent declares it is done.

>>> parse_action("echo hi")
Command(kind='command', command='echo hi', timeout=None)
>>> parse_action("#!timeout 30\\nmake test")
Command(kind='command', command='make test', timeout=30.0)
>>> parse_action("#!keys ':wq' Enter")
Keys(kind='keys', keys=[':wq', 'Enter'], literal=False, wait=1.0, quiet=0.15)
>>> parse_action("#!submit")
Submit(kind='submit', final=False)
>>> parse_action({"kind": "keys", "keys": ["C-c"]}).keys
['C-c']
"""

from __future__ import annotations

import math
import shlex
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .errors import ConfigError


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Command(_Action):
    """Type a shell command and wait for the prompt."""

    kind: Literal["command"] = "command"
    command: str
    timeout: float | None = Field(None, gt=0, description="Seconds; default: the env's.")


class Keys(_Action):
    """Send keystrokes; wait until the terminal is quiet."""

    kind: Literal["keys"] = "keys"
    keys: list[str] = Field(description="Key names (C-c, Up, Enter, ...) or literal text.")
    literal: bool = Field(False, description="Type every item as text, even key names.")
    wait: float = Field(1.0, gt=0, le=600, description="At most this many seconds.")
    quiet: float = Field(
        0.15, gt=0, le=60, description="Return after this long without output (once output began)."
    )


class Submit(_Action):
    """The agent is done; the episode ends (and is verified, when a verifier is set). In a
    multi-step task it ends the current step, and the next one begins (``final``: the episode
    ends here, the later steps not run: they score 0)."""

    kind: Literal["submit"] = "submit"
    final: bool = False


Action = Annotated[Union[Command, Keys, Submit], Field(discriminator="kind")]
_adapter: TypeAdapter[Any] = TypeAdapter(Action)

KEYS_PREFIX = "#!keys"
SUBMIT_TEXT = "#!submit"
#: the text form of ``Submit(final=True)``: a multi-step task's later steps are not run (and score 0)
SUBMIT_FINAL_TEXT = "#!submit --final"
TIMEOUT_PREFIX = "#!timeout"


def _timed_command(text: str) -> Command:
    """``#!timeout SECONDS`` on the first line, the command on the lines after it."""
    first, _, command = text.partition("\n")
    value = first[len(TIMEOUT_PREFIX):].strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ConfigError(
            f"#!timeout needs a positive number of seconds, got {value!r}: e.g. "
            "'#!timeout 30' on the first line and the command on the next"
        )
    if not command.strip():
        raise ConfigError("#!timeout needs a command on the lines after it, e.g. '#!timeout 30\nmake test'")
    return Command(command=command, timeout=seconds)


def parse_action(action: Any) -> Command | Keys | Submit:
    """Accept a typed action, its dict form, or the plain-text form; raise ConfigError if bad."""
    if isinstance(action, (Command, Keys, Submit)):
        return action
    if isinstance(action, str):
        try:
            action.encode("utf-8", errors="surrogateescape")
        except UnicodeEncodeError as exc:
            raise ConfigError(
                f"the action contains a character that is not valid text ({exc.reason} at {exc.start}); "
                "remove lone surrogates such as '\\ud800'"
            ) from None
        stripped = action.strip()
        if stripped == SUBMIT_TEXT:
            return Submit()
        if stripped == SUBMIT_FINAL_TEXT:
            return Submit(final=True)
        if stripped.startswith(KEYS_PREFIX + " ") or stripped == KEYS_PREFIX:
            try:
                tokens = shlex.split(stripped[len(KEYS_PREFIX) :])
            except ValueError as exc:
                raise ConfigError(
                    f"cannot parse keys action {action!r}: {exc}. Quote text with spaces, "
                    "e.g. #!keys 'hello world' Enter"
                ) from None
            if not tokens:
                raise ConfigError("a #!keys action needs at least one key, e.g. '#!keys C-c'")
            return Keys(keys=tokens)
        if stripped.startswith(TIMEOUT_PREFIX + " ") or stripped.split("\n", 1)[0].strip() == TIMEOUT_PREFIX:
            return _timed_command(stripped)
        return Command(command=action)
    if isinstance(action, dict):
        try:
            return _adapter.validate_python(action)
        except ValidationError as exc:
            raise ConfigError(f"invalid action {action!r}: {exc}") from None
    raise ConfigError(
        f"an action must be a str, a dict or a Command/Keys/Submit, got {type(action).__name__}"
    )


def action_to_text(action: Command | Keys | Submit) -> str:
    """The plain-text form of an action (inverse of :func:`parse_action`)."""
    if isinstance(action, Submit):
        return SUBMIT_FINAL_TEXT if action.final else SUBMIT_TEXT
    if isinstance(action, Keys):
        return KEYS_PREFIX + " " + " ".join(shlex.quote(k) for k in action.keys)
    if action.timeout is not None:
        seconds = repr(float(action.timeout)).removesuffix(".0")
        return f"{TIMEOUT_PREFIX} {seconds}\n{action.command}"
    return action.command
