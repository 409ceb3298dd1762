"""The reviewer: playbooks that leak the verifier's answers are rejected, each with its reason.

:class:`LeakChecks` (always, first) rejects a playbook whose commands or reasoning

* reach the verifier's or the oracle's files (``/tests``, ``/solution``, ``/logs/verifier``,
  ``reward.txt``, ``test_outputs.py``, ``run-tests.sh``, ``solve.sh``, ``te_checks.py``): named
  (``path-reference``), or through quoting, variables, printf, an encoding, a relative path, a
  glob, a search of ``/`` or ``/proc`` (``obfuscated-path``; :mod:`.leaks` reads the shell);
* hold a value that only the task's ``tests/`` hold, in neither its instruction nor its
  environment nor made of their parts alone (``leaked-value``): an expected output or a hidden
  input (the vendored kit ``te_checks.py``'s own constants are neither). What the tests *run* is
  not a value (commands, flags, paths, SQL and patterns: the arguments of ``subprocess``, ``re``,
  ``open``, string methods, or of a helper of the tests that hands them on to those); nor are
  docstrings and assertion messages. What they *compare* is: comparison operands of an
  ``assert``, the arguments of assertion helpers (``assert*``, ``approx``, ``allclose``,
  ``isclose``, ``*equal*`` ...) and of the tests' own helpers that compare them, parametrized
  cases, the names these flow from; in ``test.sh``, the operands of ``[ ]``/``[[ ]]``/``test``,
  ``grep`` patterns and heredocs; the lines and fields of data files. A value is looked for as
  written, unquoted or decoded when it is specific (a number of three significant digits and
  more, a string of six characters and more with a digit, a space or punctuation, or of 16 and
  more), and a float compared by the tests also when rounded to four digits and more. A shorter
  value the tests compare (``17``, ``ok``; not 0, 1 or one character) is a leak only when the
  playbook *writes* it as a literal (:func:`.leaks.written_literals`) or its reasoning calls it
  the expected answer: ``1`` elsewhere is never one.

The checks see the playbook only, never its outputs: a value copied from what an earlier step
printed is rejected too (the playbook should compute it). Rules, labelled set and measured
precision and recall: ``docs/rsr-leak-check.md``. A model reviewer (:class:`ModelReviewer`,
prompt in ``prompts/reviewer.md``) runs after the checks, never instead of them, and sees only the
public instruction and the playbook.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..models.base import SamplingParams
from ..tasks.dockerfile import dockerfile_workdir
from .leaks import ShellState, shell_test_values, variants, verifier_paths, written_literals
from .playbook import Playbook, Verdict

PROMPTS = Path(__file__).parent / "prompts"
MAX_FILE = 1 << 20  # bytes read of one file when looking for literals
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
#: what a constant of the tests is: compared with the agent's output; data (assigned, built);
#: an argument of a call we do not know; run (a command, flag, path, pattern); words for people
VALUE, DATA, ARG, COMMAND, PROSE = "value", "data", "arg", "command", "prose"
#: the project's kit, the same in every task's tests: its helpers are followed, its own
#: constants (defaults such as ``status=200``) are not the task's answers
VENDORED = {"te_checks"}
#: calls whose arguments are what the tests run or parse with, not what they expect
_RUNS = {"run", "call", "check_call", "check_output", "Popen", "system", "popen", "getoutput", "getstatusoutput",
         "execute", "executemany", "executescript", "compile", "search", "match", "fullmatch", "findall",
         "finditer", "sub", "subn", "split", "rsplit", "join", "strip", "lstrip", "rstrip", "replace", "partition",
         "rpartition", "splitlines", "encode", "decode", "format", "strptime", "strftime", "open", "Path", "exists",
         "is_file", "is_dir", "isfile", "isdir", "glob", "rglob", "iglob", "fnmatch", "get", "getenv", "urlopen",
         "connect", "reader", "writer", "DictReader", "DictWriter", "read_csv", "read_sql", "NamedTemporaryFile"}
_SAYS = {"print", "fail", "skip", "xfail", "warn", "warning", "debug", "info", "error", "exception", "AssertionError"}
_ASSERTS = re.compile(r"^(assert|approx|allclose|isclose|array_equal|array_almost_equal|equal|equals|same_)", re.I)
_ONE_ARG = {"assertTrue", "assertFalse", "assertIsNone", "assertIsNotNone"}
_SETTINGS = {"rtol", "atol", "rel", "abs", "rel_tol", "abs_tol", "places", "delta", "timeout", "cwd", "env",
             "encoding", "errors", "text", "shell", "check", "capture_output", "mode", "newline", "key"}


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


def _trivial(value: str) -> bool:
    """Too common to mean anything even when written: empty, one non-alphanumeric character,
    -1, 0, 1, a float in exponent notation (a tolerance)."""
    v = value.strip()
    if not v or (len(v) == 1 and not v.isalnum()) or re.fullmatch(r"-?\d+(\.\d+)?e-?\d+", v, re.I):
        return True
    return bool(_NUMBER.match(v)) and abs(float(v)) <= 1


@dataclass
class HiddenValues:
    """What a task's tests hold: specific values, short compared answers, compared floats."""

    values: set[str] = field(default_factory=set)
    answers: set[str] = field(default_factory=set)
    floats: set[float] = field(default_factory=set)

    def add(self, value: Any, ctx: str) -> None:
        if ctx in (COMMAND, PROSE) or value is None or isinstance(value, (bool, bytes)):
            return
        text = str(value)
        if ctx == VALUE and isinstance(value, float) and len(re.sub(r"\D", "", text).lstrip("0")) >= 4:
            self.floats.add(value)
        for line in text.splitlines() or [text]:
            line = line.strip()
            parts = {line, *re.split(r"[\s=:,;]+", line)} if ctx == VALUE else {line}
            for part in parts - {""}:
                if _significant(part) and (ctx != ARG or re.search(r"\d{3}", part)):
                    self.values.add(part)
                elif ctx == VALUE and not _trivial(part) and (part == line or _NUMBER.match(part)):
                    self.answers.add(part)


