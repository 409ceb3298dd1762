"""Turn what a verifier run wrote into a :class:`VerifierResult`.

The files come from ``/logs/verifier`` after the tests ran. Everything in them is untrusted (the
tests ran in the agent's sandbox, next to the agent's code), so :func:`parse_results` never
raises on their content: any problem becomes a ``failed`` result whose message names the file
and the problem, which is what a task author needs to fix a broken verifier.

Per-check detail, first source present with at least one check wins:

1. ``checks.json``: this project's own list, ``{"checks": [{"name", "passed", "weight",
   "message"}]}`` or a bare list;
2. ``ctrf.json``: the Common Test Report Format (``pytest --ctrf``); skipped and pending
   tests are not checks, status ``other`` counts as not passed;
3. ``junit.xml``: ``<testcase>`` elements; a ``<failure>`` or ``<error>`` child fails the
   case, ``<skipped>`` drops it. Documents with a DTD are refused (entity expansion);
4. with ``fmt="pytest-output"`` (Terminal-Bench 1.x, whose tests write no files): the
   ``pytest -rA`` short test summary in ``stdout``.

The reported reward comes from ``reward.json`` (its ``reward`` key) or else ``reward.txt``; every
number of ``reward.json`` is kept as a named metric (Harbor's several rewards). When
both checks and a reward exist, the checks decide, except that success needs both: every check
passed *and* any reported reward is 1.0 (see :func:`~terminal_env.verify.result.classify`).
"""

from __future__ import annotations

import functools
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from typing import Any
from xml.parsers import expat

from pydantic import ValidationError

from ..errors import ConfigError
from ..output import strip_ansi
from .result import Check, Outcome, VerifierResult, cap_head, cap_tail, classify

#: Files larger than this are not parsed; the verdict is then a failure naming the file.
MAX_FILE_BYTES = 10 * 1024 * 1024
FORMATS = ("harbor", "pytest-output")
#: (file name, source label) in order of precedence for per-check detail.
CHECK_FILES = (("checks.json", "checks.json"), ("ctrf.json", "ctrf"), ("junit.xml", "junit"))
REWARD_FILES = ("reward.json", "reward.txt")

# A plain decimal number: float() alone would also accept "nan", "inf" and "1_0".
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# pytest -rA summary: "PASSED path::test", "FAILED path::test - message", "ERROR path - message"
_PYTEST_LINE = re.compile(r"^(PASSED|FAILED|ERROR)\s+(\S+)(?:\s+-\s+(.*))?$")
_PYTEST_SUMMARY = re.compile(r"^=+ short test summary info =+$", re.MULTILINE)


class BadOutput(Exception):
    """A verifier file is unusable; the message names the file and the problem."""


