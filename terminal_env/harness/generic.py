"""The generic harness: reasoning, then one fenced ``bash`` block per turn.

The block holds the environment's own plain-text action syntax (:mod:`terminal_env.actions`): a
shell command, ``#!keys ...`` keystrokes, or ``#!submit``. Every other harness's trace can be
rewritten into this one, since every action compiles to these generic actions.

The helpers at the top (the answer without its thinking, the text of a result, a text action)
are shared with the ReAct harness.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..actions import Command, Keys, Submit, parse_action
from ..errors import ConfigError
from ..models.base import Completion, split_thinking
from .base import ActionResult, CommandRecord, FormatError, Harness, HarnessAction

#: fence info strings that mark a command block (lower case); ``""`` is a bare fence
SHELL_LANGS = frozenset({"bash", "sh", "shell", ""})
_OPEN = re.compile(r"^ {0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")
_CLOSE = re.compile(r"^ {0,3}(`{3,})[ \t]*$")

KEYS_HELP = (
    "#!keys sends keystrokes: key names (C-c, C-d, Enter, Escape, Tab, Up, Down, Left, Right, "
    "BSpace, PageUp, F1, M-x, ...) and literal text, separated by spaces; quote text that "
    "contains spaces, e.g. #!keys C-c  or  #!keys ':wq' Enter"
)


def answer_text(completion: Completion) -> str:
    """The reply without Qwen-style thinking: closed ``<think>`` blocks, a lone ``</think>``
    (the template opened the block) and an unclosed ``<think>`` (cut off while thinking).
    Line ends are normalised to ``\\n``."""
    text, _ = split_thinking((completion.text or "").replace("\r\n", "\n"))
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    return text


def cut_off_note(completion: Completion) -> str:
    if completion.finish_reason == "length":
        return " Your reply was cut off at the token limit: keep the reasoning shorter."
    return ""


def result_text(result: ActionResult) -> str:
    """What the model is shown for one action: its observation, or why it was refused."""
    text = result.observation
    if result.error and result.error not in text:
        text = f"{text}\n{result.error}" if text else result.error
    return text or "(no output)"


def check_text(value: str, what: str) -> str:
    """Refuse text the terminal cannot carry (lone surrogates from a broken JSON escape)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(f"{what} contains invalid Unicode (a lone surrogate); write plain UTF-8 text.") from None
    return value


def text_action(text: str) -> HarnessAction:
    """A harness action from the environment's text syntax (command, ``#!keys``, ``#!submit``)."""
    lines = text.strip().splitlines()
    if lines and lines[0].strip() == "#!submit" and len(lines) > 1:
        raise FormatError(
            "#!submit must be alone. Run your remaining commands first; when you are done, "
            "reply with a block holding only the line #!submit."
        )
    try:
        act = parse_action(check_text(text, "the command"))
    except ConfigError as exc:
        raise FormatError(f"{exc}\n{KEYS_HELP}") from None
    if isinstance(act, Submit):
        return HarnessAction(tool="submit")
    if isinstance(act, Keys):
        return HarnessAction(tool="keys", args={"keys": list(act.keys)})
    args: dict[str, Any] = {"command": act.command}
    if act.timeout is not None:
        args["timeout"] = act.timeout
    return HarnessAction(tool="bash", args=args)


def command_timeout(tool: str, args: dict[str, Any]) -> float | None:
    """The optional ``timeout`` argument of a command: a positive number of seconds, or None."""
    timeout = args.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise FormatError(f"{tool}: timeout must be a positive number of seconds.")
    return timeout


def compile_text_action(action: HarnessAction) -> list[Command | Keys | Submit]:
    """Generic actions for the ``bash`` / ``keys`` / ``submit`` vocabulary."""
    args = action.args
    if action.tool == "submit":
        return [Submit()]
    if action.tool == "bash":
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise FormatError("the command is empty: write a shell command in the block.")
        return [Command(command=check_text(command, "the command"), timeout=command_timeout("bash", args))]
    if action.tool == "keys":
        keys = args.get("keys")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise FormatError(f"a keys action needs a list of keys. {KEYS_HELP}")
        return [Keys(keys=[check_text(k, "a key") for k in keys])]
    raise FormatError(f"unknown action {action.tool!r}: use a shell command, #!keys ... or #!submit.")


def fenced_blocks(text: str) -> tuple[list[tuple[str, str, bool]], list[str]]:
    """Fenced code blocks as (language, content, closed), CommonMark-style: a closing fence has
    at least as many backticks as its opening one and no info string (so a 4-backtick fence can
    hold a 3-backtick one). Returns the shell blocks and the languages of the others."""
    shell: list[tuple[str, str, bool]] = []
    others: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        body: list[str] = []
        closed = False
        i += 1
        while i < len(lines):
            c = _CLOSE.match(lines[i])
            if c and len(c.group(1)) >= len(fence):
                closed = True
                break
            body.append(lines[i])
            i += 1
        i += 1
        if lang in SHELL_LANGS:
            shell.append((lang, "\n".join(body), closed))
        else:
            others.append(lang)
    return shell, others


