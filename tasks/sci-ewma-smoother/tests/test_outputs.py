# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden series for /app/smooth.py, compared with direct (non-recursive) reference formulas."""

import math
import random
import subprocess

PROG = ["python3", "/app/smooth.py"]


def ref_ewma(xs, alpha):
    out, s = [], None
    for x in xs:
        if x is not None:
            s = x if s is None else alpha * x + (1 - alpha) * s
        out.append(s)
    return out


def ref_adjusted(xs, alpha):
    out = []
    for t in range(len(xs)):
        pairs = [((1 - alpha) ** i, xs[t - i]) for i in range(t + 1) if xs[t - i] is not None]
        den = math.fsum(w for w, _ in pairs)
        out.append(math.fsum(w * x for w, x in pairs) / den if pairs else None)
    return out


def ref_sma(xs, w):
    h = w // 2
    out = []
    for t in range(len(xs)):
        win = [x for x in xs[max(0, t - h): t + h + 1] if x is not None]
        out.append(math.fsum(win) / len(win) if win else None)
    return out


def series(seed, n, missing=0.0):
    rng = random.Random(seed)
    level, xs = rng.uniform(-50, 50), []
    for i in range(n):
        level += rng.gauss(0, 1.5)
        v = round(level + 3 * math.sin(i / 7) + rng.gauss(0, 2), 4)
        xs.append(None if rng.random() < missing else v)
    return xs


def run(xs, *args, expect_ok=True):
    text = "".join(("NA" if x is None else repr(x)) + "\n" + ("\n" if i % 13 == 5 else "") for i, x in enumerate(xs))
    proc = subprocess.run(PROG + [str(a) for a in args], input=text, capture_output=True, text=True, timeout=60)
    if not expect_ok:
        return proc
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    lines = [l.strip() for l in proc.stdout.splitlines() if l.strip()]
    assert len(lines) == len(xs), f"{len(lines)} output lines for {len(xs)} values"
    return [None if l == "NA" else float(l) for l in lines]


def compare(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None:
            assert g is None, f"index {i}: {g}, expected NA"
        else:
            assert g is not None and abs(g - w) <= 1e-9 * max(1.0, abs(w)), f"index {i}: {g}, expected {w}"


def test_length_and_format():
    xs = series(3, 57)
    for args in (["--ewma", 0.5], ["--sma", 3], ["--ewma", 0.2, "--adjust"]):
        out = run(xs, *args)
        assert all(v is not None and math.isfinite(v) for v in out)


def test_ewma():
    for seed, alpha in ((10, 0.05), (11, 0.37), (12, 1.0)):
        xs = series(seed, 300)
        compare(run(xs, "--ewma", alpha), ref_ewma(xs, alpha))


def test_ewma_adjusted():
    for seed, alpha in ((20, 0.02), (21, 0.4), (22, 0.9)):
        xs = series(seed, 250)
        compare(run(xs, "--ewma", alpha, "--adjust"), ref_adjusted(xs, alpha))


def test_sma_centered_edges():
    for seed, w in ((30, 1), (31, 7), (32, 25)):
        xs = series(seed, 120)
        compare(run(xs, "--sma", w), ref_sma(xs, w))
    short = [4.0, 8.0, 1.0]
    compare(run(short, "--sma", 11), [13 / 3] * 3)


def test_missing_values():
    xs = [None, None] + series(40, 150, missing=0.25) + [None]
    compare(run(xs, "--ewma", 0.3), ref_ewma(xs, 0.3))
    compare(run(xs, "--ewma", 0.15, "--adjust"), ref_adjusted(xs, 0.15))
    compare(run(xs, "--sma", 5), ref_sma(xs, 5))
    compare(run([None, None, 2.5, None], "--sma", 3), [None, 2.5, 2.5, 2.5])


def test_invalid_arguments():
    xs = series(50, 10)
    compare(run(xs, "--ewma", 0.5), ref_ewma(xs, 0.5))  # a valid call works
    for args in (["--ewma", 0], ["--ewma", 1.5], ["--ewma", -0.2], ["--sma", 4], ["--sma", 0], []):
        proc = run(xs, *args, expect_ok=False)
        assert proc.returncode == 2, f"{args}: exit status {proc.returncode}"
        assert proc.stdout.strip() == "", f"{args}: printed output"