class _PythonTests:
    """Which constants of the tests' Python are compared (values) and which are run (commands):
    a small flow analysis over names, helpers' parameters and their return values, repeated
    until it settles (a helper's parameter is a value when the helper compares it)."""

    def __init__(self, modules: dict[str, ast.Module]):
        self.modules = modules
        self.defs: dict[tuple[str, str], ast.FunctionDef] = {}
        self.locals: dict[int, set[str]] = {}
        for mod, tree in modules.items():
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.defs.setdefault((mod, node.name), node)
                    a = node.args
                    self.locals[id(node)] = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                                             if p} | {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                                                      and isinstance(n.ctx, ast.Store)}
        #: ``import kit as k``: calls ``k.name(...)`` go to the tests' module kit
        self.aliases = {a.asname or a.name: a.name for tree in modules.values() for node in ast.walk(tree)
                        if isinstance(node, ast.Import) for a in node.names if a.name in modules}
        self.before: dict[tuple, set[str]] = {}

    def scan(self, into: HiddenValues) -> None:
        for _ in range(6):
            self.uses: dict[tuple, set[str]] = {}
            self.found: list[tuple[str, Any, str]] = []
            for mod, tree in self.modules.items():
                self.mod = mod  # the module being read: names and helpers resolve in it first
                self.block(tree.body, None)
            if self.uses == self.before:
                break
            self.before = self.uses
        for mod, value, ctx in self.found:
            if mod not in VENDORED:
                into.add(value, ctx)

    def ctx_of(self, key: tuple) -> str:
        used = self.before.get(key, set())
        if VALUE in used:
            return VALUE
        if used - {COMMAND, PROSE} or not used:
            return DATA
        return COMMAND if COMMAND in used else PROSE

    def key(self, name: str, scope: ast.AST | None) -> tuple:
        return (id(scope), name) if scope is not None and name in self.locals[id(scope)] else (self.mod, name)

    def block(self, body: list[ast.stmt], scope: ast.AST | None) -> None:
        for stmt in body:
            self.stmt(stmt, scope)

    def stmt(self, s: ast.stmt, scope: ast.AST | None) -> None:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in s.decorator_list:
                self.expr(d, DATA, scope)
            a = s.args
            for p, d in [*zip([*a.posonlyargs, *a.args][::-1], a.defaults[::-1]), *zip(a.kwonlyargs, a.kw_defaults)]:
                if d is not None:
                    self.expr(d, self.ctx_of((id(s), p.arg)), scope)
            self.block(s.body, s)
        elif isinstance(s, ast.ClassDef):
            self.block(s.body, scope)
        elif isinstance(s, ast.Expr):
            if not isinstance(s.value, ast.Constant):  # a docstring or a bare string: prose
                self.expr(s.value, DATA, scope)
        elif isinstance(s, ast.Assert):
            self.expr(s.test, VALUE, scope)  # the message is prose
        elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if s.value is not None:
                self.expr(s.value, self._strongest([self.ctx_of(self.key(n, scope)) for n in names]), scope)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            names = [n.id for n in ast.walk(s.target) if isinstance(n, ast.Name)]
            self.expr(s.iter, self._strongest([self.ctx_of(self.key(n, scope)) for n in names]), scope)
            self.block(s.body + s.orelse, scope)
        elif isinstance(s, (ast.If, ast.While)):
            fails = any(isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and _name(n.func) == "fail")
                        for b in s.body for n in ast.walk(b))
            self.expr(s.test, VALUE if fails else DATA, scope)
            self.block(s.body + s.orelse, scope)
        elif isinstance(s, ast.Return) and s.value is not None:
            self.expr(s.value, self.ctx_of(("return", getattr(scope, "name", ""))), scope)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.expr(item.context_expr, DATA, scope)
            self.block(s.body, scope)
        elif isinstance(s, ast.Try):
            self.block(s.body + [x for h in s.handlers for x in h.body] + s.orelse + s.finalbody, scope)
        # raise, import, global, pass ...: nothing the tests compare

    @staticmethod
    def _strongest(ctxs: list[str]) -> str:
        return next((c for c in (VALUE, DATA, COMMAND, PROSE) if c in ctxs), DATA)

    def expr(self, node: ast.AST, ctx: str, scope: ast.AST | None) -> None:
        if isinstance(node, ast.Constant):
            self.found.append((self.mod, node.value, ctx))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.op, ast.USub) and isinstance(node.operand.value, (int, float)):
            self.found.append((self.mod, -node.operand.value, ctx))
        elif isinstance(node, ast.Name):
            self.uses.setdefault(self.key(node.id, scope), set()).add(ctx)
        elif isinstance(node, ast.Call):
            self.call(node, ctx, scope)
        elif isinstance(node, ast.Compare):
            for part in [node.left, *node.comparators]:
                self.expr(part, VALUE if ctx == VALUE else DATA, scope)
        elif isinstance(node, ast.Subscript):
            self.expr(node.value, ctx, scope)
            self.expr(node.slice, COMMAND, scope)  # an index or a key picks, it is not expected
        elif isinstance(node, ast.FormattedValue):
            self.expr(node.value, ctx, scope)
        elif isinstance(node, ast.comprehension):
            names = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
            self.expr(node.iter, self._strongest([self.ctx_of(self.key(n, scope)) for n in names]), scope)
            for cond in node.ifs:
                self.expr(cond, DATA, scope)
        else:
            for child in ast.iter_child_nodes(node):
                self.expr(child, ctx, scope)

    def helper(self, func: ast.AST) -> ast.FunctionDef | None:
        """The tests' own function a call goes to: ``name(...)``, ``module.name(...)`` of a
        module of the tests, ``self.name(...)``."""
        if isinstance(func, ast.Name):
            return self.defs.get((self.mod, func.id)) or next(
                (d for (m, n), d in self.defs.items() if n == func.id), None)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = self.aliases.get(func.value.id, func.value.id)
            if owner in self.modules or owner in ("self", "cls"):
                return self.defs.get((owner if owner in self.modules else self.mod, func.attr))
        return None

    def call(self, node: ast.Call, ctx: str, scope: ast.AST | None) -> None:
        name = _name(node.func)
        local = self.helper(node.func)
        if local is not None:
            self.uses.setdefault(("return", local.name), set()).add(ctx)
            a = local.args
            params = [p.arg for p in [*a.posonlyargs, *a.args]]
            if isinstance(node.func, ast.Attribute) and params[:1] in (["self"], ["cls"]):
                params = params[1:]
            for i, arg in enumerate(node.args):
                p = params[i] if i < len(params) and not isinstance(arg, ast.Starred) else (a.vararg and a.vararg.arg)
                self.expr(arg, self._passed(self.ctx_of((id(local), p)) if p else DATA), scope)
            for kw in node.keywords:
                p = kw.arg if kw.arg in params or kw.arg in {k.arg for k in a.kwonlyargs} else (a.kwarg and a.kwarg.arg)
                self.expr(kw.value, self._passed(self.ctx_of((id(local), p)) if p else DATA), scope)
            return
        if name in _SAYS:
            return
        if isinstance(node.func, ast.Attribute):  # what a method is called on: equals.strip() is equals
            self.expr(node.func.value, ctx, scope)
        asserting = bool(name and _ASSERTS.match(name))
        passed = COMMAND if name in _RUNS else VALUE if asserting or ctx == VALUE else ARG
        if name == "parametrize":  # the names, then the cases
            args = [(a, COMMAND if i == 0 else VALUE) for i, a in enumerate(node.args)]
        elif asserting:  # assertEqual(first, second, msg): what follows the compared ones is a message
            keep = 1 if name in _ONE_ARG else 2 if name.startswith("assert") else len(node.args)
            args = [(a, VALUE if i < keep else PROSE) for i, a in enumerate(node.args)]
        else:
            args = [(a, passed) for a in node.args]
        for arg, arg_ctx in args:
            self.expr(arg, arg_ctx, scope)
        for kw in node.keywords:
            self.expr(kw.value, PROSE if kw.arg in ("msg", "err_msg") else COMMAND if kw.arg in _SETTINGS else passed,
                      scope)

    @staticmethod
    def _passed(param_ctx: str) -> str:
        """What an argument is, from what the helper does with its parameter."""
        return ARG if param_ctx == DATA else param_ctx