class GenericHarness(Harness):
    name = "generic"

    FORMAT_EXAMPLE = (
        "Example of a valid reply:\n\n"
        "The tests live in tests/; I will run them to see what fails.\n"
        "```bash\ncd /app && python3 -m pytest -q tests\n```"
    )

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def _format_error(self, problem: str, completion: Completion) -> FormatError:
        return FormatError(
            f"Format error: {problem}{cut_off_note(completion)}\nEach reply must contain exactly ONE "
            "fenced ```bash code block: a shell command (it may span several lines), or #!keys "
            "... for keystrokes, or #!submit when the task is done. Nothing was run.\n\n"
            + self.FORMAT_EXAMPLE
        )

    def parse(self, completion: Completion) -> list[HarnessAction]:
        text = answer_text(completion)
        blocks, others = fenced_blocks(text)
        if not blocks:
            if others:
                langs = ", ".join(sorted({o or "?" for o in others}))
                raise self._format_error(
                    f"your reply has no ```bash block (only a block of: {langs}). To create a file, "
                    "write it from a bash block, e.g. with cat <<'EOF' > file.", completion)
            raise self._format_error("your reply has no fenced code block.", completion)
        if len(blocks) > 1:
            raise self._format_error(
                f"your reply has {len(blocks)} ```bash blocks; only one is allowed per turn. Put "
                "several commands in one block (one per line, or joined with &&), or run them "
                "in separate turns.", completion)
        _, content, closed = blocks[0]
        if not closed and completion.finish_reason == "length":
            raise self._format_error("the code block is not closed with ```.", completion)
        if not content.strip():
            raise self._format_error("the code block is empty.", completion)
        return [text_action(content.strip("\n"))]

    def compile(self, action: HarnessAction) -> list[Command | Keys | Submit]:
        return compile_text_action(action)

    def observe(self, action: HarnessAction, commands: list[CommandRecord]) -> str:
        return "\n".join(c.observation for c in commands if c.observation) or "(no output)"

    def result_messages(self, results: list[ActionResult], completion: Completion) -> list[dict[str, Any]]:
        text = "\n\n".join(result_text(r) for r in results) or "(nothing was run)"
        return [{"role": "user", "content": text}]


def environment_text(*, commands: bool = True) -> str:
    """The environment and finishing sections shared by the system prompts; ``commands``: the
    harness runs whole commands (with a time limit) rather than raw keystrokes."""
    limit = (
        "- Commands have a time limit; one that does not finish in time is interrupted with "
        "Ctrl-C. Run long jobs with a timeout or in the background, and prefer non-interactive "
        "options (apt-get -y, git --no-pager, PAGER=cat).\n"
        if commands
        else "- Prefer non-interactive options (apt-get -y, git --no-pager, PAGER=cat); a program "
        "that waits for input keeps the terminal until you answer it or stop it with C-c.\n"
    )
    return (
        "## The environment\n"
        "- You work in a bash shell in a Linux container (Debian-like), as if typing in a "
        "terminal. The first message gives the task and the directory the shell starts in.\n"
        "- The shell persists between turns: the current directory, variables and background "
        "jobs stay.\n"
        "- After each turn you see the terminal output (long output is shortened in the "
        'middle); a command that fails is followed by a line "[exit code N]".\n'
        + limit
        + "- There is no network access unless the task says otherwise. Nobody answers "
        "questions: decide reasonable details yourself.\n\n"
        "## Finishing\n"
        "- Submitting ends the episode for good; hidden tests then check the container's final "
        "state (files, programs, services). You cannot act after that, so check your work first "
        "(run the code, look at the output, run any tests you can find).\n"
        "- You must submit when the task is done: an episode that never submits only ends when "
        "its budget runs out.\n"
    )


SYSTEM_PROMPT = (
    """\
You are an autonomous agent that solves tasks in a Linux terminal, one shell command per turn.

## Reply format
Every reply has two parts: brief reasoning, then exactly ONE fenced code block with the command \
to run, like this:

I need to see which files are there first.
```bash
ls -la
```

Rules:
- Exactly one ```bash block per reply. A reply with no block or with more than one is rejected \
and nothing runs. (```sh and a bare ``` fence work too.)
- The block's content runs in the shell as one command. It may span several lines (several \
commands, a heredoc, a loop). Only the block runs: text outside it is not executed. To write a \
file that itself contains ``` lines, open the block with four backticks (````bash) and close it \
with four.
- To send keystrokes instead (to an editor, a pager, a REPL, or to stop a running program), the \
block's first line is #!keys followed by keys separated by spaces: key names such as C-c, C-d, \
Enter, Escape, Tab, Up, Down, BSpace, or literal text in quotes. For example:
```bash
#!keys C-c
```
```bash
#!keys ':wq' Enter
```
- When the task is complete, reply with a block that contains only #!submit:
```bash
#!submit
```

"""
    + environment_text()
)
