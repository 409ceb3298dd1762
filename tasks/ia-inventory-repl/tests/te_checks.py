"""terminal-env's task author's kit: named, weighted checks for partial progress, and semantic helpers.

Vendored into a task's ``tests/`` (``terminal-env tasks new`` does it; ``tasks check`` says when a copy
is out of date), so the task runs unchanged in Harbor and in terminal-env. Loaded as a pytest plugin
by the canonical ``test.sh`` (``python3 -m pytest -p te_checks ...``), it writes, when the tests end:

* ``/logs/verifier/checks.json``: one check per test, ``{"name", "passed", "weight", "message"}``
  (terminal-env's own format: partial progress is the passed share of the weights);
* ``/logs/verifier/reward.txt``: that share, as Harbor reads it (1 only when every check passed).

Weights: ``@pytest.mark.weight(2)`` on a test (default 1). A test that is skipped is not a check; a
session that collected nothing, or broke while collecting, rewards 0.

The helpers below raise ``AssertionError`` with a message that says what differed, so a failing
check explains itself in the report. Standard library only (plus PyYAML for YAML, if installed).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import random
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

KIT_VERSION = "1"
LOG_DIR = os.environ.get("TE_CHECKS_DIR", "/logs/verifier")

# ---------------------------------------------------------------------------- the pytest plugin

_results: dict[str, dict[str, Any]] = {}
_broken: list[str] = []


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "weight(w): this check's weight in partial progress (default 1)")


def _name(item_or_report: Any) -> str:
    """``test_outputs::test_totals[case-1]``: the module's stem and the test, as JUnit names it."""
    nodeid = item_or_report.nodeid
    path, _, rest = nodeid.partition("::")
    return f"{Path(path).stem}::{rest}" if rest else Path(path).stem


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _broken.append(f"{report.nodeid or 'collection'}: {str(report.longrepr)[-300:]}")


def pytest_runtest_setup(item: Any) -> None:
    marker = item.get_closest_marker("weight")
    weight = float(marker.args[0]) if marker and marker.args else 1.0
    if not weight >= 0 or math.isinf(weight):
        raise ValueError(f"{item.nodeid}: weight must be a finite number >= 0, got {weight}")
    _results.setdefault(_name(item), {"weight": weight})


def pytest_runtest_logreport(report: Any) -> None:
    entry = _results.setdefault(_name(report), {"weight": 1.0})
    if report.skipped and report.when in ("setup", "call"):
        entry["skipped"] = True
        return
    if report.failed:
        entry["passed"] = False
        text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
        lines = [line for line in text.splitlines() if line.startswith("E ")]
        entry["message"] = ("\n".join(lines[-5:]) or text[-500:]).strip()
    elif report.when == "call" and "passed" not in entry:
        entry["passed"] = True


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    checks = [{"name": name, "passed": bool(e.get("passed")), "weight": e["weight"],
               "message": e.get("message", "")}
              for name, e in _results.items() if not e.get("skipped")]
    total = sum(c["weight"] for c in checks)
    share = sum(c["weight"] for c in checks if c["passed"]) / total if total > 0 else 0.0
    if _broken or not checks:
        share = 0.0
    out = Path(LOG_DIR)
    with contextlib.suppress(OSError):
        out.mkdir(parents=True, exist_ok=True)
        doc = {"checks": checks, "kit": KIT_VERSION, "collection_errors": _broken}
        (out / "checks.json").write_text(json.dumps(doc, indent=1))
        (out / "reward.txt").write_text(f"{round(share, 6)}\n")


# ---------------------------------------------------------------------------- files and trees


def text(path: str | os.PathLike[str]) -> str:
    """A file's text; a missing file fails the check, naming it."""
    p = Path(path)
    assert p.is_file(), f"{p} does not exist (or is not a regular file)"
    return p.read_text(errors="replace")


def check_file(path: str | os.PathLike[str], *, equals: str | None = None, contains: Iterable[str] = (),
               mode: int | None = None, owner: str | None = None, strip: bool = True) -> None:
    """A file's content (``equals``, compared stripped by default; ``contains``), permission bits
    (``mode=0o600``) and owner's user name."""
    p = Path(path)
    body = text(p)
    if equals is not None:
        got, want = (body.strip(), equals.strip()) if strip else (body, equals)
        assert got == want, f"{p}: expected {want[:200]!r}, found {got[:200]!r}"
    for part in contains:
        assert part in body, f"{p} does not contain {part!r}"
    st = p.stat()
    if mode is not None:
        assert st.st_mode & 0o7777 == mode, f"{p}: mode {st.st_mode & 0o7777:o}, expected {mode:o}"
    if owner is not None:
        import pwd

        got_owner = pwd.getpwuid(st.st_uid).pw_name
        assert got_owner == owner, f"{p}: owned by {got_owner}, expected {owner}"


