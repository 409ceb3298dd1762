"""Generated task families of the text-data category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import logtools, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ log-rollup
# A log in one of three formats; a report to compute from it, of one of three kinds. The agent
# writes a program; the tests run it on the given log and on hidden logs of the same format.

_FORMATS = {
    "clf": ("lines like `10.0.0.7 - ana [2026-03-01T10:22:13] \"GET /api/users\" 200 512 37ms` "
            "(client, user, time, request, status, bytes, latency)"),
    "jsonl": ("one JSON object per line with the keys `ts`, `user`, `method`, `path`, `status`, "
              "`bytes` and `ms`"),
    "kv": ("lines like `ts=2026-03-01T10:22:13 user=ana method=GET path=/api/users status=200 "
           "bytes=512 ms=37` (the keys may come in any order)"),
}

_REPORTS = {
    "status-by-path": ("for each path, the number of requests per status class: "
                       '`{"/api/users": {"2xx": 3, "4xx": 1}, ...}` (classes with no request left out)'),
    "p90-latency": ("for each path with at least one request, the 90th percentile of its latencies in "
                    "ms by the nearest-rank method (the smallest value that at least 90% of the "
                    'values are less than or equal to): `{"/api/users": 41, ...}`'),
    "users-per-day": ("for each day (YYYY-MM-DD), the number of distinct users with at least one "
                      'request that did not fail on the server (status below 500): `{"2026-03-01": 4, ...}`'),
}

_LOG_TESTS = '''"""Runs the agent's rollup program on the given log and on hidden logs of the same format."""

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from logtools import make_records, render, report

FMT = __FMT__
KIND = __KIND__
PROGRAM = "/app/rollup.py"


def run(text):
    d = Path(tempfile.mkdtemp())
    (d / "in.log").write_text(text)
    r = subprocess.run(["python3", PROGRAM, str(d / "in.log")], capture_output=True, text=True,
                       timeout=60, cwd=str(d))
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}"
    try:
        return json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"output is not JSON: {r.stdout[:300]!r}")


@pytest.mark.weight(1)
def test_given_log_report_file():
    recs = json.loads(Path(__file__).with_name("given.json").read_text())
    got = json.loads(Path("/app/report.json").read_text())
    assert got == report(KIND, recs), "report.json is not the report of /app/access.log"


@pytest.mark.weight(2)
def test_hidden_logs():
    for seed in range(3):
        rng = random.Random(1000 + seed)
        recs = make_records(rng, rng.randint(30, 90))
        assert run(render(FMT, recs, rng)) == report(KIND, recs), f"wrong report on hidden log {seed}"


@pytest.mark.weight(1)
def test_single_line_and_blank_lines():
    rng = random.Random(7)
    recs = make_records(rng, 1)
    text = "\\n" + render(FMT, recs, rng) + "\\n\\n"
    assert run(text) == report(KIND, recs), "a log with one record and blank lines"
'''


def _log_rollup(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_FORMATS))
    kind = rng.choice(sorted(_REPORTS))
    recs = logtools.make_records(rng, rng.randint(40, 120))
    log = logtools.render(fmt, recs, rng)
    instruction = f"""\
`/app/access.log` is a web server's access log: {_FORMATS[fmt]}.

Write `/app/rollup.py`, a Python 3 program (standard library only) that reads the log file named by
its one argument and prints, as JSON, {_REPORTS[kind]}. Blank lines are ignored.

Then run it on `/app/access.log` and save its output to `/app/report.json`. Your program will also
be run on other logs of the same format.
"""
    parse = {
        "clf": r'''m = re.match(r'\S+ - (\S+) \[(\S+)\] "(\S+) (\S+)" (\d+) (\d+) (\d+)ms', line)
        r = dict(user=m[1], ts=m[2], method=m[3], path=m[4], status=int(m[5]), bytes=int(m[6]), ms=int(m[7]))''',
        "jsonl": "r = json.loads(line)",
        "kv": '''r = dict(p.split("=", 1) for p in line.split())
        r["status"], r["ms"] = int(r["status"]), int(r["ms"])''',
    }[fmt]
    solution = f"""cat > /app/rollup.py <<'PY'
import json, math, re, sys
recs = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line:
        {parse}
        recs.append(r)
{_report_source()}
print(json.dumps(report({kind!r}, recs)))
PY
python3 /app/rollup.py /app/access.log > /app/report.json
"""
    tests = _LOG_TESTS.replace("__FMT__", repr(fmt)).replace("__KIND__", repr(kind))
    difficulty = {"status-by-path": "easy", "users-per-day": "easy", "p90-latency": "medium"}[kind]
    if fmt == "clf" and kind == "p90-latency":
        difficulty = "medium"
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{fmt}/{kind}", files={"access.log": log},
        test_files={"logtools.py": source(logtools), "given.json": json.dumps(recs)},
        tags=("logs", "json", fmt), oracle_turns=2,
    )


def _report_source() -> str:
    """The reference ``report`` function, as the oracle's program embeds it."""
    text = source(logtools)
    return text[text.index("def report("):].strip()


FAMILIES.append(Family("log-rollup", "text-data", "train",
                       "a report (status classes, p90 latency, users per day) from a log in one of "
                       "three formats, by a program run on hidden logs", _log_rollup))
