"""An example third-party harness: the model answers one JSON object per turn.

``{"command": "ls -la"}`` runs a command, ``{"keys": ["C-c"]}`` sends keystrokes,
``{"submit": true}`` ends the episode. Registered through the ``terminal_env.harnesses`` entry
point in this folder's pyproject.toml.
"""

from __future__ import annotations

from terminal_env.actions import Command, Keys, Submit
from terminal_env.harness.base import FormatError, Harness, HarnessAction, loads_lenient

EXAMPLE = '{"command": "ls -la"}  or  {"keys": ["C-c"]}  or  {"submit": true}'


class JsonCommandHarness(Harness):
    name = "json-command"

    def system_prompt(self) -> str:
        return (
            "You solve a task in a Linux terminal (bash, in a container). Answer every turn with "
            f"exactly one JSON object and nothing else: {EXAMPLE}. You see each command's output "
            "in the next message. When the task is done, submit; hidden tests then check your work."
        )

    def parse(self, completion):
        try:
            obj = loads_lenient(completion.text)
        except ValueError as exc:
            raise FormatError(f"Could not read a JSON object ({exc}). Answer with one of: {EXAMPLE}") from None
        if not isinstance(obj, dict):
            raise FormatError(f"Answer with a JSON object, one of: {EXAMPLE}")
        if obj.get("submit") is True:
            return [HarnessAction(tool="submit")]
        if isinstance(obj.get("command"), str) and obj["command"].strip():
            return [HarnessAction(tool="command", args={"command": obj["command"]})]
        keys = obj.get("keys")
        if isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
            return [HarnessAction(tool="keys", args={"keys": keys})]
        raise FormatError(f"The object needs a non-empty 'command', 'keys' or 'submit': true. Examples: {EXAMPLE}")

    def compile(self, action):
        if action.tool == "submit":
            return [Submit()]
        if action.tool == "keys":
            return [Keys(keys=action.args["keys"])]
        return [Command(command=action.args["command"])]
