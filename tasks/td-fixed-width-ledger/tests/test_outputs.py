# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/ledger2csv on hidden reports generated here (never present in the image)."""

import csv
import io
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, "/tests")
from ledgen import make  # noqa: E402


def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, dir="/tmp", encoding="utf-8") as f:
        f.write(text)
    out = subprocess.run(["/app/ledger2csv", f.name], capture_output=True, timeout=30)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]!r}"
    rows = [r for r in csv.reader(io.StringIO(out.stdout.decode("utf-8"), newline="")) if r]
    assert rows and rows[0] == ["account", "name", "date", "amount", "currency"], f"bad header {rows[:1]}"
    return rows[1:]


@pytest.fixture(scope="module")
def cases():
    out = []
    for seed, n, long_names in ((81, 120, True), (82, 60, False), (83, 260, True)):
        text, recs = make(seed, n, long_names)
        out.append((run(text), recs))
    return out


def test_records_and_accounts(cases):
    for rows, recs in cases:
        assert [r[0] for r in rows] == [r[0] for r in recs]


def test_dates_and_currencies(cases):
    for rows, recs in cases:
        assert len(rows) == len(recs)
        for g, e in zip(rows, recs):
            assert len(g) == 5, g
            assert (g[0], g[2], g[4]) == (e[0], e[2], e[4])


def test_amounts(cases):
    for rows, recs in cases:
        assert len(rows) == len(recs)
        for g, e in zip(rows, recs):
            assert g[3] == e[3], (g, e)


def test_names_simple(cases):
    rows, recs = cases[1]
    assert len(rows) == len(recs)
    for g, e in zip(rows, recs):
        assert g[1] == e[1], (g, e)


def test_names_with_continuations(cases):
    for rows, recs in (cases[0], cases[2]):
        assert len(rows) == len(recs)
        for g, e in zip(rows, recs):
            assert g[1] == e[1], (g, e)
