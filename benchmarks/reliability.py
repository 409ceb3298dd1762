"""The project's reliability figures, from one command.

    python benchmarks/reliability.py [--soak-minutes 10] [--soak-envs 32] [--skip-soak]
                                     [--skip-faults] [--json]

What it runs, each in a subprocess of its own (progress on stderr):

(i)   the attack suites: ``tests/test_verify_protected.py``, ``tests/test_verify_guard.py``
      (the agent's code inside the test process: tests named ``attack``, ``forged`` or
      ``without_a_summary`` are attacks, the oracle runs are controls) and
      ``tests/test_adversarial.py`` (when it exists) under pytest with ``--junitxml``. Every test of ``test_adversarial.py`` is
      an attack. In ``test_verify_protected.py`` an attack is a test whose name contains
      ``attack`` (the ten scripted attacks and the tampering-with-a-correct-solution one),
      ``snoop`` (the agent that searches for the tests, the solution and the expected values:
      the README's first attack) or ``separate_mode`` (a trojan interpreter in the agent's
      container, verified elsewhere); its other tests are *controls* (the oracle passes, the nop
      fails, a half solution is partial, changed tests are detected...): they are not attacks,
      but if one fails the attack verdicts cannot be trusted, so a failing control is a problem
      too. Each parametrized case is one attack. A passing attack test means the attack was
      blocked; a failing or erroring one, or an expected failure (xfail: a known hole), means it
      was not. Skipped attacks were not tried and are listed.
(ii)  the faults of ``benchmarks/faults.py`` (injected / survived; ``--faults-only`` and
      ``--faults-skip`` choose; ``engine-restart`` restarts the Docker engine and refuses while
      other containers run, unless ``--force-engine-restart``).
(iii) the fuzz tests: ``tests/test_fuzz.py`` and the hypothesis tests of ``tests/test_harness.py``,
      counting the hypothesis examples run. A small pytest plugin (written to a temporary
      directory, loaded with ``-p``) hooks ``hypothesis.statistics.collector``, the same hook
      hypothesis's own pytest plugin uses for ``--hypothesis-show-statistics``, and receives the
      engine's raw statistics per test: every test case executed in every phase, with its
      status. A hypothesis test for which no statistics arrived is reported, so a change in
      hypothesis cannot make the count silently zero. ``--fuzz-scale N`` sets
      ``TERMINAL_ENV_FUZZ_SCALE`` (N times the examples of ``test_fuzz.py``).
(iv)  the soak (``benchmarks/soak.py --envs --minutes``) unless ``--skip-soak``.
(v)   containers left at the end: the project's containers labelled with this run's tag (every
      container the faults and the soak make) or owned by one of the pytest processes started
      here. Must be 0.

Prints a table (rich); with ``--json`` the JSON goes to stdout and the table to stderr. Exit
status 0 only when every attack tried was blocked, every control passed, every fault was injected
and survived, the fuzz tests passed with their examples counted, the soak had no error, and no
container leaked; 1 otherwise; 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from _common import log

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
PROTECTED = "tests/test_verify_protected.py"
ADVERSARIAL = "tests/test_adversarial.py"
FUZZ_FILES = ["tests/test_fuzz.py", "tests/test_harness.py"]
#: in test_verify_protected.py: which tests are attacks (see the module docstring)
PROTECTED_ATTACK = re.compile(r"attack|snoop|separate_mode")
#: the agent's code inside the test process (the guarded test run): attacks by these names
GUARD = "tests/test_verify_guard.py"
GUARD_ATTACK = re.compile(r"attack|forged|without_a_summary")

PLUGIN_NAME = "te_reliability_hypothesis"
PLUGIN = r'''
"""pytest plugin of benchmarks/reliability.py: hypothesis examples per test, from the engine's
statistics (hypothesis.statistics.collector, the hook behind --hypothesis-show-statistics)."""
import json
import os

import pytest

_OUT = os.environ["TE_RELIABILITY_HYPOTHESIS_OUT"]
_ONLY = [p for p in os.environ.get("TE_RELIABILITY_HYPOTHESIS_ONLY", "").split(",") if p]
_tests = {}


def _is_hypothesis(item):
    from hypothesis.internal.detection import is_hypothesis_test
    return is_hypothesis_test(getattr(item, "obj", None))


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path in _ONLY and not _is_hypothesis(item):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    for item in items:
        _tests[item.nodeid] = {"hypothesis": _is_hypothesis(item), "outcome": None, "statistics_calls": 0,
                               "examples": 0, "valid": 0, "by_status": {}, "by_phase": {}, "stopped_because": None}


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item):
    from hypothesis.statistics import collector

    rec = _tests.get(item.nodeid)
    previous = collector.value  # hypothesis's own plugin (if outer), chained

    def note(stats):
        try:
            if rec is not None:
                rec["statistics_calls"] += 1
                for key, phase in stats.items():
                    if not (key.endswith("-phase") and isinstance(phase, dict)):
                        continue
                    cases = phase.get("test-cases") or []
                    rec["by_phase"][key[:-6]] = rec["by_phase"].get(key[:-6], 0) + len(cases)
                    rec["examples"] += len(cases)
                    for case in cases:
                        status = case.get("status", "?")
                        rec["by_status"][status] = rec["by_status"].get(status, 0) + 1
                        if status in ("valid", "interesting"):
                            rec["valid"] += 1
                rec["stopped_because"] = stats.get("stopped-because")
        finally:
            if previous is not None:
                previous(stats)

    with collector.with_value(note):
        yield


def pytest_runtest_logreport(report):
    rec = _tests.get(report.nodeid)
    if rec is None:
        return
    if report.when == "call" or report.outcome != "passed":
        if rec["outcome"] in (None, "passed"):
            rec["outcome"] = "xfailed" if hasattr(report, "wasxfail") and report.skipped else (
                "error" if report.failed and report.when != "call" else report.outcome)


def pytest_sessionfinish(session, exitstatus):
    import hypothesis
    with open(_OUT, "w") as fh:
        json.dump({"hypothesis_version": hypothesis.__version__, "tests": _tests}, fh)
'''


# ---------------------------------------------------------------------------- subprocesses
class Children:
    """The processes started here (their pids own the containers the pytest runs make)."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
            stdout_path: Path | None = None) -> tuple[int, str]:
        """Run ``argv`` in ROOT; stderr passes through (progress); stdout is captured (also to
        ``stdout_path``). Returns (exit status, stdout); -9 on timeout."""
        with open(stdout_path, "w+") if stdout_path else tempfile.TemporaryFile("w+") as out:
            # a session of its own: a Ctrl-C on the terminal reaches only this process, which
            # passes exactly one SIGINT on (a second one could cut a child's cleanup short)
            proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=None, text=True,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
            self.pids.append(proc.pid)
            try:
                rc = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"reliability: {' '.join(argv[:4])}... timed out after {timeout:.0f} s; stopping it")
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                rc = -9
            except KeyboardInterrupt:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                log(f"reliability: interrupted; stopping {Path(argv[1]).name if len(argv) > 1 else argv[0]} "
                    f"(pid {proc.pid}) cleanly")
                proc.send_signal(signal.SIGINT)  # let it stop cleanly (and remove its containers)
                try:
                    proc.wait(180)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                raise
            out.seek(0)
            return rc, out.read()


