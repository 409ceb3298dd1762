"""Generated task families of the text-data category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import h1_recs, logtools, source

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

from logtools import given_hits, make_hits, render, report

FMT = __FMT__
KIND = __KIND__
GIVEN_SEED = __SEED__
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
    got = json.loads(Path("/app/report.json").read_text())
    assert got == report(KIND, given_hits(GIVEN_SEED)), "report.json is not the report of /app/access.log"


@pytest.mark.weight(2)
def test_hidden_logs():
    for seed in range(3):
        rng = random.Random(1000 + seed)
        hits = make_hits(rng, rng.randint(30, 90))
        assert run(render(FMT, hits, rng)) == report(KIND, hits), f"wrong report on hidden log {seed}"


@pytest.mark.weight(1)
def test_single_line_and_blank_lines():
    rng = random.Random(7)
    hits = make_hits(rng, 1)
    text = "\\n" + render(FMT, hits, rng) + "\\n\\n"
    assert run(text) == report(KIND, hits), "a log with one record and blank lines"
'''


def _log_rollup(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_FORMATS))
    kind = rng.choice(sorted(_REPORTS))
    seed = rng.randrange(2**31)
    log = logtools.render(fmt, logtools.given_hits(seed), random.Random(seed + 1))
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
hits = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line:
        {parse}
        hits.append(r)
{_report_source()}
print(json.dumps(report({kind!r}, hits)))
PY
python3 /app/rollup.py /app/access.log > /app/report.json
"""
    tests = (_LOG_TESTS.replace("__FMT__", repr(fmt)).replace("__KIND__", repr(kind))
             .replace("__SEED__", repr(seed)))
    difficulty = {"status-by-path": "easy", "users-per-day": "easy", "p90-latency": "medium"}[kind]
    if fmt == "clf" and kind == "p90-latency":
        difficulty = "medium"
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{fmt}/{kind}", files={"access.log": log},
        test_files={"logtools.py": source(logtools)},
        tags=("logs", "json", fmt), oracle_turns=2,
    )


def _report_source() -> str:
    """The reference ``report`` function, as the oracle's program embeds it."""
    text = source(logtools)
    return text[text.index("def report("):].strip()


FAMILIES.append(Family("log-rollup", "text-data", "train",
                       "a report (status classes, p90 latency, users per day) from a log in one of "
                       "three formats, by a program run on hidden logs", _log_rollup))


# ------------------------------------------------------------------ record-extract
# Records in one of three text layouts (fixed-width columns under a ruler, `Key: value` stanzas,
# BEGIN/END blocks with properties); the agent's program turns a file into JSON objects. Messy
# instances add folded lines, CRLF, comments, ragged lines and escapes that the sample lacks.

_LAYOUTS = {
    "fixed-width": ("a fixed-width table. The first line holds the column names (ID, NAME, CITY, QTY, "
                    "NOTE), the second a ruler: one run of dashes per column. A column spans from the "
                    "first character of its run of dashes up to the first character of the next run (the "
                    "last column: to the end of the line). A value is the text in its column's span with "
                    "surrounding spaces removed; it may contain spaces",
                    "Data lines may be shorter than the ruler (trailing spaces are often cut off): "
                    "missing characters count as spaces."),
    "stanza": ("one stanza per record, stanzas separated by blank lines. Each line of a stanza is "
               "`Key: value` (the key is one of Id, Name, City, Qty, Note; everything after the first "
               "`: ` is the value). A field that is empty is left out",
               "Keys are case-insensitive (`NOTE`, `note`). A line that starts with spaces continues the "
               "previous value: its text without the leading spaces is appended after one space. "
               "Lines starting with `#` are comments. Lines end in CRLF, and there may be several "
               "blank lines between stanzas."),
    "blocks": ("one block per record from `BEGIN:RECORD` to `END:RECORD`; inside, one property per line: "
               "`NAME:value` or `NAME;PARAM=x:value` (parameters are ignored; the value is everything after "
               "the first `:`). NAME is ID, NAME, CITY, QTY or NOTE. In values, `\\,` stands for `,`, "
               "`\\;` for `;` and `\\\\` for a backslash. An empty field is left out",
               "Long lines are folded: a line that starts with a single space continues the previous "
               "line; remove exactly that one space and join them (the rest may start with a space "
               "that belongs to the value). Lines end in CRLF."),
}

