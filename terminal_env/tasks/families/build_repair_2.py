"""Generated task families of the build-repair category, part 2 (see :mod:`.base`)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support import hD_mig, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ sqlite-migrate-fix
# A database assembled by a shell script from a chain of numbered schema migrations and two CSV
# files. The script (or one migration) has faults from a catalogue: lexical instead of numeric
# migration order, a column added as UNIQUE (which ALTER TABLE refuses), no reset of an old
# database, an unquoted directory, a CSV header loaded as a row, errors that do not stop it. The tests run the
# script on copies under a directory with a space in its name, with hidden data and migrations.

_SCRIPT = """\
#!/bin/bash
# Assembles out/{db}.db: applies migrations/<n>_*.sql in order to an empty database, then
# loads data/{p}.csv and data/{c}.csv (both have a header line).
set -eu
cd "$(dirname "$0")"
mkdir -p out
rm -f out/{db}.db
for m in $(ls migrations | sort -n); do
    echo "applying $m"
    sqlite3 -bail out/{db}.db < "migrations/$m"
done
sqlite3 -bail out/{db}.db <<'EOF'
.import --csv --skip 1 data/{p}.csv {p}
.import --csv --skip 1 data/{c}.csv {c}
EOF
echo "assembled out/{db}.db"
"""

_FAULTS = {  # name: (right text, faulty text) in the script
    "lexical-order": ("ls migrations | sort -n)", "ls migrations | sort)"),
    "no-reset": ("rm -f out/{db}.db\n", ""),
    "unquoted-dir": ('cd "$(dirname "$0")"', "cd $(dirname $0)"),
    "header-row": (".import --csv --skip 1 data/{p}.csv", ".import --csv data/{p}.csv"),
    "errors-ignored": ("set -eu\n", "set -u\n"),
}
_LOUD = ("lexical-order", "unique-column")
_QUIET = ("no-reset", "unquoted-dir", "header-row", "errors-ignored")

_TESTS = '''"""Runs the agent's build script on fresh copies (under a directory whose name has a space),
with hidden data files and extra migrations, and reads the database it assembles."""

import random
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from hD_mig import THEMES, dataset, rollup

THEME = __THEME__
PARENT, KEY, LABEL, EXTRA, CHILD, AMOUNT, DB = THEMES[THEME]
APP = Path("/app") / DB


def fresh(seed):
    d = Path(tempfile.mkdtemp()) / "build area" / DB
    shutil.copytree(APP, d, ignore=shutil.ignore_patterns("out"))
    return d, put_data(d, seed)


def put_data(d, seed):
    pcsv, ccsv = dataset(THEME, random.Random(seed), 9 + seed % 7)
    (d / "data" / f"{PARENT}.csv").write_text(pcsv)
    (d / "data" / f"{CHILD}.csv").write_text(ccsv)
    return rollup(THEME, pcsv, ccsv)


def run(d):
    return subprocess.run(["bash", str(d / "build.sh")], cwd="/", capture_output=True, text=True,
                          timeout=120)


def query(d, sql):
    con = sqlite3.connect(str(d / "out" / f"{DB}.db"))
    try:
        return [tuple(r) for r in con.execute(sql)]
    finally:
        con.close()


def built(d, want, version="11"):
    r = run(d)
    assert r.returncode == 0, f"build.sh failed:\\n{(r.stdout + r.stderr)[-1500:]}"
    assert query(d, "SELECT * FROM rollup ORDER BY 1") == want, "the rollup view is wrong"
    assert query(d, "SELECT v FROM meta WHERE k = 'schema_version'") == [(version,)]


@pytest.mark.weight(2)
def test_fresh_build_from_hidden_data():
    d, want = fresh(__SEED__)
    built(d, want)


@pytest.mark.weight(1)
def test_second_build_uses_new_data():
    d, want = fresh(__SEED__ + 1)
    built(d, want)
    built(d, put_data(d, __SEED__ + 2))


@pytest.mark.weight(1)
def test_later_migrations_applied():
    d, want = fresh(__SEED__ + 3)
    built(d, want)
    (d / "migrations" / f"12_{CHILD}_top.sql").write_text(
        "CREATE VIEW top_one AS SELECT * FROM rollup ORDER BY total DESC, 1 LIMIT 1;\\n"
        "UPDATE meta SET v = '12' WHERE k = 'schema_version';\\n")
    (d / "migrations" / "13_meta_stamp.sql").write_text(
        "UPDATE meta SET v = v || '+13' WHERE k = 'schema_version';\\n")
    built(d, want, "12+13")
    top = sorted(want, key=lambda r: (-r[4], r[0]))[0]
    assert query(d, "SELECT * FROM top_one") == [top]


@pytest.mark.weight(1)
def test_failing_migration_fails_the_build():
    d, want = fresh(__SEED__ + 4)
    built(d, want)
    (d / "migrations" / "12_broken.sql").write_text(f"ALTER TABLE {CHILD} ADD COLUMN {AMOUNT} TEXT;\\n")
    (d / "migrations" / "13_after.sql").write_text("CREATE TABLE after_broken (x);\\n")
    r = run(d)
    assert r.returncode != 0, "build.sh reported success although migration 12 failed"
'''


def _migrate_fix(rng: random.Random, index: int) -> Instance:
    theme = rng.choice(sorted(hD_mig.THEMES))
    p, k, lab, x, c, a, db = hD_mig.THEMES[theme]
    loud = rng.sample(_LOUD, rng.choice([1, 1, 2]))
    quiet = rng.sample(_QUIET, rng.choice([0, 1, 1, 2]))
    faults = sorted(loud + quiet)
    good = _SCRIPT.format(db=db, p=p, c=c)
    bad = good
    for f in faults:
        if f in _FAULTS:
            old, new = (t.format(db=db, p=p) for t in _FAULTS[f])
            assert old in bad, (f, old)
            bad = bad.replace(old, new, 1)
    good_migs = hD_mig.migrations(theme)
    migs = hD_mig.migrations(theme, "unique-column" in faults)
    pcsv, ccsv = hD_mig.dataset(theme, rng, rng.randint(6, 10))
    files = {f"{db}/migrations/{n}": t for n, t in migs.items()}
    files.update({f"{db}/build.sh": bad, f"{db}/data/{p}.csv": pcsv, f"{db}/data/{c}.csv": ccsv})
    app = f"/app/{db}"
    instruction = f"""\
