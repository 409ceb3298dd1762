"""The tool-calling harness: OpenAI-style function calls.

Tools: ``bash``, ``read_file``, ``write_file``, ``edit``, ``submit``. Each compiles to one shell
``Command`` that runs in a plain Debian container (bash, coreutils, python3 for ``edit``). File
contents travel base64-encoded inside the command, so any bytes survive the terminal and the
shell's quoting. Every call id gets a ``tool`` message back, also when the turn was refused.
"""

from __future__ import annotations

import base64
import json
import math
import shlex
from typing import Any

from ..actions import Command, Keys, Submit
from ..models.base import Completion
from .base import ActionResult, FormatError, Harness, HarnessAction, tool_result_messages
from .generic import check_text, command_timeout, environment_text, result_text

READ_LIMIT = 2000  # lines shown by read_file when no end_line is given


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _tool("bash", "Run a command in the persistent bash shell (the working directory, variables "
          "and background jobs persist between calls). Returns the terminal output and, when it "
          "is not 0, the exit code. A command still running at the timeout is interrupted.",
          {"command": {"type": "string", "description": "The command; may span several lines."},
           "timeout": {"type": "number", "description": "Seconds to wait (optional)."}},
          ["command"]),
    _tool("read_file", f"Show a text file with line numbers (at most {READ_LIMIT} lines unless "
          "end_line is given).",
          {"path": {"type": "string", "description": "Absolute, or relative to the shell's directory."},
           "start_line": {"type": "integer", "description": "First line, from 1 (optional)."},
           "end_line": {"type": "integer", "description": "Last line, inclusive (optional)."}},
          ["path"]),
    _tool("write_file", "Create or overwrite a file with exactly the given content (parent "
          "directories are created).",
          {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    _tool("edit", "Replace old_str with new_str in a file. old_str must occur exactly once: "
          "include enough surrounding lines to make it unique.",
          {"path": {"type": "string"},
           "old_str": {"type": "string", "description": "Exact text to replace, whitespace included."},
           "new_str": {"type": "string", "description": "The replacement."}},
          ["path", "old_str", "new_str"]),
    _tool("submit", "Declare the task done. Ends the episode; hidden tests then check the "
          "container's state.", {}, []),
]
TOOL_NAMES = [t["function"]["name"] for t in TOOL_SCHEMAS]

# Reads "path\nold\nnew" (each base64) on stdin; bytes in, bytes out, so the edit is exact.
_EDIT_PY = r"""
import base64, os, sys
p, old, new = (base64.b64decode(x) for x in sys.stdin.read().split("\n")[:3])
p = os.path.expanduser(os.fsdecode(p))
try:
    with open(p, "rb") as f:
        data = f.read()
except OSError as e:
    sys.exit("edit: cannot read %s: %s" % (p, e.strerror))
n = data.count(old)
if n != 1:
    if n == 0:
        msg = "old_str was not found in %s. It must match exactly, whitespace and indentation included; read the file to copy the exact text." % p
    else:
        msg = "old_str occurs %d times in %s; it must occur exactly once. Include more surrounding lines to make it unique." % (n, p)
    sys.exit("edit: " + msg)
at = data.index(old)
data = data[:at] + new + data[at + len(old):]
try:
    with open(p, "wb") as f:
        f.write(data)
except OSError as e:
    sys.exit("edit: cannot write %s: %s" % (p, e.strerror))
first = data.count(b"\n", 0, at) + 1
lines = data.decode("utf-8", "replace").split("\n")
last = first + new.count(b"\n")
print("Edited %s: replaced 1 occurrence. Lines %d-%d now read:" % (p, max(1, first - 2), min(len(lines), last + 2)))
for i in range(max(1, first - 2), min(len(lines), last + 2) + 1):
    print("%6d\t%s" % (i, lines[i - 1]))
"""


def _b64(data: str) -> str:
    return base64.b64encode(data.encode("utf-8")).decode("ascii")


def _quote_path(path: str) -> str:
    """The path quoted for the shell, with a leading ``~/`` still meaning the home directory."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def _line(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FormatError(f"read_file: {name} must be a line number (an integer from 1).")
    return value


def _string(tool: str, args: dict[str, Any], name: str, *, empty: bool = True) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        what = "is missing" if value is None else f"must be a string, not {type(value).__name__}"
        raise FormatError(f"{tool}: the argument {name!r} {what}.")
    if not empty and not value:
        raise FormatError(f"{tool}: the argument {name!r} must not be empty.")
    return check_text(value, f"{tool}: {name}")


def read_file_command(path: str, start: int | None = None, end: int | None = None) -> str:
    q = _quote_path(path)
    s = start or 1
    e = end if end is not None else s + READ_LIMIT - 1
    notes = f'[ "$n" -lt {s} ] && echo "read_file: the file has $n lines"; '
    if end is None:
        notes += f'[ "$n" -gt {e} ] && echo "... ($n lines in all; read more with start_line={e + 1})"; '
    return (f"( if [ -f {q} ]; then cat -n -- {q} | sed -n '{s},{e}p;{e}q'; "
            f'n=$(grep -c "" < {q}); {notes}true; '
            f"else echo \"read_file: not a file: \"{q} >&2; false; fi )")


def write_file_command(path: str, content: str) -> str:
    q = _quote_path(path)
    size = len(content.encode("utf-8"))
    return (f'mkdir -p -- "$(dirname -- {q})" && printf %s {_b64(content)} | base64 -d > {q} '
            f"&& echo {shlex.quote(f'Wrote {size} bytes to {path}')}")


def edit_command(path: str, old: str, new: str) -> str:
    payload = " ".join(shlex.quote(_b64(x)) for x in (path, old, new))
    return f"printf '%s\\n' {payload} | python3 -c {shlex.quote(_EDIT_PY)}"


class ToolCallingHarness(Harness):
    name = "tool-calling"
    tool_schemas = TOOL_SCHEMAS

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def parse(self, completion: Completion) -> list[HarnessAction]:
        calls = completion.tool_calls
        if not calls:
            raise FormatError(
                "You did not call a tool, so nothing happened. Every reply must call at least "
                f"one of the tools ({', '.join(TOOL_NAMES)}). To run a command, call bash; when "
                "the task is done, call submit."
            )
        actions, problems = [], []
        for call in calls:
            raw = call.arguments or ""
            try:
                args = json.loads(raw) if raw.strip() else {}
                if isinstance(args, str) and args.strip().startswith("{"):
                    args = json.loads(args)  # encoded twice, as some models do
            except (ValueError, RecursionError) as exc:
                problems.append(f"{call.name} (call {call.id}): the arguments are not valid JSON "
                                f"({str(exc)[:200]})")
                continue
            if not isinstance(args, dict):
                problems.append(f"{call.name} (call {call.id}): the arguments must be a JSON object")
                continue
            actions.append(HarnessAction(tool=call.name, args=args, call_id=call.id))
        if problems:
            raise FormatError(
                "Nothing was run: " + "; ".join(problems) + ". Call the tools again with the "
                'arguments as one JSON object, e.g. {"command": "ls -la"}.',
                call_ids=[c.id for c in calls],
            )
        # submit last: everything else of the turn runs first
        return [a for a in actions if a.tool != "submit"] + [a for a in actions if a.tool == "submit"][:1]

    def compile(self, action: HarnessAction) -> list[Command | Keys | Submit]:
        tool, args = action.tool, action.args
        if tool == "submit":
            return [Submit()]
        if tool == "bash":
            command = _string(tool, args, "command", empty=False)
            return [Command(command=command, timeout=command_timeout(tool, args))]
        if tool == "read_file":
            path = _string(tool, args, "path", empty=False)
            start, end = _line(args, "start_line"), _line(args, "end_line")
            if start is not None and end is not None and end < start:
                raise FormatError("read_file: end_line must not be before start_line.")
            return [Command(command=read_file_command(path, start, end))]
        if tool == "write_file":
            path = _string(tool, args, "path", empty=False)
            return [Command(command=write_file_command(path, _string(tool, args, "content")))]
        if tool == "edit":
            path = _string(tool, args, "path", empty=False)
            old = _string(tool, args, "old_str", empty=False)
            new = _string(tool, args, "new_str")
            return [Command(command=edit_command(path, old, new))]
        raise FormatError(f"unknown tool {tool!r}; the tools are: {', '.join(TOOL_NAMES)}.")

    def result_messages(self, results: list[ActionResult], completion: Completion) -> list[dict[str, Any]]:
        shown = [r.model_copy(update={"observation": result_text(r)}) for r in results]
        return tool_result_messages(shown)

    def error_messages(self, error: FormatError, completion: Completion) -> list[dict[str, Any]]:
        if error.call_ids:
            return [{"role": "tool", "tool_call_id": cid, "content": error.feedback} for cid in error.call_ids]
        return [{"role": "user", "content": error.feedback}]


SYSTEM_PROMPT = (
    """\
You are an autonomous agent that solves tasks in a Linux terminal by calling tools.

## Tools
- bash(command, timeout?): run a shell command in a persistent bash shell.
- read_file(path, start_line?, end_line?): show a file with line numbers.
- write_file(path, content): create or overwrite a file with exactly this content.
- edit(path, old_str, new_str): replace the one occurrence of old_str in the file by new_str. \
old_str must match the file exactly (whitespace and indentation included) and occur exactly once; \
otherwise nothing changes and you are told how many times it occurred.
- submit(): the task is done; this ends the episode.

Call at least one tool in every reply; a reply without a tool call does nothing. You may call \
several tools in one reply: they run in order. Paths are absolute or relative to the shell's \
current directory.

"""
    + environment_text()
    + "- Submit by calling the submit tool.\n"
)
