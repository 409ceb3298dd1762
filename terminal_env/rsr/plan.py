"""The planner: a verified trajectory, under any harness, rewritten as a generic playbook.

The planner sees the task's public instruction and the trajectory's actions and observations, and
nothing of the verifier (:func:`planner_view` is all it gets: the checks, the log tail and the
messages a trajectory carries are not in it). Harness-specific actions become the commands they
stand for:

* generic ``bash`` blocks and tool-calling ``bash`` calls: their command;
* Terminus keystrokes typed at the shell's prompt (``ls -la`` + Enter, the prompt back after it):
  the command; keystrokes for a program reading the terminal (an editor, a REPL), a lone key
  (``C-c``, ``Escape``) or text typed without Enter: a keystroke step (the generic ``#!keys``);
  generic ``#!keys`` and tool-calling ``keys`` likewise;
* tool-calling ``write_file``: a readable here-document; ``edit``: a small ``python3`` edit that
  checks the old text occurs once, as the tool did;
* refused actions, ``read_file`` (it changes nothing) and ``submit``: dropped.

:class:`DeterministicPlanner` does only that. :class:`ModelPlanner` asks a model backend with the
prompt in ``prompts/planner.md`` (or a file of the user's) to write the playbook from the same view.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..harness.terminus import keystroke_keys
from ..models.base import SamplingParams
from ..output import truncate_middle
from ..trajectory import Trajectory
from .playbook import Playbook, PlaybookStep, Source

PROMPTS = Path(__file__).parent / "prompts"
WHY_LIMIT = 300
_FENCE = re.compile(r"(`{3,})[^\n]*\n.*?\1", re.S)
_KEY_NAME = re.compile(r"^(C-\w|M-\w|Escape|Enter|Tab|BSpace|Up|Down|Left|Right|Home|End|PageUp|PageDown|F\d+)$")


def heredoc(path: str, content: str) -> str:
    """A readable command that writes exactly ``content`` to ``path``.

    >>> print(heredoc("/app/a.txt", "x\\ny\\n"))
    mkdir -p "$(dirname /app/a.txt)" && cat > /app/a.txt <<'EOF'
    x
    y
    EOF
    """
    q = shlex.quote(path)
    delim = "EOF"
    while delim in content.split("\n"):
        delim += "_"
    body = content if content.endswith("\n") else content + "\n"
    cmd = f'mkdir -p "$(dirname {q})" && cat > {q} <<\'{delim}\'\n{body}{delim}'
    if not content.endswith("\n"):  # the here-document adds one newline: take it off again
        cmd += f'\nprintf %s "$(cat {q})" > {q}'
    return cmd


def python_edit(path: str, old: str, new: str) -> str:
    """A readable command that replaces the one occurrence of ``old`` in ``path`` with ``new``."""
    return (
        "python3 - <<'PY'\n"
        "import pathlib\n"
        f"p = pathlib.Path({path!r})\n"
        "text = p.read_text()\n"
        f"old, new = {old!r}, {new!r}\n"
        "assert text.count(old) == 1, 'the text to replace must occur exactly once'\n"
        "p.write_text(text.replace(old, new, 1))\n"
        "PY"
    )


def _why(turn: Any) -> str:
    """The source's own short reasoning for a turn (its words outside commands)."""
    comp = turn.completion
    if comp is None:
        return ""
    text = comp.text or ""
    try:  # Terminus: the analysis and the plan
        data = json.loads(text)
        if isinstance(data, dict):
            text = " ".join(str(data.get(k) or "") for k in ("analysis", "plan"))
    except ValueError:
        text = _FENCE.sub(" ", text)
    text = " ".join(text.split())
    return text[:WHY_LIMIT]


def planner_view(traj: Trajectory, instruction: str) -> dict[str, Any]:
    """All a planner sees: the public instruction and, per turn, the harness actions with what the
    terminal showed. Built field by field, so nothing of the verifier can come along."""
    turns = []
    for turn in traj.turns:
        actions = []
        for act in turn.actions:
            actions.append({
                "tool": act.action.tool, "args": dict(act.action.args), "refused": act.error,
                "commands": [{"kind": c.action.get("kind"), "action": dict(c.action), "output": c.observation,
                              "exit_code": c.exit_code} for c in act.commands],
            })
        turns.append({"why": _why(turn), "actions": actions})
    return {"instruction": instruction, "harness": traj.harness, "turns": turns}


