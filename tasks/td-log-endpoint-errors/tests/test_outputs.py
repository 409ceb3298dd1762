# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/endpoint_errors.sh on hidden logs generated here (never present in the image)."""

import subprocess
import sys
import tempfile

sys.path.insert(0, "/tests")
from loggen import make_log  # noqa: E402

SCRIPT = "/app/endpoint_errors.sh"
PATHS = ["/api/orders", "/api/orders/export", "/health", "/api/users/me", "/checkout", "/search", "/"]


def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, dir="/tmp") as f:
        f.write(text)
    out = subprocess.run([SCRIPT, f.name], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]}"
    rows = [l.split() for l in out.stdout.splitlines() if l.strip()]
    for r in rows:
        assert len(r) == 5, f"line does not have 5 fields: {r}"
    return rows


def by_endpoint(rows):
    return {(r[0], r[1]): r for r in rows}


def test_request_counts():
    for seed in (1, 2):
        text, agg = make_log(seed, PATHS)
        got = by_endpoint(run(text))
        assert set(got) == set(agg), f"extra {set(got) - set(agg)}, missing {set(agg) - set(got)}"
        for ep, (n, _) in agg.items():
            assert int(got[ep][2]) == n, (ep, got[ep], n)


def test_error_counts_and_rates():
    for seed in (3, 4):
        text, agg = make_log(seed, PATHS)
        got = by_endpoint(run(text))
        for ep, (n, e) in agg.items():
            assert ep in got, f"missing {ep}"
            assert int(got[ep][3]) == e, (ep, got[ep], e)
            assert abs(float(got[ep][4]) - 100 * e / n) <= 0.051, (ep, got[ep], 100 * e / n)
            assert len(got[ep][4].split(".")[-1]) == 1 and "." in got[ep][4], f"rate not one decimal: {got[ep]}"


def test_sort_order():
    for seed in (5, 6):
        text, agg = make_log(seed, PATHS + ["/a", "/b"], methods=("GET", "POST"))
        rows = run(text)
        expected = sorted(agg, key=lambda ep: (-agg[ep][1], -agg[ep][0], ep[0].encode(), ep[1].encode()))
        assert [(r[0], r[1]) for r in rows] == expected


def test_malformed_lines_ignored():
    for seed in (7, 8):
        text, agg = make_log(seed, PATHS, malformed=True)
        rows = run(text)
        got = by_endpoint(rows)
        assert set(got) == set(agg), f"extra {set(got) - set(agg)}, missing {set(agg) - set(got)}"
        for ep, (n, e) in agg.items():
            assert (int(got[ep][2]), int(got[ep][3])) == (n, e), (ep, got[ep], (n, e))
