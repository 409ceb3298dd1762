# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden linear systems for /app/lusolve, compared with a reference elimination and with residuals."""

import math
import random
import subprocess

BIN = "/app/lusolve"


def ref_solve(A, bs):
    n = len(A)
    a = [row[:] for row in A]
    amax = max(abs(v) for row in A for v in row)
    perm = list(range(n))
    det = 1.0
    for k in range(n):
        p = max(range(k, n), key=lambda i: (abs(a[i][k]), -i))
        if abs(a[p][k]) <= 1e-12 * amax:
            return None, None
        if p != k:
            a[k], a[p] = a[p], a[k]
            perm[k], perm[p] = perm[p], perm[k]
            det = -det
        det *= a[k][k]
        for i in range(k + 1, n):
            f = a[i][k] / a[k][k]
            a[i][k] = f
            for j in range(k + 1, n):
                a[i][j] -= f * a[k][j]
    xs = []
    for b in bs:
        y = [0.0] * n
        for i in range(n):
            y[i] = b[perm[i]] - sum(a[i][j] * y[j] for j in range(i))
        for i in reversed(range(n)):
            y[i] = (y[i] - sum(a[i][j] * y[j] for j in range(i + 1, n))) / a[i][i]
        xs.append(y)
    return det, xs


def fmt(A, bs):
    lines = [f"{len(A)} {len(bs)}"] + [" ".join(repr(v) for v in row) for row in A]
    lines += [" ".join(repr(v) for v in b) for b in bs]
    return "\n".join(lines) + "\n"


def run(A, bs):
    proc = subprocess.run([BIN], input=fmt(A, bs), capture_output=True, text=True, timeout=30)
    return proc


def solve(A, bs):
    proc = run(A, bs)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stdout[:200]} {proc.stderr[-300:]}"
    lines = [l.split() for l in proc.stdout.splitlines() if l.strip()]
    assert lines and lines[0][0] == "det" and len(lines[0]) == 2, f"first line {lines[:1]}"
    assert len(lines) == 1 + len(bs), f"{len(lines) - 1} solution lines for {len(bs)} right-hand sides"
    xs = [[float(v) for v in l] for l in lines[1:]]
    assert all(len(x) == len(A) for x in xs)
    return float(lines[0][1]), xs


def rand_system(rng, n, m, scale=1.0):
    A = [[round(rng.uniform(-1, 1) * scale, 6) for _ in range(n)] for _ in range(n)]
    for i in range(n):
        A[i][i] += round(rng.choice([-1, 1]) * rng.uniform(0, 2) * scale, 6)
    bs = [[round(rng.uniform(-10, 10), 5) for _ in range(n)] for _ in range(m)]
    return A, bs


def check(A, bs, det, xs, rel=1e-9):
    rdet, rxs = ref_solve(A, bs)
    assert abs(det - rdet) <= rel * abs(rdet), f"det {det!r}, reference {rdet!r}"
    for x, rx, b in zip(xs, rxs, bs):
        norm = max(abs(v) for v in rx)
        for v, w in zip(x, rx):
            assert abs(v - w) <= rel * max(norm, 1e-300) * 10, f"x component {v!r}, reference {w!r}"
        res = max(abs(math.fsum(A[i][j] * x[j] for j in range(len(x))) - b[i]) for i in range(len(b)))
        assert res <= 1e-9 * (max(abs(v) for row in A for v in row) * norm * len(x) + max(map(abs, b))), res


def test_binary_built():
    with open(BIN, "rb") as fh:
        assert fh.read(4) == b"\x7fELF", "/app/lusolve is not an ELF executable"
    det, xs = solve([[2.0, 1.0], [1.0, 3.0]], [[3.0, 5.0]])
    assert abs(det - 5.0) < 1e-12 and abs(xs[0][0] - 0.8) < 1e-12 and abs(xs[0][1] - 1.4) < 1e-12


def test_small_systems():
    rng = random.Random(90210)
    for n in (1, 3, 4, 6, 9):
        A, bs = rand_system(rng, n, 1, scale=rng.choice([1.0, 1e3, 1e-3]))
        check(A, bs, *solve(A, bs))


def test_pivoting_and_determinant_sign():
    cases = [
        [[0.0, 1.0], [1.0, 0.0]],
        [[0.0, 0.0, 3.0], [0.0, 2.0, 0.0], [5.0, 0.0, 0.0]],
        [[1e-14, 1.0], [1.0, 1.0]],
        [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]],
        [[2.0, -1.0, 0.0, 0.0], [-1.0, 2.0, -1.0, 0.0], [0.0, -1.0, 2.0, -1.0], [0.0, 0.0, -1.0, 2.0]],
    ]
    exact = [-1.0, -30.0, None, -3.0, 5.0]
    for A, want in zip(cases, exact):
        bs = [[1.0] * len(A), [float(i) for i in range(len(A))]]
        det, xs = solve(A, bs)
        if want is not None:
            assert abs(det - want) <= 1e-12 * abs(want), f"{A}: det {det}, expected {want}"
        check(A, bs, det, xs)
    det, xs = solve(cases[2], [[1.0, 2.0]])
    assert abs(xs[0][0] - 1.0) < 1e-9 and abs(xs[0][1] - 1.0) < 1e-9, "needs partial pivoting"


def test_singular():
    rng = random.Random(3)
    r1 = [rng.randint(-9, 9) for _ in range(4)]
    r2 = [rng.randint(-9, 9) for _ in range(4)]
    r3 = [rng.randint(-9, 9) for _ in range(4)]
    cases = [
        [[1.0, 2.0], [2.0, 4.0]],
        [list(map(float, r1)), list(map(float, r2)), [float(a + b) for a, b in zip(r1, r2)], list(map(float, r3))],
        [[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]],
        [[0.0]],
    ]
    for A in cases:
        proc = run(A, [[1.0] * len(A)])
        assert proc.returncode == 3, f"{A}: exit status {proc.returncode}"
        assert proc.stdout.strip() == "SINGULAR", f"{A}: output {proc.stdout[:100]!r}"
    det, _ = solve([[1.0, 0.0], [0.0, 1e-9]], [[1.0, 1.0]])  # small but above the threshold
    assert abs(det - 1e-9) < 1e-21


def test_multiple_rhs():
    rng = random.Random(77)
    A, bs = rand_system(rng, 12, 6)
    det, xs = solve(A, bs)
    check(A, bs, det, xs)
    A, _ = rand_system(rng, 5, 0)
    proc = run(A, [])
    assert proc.returncode == 0 and len([l for l in proc.stdout.splitlines() if l.strip()]) == 1


def test_large_system():
    rng = random.Random(2024)
    A, bs = rand_system(rng, 150, 2)
    det, xs = solve(A, bs)
    check(A, bs, det, xs, rel=1e-8)