def parse_results(
    files: Mapping[str, bytes],
    *,
    exit_code: int | None,
    stdout: str = "",
    weights: Mapping[str, float] | None = None,
    fmt: str = "harbor",
) -> VerifierResult:
    """The verdict of one verifier run from the files it wrote and its output.

    ``exit_code`` is the verifier's exit status; it is recorded and explained but never decides
    the outcome (a test script's status is not its verdict). ``weights`` (check name -> weight,
    from the task) override the weights of checks matched by full name or by the last
    ``::``-separated part of the name. ``fmt`` is ``"harbor"`` or ``"pytest-output"``; another
    value is the caller's mistake and raises :class:`~terminal_env.errors.ConfigError`.

    >>> r = parse_results({"reward.txt": b"1\\n"}, exit_code=0)
    >>> (r.outcome.value, r.progress, r.source)
    ('passed', 1.0, 'reward.txt')
    >>> parse_results({"reward.txt": b"nan"}, exit_code=0).message
    "reward.txt: invalid reward 'nan' (need a number in [0, 1])"
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown verifier format {fmt!r}; use one of {', '.join(FORMATS)}")
    weights = _check_weights(weights or {})
    common: dict[str, Any] = {"exit_code": exit_code, "log_tail": cap_tail(stdout)}

    def failed(message: str, source: str = "none", checks: list[Check] | None = None):
        return VerifierResult(
            outcome=Outcome.failed, progress=0.0, source=source, message=message,
            checks=checks or [], **common,
        )

    for name in (*(f for f, _ in CHECK_FILES), *REWARD_FILES):
        data = files.get(name)
        if data is not None and len(data) > MAX_FILE_BYTES:
            return failed(f"{name}: {len(data)} bytes is over the {MAX_FILE_BYTES} byte limit")

    # Per-check detail from the first source that has any.
    checks: list[Check] = []
    source = "none"
    try:
        for name, label in CHECK_FILES:
            if name in files:
                checks = _guarded(name, _CHECK_PARSERS[name], files[name])
                if checks:
                    source = label
                    break
        if not checks and fmt == "pytest-output":
            checks = _guarded("stdout", _pytest_summary_checks, stdout[-MAX_FILE_BYTES:])
            source = "pytest-output" if checks else source
    except BadOutput as e:
        return failed(str(e))
    checks = _apply_weights(checks, weights)

    # The reported reward and the named metrics, if any (Harbor's rule: reward.json's numbers,
    # and reward.txt as its "reward" when reward.json has none); an invalid one fails the run
    # whatever the checks say.
    reward: float | None = None
    reward_file = ""
    metrics: dict[str, float] = {}
    try:
        if "reward.json" in files:
            reward_file = "reward.json"
            metrics = _guarded("reward.json", _read_metrics, files["reward.json"])
        if "reward" not in metrics and "reward.txt" in files:
            reward_file = "reward.txt"
            metrics["reward"] = _guarded("reward.txt", functools.partial(_read_reward, "reward.txt"),
                                         files["reward.txt"])
        if "reward" in metrics:
            reward = _checked_reward(reward_file, metrics["reward"])
    except BadOutput as e:
        return failed(str(e), source=reward_file, checks=checks)
    if source == "none" and reward_file:
        source = reward_file

    outcome, progress = classify(checks, reward)
    message = _explain(outcome, checks, reward, reward_file, fmt, exit_code, metrics)
    return VerifierResult(
        outcome=outcome, checks=checks, reward_reported=reward, progress=progress,
        metrics=metrics, source=source, message=message, **common,
    )


def _explain(outcome: Outcome, checks: list[Check], reward: float | None, reward_file: str,
             fmt: str, exit_code: int | None, metrics: dict[str, float]) -> str:
    """One human-readable line saying why the outcome is what it is."""
    said = f"{reward_file} says {reward:g}" if reward is not None else ""
    if not checks and reward is None:
        if metrics:
            return (f"reward.json reports {', '.join(sorted(metrics))} but no \"reward\" key, and "
                    "there is no reward.txt or check report to decide the outcome")
        where = ("no pytest short test summary in the output (run pytest with -rA)"
                 if fmt == "pytest-output" else "no reward.txt, reward.json or check report")
        return f"the verifier wrote no result: {where} (exit code {exit_code})"
    if not checks:
        return said
    failing = [c for c in checks if not c.passed]
    parts = [f"{len(checks) - len(failing)}/{len(checks)} checks passed"]
    if failing:
        parts.append("failed: " + ", ".join(
            c.name + (f" ({c.message})" if c.message else "") for c in failing))
    if said:
        parts.append(said)
    if not failing and outcome != Outcome.passed:
        parts.append("the verifier's reward withholds success")
    return cap_head("; ".join(parts))


def _guarded(name: str, parser: Callable[[Any], Any], data: Any) -> Any:
    """Run one parser over untrusted input; any surprise becomes a BadOutput naming the file.

    The parsers handle every problem we know of with a precise message; this is the last line of
    defence behind them, because bytes written next to the agent's code must never crash a run.
    """
    try:
        return parser(data)
    except BadOutput:
        raise
    except Exception as e:  # noqa: BLE001 - deliberate, see above
        raise BadOutput(f"{name}: could not be read ({type(e).__name__}: {_show(str(e))})") from None


# --- rewards -----------------------------------------------------------------------------


#: at most this many named metrics are kept from reward.json, with names of at most this length
MAX_METRICS = 64
MAX_METRIC_NAME = 100


def _read_metrics(data: bytes) -> dict[str, float]:
    """reward.json: an object of named numbers (Harbor's several reward metrics). Other values
    are ignored, as Harbor ignores them; a number that is not finite, too many metrics or an
    overlong name is an error naming it."""
    text = _decode("reward.json", data)
    doc = _load_json("reward.json", text)
    if not isinstance(doc, dict):
        raise BadOutput(f"reward.json: expected an object of named numbers, got {_show(text)}")
    out: dict[str, float] = {}
    for key, value in doc.items():
        # bool is an int in Python; a JSON true is not a reward.
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if len(key) > MAX_METRIC_NAME or not key.strip():
            raise BadOutput(f"reward.json: metric name {_show(key)} is empty or longer than "
                            f"{MAX_METRIC_NAME} characters")
        try:
            number = float(value)
        except OverflowError:  # an integer of hundreds of digits
            number = math.inf
        if not math.isfinite(number):
            raise BadOutput(f"reward.json: metric {_show(key)} is {_show(json.dumps(value))}, not a "
                            "finite number")
        out[key] = number
    if len(out) > MAX_METRICS:
        raise BadOutput(f"reward.json: {len(out)} metrics; at most {MAX_METRICS} are kept")
    if "reward" in doc and "reward" not in out:
        raise BadOutput(f"reward.json: invalid reward {_show(json.dumps(doc['reward']))} "
                        "(need a number in [0, 1])")
    return out


def _checked_reward(name: str, number: float) -> float:
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise BadOutput(f"{name}: invalid reward {_show(f'{number:g}')} (need a number in [0, 1])")
    return number


def _read_reward(name: str, data: bytes) -> float:
    """reward.txt: one number in [0, 1]."""
    text = _decode(name, data)
    shown = text.strip()
    if not _NUMBER.fullmatch(shown):
        raise BadOutput(f"{name}: invalid reward {_show(shown)} (need a number in [0, 1])")
    return _checked_reward(name, float(shown))  # a huge exponent gives inf, refused there


# --- per-check formats -------------------------------------------------------------------


def _checks_json(data: bytes) -> list[Check]:
    doc = _load_json("checks.json", _decode("checks.json", data))
    items = doc.get("checks") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise BadOutput('checks.json: expected {"checks": [...]} or a list of checks')
    checks = []
    for i, item in enumerate(items):
        try:
            # strict: a verifier writing "passed": "no" must not count as a pass
            checks.append(Check.model_validate(item, strict=True))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "item"
            raise BadOutput(f"checks.json: check {i}: {where}: {first['msg']}") from None
    return checks


def _ctrf(data: bytes) -> list[Check]:
    doc = _load_json("ctrf.json", _decode("ctrf.json", data))
    results = doc.get("results") if isinstance(doc, dict) else None
    tests = results.get("tests") if isinstance(results, dict) else None
    if not isinstance(tests, list):
        raise BadOutput('ctrf.json: expected {"results": {"tests": [...]}}')
    checks = []
    for i, test in enumerate(tests):
        if not isinstance(test, dict) or not isinstance(test.get("name"), str):
            raise BadOutput(f"ctrf.json: test {i} has no name")
        status = test.get("status")
        if status in ("skipped", "pending"):
            continue  # not run, so neither met nor missed
        if status not in ("passed", "failed", "other"):
            raise BadOutput(f"ctrf.json: test {test['name']!r} has unknown status {status!r}")
        message = test.get("message")
        checks.append(Check(name=test["name"], passed=status == "passed",
                            message=message if isinstance(message, str) else ""))
    return checks


def _refuse_dtd(*_: object) -> None:
    raise BadOutput("junit.xml: documents with a DTD or entity declarations are refused")


def _junit(data: bytes) -> list[Check]:
    # A first pass with expat refuses any DTD before ElementTree sees the document: entity
    # declarations are how "billion laughs" expansion works, and a test report never needs one.
    # expat reads the document's own encoding, so this cannot be dodged by encoding it in UTF-16.
    guard = expat.ParserCreate()
    guard.StartDoctypeDeclHandler = _refuse_dtd
    guard.EntityDeclHandler = _refuse_dtd
    try:
        guard.Parse(data, True)
        root = ET.fromstring(data)
    except (expat.ExpatError, ET.ParseError, ValueError) as e:
        raise BadOutput(f"junit.xml: not well-formed XML: {e}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise BadOutput(f"junit.xml: root element is <{_show(root.tag, 40)}>, "
                        "expected <testsuites> or <testsuite>")
    checks = []
    for case in root.iter("testcase"):
        name, classname = case.get("name", ""), case.get("classname", "")
        full = f"{classname}::{name}" if classname else name
        if case.find("skipped") is not None:
            continue
        bad = case.find("failure")
        bad = bad if bad is not None else case.find("error")
        message = "" if bad is None else (bad.get("message") or (bad.text or "").strip())
        checks.append(Check(name=full, passed=bad is None, message=message))
    return checks


def _pytest_summary_checks(stdout: str) -> list[Check]:
    """Checks from the short test summary of ``pytest -rA``.

    Only the lines after the last summary header count, so "PASSED ..." printed by the code
    under test earlier in the log cannot pass for a result. A test listed more than once
    (passed, then errored in teardown) passes only if every listing passed.
    """
    stdout = strip_ansi(stdout)  # pytest colours its summary when it thinks it is on a tty
    headers = list(_PYTEST_SUMMARY.finditer(stdout))
    if not headers:
        return []
    by_name: dict[str, Check] = {}
    for line in stdout[headers[-1].end():].splitlines():
        match = _PYTEST_LINE.match(line.strip())
        if not match:
            continue
        status, name, message = match.group(1), match.group(2), match.group(3) or ""
        passed = status == "PASSED"
        old = by_name.get(name)
        if old is not None:
            passed = passed and old.passed
            message = old.message or message
        by_name[name] = Check(name=name, passed=passed, message=message)
    return list(by_name.values())


_CHECK_PARSERS = {"checks.json": _checks_json, "ctrf.json": _ctrf, "junit.xml": _junit}


# --- helpers -----------------------------------------------------------------------------


def _check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Task weights are the task author's input, so a bad one is a ConfigError, not a verdict."""
    out = {}
    for name, weight in weights.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) \
                or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"weight of check {name!r} is {weight!r}; "
                              "use a finite number >= 0")
        out[name] = float(weight)
    return out


def _apply_weights(checks: list[Check], weights: Mapping[str, float]) -> list[Check]:
    """Task weights override the verifier's, by full name or by the last ``::`` part."""
    if not weights:
        return checks
    out = []
    for check in checks:
        short = check.name.rsplit("::", 1)[-1]
        weight = weights.get(check.name, weights.get(short))
        out.append(check if weight is None else check.model_copy(update={"weight": weight}))
    return out


def _decode(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadOutput(f"{name}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _load_json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadOutput(f"{name}: malformed JSON: {e}") from None
    except ValueError as e:  # e.g. an integer past Python's 4300-digit conversion limit
        raise BadOutput(f"{name}: malformed JSON: {_show(str(e))}") from None
    except RecursionError:
        raise BadOutput(f"{name}: malformed JSON: nested too deeply") from None


def _show(text: str, limit: int = 80) -> str:
    """A bad value quoted for a message, cut short (it came from an untrusted file)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
