"""The guarded test run: a pytest plugin placed by the verifier, and the verdict on its record.

Tasks from outside often load the agent's code into the pytest process (``importlib`` of
``/app/solution.py``, ``sys.path.insert`` and ``import``). That code can end the process with
status 0, stop pytest from inside, or rewrite reports, and a ``test.sh`` that writes
``reward.txt`` from pytest's exit status then reports success. The verifier therefore runs every
test session with :mod:`.guard_plugin` loaded (``PYTEST_PLUGINS``; the plugin's directory is put
on ``PYTHONPATH`` and, through a ``.pth`` file, on the path of every Python of the image, so a
``test.sh`` that sets its own ``PYTHONPATH`` still loads it), and :func:`verdict` reads what it
recorded:

* a session that started and did not finish: the test process ended before pytest finished;
* a session stopped from inside (``pytest.exit``, ``KeyboardInterrupt`` raised by a test), or
  that ran fewer tests than it collected with no failing test to explain it;
* a test whose reported outcome is better than what its setup, call and teardown raised, or an
  exit status 0 after a failing test;
* a record whose HMAC chain does not verify, or no record at all from tests that run pytest.

Each is "not a success", named. What the guard does not promise: code that runs inside the test
process can, with enough knowledge of this plugin, read its key and forge its record; the sure fix
is a test that runs the agent's code in a subprocess, and ``tasks check`` names the tasks that do
not (SECURITY.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

GUARD_DIR = "/run/terminal-env-guard"
RECORDS = f"{GUARD_DIR}/records"
MODULE = "terminal_env_guard"
PLUGIN_SOURCE = Path(__file__).with_name("guard_plugin.py")
# Where the Pythons of common images keep their site-packages: a .pth there puts the guard's
# directory on sys.path even when test.sh sets its own PYTHONPATH.
SITE_DIRS = (
    "/usr/lib/python3/dist-packages", "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages", "/usr/lib/python3*/site-packages",
    "/opt/conda/lib/python3*/site-packages",
)
_RANK = {"failed": 0, "not-run": 0, "?": 0, "skipped": 1, "xfailed": 1, "passed": 2}
_PYTEST_WORD = re.compile(rb"\bpytest\b|py\.test\b")


@dataclass
class GuardVerdict:
    """``ok`` is False when the run is not a success whatever its files say, None when the guard
    could not check it (``note`` says why), True when it checked and found nothing wrong."""

    ok: bool | None
    note: str
    modules: list[str] = field(default_factory=list)
    #: files outside the interpreter and the tests that the test process read itself while
    #: collecting or running tests that passed
    opened: list[str] = field(default_factory=list)
    #: every test the guard saw run, by node id: what its setup, call and teardown raised
    outcomes: dict[str, str] = field(default_factory=dict)

    def contradicted(self, checks: list[Any]) -> str | None:
        """A check the result files call passed, of a test the guard saw fail or never saw run:
        the files were written by something other than the tests' own session (None if none)."""
        if not self.outcomes:
            return None
        by_test: dict[str, list[str]] = {}
        for nodeid, raw in self.outcomes.items():
            by_test.setdefault(nodeid.rsplit("::", 1)[-1], []).append(raw)
        for check in checks:
            if not check.passed:
                continue
            raws = by_test.get(check.name.rsplit("::", 1)[-1])
            if raws is None:
                return f"the result files name a passing check {check.name!r} that no test of the run recorded"
            if not any(_RANK.get(r, 0) == 2 for r in raws):
                return (f"the result files say {check.name!r} passed, but the test "
                        f"{_said(raws[0])}")
        return None


def new_key() -> str:
    return secrets.token_hex(16)


def prepare_script() -> str:
    """Shell (run as root by the verifier) that makes the guard's directory fresh; one ``&&``
    chain whose status is whether every step of it worked."""
    pth = " ".join(SITE_DIRS)
    return (
        f"rm -rf {GUARD_DIR} && mkdir -p {RECORDS} && chmod 755 {GUARD_DIR} && chmod 1777 {RECORDS} && "
        # a site directory that cannot take the .pth is left as before: a guard that did not
        # load is found out by its missing records
        f"for d in {pth}; do if [ -d \"$d\" ]; then echo {GUARD_DIR} > \"$d/zz-terminal-env-guard.pth\" "
        f"|| true; fi; done"
    )


def cleanup_script() -> str:
    """Shell (run as root between two steps of a multi-step task) that removes what a
    verification left: the tests, the results and the guard."""
    pth = " ".join(f"{d}/zz-terminal-env-guard.pth" for d in SITE_DIRS)
    return f"rm -rf /tests /logs/verifier {GUARD_DIR} && rm -f {pth}; true"


def files() -> dict[str, bytes]:
    return {f"{GUARD_DIR}/{MODULE}.py": PLUGIN_SOURCE.read_bytes()}


def env(key: str) -> dict[str, str]:
    return {
        "PYTHONPATH": GUARD_DIR,
        "PYTEST_PLUGINS": MODULE,
        "TERMINAL_ENV_GUARD_KEY": key,
        "TERMINAL_ENV_GUARD_DIR": RECORDS,
    }