def _name(func: ast.AST) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def scan_tests(tests_dir: Path) -> HiddenValues:
    """The values in a task's tests that would give the answer away, were they in a playbook."""
    found, python = HiddenValues(), {}
    for path in sorted(tests_dir.rglob("*")):
        if not path.is_file() or path.stat().st_size > MAX_FILE:
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        if path.suffix == ".py":
            try:
                python[path.stem] = ast.parse(text)
            except SyntaxError:
                continue
        elif path.suffix == ".sh" or (text.startswith("#!") and "python" not in text.split("\n", 1)[0]):
            values, scripts = shell_test_values(text)
            for value, compared in values:
                found.add(value, VALUE if compared else DATA)
            for script in scripts:  # python3 - <<EOF ... EOF: read as the Python tests are
                try:
                    python[f"{path.stem}-{len(python)}"] = ast.parse(script)
                except SyntaxError:
                    pass
        else:  # a data file: every line and field
            for line in text.splitlines():
                for part in {line, *re.split(r"[,;\t|]", line)}:
                    found.add(part.strip(), VALUE if len(text) < 2000 else DATA)
    _PythonTests(python).scan(found)
    return found


def hidden_literals(tests_dir: Path) -> set[str]:
    """The specific values in a task's tests (see :func:`scan_tests`)."""
    return scan_tests(tests_dir).values