def pytest_argv(files: list[str], junit: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *files, "-p", "no:cacheprovider", "-q", "-rN",
            f"--junitxml={junit}", "-o", "junit_family=xunit2", *extra]


def junit_cases(path: Path) -> list[dict[str, Any]]:
    """Every test case of a JUnit XML report: module, name, status (passed, failed, error,
    skipped, xfailed), message. A test reported twice (a teardown error) keeps its worst status."""
    order = {"passed": 0, "skipped": 1, "xfailed": 2, "failed": 3, "error": 4}
    cases: dict[tuple[str, str], dict[str, Any]] = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        module, name = tc.get("classname", ""), tc.get("name", "")
        status, message = "passed", ""
        for child in tc:
            tag = child.tag
            if tag in ("failure", "error"):
                status, message = ("failed" if tag == "failure" else "error"), child.get("message", "")
                break
            if tag == "skipped":
                xfail = child.get("type") == "pytest.xfail"
                status, message = ("xfailed" if xfail else "skipped"), child.get("message", "")
        key = (module, name)
        if key not in cases or order[status] > order[cases[key]["status"]]:
            cases[key] = {"module": module, "name": name, "status": status, "message": message[:300],
                          "time_s": float(tc.get("time") or 0)}
    return list(cases.values())


# ---------------------------------------------------------------------------- (i) attacks
def is_attack(case: dict[str, Any]) -> bool:
    module = case["module"].rsplit(".", 1)[-1]
    if module == "test_adversarial":
        return True
    if module == "test_verify_guard":
        return bool(GUARD_ATTACK.search(case["name"]))
    return module == "test_verify_protected" and bool(PROTECTED_ATTACK.search(case["name"]))


