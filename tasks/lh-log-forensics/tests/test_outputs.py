# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Log forensics chain; expected results are recomputed here from /app/logs."""

import csv
import gzip
import json
import math
import re
from collections import Counter, defaultdict

LOGS = "/app/logs"
MONTHS = {m: i + 1 for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())}
ENTRY = re.compile(r'\[(\d\d)/(\w{3})/(\d{4}):(\d\d:\d\d:\d\d) \+0000\] "(\w+) (\S+) HTTP/[\d.]+" (\d{3}) .* rid=(\w+) rt=([\d.]+)$')


def read(name):
    path = f"{LOGS}/{name}"
    if name.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            return fh.read().decode()
    with open(path) as fh:
        return fh.read()


def all_lines():
    text = "".join(read(n) for n in ("access.log.3.gz", "access.log.2.gz", "access.log.1", "access.log"))
    return text.splitlines()


def parse(line):
    m = ENTRY.search(line)
    assert m, line
    d, mon, y, hms, method, path, status, rid, rt = m.groups()
    return {"time": f"{y}-{MONTHS[mon]:02d}-{d}T{hms}Z", "method": method, "path": path, "status": status, "rid": rid,
            "rt_ms": round(float(rt) * 1000)}


def expected_rows():
    errors = [parse(l) for l in all_lines() if parse(l)["status"].startswith("5")]
    users, codes = defaultdict(set), {}
    for inst in ("app-1", "app-2"):
        for line in read(f"{inst}.log.gz").splitlines():
            kv = dict(re.findall(r"\b(rid|user|code)=(\S+)", line))
            if "rid" not in kv:
                continue
            users[kv["rid"]].add(kv.get("user", "-"))
            if line.split()[1] == "ERROR":
                codes.setdefault(kv["rid"], (kv.get("user", "-"), kv.get("code", "-")))
    rows = []
    for e in errors:
        if e["rid"] in codes:
            user, code = codes[e["rid"]]
        elif users.get(e["rid"]):
            user, code = sorted(users[e["rid"]])[0], "-"
        else:
            user, code = "-", "-"
        rows.append([e["rid"], e["time"], e["method"], e["path"], e["status"], user, code])
    return rows


def expected_stats(rows):
    entries = [parse(l) for l in all_lines()]
    rts = sorted(e["rt_ms"] for e in entries)
    return {"requests": len(entries), "errors": len(rows), "error_rate": round(len(rows) / len(entries), 4),
            "by_status": dict(Counter(r[4] for r in rows)), "by_error_code": dict(Counter(r[6] for r in rows)),
            "p95_rt_ms": rts[math.ceil(0.95 * len(rts)) - 1]}


def pick(counter):
    best = max(counter.values())
    return min(k for k, v in counter.items() if v == best)


def test_1_merged_access_log():
    with open("/app/work/access_all.log") as fh:
        got = fh.read().splitlines()
    want = all_lines()
    assert len(got) == len(want), f"{len(got)} lines, expected {len(want)}"
    assert got == want, "lines differ from the rotated logs concatenated oldest first"


def test_2_errors_filtered():
    with open("/app/work/errors.log") as fh:
        got = fh.read().splitlines()
    want = [l for l in all_lines() if parse(l)["status"].startswith("5")]
    assert got == want, f"{len(got)} lines, expected {len(want)} 5xx entries in order"


def test_3_correlated():
    with open("/app/work/correlated.csv", newline="") as fh:
        got = [r for r in csv.reader(fh) if r]
    assert got[0] == ["rid", "time", "method", "path", "status", "user", "error_code"], got[0]
    want = expected_rows()
    assert len(got) - 1 == len(want), f"{len(got) - 1} rows, expected {len(want)}"
    for g, w in zip(got[1:], want):
        assert g == w, f"row {g}, expected {w}"


def test_4_stats():
    with open("/app/work/stats.json") as fh:
        got = json.load(fh)
    want = expected_stats(expected_rows())
    for key, value in want.items():
        assert got.get(key) == value, f"{key}: {got.get(key)!r}, expected {value!r}"


def test_5_summary():
    with open("/app/summary.json") as fh:
        got = json.load(fh)
    rows = expected_rows()
    endpoints = Counter(r[2] + " " + "/".join("{id}" if s.isdigit() else s for s in r[3].split("?")[0].split("/"))
                        for r in rows)
    want = {"first_error": rows[0][1], "last_error": rows[-1][1],
            "top_error_code": pick(Counter(r[6] for r in rows if r[6] != "-")),
            "affected_users": len({r[5] for r in rows} - {"-"}),
            "worst_endpoint": pick(endpoints),
            "error_rate": expected_stats(rows)["error_rate"]}
    for key, value in want.items():
        assert got.get(key) == value, f"{key}: {got.get(key)!r}, expected {value!r}"