def fit_view(view: dict[str, Any], max_chars: int) -> tuple[dict[str, Any], str | None]:
    """The view cut to about ``max_chars`` characters of JSON for a model's context: each output
    first kept to its head and tail, then the middle turns left out (the first and the last are
    where a solution starts and ends). Returns the view and what was cut, if anything."""
    if len(json.dumps(view)) <= max_chars:
        return view, None
    view = json.loads(json.dumps(view))
    for limit in (2000, 400, 0):
        for turn in view["turns"]:
            for act in turn["actions"]:
                for c in act["commands"]:
                    c["output"] = truncate_middle(c["output"] or "", limit)[0] if limit else "(left out)"
        if len(json.dumps(view)) <= max_chars:
            return view, f"outputs cut to {limit} characters" if limit else "outputs left out"
    turns = view["turns"]
    keep = len(turns)
    while keep > 2 and len(json.dumps({**view, "turns": turns[: keep // 2] + turns[-(keep - keep // 2):]})) > max_chars:
        keep -= 1
    head, tail = turns[: keep // 2], turns[len(turns) - (keep - keep // 2):]
    gap = {"why": f"({len(turns) - keep} turns left out here)", "actions": []}
    view["turns"] = head + [gap] + tail
    return view, f"outputs left out and {len(turns) - keep} of {len(turns)} turns"


def _step_of_keys(keys: list[str] | str, why: str) -> PlaybookStep:
    if isinstance(keys, str):
        keys = keystroke_keys(keys)
    return PlaybookStep(keys=[k for k in keys if k != ""], why=why)


def _steps_of(action: dict[str, Any], why: str, dropped: list[str], at_prompt: bool) -> list[PlaybookStep]:
    """The playbook steps of one harness action. ``at_prompt``: the shell was at its prompt
    before it (no program was reading the terminal), so typed lines are commands; otherwise
    keystrokes stay keystrokes."""
    tool, args = action["tool"], action["args"]
    if action["refused"]:
        dropped.append(f"{tool}: refused ({str(action['refused'])[:80]})")
        return []
    if tool == "submit":
        return []
    if tool == "read_file":
        dropped.append(f"read_file {args.get('path')}: a read changes nothing")
        return []
    if tool == "write_file":
        return [PlaybookStep(command=heredoc(str(args.get("path")), str(args.get("content", ""))), why=why)]
    if tool == "edit":
        return [PlaybookStep(command=python_edit(str(args.get("path")), str(args.get("old_str", "")),
                                                 str(args.get("new_str", ""))), why=why)]
    if tool == "bash":
        timeout = args.get("timeout")
        return [PlaybookStep(command=str(args.get("command", "")), why=why,
                             timeout=float(timeout) if isinstance(timeout, (int, float)) else None)]
    if tool == "keystrokes":
        keys = str(args.get("keystrokes", "")).replace("\r\n", "\n")
        if not keys:
            return []  # a wait (a lone Enter is a key, which a REPL's block may need)
        finished = bool(action["commands"]) and action["commands"][-1].get("exit_code") is not None
        line = keys.rstrip("\n")
        if at_prompt and finished and keys.endswith("\n") and not _KEY_NAME.match(line.strip()):
            return [PlaybookStep(command=line, why=why)]  # a command line typed at the prompt
        return [_step_of_keys(keys, why)]
    if tool == "keys":
        return [_step_of_keys([str(k) for k in args.get("keys") or []], why)]
    # A harness of its own (a plugin): the generic actions its action compiled to, as run.
    steps = []
    for c in action["commands"]:
        a = c["action"]
        if c.get("kind") == "command" and a.get("command"):
            steps.append(PlaybookStep(command=str(a["command"]), why=why))
        elif c.get("kind") == "keys" and a.get("keys"):
            steps.append(_step_of_keys([str(k) for k in a["keys"]], why))
    if not steps:
        dropped.append(f"{tool}: an action of its harness that ran no shell command")
    return steps


def weights_of(traj: Trajectory) -> str | None:
    """The weights that produced the trajectory's turns (as their backend named them), if any."""
    names = sorted({t.completion.weights for t in traj.turns if t.completion is not None and t.completion.weights})
    return ",".join(names) or None


class DeterministicPlanner:
    """Normalises and extracts the commands (no model)."""

    name = "deterministic"

    def plan(self, traj: Trajectory, *, instruction: str, task_path: str, task_digest: str,
             attempt: int, source_path: str) -> Playbook:
        view = planner_view(traj, instruction)
        steps: list[PlaybookStep] = []
        dropped: list[str] = []
        at_prompt = True
        for turn in view["turns"]:
            for action in turn["actions"]:
                steps += _steps_of(action, turn["why"], dropped, at_prompt)
                if action["commands"]:  # the shell's prompt came back after its last command
                    at_prompt = action["commands"][-1].get("exit_code") is not None
        steps = [s for s in steps if not s.empty]
        return Playbook(
            task=traj.task.name, task_path=task_path, task_digest=task_digest, instruction=instruction,
            source=Source(trajectory_id=traj.id, harness=traj.harness, attempt=attempt,
                          policy=traj.model.name, weights=weights_of(traj), path=source_path),
            steps=steps, planner=self.name, dropped=dropped)


class ModelPlanner(DeterministicPlanner):
    """Asks a model for the playbook, from the planner's view and the deterministic draft. The
    reply must be a JSON list of ``{"command", "why"}`` (or ``{"keys": [...], "why"}``); a reply
    that is not keeps the draft and says why in ``dropped``. A long trajectory's view is cut to
    ``max_chars`` (:func:`fit_view`), saying so in ``dropped``."""

    def __init__(self, backend: Any, prompt: str | Path | None = None, *,
                 params: SamplingParams | None = None, max_chars: int = 40_000):
        self.backend = backend
        self.prompt = Path(prompt) if prompt else PROMPTS / "planner.md"
        if not self.prompt.is_file():
            raise ConfigError(f"planner prompt {self.prompt} does not exist")
        self.name = f"model:{getattr(backend, 'name', type(backend).__name__)}"
        self.params = params or SamplingParams(temperature=0.0)
        self.max_chars = max_chars

    def plan(self, traj: Trajectory, **kw: Any) -> Playbook:
        draft = super().plan(traj, **kw)
        view, cut = fit_view(planner_view(traj, kw["instruction"]), self.max_chars)
        messages = [
            {"role": "system", "content": self.prompt.read_text()},
            {"role": "user", "content": json.dumps({"view": view, "draft": [s.model_dump(exclude_defaults=True)
                                                                             for s in draft.steps]}, indent=1)},
        ]
        reply = self.backend.complete(messages, params=self.params)
        usage = {k: v for k, v in reply.usage.model_dump().items() if v is not None}
        notes = [f"planner model's view: {cut}"] if cut else []
        steps = parse_steps(reply.text)
        if steps is None:
            return draft.model_copy(update={"planner": DeterministicPlanner.name, "usage": usage, "dropped": [
                *draft.dropped, *notes, "planner model: no JSON list of steps in its reply; the draft is kept"]})
        return draft.model_copy(update={"steps": steps, "planner": self.name, "usage": usage,
                                        "dropped": [*draft.dropped, *notes]})


def parse_steps(text: str) -> list[PlaybookStep] | None:
    """A JSON list of ``{"command", "why"}`` in ``text`` (a fenced ``json`` block allowed)."""
    m = re.search(r"\[.*\]", text or "", re.S)
    if not m:
        return None
    try:
        items = json.loads(m.group(0))
        steps = [PlaybookStep(keys=[str(k) for k in i["keys"]], why=str(i.get("why", ""))[:WHY_LIMIT])
                 if isinstance(i.get("keys"), list) else
                 PlaybookStep(command=str(i["command"]), why=str(i.get("why", ""))[:WHY_LIMIT]) for i in items]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return [s for s in steps if not s.empty] or None