def public_text(task_dir: Path, instruction: str, environment_dir: Path | None) -> str:
    """What an agent could know: the instruction, the files of the task's environment (gzip ones
    uncompressed: the agent can zcat them) and their names."""
    parts = [instruction]
    env = environment_dir or task_dir / "environment"
    if env.is_dir():
        for path in sorted(env.rglob("*")):
            if path.is_file() and path.stat().st_size <= MAX_FILE:
                data = path.read_bytes()
                if path.suffix == ".gz":
                    try:
                        data = gzip.decompress(data)[:MAX_FILE]
                    except (OSError, EOFError):
                        pass
                parts += [str(path.relative_to(env)), data.decode("utf-8", "replace")]
    return "\n".join(parts)


def _occurs(value: str, text: str) -> bool:
    if _NUMBER.match(value):
        return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", text) is not None
    return value in text


def _composed(value: str, public: str) -> bool:
    """Made of public parts only (``listen 8081;`` where the instruction says 8081 and the
    environment's config says ``listen``): nothing in it the agent could not have known."""
    parts = [p.strip("\"'()[]{}<>.!?;") for p in re.split(r"[\s=:,;]+", value)]
    return len(parts) > 1 and all(not p or _trivial(p) or re.search(_token(p), public) for p in parts)


def _token(value: str) -> str:
    return rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\d)"


