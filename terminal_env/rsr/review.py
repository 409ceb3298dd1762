"""The reviewer: playbooks that leak the verifier's answers are rejected, each with its reason.

:class:`LeakChecks` (always, first) rejects a playbook whose commands or reasoning

* name the verifier's or the oracle's files: ``/tests``, ``/solution``, ``/logs/verifier``,
  ``reward.txt``/``reward.json``, ``test_outputs.py``, ``run-tests.sh``, ``solve.sh``
  (``path-reference``);
* hold a literal that occurs in the task's ``tests/`` and in neither its instruction nor its
  environment (``leaked-value``): an expected output or a hidden input the agent could not have
  seen. Literals are the tests' string constants with a digit, a space or punctuation (or 16
  characters and more; not docstrings, assertion messages, or the arguments the tests pass to
  what they call, such as commands, flags, SQL and patterns, unless they hold three digits in a
  row), their numbers of three significant digits and more, and the lines and fields of their
  data files.

A model reviewer (:class:`ModelReviewer`, prompt in ``prompts/reviewer.md``) runs after the checks,
never instead of them, and sees only the public instruction and the playbook.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..models.base import SamplingParams
from .playbook import Playbook, Verdict

PROMPTS = Path(__file__).parent / "prompts"
_PATHS = re.compile(
    r"(?<![\w.~/-])(/tests|/solution|/logs/verifier|/oracle)(?![\w-])"
    r"|\breward\.(?:txt|json)\b|\btest_outputs\.py\b|\brun-tests\.sh\b|\bsolve\.sh\b"
)
MAX_FILE = 1 << 20  # bytes read of one file when looking for literals
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _significant(value: str) -> bool:
    """A value specific enough that finding it in a playbook means the playbook knew it: numbers
    with three significant digits or more (``98765``, ``0.125``; not ``500`` or ``250000``),
    strings with a digit, a space or punctuation and six characters or more, or long ones."""
    value = value.strip()
    if _NUMBER.match(value):
        digits = value.lstrip("-")
        digits = digits.replace(".", "") if "." in digits else digits.rstrip("0")
        return len(digits.lstrip("0")) >= 3
    if len(value) >= 16:
        return True
    return len(value) >= 6 and bool(re.search(r"[\d\s]|[^\w]", value))


def hidden_literals(tests_dir: Path) -> set[str]:
    """The values in a task's tests that would give the answer away, were they in a playbook."""
    found: set[str] = set()
    for path in sorted(tests_dir.rglob("*")):
        if not path.is_file() or path.stat().st_size > MAX_FILE:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        if path.suffix == ".py":
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            prose = set()  # docstrings and assertion messages: words for people, not values
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                        and isinstance(body[0].value, ast.Constant):
                    prose.add(id(body[0].value))
                if isinstance(node, ast.Assert) and node.msg is not None:
                    prose |= {id(n) for n in ast.walk(node.msg)}
                if isinstance(node, ast.Call):  # commands, flags, SQL, patterns the test runs
                    for arg in [*node.args, *(k.value for k in node.keywords)]:
                        prose |= {id(n) for n in ast.walk(arg) if isinstance(n, ast.Constant)
                                  and not re.search(r"\d{3}", str(n.value))}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)) \
                        and not isinstance(node.value, bool) and id(node) not in prose:
                    found |= {line.strip() for line in str(node.value).splitlines()}
        elif path.name not in ("test.sh", "run-tests.sh"):  # a data file: every line and field
            for line in text.splitlines():
                found |= {line.strip(), *(f.strip() for f in re.split(r"[,;\t|]", line))}
    return {v for v in found if _significant(v)}


def public_text(task_dir: Path, instruction: str, environment_dir: Path | None) -> str:
    """What an agent could know: the instruction and the files of the task's environment."""
    parts = [instruction]
    env = environment_dir or task_dir / "environment"
    if env.is_dir():
        for path in sorted(env.rglob("*")):
            if path.is_file() and path.stat().st_size <= MAX_FILE:
                parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def _occurs(value: str, text: str) -> bool:
    if _NUMBER.match(value):
        return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", text) is not None
    return value in text


class LeakChecks:
    """The deterministic checks (no model)."""

    name = "leak-checks"

    def __init__(self, task_dir: str | Path, *, tests_dir: str | Path | None = None,
                 environment_dir: str | Path | None = None, instruction: str = ""):
        self.task_dir = Path(task_dir)
        tests = Path(tests_dir) if tests_dir else self.task_dir / "tests"
        public = public_text(self.task_dir, instruction, Path(environment_dir) if environment_dir else None)
        self.hidden = sorted(v for v in hidden_literals(tests) if not _occurs(v, public)) if tests.is_dir() else []

    def review(self, playbook: Playbook) -> list[str]:
        reasons: list[str] = []
        for i, step in enumerate(playbook.steps, 1):
            text = f"{step.command}\n{step.why}"
            for m in _PATHS.finditer(text):
                reasons.append(f"path-reference: step {i} names {m.group(0)!r}, a file of the verifier or the oracle")
            for value in self.hidden:
                if _occurs(value, text):
                    shown = value if len(value) <= 40 else value[:37] + "..."
                    reasons.append(f"leaked-value: step {i} holds {shown!r}, which only the task's tests hold")
        return list(dict.fromkeys(reasons))


class ModelReviewer:
    """A model's verdict on the public instruction and the playbook (never the tests). The reply
    must be JSON ``{"accept": true|false, "reason": "..."}``; any other reply rejects, saying so."""

    def __init__(self, backend: Any, prompt: str | Path | None = None):
        self.backend = backend
        self.prompt = Path(prompt) if prompt else PROMPTS / "reviewer.md"
        if not self.prompt.is_file():
            raise ConfigError(f"reviewer prompt {self.prompt} does not exist")
        self.name = f"model:{getattr(backend, 'name', type(backend).__name__)}"

    def review(self, playbook: Playbook) -> list[str]:
        shown = {"instruction": playbook.instruction,
                 "steps": [{"command": s.command, "why": s.why} for s in playbook.steps]}
        messages = [{"role": "system", "content": self.prompt.read_text()},
                    {"role": "user", "content": json.dumps(shown, indent=1)}]
        reply = self.backend.complete(messages, params=SamplingParams(temperature=0.0)).text or ""
        m = re.search(r"\{.*\}", reply, re.S)
        try:
            data = json.loads(m.group(0)) if m else None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("accept"), bool):
            return ["reviewer-unreadable: the model's reply was not {\"accept\": ..., \"reason\": ...}"]
        return [] if data["accept"] else [f"model-rejected: {str(data.get('reason') or 'no reason given')[:200]}"]


def review(playbook: Playbook, checks: LeakChecks, model: ModelReviewer | None = None) -> Verdict:
    """The leak checks, then (only if they pass) the model reviewer."""
    reasons = checks.review(playbook)
    reviewers = [checks.name]
    if not reasons and model is not None:
        reasons = model.review(playbook)
        reviewers.append(model.name)
    return Verdict(accepted=not reasons, reasons=reasons, reviewers=reviewers)
