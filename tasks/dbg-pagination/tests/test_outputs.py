# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs paginate() and view.py on hidden inputs (pages in the middle, partial last pages,
exact multiples, empty input)."""

import json
import math
import random
import subprocess
import tempfile
from pathlib import Path

PROBE = r"""
import json, sys
sys.path.insert(0, "/app/pager")
from pager import PageError, paginate
out = []
for n, page, per in json.loads(sys.stdin.read()):
    try:
        r = paginate(list(range(n)), page, per)
        out.append([r["items"], r["page"], r["total_pages"], r["has_prev"], r["has_next"]])
    except PageError:
        out.append("PageError")
print(json.dumps(out))
"""


def probe(cases):
    r = subprocess.run(["python3", "-c", PROBE], input=json.dumps(cases), capture_output=True,
                       text=True, timeout=60, cwd="/tmp")
    assert r.returncode == 0, r.stderr[-1500:]
    return json.loads(r.stdout)


def expected(n, page, per):
    if per < 1:
        return "PageError"
    total = max(1, math.ceil(n / per))
    if page < 1 or page > total:
        return "PageError"
    items = list(range(n))[(page - 1) * per: page * per]
    return [items, page, total, page > 1, page < total]


def check(cases):
    got = probe(cases)
    for case, g in zip(cases, got):
        assert g == expected(*case), f"paginate(range({case[0]}), page={case[1]}, per_page={case[2]}) -> {g}"


def test_page_contents():
    rng = random.Random(5511)
    cases = []
    for _ in range(200):
        per = rng.randint(2, 30)
        pages = rng.randint(3, 12)
        n = per * pages + rng.randint(1, per - 1)        # the middle pages are full
        cases.append([n, rng.randint(1, pages - 1), per])
    got = probe(cases)
    for (n, page, per), g in zip(cases, got):
        assert g != "PageError", f"page {page} of {n} items ({per} per page) raised"
        want = expected(n, page, per)
        assert g[0] == want[0], f"wrong items on page {page} ({n} items, {per} per page)"
        assert g[3] == want[3], f"has_prev wrong on page {page}"


def test_partial_last_page():
    rng = random.Random(5512)
    cases = []
    for _ in range(150):
        per = rng.randint(2, 25)
        n = per * rng.randint(0, 9) + rng.randint(1, per - 1)
        total = math.ceil(n / per)
        cases.append([n, total, per])
        cases.append([n, total + 1, per])
    cases += [[1, 1, 10], [7, 1, 10], [11, 2, 10], [3, 2, 2]]
    check(cases)


def test_exact_multiple_and_range():
    rng = random.Random(5513)
    cases = [[0, 1, 5], [0, 2, 5], [0, 0, 5], [10, 1, 10], [10, 2, 10], [5, 1, 0], [5, -1, 2]]
    for _ in range(100):
        per = rng.randint(1, 20)
        pages = rng.randint(1, 8)
        n = per * pages
        cases += [[n, pages, per], [n, pages + 1, per], [n, rng.randint(1, pages), per]]
    check(cases)


def run_view(path, page, per):
    return subprocess.run(["python3", "/app/pager/view.py", str(path), "--page", str(page),
                           "--per-page", str(per)], capture_output=True, text=True, timeout=30,
                          cwd="/tmp")


def expected_view(lines, page, per):
    n = len(lines)
    total = max(1, math.ceil(n / per))
    items = lines[(page - 1) * per: page * per]
    first = (page - 1) * per + 1 if items else 0
    last = first + len(items) - 1 if items else 0
    out = [f"page {page} of {total} (lines {first}-{last} of {n})", *items]
    if page < total:
        out.append(f"more: --page {page + 1}")
    return "\n".join(out) + "\n"


def test_cli_output():
    rng = random.Random(5514)
    d = Path(tempfile.mkdtemp())
    words = ["alpha", "beta", "gamma", "delta", "", "eps ilon", "zeta:3"]
    for i in range(12):
        n = rng.choice([0, 1, 9, 10, 37, 40, 123])
        lines = [f"{j + 1:04d} {rng.choice(words)}".rstrip() for j in range(n)]
        path = d / f"f{i}.txt"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        per = rng.choice([1, 3, 10, 20])
        total = max(1, math.ceil(n / per))
        for page in sorted({1, total, rng.randint(1, total)}):
            r = run_view(path, page, per)
            assert r.returncode == 0, f"{n} lines, page {page}/{per}: {r.stderr[-500:]}"
            assert r.stdout == expected_view(lines, page, per), f"{n} lines, page {page}, {per} per page"
        r = run_view(path, total + 1, per)
        assert r.returncode == 2 and r.stdout == "", f"page {total + 1} of {total} must fail with status 2"
