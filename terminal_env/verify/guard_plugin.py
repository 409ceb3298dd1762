"""The pytest plugin that guards a verification run (the verifier copies this file in; see
:mod:`terminal_env.verify.guard`). Standalone: it imports nothing of terminal-env, and runs on any
Python 3 a task's tests use.

Many tasks' tests import the agent's code into the pytest process itself. That code then runs with
the test runner's powers: it can end the process with status 0 (``os._exit(0)``), stop pytest from
inside (``pytest.exit(returncode=0)``, ``session.shouldstop``) or rewrite test reports. This
plugin keeps its own record, which the verifier reads after the run:

* ``start`` when the session begins, before any test module (and so any agent code) is imported;
* ``collected``: the test ids pytest is about to run;
* ``test``: each test's raw outcome, from the exceptions its setup, call and teardown raised as
  seen by the plugin's own hook wrappers, not from the report objects other code can change;
* ``finish``: pytest's exit status and every test's *reported* outcome as it stands at the end.

Each line is chained with an HMAC under a key the verifier passes in the environment; the plugin
takes the key out of ``os.environ`` at import, so processes the tests start (where well-written
tasks run the agent's code) never see it. Without a key (a pytest started by the tests
themselves) the plugin does nothing.
"""

import hashlib
import hmac
import json
import os
import sys
import time

import pytest

_KEY = os.environ.pop("TERMINAL_ENV_GUARD_KEY", "").encode()
_DIR = os.environ.get("TERMINAL_ENV_GUARD_DIR", "")
_SKIPS = ("Skipped", "XFailed")


class _Record:
    def __init__(self, directory):
        name = "session-%d-%d.jsonl" % (os.getpid(), time.time_ns())
        self._fh = open(os.path.join(directory, name), "a")
        self._mac = b""

    def write(self, **event):
        line = json.dumps(event, sort_keys=True)
        self._mac = hmac.new(_KEY, self._mac + line.encode(), hashlib.sha256).hexdigest().encode()
        self._fh.write(line + "\t" + self._mac.decode() + "\n")
        self._fh.flush()


class _Guard:
    def __init__(self, record):
        self.record = record
        self.raw = {}  # nodeid -> worst raw outcome of its phases
        self.reports = {}  # nodeid -> the report objects pytest made (read again at the end)
        # innermost wrappers (trylast, registered before any test module is imported): the
        # nearest to the test itself of all the wrappers later code could add
        self.stopped = ""

    def _phase(self, item, outcome):
        exc = getattr(outcome, "excinfo", None) or getattr(outcome, "_excinfo", None)
        kind = "passed"
        if exc is not None:
            name = exc[0].__name__
            if name in _SKIPS:
                kind = "skipped"
            elif name == "Exit" or issubclass(exc[0], KeyboardInterrupt):
                kind = "failed"
                self.stopped = "%s raised %s" % (item.nodeid, name)
            elif item.get_closest_marker("xfail") is not None:
                kind = "xfailed"
            else:
                kind = "failed"
        order = ("passed", "skipped", "xfailed", "failed")
        before = self.raw.get(item.nodeid, "passed")
        self.raw[item.nodeid] = max(before, kind, key=order.index)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_setup(self, item):
        _NOW[0] = item.nodeid  # the files opened from here on are this test's
        outcome = yield
        self._phase(item, outcome)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item):
        outcome = yield
        self._phase(item, outcome)

    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item):
        outcome = yield
        self._phase(item, outcome)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        self.reports.setdefault(item.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid, location):
        _NOW[0] = ""
        self.record.write(event="test", nodeid=nodeid, raw=self.raw.get(nodeid, "not-run"))

    def pytest_collection_finish(self, session):
        self.record.write(event="collected", nodeids=[i.nodeid for i in session.items])

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        yield
        reported = {}
        for nodeid, reports in self.reports.items():
            outcomes = [getattr(r, "outcome", "?") for r in reports]
            xfail = any(getattr(r, "wasxfail", None) is not None for r in reports)
            if "failed" in outcomes:
                reported[nodeid] = "failed"
            elif "skipped" in outcomes or xfail:
                reported[nodeid] = "skipped"
            elif outcomes and all(o == "passed" for o in outcomes):
                reported[nodeid] = "passed"
            else:
                reported[nodeid] = "?"
        self.record.write(
            event="finish", exitstatus=int(getattr(session, "exitstatus", exitstatus)),
            reported=reported, stopped=self.stopped,
            shouldstop=str(getattr(session, "shouldstop", "") or ""),
            modules=_outside_modules(),
            opened=_outside_files({n for n, r in self.raw.items() if r == "passed"}),
        )


_EXECUTED = set()  # files whose code this process executed (imports, exec_module, runpy)
_OPENED = {}  # test id ("" outside tests) -> files this process itself opened during it
_NOW = [""]  # the test running now
_COPIED = set()  # files it only copied (shutil.copyfile: a project copied to build it fresh)


def _audit(event, args):
    if event == "exec" and len(_EXECUTED) < 1000:
        filename = getattr(args[0], "co_filename", None) if args else None
        if filename and filename.startswith("/"):
            _EXECUTED.add(filename)
    elif event == "open" and args and isinstance(args[0], str):
        files = _OPENED.setdefault(_NOW[0], set())
        if len(files) < 2000:
            files.add(args[0])
    elif event == "shutil.copyfile" and len(_COPIED) < 5000 and args:
        try:
            _COPIED.add(os.path.realpath(os.fspath(args[0])))
        except TypeError:
            pass


def _roots():
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, "/tests")}
    roots |= {os.path.realpath(p) for p in sys.path if "-packages" in p}
    return roots | {"/etc", os.path.dirname(os.path.realpath(__file__))}


def _outside_files(passed):
    """Files outside the interpreter's trees and the tests that the test process read itself
    (not only copied) while collecting or running the tests that ``passed``: where passing
    checks took their expectations from (the gate's rewrite probe asks)."""
    roots, found = _roots() | {"/proc", "/dev", "/sys", "/logs", "/tmp"}, set()
    opened = set(_OPENED.get("", ())) if passed else set()
    for nodeid in passed:
        opened |= _OPENED.get(nodeid, set())
    for path in opened:
        real = os.path.realpath(path) if path.startswith("/") else ""
        if real and real not in _COPIED and os.path.isfile(real) and not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            found.add(real)
    return sorted(found)[:200]


def _outside_modules():
    """Files of code the test process ran from outside the interpreter's own trees and the
    tests: code it loaded from where the agent could have written it."""
    roots = _roots()
    paths = set(_EXECUTED)
    paths |= {getattr(m, "__file__", None) or "" for m in list(sys.modules.values())}
    found = set()
    for path in paths:
        real = os.path.realpath(path) if path.startswith("/") else ""
        if real and not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            found.add(real)
    return sorted(found)[:50]


def pytest_configure(config):
    if not _KEY or not _DIR or config.pluginmanager.has_plugin("terminal-env-guard"):
        return
    try:
        record = _Record(_DIR)
    except OSError:  # cannot write (another user, a read-only /run): no record, which is a verdict
        return
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        # pytest-xdist: the tests run in worker processes this plugin does not see
        record.write(event="start", pid=os.getpid(), xdist=True)
        return
    if hasattr(sys, "addaudithook"):  # Python 3.8 and later
        sys.addaudithook(_audit)
    record.write(event="start", pid=os.getpid(), argv=sys.argv[:20], python=sys.version.split()[0])
    config.pluginmanager.register(_Guard(record), "terminal-env-guard")