def attacks(children: Children, tmp: Path) -> dict[str, Any]:
    files = [PROTECTED, GUARD] + ([ADVERSARIAL] if (ROOT / ADVERSARIAL).exists() else [])
    junit = tmp / "attacks.xml"
    log(f"reliability: (i) attack suites: {' '.join(files)}")
    t0 = time.monotonic()
    rc, out = children.run(pytest_argv(files, junit), timeout=3600, stdout_path=tmp / "attacks.log")
    res: dict[str, Any] = {"files": files, "adversarial_suite_present": ADVERSARIAL in files,
                           "pytest_exit": rc, "wall_s": round(time.monotonic() - t0, 1),
                           "rule": "test_adversarial.py: every test; test_verify_protected.py: names matching "
                                   f"/{PROTECTED_ATTACK.pattern}/, test_verify_guard.py: names matching "
                                   f"/{GUARD_ATTACK.pattern}/ (the rest are controls); a passing test = "
                                   "the attack was blocked; xfail = a known hole (not blocked)"}
    if not junit.exists():
        res["error"] = f"no JUnit report (pytest exit {rc}): {out[-500:]}"
        return res
    cases = junit_cases(junit)
    atk = [c for c in cases if is_attack(c)]
    ctl = [c for c in cases if not is_attack(c)]
    tried = [c for c in atk if c["status"] != "skipped"]
    res.update({
        "attacks_tried": len(tried),
        "attacks_blocked": sum(c["status"] == "passed" for c in tried),
        "not_blocked": [{"test": f"{c['module'].rsplit('.', 1)[-1]}::{c['name']}", "status": c["status"],
                         "message": c["message"]} for c in tried if c["status"] != "passed"],
        "skipped_tests": [f"{c['module'].rsplit('.', 1)[-1]}::{c['name']}" for c in atk if c["status"] == "skipped"],
        "by_suite": {},
        "controls_run": len(ctl),
        "controls_passed": sum(c["status"] == "passed" for c in ctl),
        "controls_failed": [f"{c['module'].rsplit('.', 1)[-1]}::{c['name']} ({c['status']})"
                            for c in ctl if c["status"] not in ("passed", "skipped")],
        "attack_names": [c["name"] for c in atk],
    })
    for c in tried:
        suite = c["module"].rsplit(".", 1)[-1]
        s = res["by_suite"].setdefault(suite, {"tried": 0, "blocked": 0})
        s["tried"] += 1
        s["blocked"] += c["status"] == "passed"
    if rc not in (0, 1):
        res["error"] = f"pytest exit {rc} (not a test failure: collection or usage error): {out[-500:]}"
    return res


