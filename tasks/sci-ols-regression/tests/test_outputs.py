# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden regression data sets for /app/ols.py; the reference fit uses a Householder-free MGS QR."""

import json
import math
import os
import random
import subprocess
import tempfile

PROG = ["python3", "/app/ols.py"]


def ref_fit(header, rows):
    names = ["(Intercept)"] + header[1:]
    n, p = len(rows), len(names)
    y = [r[0] for r in rows]
    cols = [[1.0] * n] + [[r[j] for r in rows] for j in range(1, p)]
    q, R = [], [[0.0] * p for _ in range(p)]
    for j in range(p):  # modified Gram-Schmidt
        v = cols[j][:]
        for i in range(j):
            R[i][j] = math.fsum(a * b for a, b in zip(q[i], v))
            v = [a - R[i][j] * b for a, b in zip(v, q[i])]
        R[j][j] = math.sqrt(math.fsum(a * a for a in v))
        q.append([a / R[j][j] for a in v])
    qty = [math.fsum(a * b for a, b in zip(q[j], y)) for j in range(p)]
    beta = [0.0] * p
    for j in reversed(range(p)):
        beta[j] = (qty[j] - math.fsum(R[j][k] * beta[k] for k in range(j + 1, p))) / R[j][j]
    Rinv = [[0.0] * p for _ in range(p)]
    for c in range(p):
        for j in reversed(range(p)):
            rhs = (1.0 if j == c else 0.0) - math.fsum(R[j][k] * Rinv[k][c] for k in range(j + 1, p))
            Rinv[j][c] = rhs / R[j][j]
    diag = [math.fsum(Rinv[j][c] ** 2 for c in range(p)) for j in range(p)]
    fitted = [math.fsum(cols[j][i] * beta[j] for j in range(p)) for i in range(n)]
    rss = math.fsum((a - b) ** 2 for a, b in zip(y, fitted))
    ybar = math.fsum(y) / n
    tss = math.fsum((a - ybar) ** 2 for a in y)
    s2 = rss / (n - p)
    se = [math.sqrt(s2 * d) for d in diag]
    r2 = 1 - rss / tss
    return {"n": n, "p": p, "coefficients": dict(zip(names, beta)), "std_errors": dict(zip(names, se)),
            "t_values": {k: b / s for k, b, s in zip(names, beta, se)}, "r_squared": r2,
            "adj_r_squared": 1 - (1 - r2) * (n - 1) / (n - p), "sigma": math.sqrt(s2),
            "f_statistic": ((tss - rss) / (p - 1)) / s2}


def make_data(seed, n, k, noise=1.0):
    rng = random.Random(seed)
    names = ["resp"] + [f"v{j}_{rng.choice(['age', 'dose', 'temp', 'load', 'rate'])}" for j in range(1, k + 1)]
    scales = [rng.choice([1, 10, 250, 0.05]) for _ in range(k)]
    beta = [rng.uniform(-3, 3) for _ in range(k + 1)]
    rows = []
    for _ in range(n):
        x = [round(rng.gauss(rng.uniform(-1, 1), 1) * s + s, 4) for s in scales]
        y = beta[0] + sum(b * v / s for b, v, s in zip(beta[1:], x, scales)) + rng.gauss(0, noise)
        rows.append([round(y, 5)] + x)
    return names, rows


def write_csv(names, rows, extra_lines=()):
    fd, path = tempfile.mkstemp(suffix=".csv", dir="/tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(",".join(names) + "\n")
        for i, r in enumerate(rows):
            fh.write(",".join(repr(v) if isinstance(v, float) else str(v) for v in r) + "\n")
            if i < len(extra_lines):
                fh.write(extra_lines[i] + "\n")
    return path


def run(path):
    proc = subprocess.run(PROG + [path], capture_output=True, text=True, timeout=60)
    return proc


def fit(names, rows, extra=()):
    path = write_csv(names, rows, extra)
    try:
        proc = run(path)
    finally:
        os.unlink(path)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    return json.loads(proc.stdout)


def close(a, b, rel=1e-7, abs_=1e-9):
    return isinstance(a, (int, float)) and abs(a - b) <= max(rel * abs(b), abs_)


DATASETS = [make_data(301, 40, 2), make_data(302, 150, 4, 3.0), make_data(303, 12, 3, 0.2), make_data(304, 60, 1)]


def test_output_keys():
    names, rows = DATASETS[0]
    out = fit(names, rows)
    for key in ("n", "p", "coefficients", "std_errors", "t_values", "r_squared", "adj_r_squared", "sigma", "f_statistic"):
        assert key in out, f"missing key {key}"
    assert out["n"] == len(rows) and out["p"] == len(names)
    for key in ("coefficients", "std_errors", "t_values"):
        assert set(out[key]) == {"(Intercept)", *names[1:]}, f"{key}: {sorted(out[key])}"


def test_coefficients():
    for names, rows in DATASETS:
        out, ref = fit(names, rows), ref_fit(names, rows)
        for k, v in ref["coefficients"].items():
            assert close(out["coefficients"].get(k), v), f"{k}: {out['coefficients'].get(k)} vs {v}"


def test_standard_errors():
    for names, rows in DATASETS:
        out, ref = fit(names, rows), ref_fit(names, rows)
        for k in ref["std_errors"]:
            assert close(out["std_errors"].get(k), ref["std_errors"][k]), f"se {k}: {out['std_errors'].get(k)}"
            assert close(out["t_values"].get(k), ref["t_values"][k]), f"t {k}: {out['t_values'].get(k)}"


def test_fit_statistics():
    for names, rows in DATASETS:
        out, ref = fit(names, rows), ref_fit(names, rows)
        for key in ("r_squared", "adj_r_squared", "sigma", "f_statistic"):
            assert close(out.get(key), ref[key]), f"{key}: {out.get(key)} vs {ref[key]}"


def test_missing_rows_skipped():
    names, rows = DATASETS[1]
    k = len(names) - 1
    junk = ["NA," + ",".join(["1.5"] * k), "3.25," + ",".join(["NA"] + ["2"] * (k - 1)),
            "7.0," + ",".join([""] + ["1"] * (k - 1)), ",".join(["4.4"] * k) + ","]
    out, ref = fit(names, rows, junk), ref_fit(names, rows)
    assert out["n"] == len(rows), f"n = {out['n']}, expected {len(rows)}"
    for k_, v in ref["coefficients"].items():
        assert close(out["coefficients"].get(k_), v), k_


def test_singular_design():
    rng = random.Random(55)
    base = [[rng.randint(1, 50), rng.randint(1, 50)] for _ in range(30)]
    cases = [
        (["y", "a", "b", "a_plus_b"], [[rng.uniform(0, 9), a, b, a + b] for a, b in base]),
        (["y", "a", "const"], [[rng.uniform(0, 9), a, 4] for a, _ in base]),
        (["y", "a", "b", "c"], [[1.0, 2, 3, 5], [2.0, 1, 0, 4], [3.5, 7, 1, 1], [0.5, 2, 2, 9]]),
    ]
    for names, rows in cases:
        path = write_csv(names, rows)
        try:
            proc = run(path)
        finally:
            os.unlink(path)
        assert proc.returncode == 3, f"{names}: exit status {proc.returncode}, expected 3"
        assert not proc.stdout.strip().startswith("{"), f"{names}: printed a fit"
