# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden polynomials for /app/newton.py, compared with the reference iteration below."""

import json
import math
import random
import subprocess

PROG = ["python3", "/app/newton.py"]


def poly_from_roots(roots, lead=1.0):
    c = [lead]
    for r in roots:
        c = [a - r * b for a, b in zip(c + [0.0], [0.0] + c)]
    return c


def ev(c, x):
    p = 0.0
    for a in c:
        p = p * x + a
    return p


def reference(job):
    c = [float(v) for v in job["coeffs"]]
    n = len(c) - 1
    d = [a * (n - i) for i, a in enumerate(c[:-1])] or [0.0]
    x = float(job["x0"])
    fx, dfx = ev(c, x), ev(d, x)
    if abs(fx) <= job["ftol"]:
        return "converged", x, 0, fx
    for k in range(1, job["max_iter"] + 1):
        if dfx == 0:
            return "zero-derivative", x, k - 1, fx
        nx = x - fx / dfx
        fx, dfx = ev(c, nx), ev(d, nx)
        step, x = abs(nx - x), nx
        if abs(fx) <= job["ftol"] or step <= job["xtol"] * (1 + abs(x)):
            return "converged", x, k, fx
    return "max-iter", x, job["max_iter"], fx


def run(jobs):
    text = "\n".join(json.dumps(j) for j in jobs) + "\n"
    proc = subprocess.run(PROG, input=text, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    out = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
    assert len(out) == len(jobs), f"{len(out)} result lines for {len(jobs)} jobs"
    return out


def scale(c, x):
    return sum(abs(a) * abs(x) ** (len(c) - 1 - i) for i, a in enumerate(c))


def simple_jobs():
    rng = random.Random(1618)
    jobs = []
    for _ in range(10):
        deg = rng.randint(2, 5)
        roots = sorted(round(rng.uniform(-4, 4), 3) for _ in range(deg))
        if min(b - a for a, b in zip(roots, roots[1:])) < 0.3:
            continue
        c = poly_from_roots(roots, round(rng.uniform(0.5, 3), 2) * rng.choice([-1, 1]))
        target = rng.choice(roots)
        jobs.append(({"coeffs": c, "x0": target + rng.uniform(-0.08, 0.08), "xtol": 1e-13, "ftol": 1e-300,
                      "max_iter": 60}, target))
    return jobs


def test_format():
    out = run([{"coeffs": [1.0, -3.0, 1.0], "x0": 0.1, "xtol": 1e-12, "ftol": 1e-12, "max_iter": 40},
               {"coeffs": [1, 0, 9], "x0": 0.5, "xtol": 1e-12, "ftol": 1e-12, "max_iter": 5}])
    for rec in out:
        assert {"status", "root", "iterations", "residual"} <= set(rec), rec
        assert rec["status"] in ("converged", "zero-derivative", "max-iter")
        assert isinstance(rec["iterations"], int) and isinstance(rec["root"], (int, float))
        assert isinstance(rec["residual"], (int, float))


def test_simple_roots():
    pairs = simple_jobs()
    assert len(pairs) >= 5
    out = run([j for j, _ in pairs])
    for (j, target), rec in zip(pairs, out):
        assert rec["status"] == "converged", f"{j}: {rec}"
        assert abs(rec["root"] - target) <= 1e-9 * max(1, abs(target)), f"{j}: root {rec['root']}, true {target}"
        assert abs(rec["residual"] - ev(j["coeffs"], rec["root"])) <= 1e-12 * scale(j["coeffs"], rec["root"]) + 1e-300


def test_iteration_counts():
    rng = random.Random(777)
    jobs = [j for j, _ in simple_jobs()]
    for _ in range(6):  # double roots converge linearly
        r = round(rng.uniform(-2, 2), 2)
        other = round(r + rng.choice([-1, 1]) * rng.uniform(1.0, 2.5), 2)
        jobs.append({"coeffs": poly_from_roots([r, r, other]), "x0": r + rng.uniform(0.2, 0.6),
                     "xtol": 1e-6, "ftol": 0, "max_iter": 100})
    for _ in range(6):  # loose tolerances stop early through either test
        c = [round(rng.uniform(-3, 3), 2) for _ in range(rng.randint(3, 6))] + [round(rng.uniform(-1, 1), 2)]
        jobs.append({"coeffs": c, "x0": round(rng.uniform(-2, 2), 2), "xtol": 10 ** -rng.randint(3, 8),
                     "ftol": 10 ** -rng.randint(2, 6), "max_iter": 200})
    out = run(jobs)
    bad = []
    for j, rec in zip(jobs, out):
        s, x, k, fx = reference(j)
        if rec["status"] != s or rec["iterations"] != k:
            bad.append(f"{j}: got {rec['status']}/{rec['iterations']}, reference {s}/{k}")
        elif s != "max-iter" and abs(rec["root"] - x) > 1e-9 * max(1, abs(x)):
            bad.append(f"{j}: root {rec['root']!r}, reference {x!r}")
    assert not bad, "\n".join(bad[:5])


def test_zero_derivative():
    jobs = [{"coeffs": [1, 0, -4], "x0": 0, "xtol": 1e-12, "ftol": 1e-12, "max_iter": 30},
            {"coeffs": [1, 0, -3, 5], "x0": -1.0, "xtol": 1e-12, "ftol": 1e-12, "max_iter": 30},
            {"coeffs": [0.5, -1, 3], "x0": 1, "xtol": 1e-12, "ftol": 1e-12, "max_iter": 30},
            {"coeffs": [1, 0, 0, -2], "x0": 0.0, "xtol": 1e-9, "ftol": 1e-9, "max_iter": 3}]
    out = run(jobs)
    for j, rec in zip(jobs, out):
        s, x, k, fx = reference(j)
        assert s == "zero-derivative"
        assert rec["status"] == s and rec["iterations"] == k, f"{j}: {rec}"
        assert rec["root"] == x and abs(rec["residual"] - fx) < 1e-12, f"{j}: {rec}"


def test_max_iter_and_immediate():
    jobs = [{"coeffs": [1, 0, 6.25], "x0": 0.7, "xtol": 1e-12, "ftol": 1e-12, "max_iter": 12},
            {"coeffs": [1, -2, 5], "x0": 3.3, "xtol": 1e-14, "ftol": 1e-14, "max_iter": 7},
            {"coeffs": [2, -3, -2], "x0": 2.0, "xtol": 1e-12, "ftol": 1e-12, "max_iter": 30},
            {"coeffs": [1, 1, -1, 1.5], "x0": -0.5, "xtol": 1e-12, "ftol": 2.5, "max_iter": 30}]
    out = run(jobs)
    assert out[0]["status"] == "max-iter" and out[0]["iterations"] == 12, out[0]
    assert out[1]["status"] == "max-iter" and out[1]["iterations"] == 7, out[1]
    assert out[2] == {**out[2], "status": "converged", "iterations": 0} and out[2]["root"] == 2.0, out[2]
    assert out[3]["status"] == "converged" and out[3]["iterations"] == 0 and out[3]["root"] == -0.5, out[3]
    assert abs(out[1]["residual"] - ev(jobs[1]["coeffs"], out[1]["root"])) <= 1e-9 * scale(jobs[1]["coeffs"], out[1]["root"])
