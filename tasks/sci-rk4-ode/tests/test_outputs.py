# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden pendulum runs for /app/rk4.py, compared with the reference RK4 below and with exact solutions."""

import json
import math
import random
import subprocess

PROG = ["python3", "/app/rk4.py"]


def reference(p):
    g, w0, A, om = p["gamma"], p["w0"], p["A"], p["omega"]
    n, k = p["steps"], p["every"]
    h = (p["t1"] - p["t0"]) / n

    def f(t, y):
        return [y[1], -g * y[1] - w0 * w0 * math.sin(y[0]) + A * math.cos(om * t)]

    y = list(map(float, p["y0"]))
    rows = [(p["t0"], y[0], y[1])]
    for i in range(1, n + 1):
        t = p["t0"] + (i - 1) * h
        s1 = f(t, y)
        s2 = f(t + 0.5 * h, [y[j] + 0.5 * h * s1[j] for j in range(2)])
        s3 = f(t + 0.5 * h, [y[j] + 0.5 * h * s2[j] for j in range(2)])
        s4 = f(t + h, [y[j] + h * s3[j] for j in range(2)])
        y = [y[j] + h * (s1[j] + 2 * s2[j] + 2 * s3[j] + s4[j]) / 6 for j in range(2)]
        if i % k == 0 or i == n:
            rows.append((p["t0"] + i * h, y[0], y[1]))
    return rows


def run(p, expect_ok=True):
    proc = subprocess.run(PROG, input=json.dumps(p), capture_output=True, text=True, timeout=60)
    if not expect_ok:
        return proc
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    lines = [l.strip() for l in proc.stdout.splitlines() if l.strip()]
    assert lines and lines[0].replace(" ", "") == "t,theta,v", f"bad header: {lines[:1]}"
    return [tuple(float(x) for x in l.split(",")) for l in lines[1:]]


def compare(got, want, rel=1e-9, abs_=1e-10):
    assert len(got) == len(want), f"{len(got)} rows, expected {len(want)}"
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert abs(a - b) <= max(rel * abs(b), abs_), f"row {g} differs from reference {w}"


def random_case(rng, **over):
    p = {"gamma": round(rng.uniform(0.5, 1.0), 3), "w0": round(rng.uniform(0.8, 2.0), 3),
         "A": round(rng.uniform(0.2, 0.9), 3), "omega": round(rng.uniform(0.5, 2.5), 3),
         "y0": [round(rng.uniform(-1.2, 1.2), 3), round(rng.uniform(-0.8, 0.8), 3)],
         "t0": round(rng.uniform(-1, 2), 2), "steps": rng.randint(20, 60), "every": rng.randint(1, 7)}
    p["t1"] = round(p["t0"] + rng.uniform(5, 15), 2)
    p.update(over)
    return p


def test_csv_shape():
    p = {"gamma": 0.1, "w0": 1.0, "A": 0.0, "omega": 1.0, "y0": [0.2, 0.1], "t0": 1.0, "t1": 4.5,
         "steps": 23, "every": 4}
    rows = run(p)
    assert len(rows) == 23 // 4 + 2, f"{len(rows)} data rows"
    ts = [r[0] for r in rows]
    want_t = [1.0 + i * 3.5 / 23 for i in list(range(0, 24, 4)) + [23]]
    assert all(abs(a - b) < 1e-9 for a, b in zip(ts, want_t)), ts
    assert rows[0][1:] == (0.2, 0.1)


def test_undamped_small_angle():
    # theta0 tiny, no damping, no drive: harmonic oscillator theta = a cos(w0 t) + (v0/w0) sin(w0 t)
    w0, a, v0 = 1.37, 2e-4, -1e-4
    p = {"gamma": 0.0, "w0": w0, "A": 0.0, "omega": 0.0, "y0": [a, v0], "t0": 0.0, "t1": 12.0,
         "steps": 2400, "every": 100}
    rows = run(p)
    assert len(rows) == 25
    for t, th, v in rows:
        want = a * math.cos(w0 * t) + v0 / w0 * math.sin(w0 * t)
        assert abs(th - want) < 1e-9, f"t={t}: theta={th}, harmonic solution {want}"


def test_matches_reference_rk4():
    rng = random.Random(4242)
    for _ in range(5):
        p = random_case(rng)
        compare(run(p), reference(p))


def test_backward_integration():
    rng = random.Random(17)
    p = random_case(rng)
    p["t0"], p["t1"] = p["t1"], p["t0"]
    compare(run(p), reference(p))
    fwd = random_case(rng, every=1)
    rows = run(fwd)
    back = dict(fwd, t0=fwd["t1"], t1=fwd["t0"], y0=list(rows[-1][1:]), steps=fwd["steps"] * 8, every=fwd["steps"] * 8)
    start = run(back)[-1]
    assert abs(start[1] - fwd["y0"][0]) < 1e-3 and abs(start[2] - fwd["y0"][1]) < 1e-3, (start, fwd["y0"])


def test_invalid_steps():
    base = random_case(random.Random(5))
    for over in ({"steps": 0}, {"every": 0}, {"steps": -3}):
        proc = run(dict(base, **over), expect_ok=False)
        assert proc.returncode == 2, f"{over}: exit status {proc.returncode}"
        assert proc.stdout.strip() == "", f"{over}: stdout should be empty"
    compare(run(dict(base, every=10 ** 6)), reference(dict(base, every=10 ** 6)))