# ---------------------------------------------------------------------------- (ii) faults
def faults(children: Children, tmp: Path, tag: str, args: argparse.Namespace) -> dict[str, Any]:
    out = tmp / "faults.json"
    argv = [sys.executable, str(BENCH / "faults.py"), "--run-tag", f"{tag}-f", "--out", str(out)]
    if args.faults_only:
        argv += ["--only", *args.faults_only]
    if args.faults_skip:
        argv += ["--skip", *args.faults_skip]
    if args.force_engine_restart:
        argv.append("--force-engine-restart")
    log(f"reliability: (ii) faults: {' '.join(argv[1:])}")
    rc, stdout = children.run(argv, timeout=3600)
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"faults.py exit {rc}, no result ({exc}): {stdout[-500:]}", "exit": rc}
    data["exit"] = rc
    return data


# ---------------------------------------------------------------------------- (iii) fuzz
def fuzz(children: Children, tmp: Path, scale: int | None) -> dict[str, Any]:
    plugin_dir = tmp / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    (plugin_dir / f"{PLUGIN_NAME}.py").write_text(PLUGIN)
    stats = tmp / "hypothesis.json"
    junit = tmp / "fuzz.xml"
    env = {"PYTHONPATH": os.pathsep.join([str(plugin_dir), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "TE_RELIABILITY_HYPOTHESIS_OUT": str(stats),
           "TE_RELIABILITY_HYPOTHESIS_ONLY": "tests/test_harness.py"}  # its hypothesis tests only
    if scale:
        env["TERMINAL_ENV_FUZZ_SCALE"] = str(scale)
    log(f"reliability: (iii) fuzz: {' '.join(FUZZ_FILES)} (hypothesis tests of test_harness.py only)")
    t0 = time.monotonic()
    rc, out = children.run(pytest_argv(FUZZ_FILES, junit, "-p", PLUGIN_NAME), timeout=3600, env=env,
                           stdout_path=tmp / "fuzz.log")
    res: dict[str, Any] = {"files": FUZZ_FILES, "pytest_exit": rc, "wall_s": round(time.monotonic() - t0, 1),
                           "fuzz_scale": scale or int(os.environ.get("TERMINAL_ENV_FUZZ_SCALE", "1") or 1),
                           "method": "hypothesis.statistics.collector via a pytest plugin: test cases "
                                     "executed per phase (generate, reuse, shrink, ...), with their status"}
    try:
        data = json.loads(stats.read_text())
    except (OSError, ValueError) as exc:
        res["error"] = f"no statistics from the plugin (pytest exit {rc}, {exc}): {out[-500:]}"
        return res
    tests = data["tests"]
    hyp = {k: v for k, v in tests.items() if v["hypothesis"]}
    by_phase: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for v in hyp.values():
        for k, n in v["by_phase"].items():
            by_phase[k] = by_phase.get(k, 0) + n
        for k, n in v["by_status"].items():
            by_status[k] = by_status.get(k, 0) + n
    res.update({
        "hypothesis_version": data.get("hypothesis_version"),
        "tests_run": len(tests),
        "tests_passed": sum(v["outcome"] == "passed" for v in tests.values()),
        "tests_failed": sorted(k for k, v in tests.items() if v["outcome"] not in ("passed", "skipped")),
        "hypothesis_tests": len(hyp),
        "examples": sum(v["examples"] for v in hyp.values()),
        "valid_examples": sum(v["valid"] for v in hyp.values()),
        "examples_by_phase": by_phase, "examples_by_status": by_status,
        "hypothesis_tests_without_statistics": sorted(k for k, v in hyp.items()
                                                      if v["outcome"] == "passed" and v["statistics_calls"] == 0),
        "examples_per_test": {k.split("::", 1)[0].rsplit("/", 1)[-1] + "::" + k.split("::", 1)[-1]: v["examples"]
                              for k, v in sorted(hyp.items())},
    })
    if rc not in (0, 1):
        res["error"] = f"pytest exit {rc}: {out[-500:]}"
    return res


# ---------------------------------------------------------------------------- (iv) soak
def soak(children: Children, tmp: Path, tag: str, args: argparse.Namespace) -> dict[str, Any]:
    out = tmp / "soak.json"
    argv = [sys.executable, str(BENCH / "soak.py"), "--envs", str(args.soak_envs), "--minutes",
            str(args.soak_minutes), "--out", str(out), "--run-tag", f"{tag}-s"]
    log(f"reliability: (iv) soak: {args.soak_envs} environments for {args.soak_minutes:g} min")
    rc, stdout = children.run(argv, timeout=60 * args.soak_minutes + 1800)
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"soak.py exit {rc}, no result ({exc}): {stdout[-500:]}", "exit": rc}
    data["exit"] = rc
    data.get("memory", {}).pop("samples", None)  # the full series is in soak.py's own output
    return data


# ---------------------------------------------------------------------------- (v) leaks
def leaked(tag: str, pids: list[int], since: float) -> list[str]:
    from terminal_env.sandbox import LABEL_MANAGED
    from terminal_env.sandbox.engine import get_client

    client = get_client()
    out = []
    for c in client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL_MANAGED}=1"}):
        labels = c.attrs.get("Labels") or {}
        ours = labels.get("terminal-env.run", "").startswith(tag)
        try:
            by_child = int(labels.get("terminal-env.owner-pid", "-1")) in pids and c.attrs.get("Created", 0) >= since - 5
        except ValueError:
            by_child = False
        if ours or by_child:
            out.append((c.attrs.get("Names") or [c.id[:12]])[0].lstrip("/"))
    return out


