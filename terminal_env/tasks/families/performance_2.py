"""Generated task families of the performance category, continued (:mod:`.performance` has the
shared test template): sqlite-lookups and io-churn."""

from __future__ import annotations

import os
import random
import tempfile

from .base import Family, Instance
from .performance import _timed_tests
from .support import functions, h1_churn, h1_perf, h1_sql, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ sqlite-lookups

_SQLS = {
    "customer-totals": ("one line per customer (by id): `name<TAB>number of orders<TAB>total amount_cents` "
                        "(0 and 0 for a customer without orders)", """\
    for cid, name in con.execute("SELECT id, name FROM customers ORDER BY id").fetchall():
        n, total = con.execute("SELECT COUNT(*), SUM(amount_cents) FROM orders WHERE customer_id = ?",
                               (cid,)).fetchone()
        print(f"{name}\\t{n}\\t{total or 0}")
"""),
    "latest-reading": ("one line per sensor (by id): `label<TAB>ts<TAB>value` of its latest reading, or "
                       "`label<TAB>-` for a sensor without readings", """\
    for sid, label in con.execute("SELECT id, label FROM sensors ORDER BY id").fetchall():
        row = con.execute("SELECT ts, value FROM readings WHERE sensor_id = ? ORDER BY ts DESC LIMIT 1",
                          (sid,)).fetchone()
        print(f"{label}\\t{row[0]}\\t{row[1]}" if row else f"{label}\\t-")
"""),
    "window-counts": ("one line per window (by id): `id<TAB>number of events with start <= ts <= stop`", """\
    for wid, start, stop in con.execute("SELECT id, start, stop FROM windows ORDER BY id").fetchall():
        (n,) = con.execute("SELECT COUNT(*) FROM events WHERE ts BETWEEN ? AND ?", (start, stop)).fetchone()
        print(f"{wid}\\t{n}")
"""),
    "email-match": ("one line per signup (by id): `email<TAB>id of the user with that email ignoring ASCII "
                    "case` (the lowest such id), or `email<TAB>-`", """\
    for _, email in con.execute("SELECT id, email FROM signups ORDER BY id").fetchall():
        row = con.execute("SELECT id FROM users WHERE lower(email) = lower(?) ORDER BY id LIMIT 1",
                          (email,)).fetchone()
        print(f"{email}\\t{row[0] if row else '-'}")
"""),
}

_SQL_BODY = '''
import h1_sql

SQL_REF = str(Path(__file__).with_name("h1_sql.py"))


def check_db(seed, scale):
    path = str(Path(tempfile.mkdtemp()) / "data.db")
    h1_sql.make_db(KIND, random.Random(seed), scale, path)
    want, t_ref = timed([sys.executable, SQL_REF, KIND], path, 120)
    got, t = timed(["python3", PROGRAM], path, 5 * t_ref + 2.0)
    assert got == want, f"output differs from the original program's: {got[:200]!r} vs {want[:200]!r}"
    return t, t_ref


@pytest.mark.weight(1)
def test_small_databases():
    for seed, scale in ((1, 5), (2, 60), (3, 900), (4, 120000)):
        check_db(seed, scale)


@pytest.mark.weight(2)
def test_large_database_in_time():
    t, t_ref = check_db(5, 200000)
    print(f"{t:.2f} s, reference {t_ref:.2f} s")


@pytest.mark.weight(1)
def test_another_large_database():
    check_db(6, 200000)
'''


def _sqlite_lookups(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_SQLS))
    doc, body = _SQLS[kind]
    name = rng.choice(["report", "summary", "nightly"])
    program = f"/app/{name}.py"
    slow = f'''"""Usage: {name}.py DB -- prints {doc}.
"""
import sqlite3
import sys


def main():
    con = sqlite3.connect(sys.argv[1])
{body}

if __name__ == "__main__":
    main()
'''
    schema = ";\n".join(h1_sql.SCHEMAS[kind]) + ";"
    instruction = f"""\
`{program} DB` prints a report from an SQLite database with this schema:

```sql
{schema}
```

`/app/sample.db` is a small example. The output is right, but on a production database (a few
hundred thousand rows in the big table) it runs for minutes. Make `{program}` fast: with the same
command line it must print exactly the same output, byte for byte, for every database of this
schema, and take a few seconds at most on 200,000 rows. It will be run on fresh databases that have
exactly this schema (no index beyond the primary keys). Keep it a Python 3 program (standard
library only; the `sqlite3` module is available).
"""
    solution = f"""cat > {program} <<'PY'
import bisect, sqlite3, sys
{_ref_source(h1_sql, "report")}


sys.stdout.write(report({kind!r}, sys.argv[1]))
PY
"""
    tests = _timed_tests("sql", kind, program, _SQL_BODY)
    difficulty = {"customer-totals": "easy", "latest-reading": "medium", "window-counts": "medium",
                  "email-match": "medium"}[kind]
    return Instance(instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
                    variant=kind, files={f"{name}.py": slow, "sample.db": _sample_db(kind, rng)},
                    test_files={"h1_perf.py": source(h1_perf), "h1_sql.py": source(h1_sql)},
                    tags=("sqlite", "sql", "python"), verifier_timeout_sec=300.0)


