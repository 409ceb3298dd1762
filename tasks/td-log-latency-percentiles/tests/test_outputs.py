# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/latency_report.sh on hidden logs generated here (never present in the image)."""

import gzip
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, "/tests")
from lfgen import make, nearest_rank  # noqa: E402

SCRIPT = "/app/latency_report.sh"
ROUTES = ["/v2/search", "/v2/orders/{id}", "/v2/orders", "/healthz", "/admin/reports", "/Z"]


def write(text, suffix):
    d = tempfile.mkdtemp(dir="/tmp")
    path = os.path.join(d, "svc" + suffix)
    if suffix.endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
    return path


def run(paths):
    out = subprocess.run([SCRIPT, *paths], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]}"
    rows = [l.split("\t") for l in out.stdout.splitlines() if l.strip()]
    for r in rows:
        assert len(r) == 6, f"line does not have 6 tab-separated fields: {r}"
    return rows


def check_stats(rows, agg, what=("count", "pct", "max")):
    got = {r[0]: r for r in rows}
    assert set(got) == set(agg), f"extra {set(got) - set(agg)}, missing {set(agg) - set(got)}"
    for route, vals in agg.items():
        r = got[route]
        if "count" in what:
            assert int(r[1]) == len(vals), (route, r, len(vals))
        if "pct" in what:
            for field, p in ((r[2], 50), (r[3], 90), (r[4], 99)):
                assert abs(float(field) - nearest_rank(vals, p)) < 0.0006, (route, p, r, nearest_rank(vals, p))
        if "max" in what:
            assert abs(float(r[5]) - max(vals)) < 0.0006, (route, r, max(vals))
        for field in r[2:]:
            assert len(field.split(".")[-1]) == 3 and "." in field, f"not three decimals: {r}"


def test_counts_and_order():
    text, agg = make(101, ROUTES, 700)
    rows = run([write(text, ".log")])
    check_stats(rows, agg, what=("count",))
    assert [r[0] for r in rows] == sorted(agg, key=str.encode)


def test_percentiles_and_max():
    for seed, n in ((201, 900), (202, 37), (203, 2000)):
        text, agg = make(seed, ROUTES, n)
        check_stats(run([write(text, ".log")]), agg)


def test_other_events_and_quoted_values_ignored():
    for seed in (301, 302):
        text, agg = make(seed, ROUTES, 800, traps=True)
        check_stats(run([write(text, ".log")]), agg)


def test_several_files_and_gzip():
    t1, a1 = make(401, ROUTES[:4], 500, traps=True)
    t2, a2 = make(402, ROUTES[2:], 600, traps=True)
    t3, a3 = make(403, ROUTES, 300, traps=True)
    agg = {}
    for a in (a1, a2, a3):
        for k, v in a.items():
            agg.setdefault(k, []).extend(v)
    rows = run([write(t1, ".log"), write(t2, ".log.gz"), write(t3, ".log")])
    check_stats(rows, agg)