class LeakChecks:
    """The deterministic checks (no model). ``hidden``: the specific values only the tests hold;
    ``answers``: the short values they compare; ``floats``: the floats they compare."""

    name = "leak-checks"

    def __init__(self, task_dir: str | Path, *, tests_dir: str | Path | None = None,
                 environment_dir: str | Path | None = None, instruction: str = ""):
        self.task_dir = Path(task_dir)
        tests = Path(tests_dir) if tests_dir else self.task_dir / "tests"
        env = Path(environment_dir) if environment_dir else self.task_dir / "environment"
        public = public_text(self.task_dir, instruction, env)
        found = scan_tests(tests) if tests.is_dir() else HiddenValues()
        # a name of the verifier's files is reported as a path-reference, not twice
        self.hidden = sorted(v for v in found.values
                             if not _occurs(v, public) and not _composed(v, public) and not verifier_paths(v))
        self.answers = sorted(v for v in found.answers if not re.search(_token(v), public))
        self.floats = sorted(f for f in found.floats if not _occurs(str(f), public))
        dockerfile = env / "Dockerfile"
        self.workdir = (dockerfile_workdir(dockerfile.read_text()) if dockerfile.is_file() else None) or "/app"

    def review(self, playbook: Playbook) -> list[str]:
        state = ShellState(cwd=self.workdir)  # a cd or a variable of one step holds in the next
        reasons: list[str] = []
        for i, step in enumerate(playbook.steps, 1):
            command = step.text() if hasattr(step, "text") else step.command
            reasons += self._check(command, f"step {i}", state, commands=True, prose=False)
            reasons += self._check(step.why, f"step {i}", state, commands=False, prose=True)
        return list(dict.fromkeys(reasons))

    def review_text(self, text: str, where: str) -> list[str]:
        """The checks on any text (an executor's message: commands and prose together)."""
        return self._check(text, where, ShellState(cwd=self.workdir), commands=True, prose=True)

    def _check(self, text: str, where: str, state: ShellState, *, commands: bool, prose: bool) -> list[str]:
        if not text.strip():
            return []
        reasons = [f"{kind}: {where} {detail}" + (", a file of the verifier or the oracle" * (kind == "path-reference"))
                   for kind, detail in verifier_paths(text, state, commands=commands)]
        readings = [(how, body) for how, body in variants(text, ShellState(state.cwd, dict(state.variables))) if body]
        reasons += self._specific(where, readings)
        if commands:
            reasons += self._written(text, where, readings)
        if prose:
            reasons += self._said(text, where)
        return list(dict.fromkeys(reasons))

    def _specific(self, where: str, readings: list[tuple[str, str]]) -> list[str]:
        """Specific values, as written or read through quoting, variables, printf, an encoding;
        compared floats, rounded."""
        reasons = []
        for value in self.hidden:
            bare = re.sub(r"[\"'\\]", "", value)  # as the unquoted readings show it: echo "\"Quoted\""
            bare = bare if bare != value and _significant(bare) else value
            how = next((how for how, body in readings if _occurs(value, body) or (how != "raw" and _occurs(bare, body))),
                       None)
            if how:
                shown = value if len(value) <= 40 else value[:37] + "..."
                through = "" if how == "raw" else f" (read through its {how})"
                reasons.append(f"leaked-value: {where} holds {shown!r}{through}, which only the task's tests hold")
        for number in re.findall(r"(?<![\w.])-?\d+\.\d+(?![\w.])", readings[0][1]):
            if len(re.sub(r"\D", "", number).lstrip("0")) < 4 or number in self.hidden:
                continue  # too short to be more than a coincidence, or said already
            half = 0.5 * 10 ** -len(number.split(".")[1]) + 1e-12
            near = next((f for f in self.floats if abs(float(number) - f) <= half), None)
            if near is not None:
                reasons.append(f"leaked-value: {where} holds {number}, the tests' expected {near!r} rounded")
        return reasons

    def _written(self, text: str, where: str, readings: list[tuple[str, str]]) -> list[str]:
        """Short answers the text writes as literals (into a file, a variable, a printed line)."""
        if not self.answers:
            return []
        written = written_literals(text)
        if re.search(r">|\btee\b", text):  # decoded into a file: echo MTc= | base64 -d > f
            written |= {w for how, body in readings if how == "encoding" for w in body.split()}
        numbers = {float(w) for w in written if _NUMBER.match(w)}
        return [f"leaked-value: {where} writes {answer!r} as a literal, an answer only the task's tests hold"
                for answer in self.answers
                if answer in written or (_NUMBER.match(answer) and float(answer) in numbers)]

    def _said(self, text: str, where: str) -> list[str]:
        """Short answers the reasoning calls the expected one (``the checker expects 17``)."""
        reasons = []
        for answer in self.answers:
            before = rf"\b(answer|expect\w*|checker|grader|verifier|wants?)\b[^.\n]{{0,40}}?{_token(answer)}"
            after = rf"{_token(answer)}[^.\n]{{0,20}}\b(answer|expected)\b"
            if re.search(before, text, re.I) or re.search(after, text, re.I):
                reasons.append(f"leaked-value: {where} gives {answer!r} as the expected answer, which only the "
                               "task's tests hold")
        return reasons


