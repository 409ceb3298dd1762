# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs rangeq.py on hidden query sets. Each input is large enough that rebuilding the prefix
sums per query (O(N) each) cannot finish within the per-run timeout, while O(log N) per query
needs a second or two."""

import random
import subprocess

import te_checks as te

TIMEOUT = 20   # seconds per run; the original script needs minutes to hours on these inputs

# One budget for all runs (te_checks.Budget): a program too slow for the task fails the first run
# that spends it and every later one at once, so verifying it costs 30 s, not 20 s per test.
BUDGET = te.Budget(30)


def gen(seed, n, q, p_set=0.0, p_mean=0.0, p_bad=0.0, big=False):
    rng = random.Random(seed)
    hi = 10**12 if big else 1000
    values = [rng.randint(-hi, hi) for _ in range(n)]
    queries = []
    for _ in range(q):
        r = rng.random()
        if r < p_set:
            i = rng.randint(1, n) if rng.random() > p_bad else rng.choice([0, n + 1, -3])
            queries.append(("set", i, rng.randint(-hi, hi)))
            continue
        op = "mean" if rng.random() < p_mean else "sum"
        if rng.random() < p_bad:
            a, b = rng.choice([(5, 4), (0, 3), (n, n + 1), (-1, 2)])
        else:
            a = rng.randint(1, n)
            b = rng.randint(a, min(n, a + rng.choice([0, 10, 1000, n])))
        queries.append((op, a, b))
    return values, queries


def reference(values, queries):
    """Block decomposition (blocks of B values with their sums): O(N / B + B) per query."""
    B = 512
    values = list(values)
    n = len(values)
    blocks = [sum(values[i:i + B]) for i in range(0, n, B)]

    def total(a, b):                                  # 0-based, inclusive
        s = 0
        while a <= b and a % B:
            s += values[a]
            a += 1
        while a + B - 1 <= b:
            s += blocks[a // B]
            a += B
        while a <= b:
            s += values[a]
            a += 1
        return s

    out = []
    for op, a, b in queries:
        if op == "set":
            if not 1 <= a <= n:
                out.append("error")
            else:
                blocks[(a - 1) // B] += b - values[a - 1]
                values[a - 1] = b
            continue
        if not 1 <= a <= b <= n:
            out.append("error")
            continue
        t = total(a - 1, b - 1)
        out.append(str(t) if op == "sum" else f"{t / (b - a + 1):.6f}")
    return out


def run(values, queries):
    rng = random.Random(len(values))
    toks = [str(len(values))] + [str(v) for v in values] + [str(len(queries))]
    parts = []
    for t in toks:                                   # line breaks anywhere
        parts.append(t + ("\n" if rng.random() < 0.05 else " "))
    text = "".join(parts) + "\n".join(f"{op} {a} {b}" for op, a, b in queries) + "\n"
    with BUDGET.limit(TIMEOUT) as timeout:
        try:
            r = subprocess.run(["python3", "/app/rangeq/rangeq.py"], input=text, capture_output=True,
                               text=True, timeout=timeout, cwd="/tmp")
        except subprocess.TimeoutExpired:
            raise AssertionError(f"rangeq.py did not finish N={len(values)} Q={len(queries)} within {timeout:g} s")
    assert r.returncode == 0, r.stderr[-1000:]
    return r.stdout.splitlines()


def check(values, queries):
    got, want = run(values, queries), reference(values, queries)
    assert len(got) == len(want), f"{len(got)} output lines, expected {len(want)}"
    bad = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
    assert bad is None, f"output line {bad + 1}: got {got[bad]!r}, expected {want[bad]!r}"


def test_sum_queries():
    check(*gen(2101, 100_000, 20_000, big=True))


def test_mean_and_errors():
    check(*gen(2102, 100_000, 20_000, p_mean=0.5, p_bad=0.1))


def test_with_updates():
    check(*gen(2103, 100_000, 20_000, p_set=0.3, p_bad=0.02))


def test_large_input():
    check(*gen(2104, 200_000, 100_000, p_set=0.25, p_mean=0.3, p_bad=0.01, big=True))
