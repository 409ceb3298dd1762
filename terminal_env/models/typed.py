"""The oracle as an agent of any harness: the reference solution's commands, typed as its own.

:class:`~terminal_env.models.simple.OracleBackend` copies ``solution/`` in and runs it as one
script, in the generic harness only. The self-rewrite pipeline needs verified successes under
several harnesses that look like an agent's: :class:`TypedOracleBackend` reads the solution
script on the host, cuts it into the commands a person would type (a chunk is complete when
``bash -n`` parses it without a complaint: multi-line loops and here-documents stay whole), and
answers each turn in the harness's own format:

* ``generic``: one fenced ``bash`` block per command;
* ``terminus``: the command as keystrokes ending in Enter, then ``task_complete`` (twice, as
  Terminus asks to confirm);
* ``tool-calling`` (and any harness with a ``bash`` tool): a ``bash`` call per command, except that
  a ``cat > FILE <<'EOF'`` here-document becomes a ``write_file`` call with the file's content.

Nothing under ``/solution`` is copied into the sandbox or named by a command: a solution that
names its own directory (``$0``, ``dirname``, ``/solution/...``) cannot be typed, and the backend
says so when the episode starts (:class:`UntypeableSolution`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .base import Completion, EpisodeAware
from .simple import fenced, to_completion

#: shell lines that change how an interactive shell behaves (``set -e`` would end it at the
#: first failing command; ``exit`` would end it at once): dropped when typed
_SHELL_ONLY = re.compile(r"^\s*(set\s+-[euxo]+(\s+pipefail)?|set\s+-o\s+\w+|exit(\s+\d+)?|#!.*)\s*$")
# the script naming its own place: `dirname "$0"`, `${0%/*}`, BASH_SOURCE, /solution (awk's $0 is not)
_OWN_DIR = re.compile(r"dirname\s+[\"']?\$\{?0\b|\$\{0[%#/]|BASH_SOURCE|(?<![\w.-])/solution\b")
_HEREDOC = re.compile(r"^cat\s+>\s*(\S+)\s+<<-?\s*'?\"?(\w+)'?\"?\n(.*)\n\2$", re.S)


class UntypeableSolution(ConfigError):
    """The task's solution cannot be typed as an agent's commands (it names its own directory,
    or is not a shell script)."""


def _complete(chunk: str) -> bool:
    """``bash -n`` parses ``chunk`` without an error or a warning (an unterminated here-document
    is only a warning). Parsing only: nothing of the script runs on this host."""
    bash = shutil.which("bash") or "/bin/bash"
    proc = subprocess.run([bash, "-n"], input=chunk, capture_output=True, text=True, timeout=30)
    return proc.returncode == 0 and not proc.stderr.strip()


def typed_commands(script: str, *, source: str = "solution") -> list[str]:
    """The commands of a shell script as a person would type them, in order.

    >>> typed_commands("#!/bin/bash\\nset -e\\ncd /app\\nfor i in 1 2; do\\n  echo $i\\ndone\\n")
    ['cd /app', 'for i in 1 2; do\\n  echo $i\\ndone']
    """
    if _OWN_DIR.search(script):
        raise UntypeableSolution(
            f"{source}: it names its own directory ($0, BASH_SOURCE, dirname or /solution), so "
            "its commands cannot be typed as an agent's own")
    commands: list[str] = []
    buffer: list[str] = []
    for line in script.splitlines():
        if not buffer and (not line.strip() or line.lstrip().startswith("#") or _SHELL_ONLY.match(line)):
            continue
        buffer.append(line)
        chunk = "\n".join(buffer)
        continued = (len(line) - len(line.rstrip("\\"))) % 2 == 1  # a line ending in one backslash
        if not continued and _complete(chunk + "\n"):
            commands.append(chunk.strip("\n"))
            buffer = []
    if buffer:
        raise UntypeableSolution(f"{source}: its last lines do not parse as a complete command:\n"
                                 + "\n".join(buffer[:5]))
    if not commands:
        raise UntypeableSolution(f"{source}: no command to type")
    return commands


def terminus_reply(commands: list[str], done: bool, duration: float = 60.0) -> str:
    return json.dumps({
        "analysis": "Following the plan." if commands else "The work is done.",
        "plan": "Run the next step." if commands else "Submit.",
        "commands": [{"keystrokes": c + "\n", "duration": duration} for c in commands],
        "task_complete": done,
    })


def tool_call_for(command: str) -> dict[str, Any]:
    """A ``write_file`` call for a ``cat > FILE <<'EOF'`` here-document, else a ``bash`` call."""
    m = _HEREDOC.match(command)
    if m and "$" not in m.group(1) and "'" in command.split("\n", 1)[0]:  # a quoted delimiter: literal
        return {"name": "write_file", "arguments": {"path": m.group(1), "content": m.group(3) + "\n"}}
    return {"name": "bash", "arguments": {"command": command}}


class TypedOracleBackend(EpisodeAware):
    """Types the task's reference solution, command by command, in the episode's harness."""

    name = "typed-oracle"

    def __init__(self) -> None:
        self._replies: list[Any] = []
        self._i = 0

    def start_episode(self, env: Any, harness: Any) -> None:
        task = env.source_task
        if task is None or not task.has_solution:
            raise ConfigError("typed-oracle needs a task directory with a solution")
        files = task.solution_files()
        main = files.get("solve.sh")
        if main is None:
            raise UntypeableSolution(f"task {task.name!r}: no solve.sh to type")
        text = main.decode() if isinstance(main, bytes) else Path(main).read_text()
        commands = typed_commands(text, source=f"task {task.name!r} solve.sh")
        kind = getattr(harness, "name", "generic")
        has_bash = any((t.get("function") or {}).get("name") == "bash" for t in (harness.tools() or []))
        if kind not in ("generic", "terminus") and not has_bash:
            raise ConfigError(f"typed-oracle answers in the generic and terminus formats and with a `bash` "
                              f"tool; the {kind!r} harness takes none of them")
        if kind == "terminus":
            self._replies = [terminus_reply([c], False) for c in commands]
            self._replies += [terminus_reply([], True), terminus_reply([], True)]
        elif kind == "generic":
            self._replies = [fenced(c) for c in commands] + [fenced("#!submit")]
        else:
            self._replies = [{"content": "", "tool_calls": [tool_call_for(c)]} for c in commands]
            self._replies.append({"content": "", "tool_calls": [{"name": "submit", "arguments": {}}]})
        self._i = 0

    def complete(self, messages, *, tools=None, params=None) -> Completion:
        self._i += 1
        reply = self._replies[min(self._i, len(self._replies)) - 1] if self._replies else fenced("#!submit")
        return to_completion(reply, self._i)