def _ref_source(module, name: str) -> str:
    return functions(module, name)


def _sample_db(kind: str, rng: random.Random) -> bytes:
    """The example database's bytes (written through a temporary file: sqlite needs a path)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.db")
        h1_sql.make_db(kind, rng, 60, path)
        with open(path, "rb") as f:
            return f.read()


FAMILIES.append(Family("sqlite-lookups", "performance", "train",
                       "a report that runs one unindexed SQLite query per row (totals, latest reading, "
                       "time windows, case-insensitive match) to make fast, same output", _sqlite_lookups))


# ------------------------------------------------------------------ io-churn
# A pricing run that re-reads its inputs for every record: the price table (scanned from the top
# for each record), the settings file (parsed again for each record), or the records file itself
# (read again up to line i to get record i). Hard instances combine two of them, across two
# modules, and their data holds repeated table codes and alias-to-alias entries.

_WASTES = {
    "table": '''def price_of(data, code):
    """The price of `code`: the first row of table.csv with that code, or None."""
    with open(os.path.join(data, "table.csv")) as f:
        for line in f:
            c, p = line.strip().split(",")
            if c == code:
                return int(p)
    return None
''',
    "settings": '''def resolve(data, code):
    """`code` after one lookup in the aliases of settings.json (aliases are not followed further)."""
    with open(os.path.join(data, "settings.json")) as f:
        aliases = json.load(f)["aliases"]
    return aliases.get(code, code)
''',
    "records": '''def count_lines(data):
    with open(os.path.join(data, "records.txt")) as f:
        return sum(1 for _ in f)


def line_at(data, i):
    with open(os.path.join(data, "records.txt")) as f:
        for j, line in enumerate(f):
            if j == i:
                return line


def records(data):
    for i in range(count_lines(data)):
        yield line_at(data, i)
''',
}

_PLAIN = {
    "table": '''def price_of(data, code):
    """The price of `code`: the first row of table.csv with that code, or None."""
    prices = {}
    with open(os.path.join(data, "table.csv")) as f:
        for line in f:
            c, p = line.strip().split(",")
            prices.setdefault(c, int(p))
    return prices.get(code)
''',
    "settings": '''_ALIASES = {}


def resolve(data, code):
    """`code` after one lookup in the aliases of settings.json (aliases are not followed further)."""
    if data not in _ALIASES:
        with open(os.path.join(data, "settings.json")) as f:
            _ALIASES[data] = json.load(f)["aliases"]
    return _ALIASES[data].get(code, code)
''',
    "records": '''def records(data):
    with open(os.path.join(data, "records.txt")) as f:
        return list(f)
''',
}

_MAIN = '''def main():
    data = sys.argv[1]
    out = []
    for line in records(data):
        if not line.strip():
            continue
        rid, code, qty = line.split()
        code = __RESOLVE__
        price = price_of(data, code)
        out.append(f"{rid} {code} {price * int(qty)}" if price is not None else f"{rid} {code} ?")
    with open(os.path.join(data, "out.txt"), "w") as f:
        f.write("".join(line + "\\n" for line in out))


if __name__ == "__main__":
    main()
'''

_CHURN_TESTS = '''"""Hidden checks for the batch job: fresh data directories are priced twice, once by the
job under test and once by the known-good pricing run (pricing.py, shipped next to this file);
out.txt must match byte for byte and the job gets a wall-clock allowance scaled from the
known-good run's own duration on the same directory, on this same machine."""

import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import pricing

JOB = __JOB__
ALIASES = __ALIASES__
REPEATS = __REPEATS__
GOOD = str(Path(__file__).with_name("pricing.py"))


def stopwatch(argv, allowance):
    began = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=allowance, cwd="/tmp")
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{argv[1]} still running after {allowance:.1f} s")
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-800:]}"
    return time.monotonic() - began


