"""A SQLite database assembled from a numbered chain of schema migrations plus two CSV data files:
the themes (table and column names), the migration texts, random data sets, and the rollup the
database's view must give for a data set."""

from __future__ import annotations

import csv
import io
import random

THEMES = {
    # theme: parent table, key, label, extra column, child table, amount column, db name
    "depot": ("items", "sku", "name", "bin", "moves", "delta", "depot"),
    "library": ("titles", "code", "title", "shelf", "loans", "days", "library"),
    "fleet": ("vehicles", "plate", "model", "garage", "trips", "km", "fleet"),
    "orchard": ("trees", "tag", "variety", "row_no", "harvests", "kilos", "orchard"),
}
LAST = 11


def migrations(theme: str, unique_fault: bool = False) -> dict[str, str]:
    """The chain ``migrations/<n>_<what>.sql`` (n = 1..11, not zero-padded)."""
    p, k, lab, x, c, a, _ = THEMES[theme]
    return {
        f"1_create_{p}.sql": f"CREATE TABLE {p} (\n  {k} TEXT PRIMARY KEY,\n  {lab} TEXT NOT NULL\n);\n",
        f"2_create_{c}.sql": f"CREATE TABLE {c} (\n  id INTEGER PRIMARY KEY,\n"
                             f"  {k} TEXT NOT NULL REFERENCES {p}({k})\n);\n",
        f"3_{p}_{x}.sql": f"ALTER TABLE {p} ADD COLUMN {x} TEXT;\n",
        f"4_{c}_index.sql": f"CREATE INDEX idx_{c}_{k} ON {c}({k});\n",
        "5_meta.sql": "CREATE TABLE meta (k TEXT PRIMARY KEY, v TEXT);\n"
                      "INSERT INTO meta VALUES ('schema_version', '5');\n",
        f"6_{c}_{a}.sql": f"ALTER TABLE {c} ADD COLUMN {a} INTEGER NOT NULL DEFAULT 0;\n",
        f"7_{p}_index.sql": f"CREATE INDEX idx_{p}_{x} ON {p}({x});\n",
        "8_meta_version.sql": "UPDATE meta SET v = '8' WHERE k = 'schema_version';\n",
        f"9_{c}_note.sql": f"ALTER TABLE {c} ADD COLUMN note TEXT{' UNIQUE' * unique_fault};\n",
        "10_rollup_view.sql": (
            f"CREATE VIEW rollup AS\n  SELECT {p}.{k} AS {k}, {p}.{lab} AS {lab}, {p}.{x} AS {x},\n"
            f"         COUNT({c}.id) AS n, COALESCE(SUM({c}.{a}), 0) AS total,\n"
            f"         COALESCE(SUM({c}.note = 'checked'), 0) AS checked\n"
            f"  FROM {p} LEFT JOIN {c} ON {c}.{k} = {p}.{k}\n  GROUP BY {p}.{k};\n"),
        "11_meta_version.sql": "UPDATE meta SET v = '11' WHERE k = 'schema_version';\n",
    }


def dataset(theme: str, rng: random.Random, size: int) -> tuple[str, str]:
    """Two CSV files with headers: the parent rows and the child rows."""
    p, k, lab, x, c, a, _ = THEMES[theme]
    syll = ["ka", "lo", "mi", "ter", "vo", "sen", "ra", "dun", "pel", "zi", "mor", "ast"]
    keys = sorted({f"{rng.choice('ABCDEFGHKLMNPR')}{rng.choice('ABCDEFGHKLMNPR')}-{rng.randint(100, 999)}"
                   for _ in range(size)})
    parents = [f"{k},{lab},{x}"]
    for key in keys:
        label = "".join(rng.choice(syll) for _ in range(rng.randint(2, 3))).capitalize()
        if rng.random() < 0.2:
            label = f'"{label}, {rng.choice(syll)}"'
        parents.append(f"{key},{label},{rng.choice('ABCDE')}{rng.randint(1, 12)}")
    children = [f"id,{k},{a},note"]
    for i in range(1, size * 3 + 1):
        note = rng.choice(["", "", "checked", "late", "re-count"])
        children.append(f"{i},{rng.choice(keys)},{rng.randint(-5 if theme == 'depot' else 1, 90)},{note}")
    return "\n".join(parents) + "\n", "\n".join(children) + "\n"


def rollup(theme: str, parents_csv: str, children_csv: str) -> list[tuple]:
    """What ``SELECT * FROM rollup ORDER BY 1`` gives for the data."""
    rows = list(csv.reader(io.StringIO(parents_csv)))[1:]
    kids = list(csv.reader(io.StringIO(children_csv)))[1:]
    out = []
    for key, label, extra in rows:
        mine = [r for r in kids if r[1] == key]
        checked = sum(r[3] == "checked" for r in mine)
        out.append((key, label, extra, len(mine), sum(int(r[2]) for r in mine), checked))
    return sorted(out)