# ---------------------------------------------------------------------------- verdict and table
def problems_of(r: dict[str, Any]) -> list[str]:
    p = []
    a = r.get("attacks")
    if a is not None:
        if a.get("error"):
            p.append(f"attacks: {a['error'][:200]}")
        for x in a.get("not_blocked", []):
            p.append(f"attack not blocked: {x['test']} ({x['status']})")
        for x in a.get("controls_failed", []):
            p.append(f"control failed (attack verdicts in doubt): {x}")
        if not a.get("error") and not a.get("attacks_tried"):
            p.append("attacks: none tried")
    f = r.get("faults")
    if f is not None and not f.get("skipped"):
        if f.get("error"):
            p.append(f"faults: {f['error'][:200]}")
        for x in f.get("faults", []):
            if not x["survived"]:
                p.append(f"fault {x['name']}: {'not injected' if not x['injected'] else 'not survived'}: "
                         f"{x['detail'][:200]}")
        if f.get("leaked_containers"):
            p.append(f"faults: {f['leaked_containers']} container(s) leaked")
    z = r.get("fuzz")
    if z is not None:
        if z.get("error"):
            p.append(f"fuzz: {z['error'][:200]}")
        for t in z.get("tests_failed", []):
            p.append(f"fuzz test failed: {t}")
        if z.get("hypothesis_tests_without_statistics"):
            p.append(f"fuzz: no example count for {len(z['hypothesis_tests_without_statistics'])} hypothesis "
                     "test(s) (the statistics hook did not fire)")
        if not z.get("error") and not z.get("examples"):
            p.append("fuzz: no hypothesis example counted")
    s = r.get("soak")
    if s is not None and not s.get("skipped"):
        if s.get("error"):
            p.append(f"soak: {s['error'][:200]}")
        elif not s.get("ok"):
            p.append(f"soak: {s.get('errors')} error(s), {s.get('leaked_containers')} leaked container(s)"
                     + (f", fatal: {s['fatal']}" if s.get("fatal") else "")
                     + (", interrupted" if s.get("interrupted") else ""))
    if r.get("leaked_containers"):
        p.append(f"{r['leaked_containers']} container(s) left at the end: {', '.join(r['leaked_container_names'][:5])}")
    if r.get("interrupted"):
        p.append("interrupted")
    return p