def price_batch(seed, count, repeats):
    root = Path(tempfile.mkdtemp())
    pricing.make_dir(random.Random(seed), count, str(root / "good"), aliases=ALIASES, dups=repeats)
    shutil.copytree(root / "good", root / "job")
    good_secs = stopwatch([sys.executable, GOOD, str(root / "good"), "1" if ALIASES else "0"], 120)
    job_secs = stopwatch(["python3", JOB, str(root / "job")], 8 * good_secs + 4.0)
    expected = (root / "good" / "out.txt").read_text()
    produced = root / "job" / "out.txt"
    actual = produced.read_text() if produced.exists() else None
    assert actual == expected, f"out.txt is not the known-good one: {str(actual)[:200]!r} vs {expected[:200]!r}"
    return job_secs, good_secs


@pytest.mark.weight(1)
def test_small_and_medium_batches():
    for seed, count in ((1, 3), (2, 40), (3, 400), (4, 12000)):
        price_batch(seed, count, REPEATS)


@pytest.mark.weight(2)
def test_big_batch_within_allowance():
    job_secs, good_secs = price_batch(5, 30000, REPEATS)
    print(f"job {job_secs:.2f} s, known-good run {good_secs:.2f} s")


@pytest.mark.weight(1)
def test_big_batch_with_repeated_codes():
    price_batch(6, 30000, True)
'''


def _io_churn(rng: random.Random, index: int) -> Instance:
    hard = rng.random() < 0.35
    wastes = sorted(rng.sample(sorted(_WASTES), 2 if hard else 1))
    aliases = "settings" in wastes or rng.random() < 0.5
    pkg = rng.choice(["pricing", "billing", "quote", "ledger"])
    parts = [(_WASTES if w in wastes else _PLAIN)[w] for w in ("table", "settings", "records")
             if w != "settings" or aliases]
    resolve = "resolve(data, code)" if aliases else "code"
    main = _MAIN.replace("__RESOLVE__", resolve)
    doc = (f'"""Usage: run.py DATA_DIR -- prices DATA_DIR/records.txt (`id code quantity` lines; blank lines are\n'
           f'skipped) with DATA_DIR/table.csv (`code,price` rows){" and the aliases of DATA_DIR/settings.json" if aliases else ""}\n'
           f'and writes one line `id code total` (or `id code ?` for an unknown code) per record to\nDATA_DIR/out.txt.\n"""\n')
    if hard:  # the lookups live in a module of their own
        files = {f"{pkg}/run.py": doc + f"import os\nimport sys\n\nfrom lookups import *  # noqa: F401,F403\n\n\n{main}",
                 f"{pkg}/lookups.py": "import json\nimport os\n\n\n" + "\n\n".join(parts)}
    else:
        files = {f"{pkg}/run.py": doc + "import json\nimport os\nimport sys\n\n\n" + "\n\n".join(parts) + "\n\n" + main}
    with tempfile.TemporaryDirectory() as sample:
        h1_churn.make_dir(rng, 25, sample, aliases=aliases, dups=hard)
        for fname in sorted(os.listdir(sample)):
            with open(os.path.join(sample, fname)) as f:
                files[f"sample/{fname}"] = f.read()
    program = f"/app/{pkg}/run.py"
    instruction = f"""\
`python3 {program} DATA_DIR` prices a batch of orders; its docstring says what it reads and writes,
and `/app/sample/` is a small example data directory. The output is right, but a batch of 30,000
records with a table of 30,000 rows takes many minutes, and almost all of that time is spent
reading files it has already read.

Make it fast: for every valid data directory it must write exactly the same `out.txt` as now,
byte for byte, and a batch of 30,000 records must take a few seconds at most. Keep the command
line; it may stay split into the same files or not. Python 3 standard library only.
"""
    tests = (_CHURN_TESTS.replace("__JOB__", repr(program)).replace("__ALIASES__", repr(aliases))
             .replace("__REPEATS__", repr(hard)))
    solution = f"""rm -f /app/{pkg}/lookups.py
cat > {program} <<'PY'
import json, os, sys
{_ref_source(h1_churn, "reference")}


reference(sys.argv[1], {aliases!r})
PY
"""
    difficulty = "hard" if hard else ("medium" if aliases or wastes != ["table"] else "easy")
    return Instance(instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
                    variant="+".join(wastes) + ("/aliases" if aliases else ""), files=files,
                    test_files={"pricing.py": source(h1_churn)},
                    tags=("python", "io"), verifier_timeout_sec=300.0)


FAMILIES.append(Family("io-churn", "performance", "validation",
                       "a batch job that re-reads its price table, settings or records file for every "
                       "record (one or two of them, across modules) to make fast, same output", _io_churn))