def uses_pytest(scripts: Mapping[str, bytes]) -> bool:
    """Whether the task's test scripts run pytest (then a missing record is a failure).

    >>> uses_pytest({"test.sh": b"python3 -m pytest /tests -rA"}), uses_pytest({"test.sh": b"./check"})
    (True, False)
    """
    return any(_PYTEST_WORD.search(data) for data in scripts.values())


def read_records(sandbox: Any) -> dict[str, bytes] | None:
    """The session files the plugin wrote (None: the records directory itself is gone)."""
    try:
        return sandbox.read_dir(RECORDS, limit=16 * 1024 * 1024)
    except FileNotFoundError:
        return None


def _events(data: bytes, key: str) -> list[dict[str, Any]] | None:
    """The record's events, or None when its HMAC chain does not verify."""
    mac = b""
    events = []
    for line in data.decode("utf-8", "replace").splitlines():
        body, _, sig = line.rpartition("\t")
        want = hmac.new(key.encode(), mac + body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, sig):
            return None
        mac = sig.encode()
        try:
            events.append(json.loads(body))
        except ValueError:
            return None
    return events


def verdict(records: dict[str, bytes] | None, key: str, *, pytest_expected: bool) -> GuardVerdict:
    """What the guard's record says about the run (see the module's docstring)."""
    if records is None:
        return GuardVerdict(False, "the guard's record was removed during the test run")
    if not records:
        if pytest_expected:
            return GuardVerdict(False, "the tests run pytest, but no guarded pytest session was "
                                       "recorded (the guard was not loaded, or its record was removed)")
        return GuardVerdict(None, "unchecked: the tests ran no pytest session, so whether they "
                                  "ended normally could not be checked")
    modules: set[str] = set()
    opened: set[str] = set()
    outcomes: dict[str, str] = {}
    unseen = 0
    for name in sorted(records):
        events = _events(records[name], key)
        if events is None:
            return GuardVerdict(False, "the guard's record was altered during the test run")
        if events and events[0].get("xdist"):
            unseen += 1
            continue
        problem = _session_problem(events)
        for e in events:
            modules.update(e.get("modules") or [])
            opened.update(e.get("opened") or [])
            if e.get("event") == "test" and e.get("nodeid"):
                outcomes[str(e["nodeid"])] = str(e.get("raw"))
        if problem:
            return GuardVerdict(False, problem, sorted(modules), sorted(opened))
    n = len(records) - unseen
    if unseen:
        return GuardVerdict(None, f"unchecked: {unseen} pytest session(s) ran their tests in "
                                  f"pytest-xdist workers, which the guard does not see"
                                  + (f"; {n} other(s) ended normally" if n else ""),
                            sorted(modules), sorted(opened))
    return GuardVerdict(True, f"checked: {n} pytest session{'s' if n > 1 else ''} ended normally",
                        sorted(modules), sorted(opened), outcomes)


def _session_problem(events: list[dict[str, Any]]) -> str:
    kinds = [e.get("event") for e in events]
    collected = next((e.get("nodeids") or [] for e in events if e.get("event") == "collected"), None)
    raw = {e.get("nodeid"): e.get("raw") for e in events if e.get("event") == "test"}
    total = "?" if collected is None else str(len(collected))
    ran = f"{len(raw)} of {total} test{'' if total == '1' else 's'} ran"
    if "finish" not in kinds:
        return f"the test process ended before pytest finished: {ran}"
    finish = events[kinds.index("finish")]
    failing = sorted(n for n, r in raw.items() if _RANK.get(r, 0) == 0)
    if finish.get("stopped"):
        return f"pytest was stopped from inside ({finish['stopped']}): {ran}"
    if collected is None:
        return (f"pytest was stopped before it finished collecting the tests (exit status "
                f"{finish.get('exitstatus')}): no test ran")
    if not raw and finish.get("exitstatus") == 0:
        return "pytest exited 0 but no test ran"
    status = finish.get("exitstatus")
    if status not in (0, 1, 5):
        why = {2: "interrupted: a test module could not be collected, or the run was stopped",
               3: "an internal error", 4: "a usage error"}.get(status, "not a test verdict")
        return f"pytest ended with exit status {status} ({why}): {ran}"
    if len(raw) < len(collected) and not failing:
        why = f" (session.shouldstop = {finish['shouldstop']!r})" if finish.get("shouldstop") else ""
        return f"pytest ended early{why} with no failing test to explain it: {ran}"
    reported = finish.get("reported") or {}
    for nodeid, outcome in sorted(reported.items()):
        if _RANK.get(outcome, 0) > _RANK.get(raw.get(nodeid, "not-run"), 0):
            return (f"the reports disagree with the guard's record: {nodeid} was reported "
                    f"{outcome}, but it {_said(raw.get(nodeid, 'not-run'))}")
    if failing and finish.get("exitstatus") == 0:
        return f"pytest exited 0 although {failing[0]} failed"
    return ""


def _said(raw: str) -> str:
    return {"failed": "raised an error", "not-run": "never ran", "skipped": "was skipped",
            "xfailed": "failed as expected (xfail)"}.get(raw, f"was {raw}")