def check_tree(root: str | os.PathLike[str], expected: Mapping[str, str | None], *, exact: bool = False) -> None:
    """Files under ``root`` by relative path: content (stripped) to compare, or None for any.
    ``exact``: no other file may exist."""
    base = Path(root)
    assert base.is_dir(), f"{base} is not a directory"
    for rel, want in expected.items():
        p = base / rel
        assert p.is_file(), f"{p} is missing"
        if want is not None:
            assert p.read_text(errors="replace").strip() == want.strip(), f"{p}: unexpected content"
    if exact:
        found = {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()}
        extra = sorted(found - set(expected))
        assert not extra, f"{base}: unexpected files {extra[:10]}"


def digest(path: str | os.PathLike[str]) -> str:
    """sha256 of a file (compare inputs the agent must not rewrite with the value at build time)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------- numbers and data


def close(actual: Any, expected: float, *, rel: float = 1e-6, abs_tol: float = 0.0, what: str = "value") -> None:
    """A number within a relative and absolute tolerance (text is parsed)."""
    try:
        value = float(str(actual).strip())
    except ValueError:
        raise AssertionError(f"{what}: {actual!r} is not a number") from None
    assert math.isfinite(value), f"{what}: {value} is not finite"
    assert math.isclose(value, expected, rel_tol=rel, abs_tol=abs_tol), \
        f"{what}: {value} is not within rel={rel} abs={abs_tol} of {expected}"


def _cell(value: Any) -> Any:
    s = str(value).strip()
    try:
        return float(s) if s else s
    except ValueError:
        return s


def rows(source: str | os.PathLike[str], *, delimiter: str = ",") -> list[dict[str, str]]:
    """A CSV file (or CSV text when it has a newline) as a list of dicts by header."""
    data = source if isinstance(source, str) and "\n" in source else text(source)
    return list(csv.DictReader(io.StringIO(data), delimiter=delimiter))


def same_rows(actual: Sequence[Mapping[str, Any]], expected: Sequence[Mapping[str, Any]], *,
              ordered: bool = True, rel: float = 1e-9, abs_tol: float = 1e-9) -> None:
    """Tables compared as data: numbers within tolerance, surrounding spaces ignored, order
    optional. The message names the first differing row and column."""
    assert len(actual) == len(expected), f"{len(actual)} rows, expected {len(expected)}"

    def norm(row: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        return tuple(sorted((str(k).strip(), _cell(v)) for k, v in row.items()))

    a = [norm(r) for r in actual]
    e = [norm(r) for r in expected]
    if not ordered:
        a, e = sorted(a, key=repr), sorted(e, key=repr)
    for i, (ra, re_) in enumerate(zip(a, e)):
        da, de = dict(ra), dict(re_)
        assert set(da) == set(de), f"row {i + 1}: columns {sorted(da)}, expected {sorted(de)}"
        for col in de:
            x, y = da[col], de[col]
            if isinstance(x, float) and isinstance(y, float):
                assert math.isclose(x, y, rel_tol=rel, abs_tol=abs_tol), f"row {i + 1}, {col}: {x} != {y}"
            else:
                assert x == y, f"row {i + 1}, {col}: {x!r} != {y!r}"


def same_data(actual: Any, expected: Any, *, rel: float = 1e-9, abs_tol: float = 1e-9, where: str = "$") -> None:
    """JSON-like data compared as data (dict order ignored, numbers within tolerance)."""
    if isinstance(expected, Mapping):
        assert isinstance(actual, Mapping), f"{where}: expected an object, found {type(actual).__name__}"
        assert set(actual) == set(expected), f"{where}: keys {sorted(actual)}, expected {sorted(expected)}"
        for k in expected:
            same_data(actual[k], expected[k], rel=rel, abs_tol=abs_tol, where=f"{where}.{k}")
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)), f"{where}: expected a list, found {type(actual).__name__}"
        assert len(actual) == len(expected), f"{where}: {len(actual)} items, expected {len(expected)}"
        for i, (x, y) in enumerate(zip(actual, expected)):
            same_data(x, y, rel=rel, abs_tol=abs_tol, where=f"{where}[{i}]")
    elif isinstance(expected, float) or (isinstance(expected, int) and isinstance(actual, float)):
        assert isinstance(actual, (int, float)) and not isinstance(actual, bool), f"{where}: {actual!r} is not a number"
        assert math.isclose(actual, expected, rel_tol=rel, abs_tol=abs_tol), f"{where}: {actual} != {expected}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def json_file(path: str | os.PathLike[str]) -> Any:
    try:
        return json.loads(text(path))
    except ValueError as exc:
        raise AssertionError(f"{path} is not valid JSON: {exc}") from None


def yaml_file(path: str | os.PathLike[str]) -> Any:
    import yaml  # PyYAML, where the task's image has it

    try:
        return yaml.safe_load(text(path))
    except yaml.YAMLError as exc:
        raise AssertionError(f"{path} is not valid YAML: {exc}") from None


# ---------------------------------------------------------------------------- programs and time


def run(cmd: Sequence[str] | str, *, input: str | None = None, timeout: float = 30, cwd: str | None = None,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a program with a time limit: past it the check fails at once (a slow or hanging agent
    program costs ``timeout`` seconds, not the verifier's whole budget)."""
    try:
        return subprocess.run(cmd, input=input, capture_output=True, text=True, errors="replace",
                              timeout=timeout, cwd=cwd, shell=isinstance(cmd, str),
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{cmd if isinstance(cmd, str) else ' '.join(cmd)} ran past {timeout:g} s") from None
    except FileNotFoundError as exc:
        raise AssertionError(f"cannot run {cmd!r}: {exc}") from None


@contextlib.contextmanager
def time_limit(seconds: float, what: str = "this check") -> Iterator[None]:
    """Fail ``what`` once it runs past ``seconds`` (SIGALRM; main thread only)."""
    def stop(signum: int, frame: Any) -> None:
        raise AssertionError(f"{what} ran past {seconds:g} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def timed(fn: Callable[[], Any], *, limit: float, what: str = "the program") -> float:
    """Seconds ``fn`` took; fails past ``limit`` (performance tasks)."""
    t0 = time.perf_counter()
    with time_limit(limit * 2 + 1, what):
        fn()
    took = time.perf_counter() - t0
    assert took <= limit, f"{what} took {took:.2f} s, over the limit of {limit:g} s"
    return took


class Budget:
    """One time budget for every program run of a test module (performance tasks): each run gets
    its own limit but never more than what is left, and once the budget is spent every later run
    fails at once. A program too slow for the task then costs ``total`` seconds to verify, not
    one full timeout per test.

    ::

        BUDGET = te.Budget(30)
        with BUDGET.limit(20) as timeout:
            subprocess.run([...], timeout=timeout)
    """

    def __init__(self, total: float):
        self.total = float(total)
        self.spent = 0.0

    @contextlib.contextmanager
    def limit(self, per_run: float) -> Iterator[float]:
        left = self.total - self.spent
        if left <= 0:
            raise AssertionError(f"the tests' time budget of {self.total:g} s was spent by earlier runs "
                                 "of the program: it is too slow")
        t0 = time.monotonic()
        try:
            yield min(float(per_run), left)
        finally:
            self.spent += time.monotonic() - t0


def hidden_rng(task: str, seed: int = 0) -> random.Random:
    """A random generator for hidden inputs: the same inputs on every run of the verifier, never
    present in the image (generate them in the test, run the agent's program on them)."""
    return random.Random(int(hashlib.sha256(f"{task}:{seed}".encode()).hexdigest()[:16], 16))


# ---------------------------------------------------------------------------- processes and services


def processes() -> list[str]:
    """The command lines of the processes running now."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError):
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                if raw:
                    out.append(raw.replace(b"\0", b" ").decode(errors="replace").strip())
    return out


def process_running(fragment: str) -> None:
    assert any(fragment in p for p in processes()), f"no running process matches {fragment!r}"


def listening(port: int) -> bool:
    """A TCP socket listens on ``port`` (any address, IPv4 or IPv6), from /proc/net."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 3 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def answers(url: str, *, timeout: float = 5, contains: str | None = None, status: int = 200) -> str:
    """An HTTP service answers ``url`` with ``status`` (and ``contains``); its body."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read().decode(errors="replace")
            code = resp.status
    except urllib.error.HTTPError as exc:
        body, code = exc.read().decode(errors="replace"), exc.code
    except OSError as exc:
        raise AssertionError(f"{url} does not answer: {exc}") from None
    assert code == status, f"{url} answered {code}, expected {status}"
    if contains is not None:
        assert contains in body, f"{url}: the answer does not contain {contains!r}"
    return body


# ---------------------------------------------------------------------------- git


def git(repo: str | os.PathLike[str], *args: str) -> str:
    res = run(["git", "-C", str(repo), *args], timeout=60)
    assert res.returncode == 0, f"git {' '.join(args)} failed in {repo}: {res.stderr.strip()[:300]}"
    return res.stdout


def merged(repo: str | os.PathLike[str], branch: str, into: str = "main") -> None:
    res = run(["git", "-C", str(repo), "merge-base", "--is-ancestor", branch, into], timeout=60)
    assert res.returncode == 0, f"{branch} is not merged into {into}"


def secret_gone(repo: str | os.PathLike[str], secret: str) -> None:
    """``secret`` is in no object of the repository, reachable or not (history rewritten *and*
    the old objects expired), and in no file of its work tree."""
    try:
        res = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"],
                             capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"reading every object of {repo} ran past 120 s") from None
    assert res.returncode == 0, f"cannot read the objects of {repo}: {res.stderr.decode(errors='replace')[:200]}"
    assert secret.encode() not in res.stdout, \
        f"the secret is still in an object of {repo} (expire the reflog and run git gc after rewriting)"
    for p in Path(repo).rglob("*"):
        if p.is_file() and ".git" not in p.parts:
            with contextlib.suppress(OSError):
                assert secret not in p.read_text(errors="ignore"), f"the secret is still in {p}"
