# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/join.sh on hidden exports generated here (never present in the image)."""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, "/tests")
from joingen import make  # noqa: E402


def run(cust, pay):
    d = tempfile.mkdtemp(dir="/tmp")
    c, p = os.path.join(d, "c.tsv"), os.path.join(d, "p.csv")
    open(c, "w").write(cust)
    open(p, "w").write(pay)
    out = subprocess.run(["/app/join.sh", c, p], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]}"
    rows = [l.split("\t") for l in out.stdout.split("\n") if l.strip()]
    for r in rows:
        assert len(r) == 6, f"not 6 tab-separated fields: {r}"
    return rows


def known(rows):
    return [r for r in rows if r[0] != "unknown"]


def test_customers_deduplicated_and_normalised():
    for seed in (1, 2):
        c, p, exp = make(seed, 60, 200, unknown=False)
        rows = run(c, p)
        assert [r[:3] for r in known(rows)] == [e[:3] for e in exp if e[0] != "unknown"]


def test_counts_totals_and_dates():
    for seed in (3, 4):
        c, p, exp = make(seed, 50, 400, dup_customers=False, unknown=False)
        rows = run(c, p)
        assert [r[0] for r in rows] == [e[0] for e in exp]
        assert [r[3:] for r in rows] == [e[3:] for e in exp]


def test_duplicate_payments_counted_once():
    c, p, exp = make(5, 40, 300, dup_customers=False, dup_payments=True, unknown=False)
    rows = run(c, p)
    assert [r[0] for r in rows] == [e[0] for e in exp]
    assert [r[3:] for r in rows] == [e[3:] for e in exp]


def test_unknown_customers_line():
    c, p, exp = make(6, 40, 300, dup_customers=False, unknown=True)
    rows = run(c, p)
    assert rows and rows[-1] == exp[-1]
    assert len([r for r in rows if r[0] == "unknown"]) == 1
    c, p, exp = make(7, 30, 100, unknown=False)
    assert all(r[0] != "unknown" for r in run(c, p))


def test_everything_together():
    c, p, exp = make(8, 120, 900, dup_payments=True)
    assert run(c, p) == exp