def table(r: dict[str, Any], file: Any) -> None:
    from rich.console import Console
    from rich.markup import escape as e
    from rich.table import Table

    con = Console(file=file, width=max(100, shutil.get_terminal_size((120, 20)).columns))
    t = Table(title=f"terminal-env reliability ({r['git_commit'][:10]}, {r['wall_s']:.0f} s)", show_lines=True)
    t.add_column("area", style="bold")
    t.add_column("figure", overflow="fold")
    t.add_column("status")

    def mark(ok: bool | None) -> str:
        return "[dim]skipped[/dim]" if ok is None else ("[green]ok[/green]" if ok else "[bold red]FAIL[/bold red]")

    a = r.get("attacks")
    if a is None:
        t.add_row("attacks", "", mark(None))
    else:
        if a.get("error") and "attacks_tried" not in a:
            t.add_row("attacks", e(a["error"][:300]), mark(False))
        else:
            suites = ", ".join(f"{k}: {v['blocked']}/{v['tried']}" for k, v in a["by_suite"].items())
            txt = (f"{a['attacks_blocked']} of {a['attacks_tried']} attacks blocked ({suites})"
                   + ("" if a["adversarial_suite_present"] else f"; {ADVERSARIAL} absent")
                   + f"\ncontrols {a['controls_passed']}/{a['controls_run']} passed")
            for x in a["not_blocked"]:
                txt += f"\n[red]not blocked: {e(x['test'])} ({x['status']})[/red]"
            for x in a["controls_failed"]:
                txt += f"\n[red]control failed: {e(x)}[/red]"
            if a["skipped_tests"]:
                params = Counter(re.sub(r"-.*", "", m.group(1)) if (m := re.search(r"\[(.*)\]$", x)) else "-"
                                 for x in a["skipped_tests"])
                txt += (f"\n{len(a['skipped_tests'])} skipped, not tried (by parameter: "
                        + ", ".join(f"{k} {v}" for k, v in params.most_common()) + ")")
            t.add_row("attacks", txt, mark(not a["not_blocked"] and not a["controls_failed"] and not a.get("error")
                                           and a["attacks_tried"] > 0))
    f = r.get("faults")
    if f is None or f.get("skipped"):
        t.add_row("faults", "", mark(None))
    elif f.get("error"):
        t.add_row("faults", e(f["error"][:300]), mark(False))
    else:
        tot = f["totals"]
        not_run = f"; not run: {', '.join(f['not_run'])}" if f.get("not_run") else ""
        t.add_row("faults", f"{tot['survived']} of {tot['run']} survived ({tot['injected']} injected){not_run}", mark(
            tot["survived"] == tot["run"] and not f.get("leaked_containers")))
        for x in f["faults"]:
            t.add_row(f"  {x['name']}", e(f"injected: {x['injected']}; {x['detail'][:400]}"), mark(x["survived"]))
    z = r.get("fuzz")
    if z is None:
        t.add_row("fuzz", "", mark(None))
    else:
        if z.get("error") and "examples" not in z:
            t.add_row("fuzz", e(z["error"][:300]), mark(False))
        else:
            phases = ", ".join(f"{k} {v}" for k, v in z["examples_by_phase"].items())
            txt = (f"{z['tests_passed']}/{z['tests_run']} tests passed; {z['hypothesis_tests']} hypothesis tests ran "
                   f"{z['examples']} examples ({z['valid_examples']} passing, "
                   f"{z['examples'] - z['valid_examples']} invalid or overrun; by phase: {phases}); "
                   f"scale {z['fuzz_scale']}")
            for x in z["tests_failed"]:
                txt += f"\n[red]failed: {e(x)}[/red]"
            t.add_row("fuzz", txt, mark(not z["tests_failed"] and not z.get("error") and z["examples"] > 0
                                        and not z["hypothesis_tests_without_statistics"]))
    s = r.get("soak")
    if s is None or s.get("skipped"):
        t.add_row("soak", "", mark(None))
    elif s.get("error"):
        t.add_row("soak", e(s["error"][:300]), mark(False))
    else:
        sk = s.get("soak") or {}
        lat = sk.get("latency_s", {})
        mem = s.get("memory", {})
        txt = (f"{s['config']['envs']} envs x {s['config']['minutes']:g} min: {sk.get('episodes_completed')} episodes "
               f"({sk.get('episodes_per_minute')}/min), {s.get('errors')} errors"
               + (f" {sk['errors_by_type']}" if sk.get("errors_by_type") else "")
               + f", {sk.get('masked_episodes')} masked\nlatency p50 {lat.get('p50')} s, p99 {lat.get('p99')} s; "
               f"RSS {mem.get('process_rss_mb', {}).get('before_soak')} -> {mem.get('process_rss_mb', {}).get('after_soak')} MB; "
               f"dockerd {mem.get('dockerd_rss_mb', {}).get('before_soak')} -> {mem.get('dockerd_rss_mb', {}).get('after_soak')} MB; "
               f"leaked {s.get('leaked_containers')}")
        t.add_row("soak", e(txt), mark(bool(s.get("ok"))))
    t.add_row("containers left", str(r["leaked_containers"]), mark(r["leaked_containers"] == 0))
    con.print(t)
    if r["problems"]:
        con.print("[bold red]problems:[/bold red]")
        for p in r["problems"]:
            con.print(f"  - {p}", markup=False)
    else:
        ran = [k for k in ("attacks", "faults", "fuzz", "soak") if r.get(k) and r[k].get("skipped") is not True]
        skipped = [k for k in ("attacks", "faults", "fuzz", "soak") if k not in ran]
        con.print(f"[bold green]no problem[/bold green] in: {', '.join(ran) or 'nothing'}"
                  + (f"; skipped: {', '.join(skipped)}" if skipped else "") + "; no container left")


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--soak-minutes", type=float, default=10.0)
    ap.add_argument("--soak-envs", type=int, default=32)
    ap.add_argument("--skip-soak", action="store_true")
    ap.add_argument("--skip-faults", action="store_true")
    ap.add_argument("--skip-attacks", action="store_true", help="do not run the attack suites")
    ap.add_argument("--skip-fuzz", action="store_true", help="do not run the fuzz tests")
    ap.add_argument("--faults-only", nargs="+", metavar="NAME", help="passed to faults.py --only")
    ap.add_argument("--faults-skip", nargs="+", metavar="NAME", help="passed to faults.py --skip")
    ap.add_argument("--force-engine-restart", action="store_true", help="passed to faults.py")
    ap.add_argument("--fuzz-scale", type=int, help="TERMINAL_ENV_FUZZ_SCALE for the fuzz tests")
    ap.add_argument("--json", action="store_true", help="JSON on stdout (the table goes to stderr)")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM stops like Ctrl-C: the children are stopped cleanly

    signal.signal(signal.SIGTERM, on_term)
    t0, started = time.monotonic(), time.time()
    tag = f"rel-{secrets.token_hex(3)}"
    tmp = Path(tempfile.mkdtemp(prefix="te-reliability-"))
    children = Children()
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=False, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    r: dict[str, Any] = {"benchmark": "reliability", "git_commit": commit or "unknown", "run_tag": tag,
                         "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                         "cpus": os.cpu_count(), "interrupted": False}
    try:
        r["attacks"] = None if args.skip_attacks else attacks(children, tmp)
        r["faults"] = {"skipped": True} if args.skip_faults else faults(children, tmp, tag, args)
        r["fuzz"] = None if args.skip_fuzz else fuzz(children, tmp, args.fuzz_scale)
        r["soak"] = {"skipped": True} if args.skip_soak else soak(children, tmp, tag, args)
    except KeyboardInterrupt:
        r["interrupted"] = True
        log("reliability: interrupted; checking what is left")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            names = leaked(tag, children.pids, started)
        except Exception as exc:  # noqa: BLE001 - an engine that does not answer is reported
            names = [f"(could not list containers: {exc})"]
        r["leaked_containers"] = len(names)
        r["leaked_container_names"] = names[:20]
        shutil.rmtree(tmp, ignore_errors=True)
    for k in ("attacks", "fuzz"):
        if r.get(k) is None:
            r.pop(k, None)
    r["wall_s"] = round(time.monotonic() - t0, 1)
    r["problems"] = problems_of(r)
    r["ok"] = not r["problems"]
    text = json.dumps(r, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    table(r, sys.stderr if args.json else sys.stdout)
    if args.json:
        print(text, flush=True)
    if r["interrupted"]:
        return 130
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