class ModelReviewer:
    """A model's verdict on the public instruction and the playbook (never the tests). The reply
    must be JSON ``{"accept": true|false, "reason": "..."}``; any other reply rejects, saying so."""

    def __init__(self, backend: Any, prompt: str | Path | None = None, params: SamplingParams | None = None):
        self.backend = backend
        self.params = params or SamplingParams(temperature=0.0)
        self.prompt = Path(prompt) if prompt else PROMPTS / "reviewer.md"
        if not self.prompt.is_file():
            raise ConfigError(f"reviewer prompt {self.prompt} does not exist")
        self.name = f"model:{getattr(backend, 'name', type(backend).__name__)}"
        #: tokens the last reply used (prompt, completion), when the backend says
        self.last_usage: dict[str, int] = {}

    def review(self, playbook: Playbook) -> list[str]:
        shown = {"instruction": playbook.instruction,
                 "steps": [{"command": s.text(), "why": s.why} for s in playbook.steps]}
        messages = [{"role": "system", "content": self.prompt.read_text()},
                    {"role": "user", "content": json.dumps(shown, indent=1)}]
        completion = self.backend.complete(messages, params=self.params)
        self.last_usage = {k: v for k, v in completion.usage.model_dump().items() if v is not None}
        reply = completion.text or ""
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
    reviewers, usage = [checks.name], {}
    if not reasons and model is not None:
        reasons = model.review(playbook)
        reviewers.append(model.name)
        usage = model.last_usage
    return Verdict(accepted=not reasons, reasons=reasons, reviewers=reviewers, usage=usage)
