"""The Terminus-2 harness: one JSON object per turn, keystrokes sent as with ``tmux send-keys``.

The model answers ``{"analysis", "plan", "commands": [{"keystrokes", "duration"}], "task_complete"}``.
Each command's keystrokes are typed into the terminal (a newline is Enter); a keystrokes string
that is a single tmux key name (``C-c``, ``Escape``, ``Up``) sends that key. ``task_complete``
must be confirmed on the next turn before the episode is submitted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..actions import Command, Keys, Submit
from ..keys import key_bytes
from ..models.base import Completion
from .base import ActionResult, CommandRecord, FormatError, Harness, HarnessAction, loads_lenient
from .generic import answer_text, check_text, cut_off_note, environment_text, result_text

DEFAULT_DURATION = 1.0
MAX_DURATION = 60.0
MIN_DURATION = 0.1

SHAPE = """\
{
  "analysis": "what you see in the terminal and what it means",
  "plan": "what you will do next and why",
  "commands": [
    {"keystrokes": "ls -la\\n", "duration": 0.1},
    {"keystrokes": "make test\\n", "duration": 30}
  ],
  "task_complete": false
}"""

CONFIRM = (
    "Are you sure you want to mark the task complete? This will submit your solution for "
    "grading by hidden tests and you will not be able to make any further changes. If so, reply "
    'again with "task_complete": true. If not, continue working with "task_complete": false.'
)


def keystroke_keys(keystrokes: str) -> list[str]:
    """Keys items for a ``keystrokes`` string: text chunks and ``Enter`` for each newline; a
    string that is one key name (optionally followed by newlines) sends that key.

    >>> keystroke_keys("ls -la\\n")
    ['ls -la', 'Enter']
    >>> keystroke_keys("C-c")
    ['C-c']
    >>> keystroke_keys("Up\\nUp")
    ['U', 'p', 'Enter', 'U', 'p']
    """
    text = keystrokes.replace("\r\n", "\n")
    head = text.rstrip("\n")
    if head and key_bytes(head) is not None:
        return [head] + ["Enter"] * (len(text) - len(head))
    keys: list[str] = []
    for i, chunk in enumerate(text.split("\n")):
        if i:
            keys.append("Enter")
        if not chunk:
            continue
        # Text that happens to be a key name ("Up", "Tab") is typed letter by letter: single
        # characters are never key names, so the action stays a plain (non-literal) Keys.
        keys.extend(chunk if key_bytes(chunk) is not None else [chunk])
    return keys or [""]  # empty keystrokes: just wait for the duration


def _error(problem: str, completion: Completion | None = None) -> FormatError:
    note = cut_off_note(completion) if completion is not None else ""
    return FormatError(
        f"Format error: {problem}{note} Nothing was run.\nReply with exactly one JSON object of "
        f"this shape:\n{SHAPE}"
    )


class TerminusHarness(Harness):
    name = "terminus"

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.reset()

    def reset(self) -> None:
        self._asked = False  # the previous turn said task_complete for the first time
        self._warnings: list[str] = []

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    # -- parsing -------------------------------------------------------------------------
    def parse(self, completion: Completion) -> list[HarnessAction]:
        asked, self._asked, self._warnings = self._asked, False, []
        data = self._load(answer_text(completion), completion)
        for field in ("analysis", "plan"):
            if field not in data:
                raise _error(f'the field "{field}" is missing.')
            if not isinstance(data[field], str):
                raise _error(f'"{field}" must be a string.')
        done = data.get("task_complete", False)
        if isinstance(done, str) and done.strip().lower() in ("true", "false"):
            done = done.strip().lower() == "true"
        if not isinstance(done, bool):
            raise _error('"task_complete" must be true or false.')
        if "commands" not in data and not done:
            raise _error('the field "commands" is missing (use [] to send nothing).')
        commands = data.get("commands", [])
        if not isinstance(commands, list):
            raise _error('"commands" must be a list of {"keystrokes": ..., "duration": ...} objects.')
        actions = [self._command(i, c) for i, c in enumerate(commands)]
        if done:
            if asked:
                actions.append(HarnessAction(tool="submit"))
            else:
                self._asked = True
        return actions

    def _load(self, text: str, completion: Completion) -> dict[str, Any]:
        if not text.strip():
            raise _error("your reply is empty.", completion)
        try:
            data = loads_lenient(text)
        except (ValueError, RecursionError):
            raise _error(f"no valid JSON object found{_json_problem(text)}.", completion) from None
        if not isinstance(data, dict):
            raise _error("the reply must be a JSON object {...}, not a list or a value.", completion)
        if not {"analysis", "plan", "commands", "task_complete"} & set(data):
            # loads_lenient settled for an inner object: the outer one is broken
            raise _error(f"no JSON object with the fields analysis, plan, commands found"
                         f"{_json_problem(text)}.", completion)
        if not _is_bare_json(text):
            self._warnings.append("Extra text before or after the JSON object was ignored.")
        return data

    @staticmethod
    def _command(i: int, cmd: Any) -> HarnessAction:
        where = f"commands[{i}]"
        if not isinstance(cmd, dict):
            raise _error(f'{where} must be an object {{"keystrokes": "...", "duration": 1.0}}.')
        keystrokes = cmd.get("keystrokes")
        if keystrokes is None:
            raise _error(f'{where} has no "keystrokes" field.')
        if not isinstance(keystrokes, str):
            raise _error(f'{where}.keystrokes must be a string (use "\\n" for Enter).')
        duration = cmd.get("duration", DEFAULT_DURATION)
        if duration is None:
            duration = DEFAULT_DURATION
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or math.isnan(duration) \
                or duration < 0:
            raise _error(f"{where}.duration must be a number of seconds (0 to {MAX_DURATION:g}).")
        duration = min(max(float(duration), MIN_DURATION), MAX_DURATION)
        return HarnessAction(tool="keystrokes", args={"keystrokes": keystrokes, "duration": duration})

    # -- actions -------------------------------------------------------------------------
    def compile(self, action: HarnessAction) -> list[Command | Keys | Submit]:
        if action.tool == "submit":
            return [Submit()]
        if action.tool != "keystrokes":
            raise FormatError(f"unknown action {action.tool!r}: send keystrokes in \"commands\".")
        keystrokes = action.args.get("keystrokes")
        duration = action.args.get("duration", DEFAULT_DURATION)
        if not isinstance(keystrokes, str):
            raise FormatError("keystrokes must be a string.")
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not duration > 0:
            raise FormatError("duration must be a positive number of seconds.")
        duration = min(max(float(duration), MIN_DURATION), MAX_DURATION)
        check_text(keystrokes, "keystrokes")
        # Return as soon as the shell prompt is back; otherwise wait the whole duration, as
        # the model asked (quiet = duration: a pause in the output does not end the wait).
        return [Keys(keys=keystroke_keys(keystrokes), wait=duration, quiet=duration)]

    def observe(self, action: HarnessAction, commands: list[CommandRecord]) -> str:
        return "\n".join(c.observation for c in commands if c.observation)

    # -- messages ------------------------------------------------------------------------
    def result_messages(self, results: list[ActionResult], completion: Completion) -> list[dict[str, Any]]:
        parts = []
        if self._warnings:
            parts.append("WARNINGS: " + " ".join(self._warnings))
        outputs = [result_text(r) for r in results if r.action.tool != "submit"]
        output = "\n".join(o for o in outputs if o != "(no output)").strip()
        if results:
            parts.append("New Terminal Output:\n" + (output or "(no new output)"))
        else:
            parts.append("No commands were sent.")
        if self._asked:
            parts.append(CONFIRM)
        return [{"role": "user", "content": "\n\n".join(parts)}]

    def error_messages(self, error: FormatError, completion: Completion) -> list[dict[str, Any]]:
        return [{"role": "user", "content": error.feedback}]


def _json_problem(text: str) -> str:
    """Where JSON parsing fails for the object that starts at the first ``{``."""
    start = text.find("{")
    if start < 0:
        return " (no '{' in the reply)"
    try:
        json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        return f" (JSON error: {exc.msg} at line {exc.lineno} column {exc.colno})"
    except (ValueError, RecursionError):
        return " (the JSON is invalid or nested too deeply)"
    return ""


def _is_bare_json(text: str) -> bool:
    """The reply is only JSON, possibly in a ```json fence."""
    s = text.strip()
    if s.startswith("```") and s.endswith("```") and len(s) >= 6:
        s = s[3:-3]
        s = s[4:] if s.startswith("json") else s
    try:
        json.loads(s)
    except (ValueError, RecursionError):
        return False
    return True


SYSTEM_PROMPT = (
    """\
You are an AI assistant that solves command-line tasks in a Linux environment. You are given a \
task and the output of the terminal; you send keystrokes to the terminal, batch by batch.

## Reply format
Reply with exactly one JSON object, nothing else, of this shape:
"""
    + SHAPE
    + """

Fields:
- "analysis" (string, required): your reading of the current terminal state. What has been \
done, what is still missing?
- "plan" (string, required): what the commands of this reply will do, and why.
- "commands" (list, required, may be []): keystroke batches, sent in order. Each one is \
{"keystrokes": string, "duration": number}.
  - "keystrokes" is typed into the terminal exactly as written (like tmux send-keys). A newline \
"\\n" presses Enter, so a shell command must end with "\\n" to run. A keystrokes string that is \
exactly one key name sends that key: "C-c" (Ctrl-C, to stop a program), "C-d", "C-z", "Escape", \
"Tab", "Enter", "Up", "Down", "Left", "Right", "BSpace", "PageUp", "PageDown". Anything else is \
typed as text. Use this for interactive programs too (editors, REPLs, pagers).
  - "duration" (seconds, optional, default 1, at most 60): how long to wait for output before \
the next batch. When the shell prompt comes back earlier, the wait ends early, so give long \
commands (installs, builds, test runs) a generous duration: 0.1 for quick commands like cd or \
ls, 1 to 5 for normal ones, 10 to 60 for slow ones. If a command is still running when you \
see the output, send an empty "keystrokes" with a duration to wait more. Never wait for \
input that will not come: a program waiting for a keypress blocks the terminal.
- "task_complete" (boolean, optional, default false): set it to true when the task is done. \
You will be asked to confirm: reply once more with "task_complete": true to submit (the \
commands of both replies still run first).

"""
    + environment_text(commands=False)
)
