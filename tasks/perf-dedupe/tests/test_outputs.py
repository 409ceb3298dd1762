# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs finddups.py on hidden inputs large enough that a quadratic scan cannot finish within
the per-run timeout (a linear one needs well under a second); compares output byte for byte."""

import random
import subprocess
import tempfile
from pathlib import Path

import te_checks as te

TIMEOUT = 20   # seconds per run; the original script needs minutes on each of these inputs

# One budget for all runs (te_checks.Budget): a program too slow for the task fails the first run
# that spends it and every later one at once, so verifying it costs 30 s, not 20 s per test.
BUDGET = te.Budget(30)


def reference(lines):
    seen = {}
    for line in lines:
        key = " ".join(line.split()).lower()
        if not key:
            continue
        if key in seen:
            seen[key][0] += 1
        else:
            seen[key] = [1, line]
    dups = [(c, t) for c, t in seen.values() if c > 1]
    out = [f"{c}\t{t}" for c, t in dups] + [f"duplicates: {sum(c - 1 for c, _ in dups)}"]
    return "\n".join(out) + "\n"


def run(lines):
    f = Path(tempfile.mkdtemp()) / "input.txt"
    f.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    with BUDGET.limit(TIMEOUT) as timeout:
        try:
            r = subprocess.run(["python3", "/app/dedupe/finddups.py", str(f)], capture_output=True,
                               timeout=timeout, cwd="/tmp")
        except subprocess.TimeoutExpired:
            raise AssertionError(f"finddups.py did not finish {len(lines)} lines within {timeout:g} s")
    assert r.returncode == 0, r.stderr[-1000:]
    return r.stdout.decode("utf-8")


def emails(rng, n, distinct):
    return [f"user{rng.randint(0, distinct)}@mail{rng.randint(0, 9)}.example.org" for _ in range(n)]


def test_counts_and_order():
    rng = random.Random(9201)
    lines = emails(rng, 120_000, 400_000)
    lines += rng.sample(lines, 15_000)                 # guaranteed repeats, at the end
    assert run(lines) == reference(lines)


def test_normalization():
    rng = random.Random(9202)
    base = emails(rng, 110_000, 10**7)
    lines = []
    for s in base:
        r = rng.random()
        if r < 0.05:
            s = s.upper()
        elif r < 0.1:
            s = "  " + s.replace("@", " \t @ ") + " "
        elif r < 0.15:
            s = s.capitalize() + "\t"
        lines.append(s)
    lines += [rng.choice(base).swapcase() for _ in range(10_000)]
    assert run(lines) == reference(lines)


def test_blank_lines_and_unicode():
    rng = random.Random(9203)
    words = ["Stra\u00dfe", "\u00c9COLE", "\u00e9cole", "na\u00efve", "\u0130stanbul", "\u65e5\u672c",
             "\u03a3\u039f\u03a6\u0399\u0391", "\u03c3\u03bf\u03c6\u03b9\u03b1", "caf\u00e9", "\u00c5ngstr\u00f6m"]
    lines = []
    for i in range(120_000):
        r = rng.random()
        if r < 0.1:
            lines.append(rng.choice(["", " ", "\t", "   \t "]))
        else:
            lines.append(f"{rng.choice(words)} {rng.randint(0, 150_000)} {rng.choice(words)}")
    assert run(lines) == reference(lines)


def test_large_input():
    rng = random.Random(9204)
    lines = []
    for _ in range(320_000):
        lines.append(f"{rng.randint(0, 2_000_000):08d},{rng.choice(['ok', 'FAIL', 'retry'])},"
                     f"node-{rng.randint(0, 50)}.cluster.local,{'x' * rng.randint(0, 20)}")
    out = run(lines)
    assert out == reference(lines)