`{app}/build.sh` assembles the SQLite database `{app}/out/{db}.db`: it applies the schema
migrations `{app}/migrations/<n>_<what>.sql` to an empty database in the order of their number
`<n>` (1, 2, ..., 10, 11, ...), then loads `data/{p}.csv` into table `{p}` and `data/{c}.csv` into
table `{c}` (both files are CSV with a header line). The migrations create the view `rollup` (one
row per {p[:-1]}: `{k}`, `{lab}`, `{x}`, the number of its {c}, the sum of their `{a}` and how
many of them have the note `checked`) and keep the schema version in table `meta`.

The build is broken. Repair `build.sh` (and the migrations, if one of them is wrong) so that:

- `build.sh` works from any current directory and wherever the project directory is, including
  a path that contains spaces;
- every run assembles the database from scratch from the current migrations and data files (a
  second run after the CSV files changed gives the new data, nothing left over from before);
- migrations added later (`12_...sql`, `13_...sql`) are applied after the others, by number;
- if any migration or data load fails, `build.sh` stops and exits with a non-zero status;
- the tables hold exactly the CSV rows (no header rows).

The project will be copied elsewhere and built with other data files and extra migrations.
"""
    solution = f"cat > {app}/build.sh <<'EOF_SCRIPT'\n{good}EOF_SCRIPT\n"
    if "unique-column" in faults:
        name = next(n for n in good_migs if n.startswith("9_"))
        solution += f"cat > {app}/migrations/{name} <<'EOF_SQL'\n{good_migs[name]}EOF_SQL\n"
    solution += f"bash {app}/build.sh\nsqlite3 {app}/out/{db}.db 'SELECT * FROM rollup'\n"
    tests = _TESTS.replace("__THEME__", repr(theme)).replace("__SEED__", str(rng.randint(1000, 9000)))
    score = len(quiet) + (len(loud) == 2)
    return Instance(
        instruction=instruction, tests=tests, solution=solution,
        difficulty=("easy", "medium", "hard", "hard")[score], variant=f"{theme}/{'+'.join(faults)}",
        files=files, test_files={"hD_mig.py": source(hD_mig)}, executable=(f"{db}/build.sh",),
        tags=("sqlite", "shell", "migrations"), image="dev", oracle_turns=3,
    )


FAMILIES.append(Family("sqlite-migrate-fix", "build-repair", "train",
                       "a shell script assembling a SQLite database from numbered schema migrations and CSV "
                       "files, with faults (order, UNIQUE column, reset, quoting, header row, errors "
                       "ignored), run by the tests on hidden data and extra migrations", _migrate_fix))
