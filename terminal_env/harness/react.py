"""The ReAct harness: ``<thought>...</thought>`` then one ``<action>...</action>`` per turn;
observations come back as ``<observation>...</observation>``.

The action holds the environment's plain-text syntax (a shell command, ``#!keys ...``, or
``#!submit``), so it compiles exactly like the generic harness.
"""

from __future__ import annotations

import re
from typing import Any

from ..models.base import Completion
from .base import ActionResult, FormatError, HarnessAction
from .generic import (
    GenericHarness,
    answer_text,
    cut_off_note,
    environment_text,
    result_text,
    text_action,
)

_ACTION = re.compile(r"<action>(.*?)</action>", re.S | re.I)
_OPEN = re.compile(r"<action>", re.I)
_FENCE = re.compile(r"\A```[^\n`]*\n(.*?)\n?```\Z", re.S)

EXAMPLE = """\
<thought>I need to know which files are in the project before changing anything.</thought>
<action>ls -la</action>"""


class ReactHarness(GenericHarness):
    name = "react"

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def _format_error(self, problem: str, completion: Completion) -> FormatError:
        return FormatError(
            f"Format error: {problem}{cut_off_note(completion)} Nothing was run.\nEach reply must "
            "be a <thought>...</thought> followed by exactly ONE <action>...</action> holding a "
            "shell command, or #!keys ... for keystrokes, or #!submit when the task is done. Do "
            "not write <observation> yourself: it comes back after the action runs.\n\nExample:\n"
            + EXAMPLE
        )

    def parse(self, completion: Completion) -> list[HarnessAction]:
        text = answer_text(completion)
        found = _ACTION.findall(text)
        if len(found) > 1:
            raise self._format_error(f"your reply has {len(found)} <action> tags; only one is "
                                     "allowed per turn.", completion)
        if not found:
            opened = list(_OPEN.finditer(text))
            if not opened:
                raise self._format_error("your reply has no <action>...</action>.", completion)
            if len(opened) > 1 or completion.finish_reason == "length":
                raise self._format_error("the <action> tag is not closed with </action>.", completion)
            # Generation stopped right after the action (e.g. on a stop sequence): take the rest.
            found = [text[opened[0].end():]]
        content = found[0].strip()
        fence = _FENCE.match(content)
        if fence:
            content = fence.group(1).strip("\n")
        if not content.strip():
            raise self._format_error("the <action> is empty.", completion)
        return [text_action(content)]

    def result_messages(self, results: list[ActionResult], completion: Completion) -> list[dict[str, Any]]:
        text = "\n\n".join(result_text(r) for r in results) or "(nothing was run)"
        return [{"role": "user", "content": f"<observation>\n{text}\n</observation>"}]


SYSTEM_PROMPT = (
    """\
You are an autonomous agent that solves tasks in a Linux terminal. You work in a loop of \
thought, action and observation, one action per turn.

## Reply format
Every reply is a thought followed by exactly one action:
"""
    + EXAMPLE
    + """

Rules:
- <thought>: brief reasoning about what you saw and what to do next.
- <action>: exactly one per reply; a reply with none or with several is rejected and nothing \
runs. Its content is one of:
  - a shell command, run as one command; it may span several lines (several commands, a \
heredoc, a loop). Write it as is, with no code fence and no escaping;
  - #!keys followed by keys separated by spaces, to type into an interactive program or to stop \
one: key names such as C-c, C-d, Enter, Escape, Tab, Up, Down, BSpace, or literal text in \
quotes, e.g. <action>#!keys ':wq' Enter</action>;
  - #!submit, when the task is complete: <action>#!submit</action>.
- Stop after </action>. The result comes back as <observation>...</observation>; never write an \
observation yourself.

"""
    + environment_text()
)