_RECS_TESTS = '''"""Runs the agent's extractor on the given file and on hidden files of the same layout."""

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h1_recs import expected, make_records, render

FMT = __FMT__
MESSY = __MESSY__


def run(text):
    d = Path(tempfile.mkdtemp())
    (d / "in.txt").write_bytes(text.encode())
    r = subprocess.run(["python3", "/app/extract.py", str(d / "in.txt")], capture_output=True, text=True,
                       timeout=60, cwd=str(d))
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}"
    try:
        return json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"output is not JSON: {r.stdout[:300]!r}")


@pytest.mark.weight(1)
def test_given_file_records():
    entries = json.loads(Path(__file__).with_name("given.json").read_text())
    assert json.loads(Path("/app/records.json").read_text()) == expected(entries)


@pytest.mark.weight(2)
def test_hidden_files():
    for seed in range(3):
        rng = random.Random(600 + seed)
        entries = make_records(rng, rng.randint(5, 30))
        assert run(render(FMT, entries, rng)) == expected(entries), f"hidden file {seed}"


@pytest.mark.weight(2)
def test_hidden_files_with_all_rules():
    for seed in range(3):
        rng = random.Random(700 + seed)
        entries = make_records(rng, rng.randint(5, 30), messy=MESSY)
        assert run(render(FMT, entries, rng, messy=MESSY)) == expected(entries), f"hidden file {seed}"
'''


def _record_extract(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_LAYOUTS))
    messy = rng.random() < 0.6
    entries = h1_recs.make_records(rng, rng.randint(8, 20))
    text = h1_recs.render(fmt, entries, rng)
    layout, more = _LAYOUTS[fmt]
    instruction = f"""\
`/app/records.txt` is an export in this layout: {layout}.{(" " + more) if messy else ""}

Write `/app/extract.py`, a Python 3 program (standard library only) that reads a file in this layout
named by its one argument and prints a JSON list with one object per record, in file order, each
with exactly the keys `id`, `name`, `city`, `qty` and `note` (string values; `""` for a field that
is empty or left out). Run it on `/app/records.txt` and save the output to `/app/records.json`. It
will also be run on other exports in this layout.
"""
    solution = f"""cat > /app/extract.py <<'PY'
{_EXTRACTORS[fmt]}
PY
python3 /app/extract.py /app/records.txt > /app/records.json
"""
    difficulty = ("hard" if fmt != "fixed-width" else "medium") if messy else \
        ("easy" if fmt == "stanza" else "medium")
    tests = _RECS_TESTS.replace("__FMT__", repr(fmt)).replace("__MESSY__", repr(messy))
    return Instance(instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
                    variant=f"{fmt}/{'messy' if messy else 'clean'}", files={"records.txt": text},
                    test_files={"h1_recs.py": source(h1_recs), "given.json": json.dumps(entries)},
                    tags=("parsing", fmt), oracle_turns=2)


_EXTRACTORS = {
    "fixed-width": r'''import json, re, sys
lines = open(sys.argv[1]).read().split("\n")
names = lines[0].split()
spans = [m.start() for m in re.finditer(r"-+", lines[1])] + [None]
out = []
for line in lines[2:]:
    if not line.strip():
        continue
    vals = [line[a:b].strip() for a, b in zip(spans, spans[1:])]
    out.append({n.lower(): v for n, v in zip(names, vals)})
print(json.dumps(out))''',
    "stanza": r'''import json, sys
KEYS = ["id", "name", "city", "qty", "note"]
out, entry, last = [], {}, None
for line in open(sys.argv[1], newline="").read().replace("\r\n", "\n").split("\n"):
    if line.startswith("#"):
        continue
    if not line.strip():
        if entry:
            out.append(entry)
        entry, last = {}, None
    elif line[0] in " \t":
        entry[last] += " " + line.strip()
    else:
        k, v = line.split(": ", 1)
        last = k.lower()
        entry[last] = v
if entry:
    out.append(entry)
print(json.dumps([{k: r.get(k, "") for k in KEYS} for r in out]))''',
    "blocks": r'''import json, sys
KEYS = ["id", "name", "city", "qty", "note"]
raw = open(sys.argv[1], newline="").read().replace("\r\n", "\n").split("\n")
lines = []
for line in raw:
    if line.startswith(" ") and lines:
        lines[-1] += line[1:]
    else:
        lines.append(line)
def unescape(v):
    out, i = [], 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v):
            out.append(v[i + 1])
            i += 2
        else:
            out.append(v[i])
            i += 1
    return "".join(out)
out = []
for line in lines:
    if line == "BEGIN:RECORD":
        entry = {}
    elif line == "END:RECORD":
        out.append({k: entry.get(k, "") for k in KEYS})
    elif line:
        head, val = line.split(":", 1)
        entry[head.split(";")[0].lower()] = unescape(val)
print(json.dumps(out))''',
}

FAMILIES.append(Family("record-extract", "text-data", "validation",
                       "records to JSON from fixed-width columns, Key: value stanzas or BEGIN/END "
                       "blocks, with folded lines, CRLF and escapes in messy instances", _record_extract))
