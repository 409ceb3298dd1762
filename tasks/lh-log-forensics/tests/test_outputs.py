# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Log forensics chain. The expected results were computed once from the logs the image ships
(environment/logs, copied unchanged by the Dockerfile) and are kept here as values and SHA-256
digests: nothing is read back from /app/logs, which the agent can rewrite. Steps 4 and 5 are
computed from correlated.csv, so they count only when the columns of it they use are right."""

import csv
import hashlib
import json

# (source file, number of lines, digest of those lines) in the order of access_all.log
SEGMENTS = [
    ("access.log.3.gz", 800, "a3820ce8d3f82268007419fe3f756a7df921c0d256860e13920f7702d67a3990"),
    ("access.log.2.gz", 850, "d0ef8bc7ba69e88b4dd718e70103d81ab78df25c2ca6eae6b4bd492fbd0247b2"),
    ("access.log.1", 800, "d3959416d3a4160ce8e1c5b84ab1ed13608359ec4162a04aed98d5a55037165c"),
    ("access.log", 750, "134a7ea4579359cc16c8cfc6ec4e45d6d0568bc9e1a3e1ee8f3baa8143df705a"),
]
ACCESS_LINES = 3200
ERROR_LINES = 223
ERRORS_DIGEST = "4b86c86d30ece75fe3799776045ffce0fcf3a47fc6d391cf2fa9cbd8841289c7"
HEADER = ["rid", "time", "method", "path", "status", "user", "error_code"]
# digest of each column of correlated.csv (header left out), top to bottom
COLUMNS = {
    "rid": "30e953f6d42cb5ec210eb90c34c04cd68dde9e53e45fc12602f434c60c6b2908",
    "time": "2af4abb9973220d2ab1f5ee48bacd54074ee8c8069cd1baa3f1cb441651c17ce",
    "method": "4013fd10ccd388a7d7d48113ecdf20ab52f44bcb0231637567149c2ded7c8916",
    "path": "898c6cf98f2402929879f947fa0290868d83fdc3bd4ed3b4aa9f9d85c0d5c9e1",
    "status": "cc594a959c5570e18c83321c815de5657728bd6637052238557e69375e10218b",
    "user": "7f18795f47f519475e50a1a7b6813c81303fbfbb61391437e619f5862e10509b",
    "error_code": "72d1681b10df011854cb4f4780c0954b33d96a0be843d6854aeb2cd4cbfafab3",
}
STATS = {
    "requests": 3200,
    "errors": 223,
    "error_rate": 0.0697,
    "by_status": {"500": 115, "502": 67, "503": 41},
    "by_error_code": {"E_DB_TIMEOUT": 81, "-": 71, "E_CACHE_MISS_STORM": 41, "E_NULL_CART": 26,
                      "E_PAYMENT_GW": 4},
    "p95_rt_ms": 6550,
}
SUMMARY = {
    "first_error": "2024-03-12T06:09:22Z",
    "last_error": "2024-03-12T09:09:36Z",
    "top_error_code": "E_DB_TIMEOUT",
    "affected_users": 54,
    "worst_endpoint": "POST /api/orders",
    "error_rate": 0.0697,
}


def digest(lines):
    return hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()


def lines_of(path):
    with open(path) as fh:
        return fh.read().splitlines()


def test_1_merged_access_log():
    got = lines_of("/app/work/access_all.log")
    assert len(got) == ACCESS_LINES, f"{len(got)} lines, expected {ACCESS_LINES}"
    start = 0
    for name, count, want in SEGMENTS:
        part = got[start:start + count]
        assert digest(part) == want, (
            f"lines {start + 1}-{start + count} should be {name}, unchanged and in order")
        start += count


def test_2_errors_filtered():
    got = lines_of("/app/work/errors.log")
    assert len(got) == ERROR_LINES, f"{len(got)} lines, expected {ERROR_LINES} 5xx entries"
    assert digest(got) == ERRORS_DIGEST, \
        "not the 5xx entries of access_all.log, unchanged and in order"


def correlated_rows():
    with open("/app/work/correlated.csv", newline="") as fh:
        return [r for r in csv.reader(fh) if r]


def check_columns(rows, names):
    """The named columns of correlated.csv (header left out) hold the expected values."""
    assert len(rows) == ERROR_LINES, f"{len(rows)} rows in correlated.csv, expected {ERROR_LINES}"
    assert all(len(r) == len(HEADER) for r in rows), \
        "every row of correlated.csv needs exactly 7 fields"
    wrong = [n for n in names if digest([r[HEADER.index(n)] for r in rows]) != COLUMNS[n]]
    assert not wrong, f"wrong values in column(s) of correlated.csv: {', '.join(wrong)}"


def test_3_correlated():
    got = correlated_rows()
    assert got and got[0] == HEADER, got[:1]
    check_columns(got[1:], HEADER)


def test_4_stats():
    # by_status and by_error_code are counted over these columns of step 3
    check_columns(correlated_rows()[1:], ["status", "error_code"])
    with open("/app/work/stats.json") as fh:
        got = json.load(fh)
    for key, value in STATS.items():
        assert got.get(key) == value, f"{key}: {got.get(key)!r} is not right"


def test_5_summary():
    # times, codes, users and endpoints are taken from these columns of step 3
    check_columns(correlated_rows()[1:], ["time", "method", "path", "user", "error_code"])
    with open("/app/summary.json") as fh:
        got = json.load(fh)
    for key, value in SUMMARY.items():
        assert got.get(key) == value, f"{key}: {got.get(key)!r} is not right"
