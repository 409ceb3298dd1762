# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden jobs for /app/adaptive.py, checked against exact integrals and an independent reference."""

import json
import math
import random
import subprocess

PROG = ["python3", "/app/adaptive.py"]
MATH = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}


def reference(expr, a, b, tol, max_depth):
    """Adaptive Simpson with an explicit work list (same decisions as the recursive spec)."""
    code = compile(expr, "<f>", "eval")
    count = [0]

    def f(x):
        count[0] += 1
        return eval(code, {"__builtins__": {}, **MATH}, {"x": x})

    fa = f(a)
    fm = f((a + b) / 2)
    fb = f(b)
    whole = (b - a) / 6 * (fa + 4 * fm + fb)
    limited = False

    def node(a, b, fa, fm, fb, whole, tol, depth):
        nonlocal limited
        m = (a + b) / 2
        flm, frm = f((a + m) / 2), f((m + b) / 2)
        left = (m - a) / 6 * (fa + 4 * flm + fm)
        right = (b - m) / 6 * (fm + 4 * frm + fb)
        delta = left + right - whole
        accept = abs(delta) <= 15 * tol
        if accept or depth <= 0:
            limited = limited or not accept
            return ("leaf", left + right + delta / 15)
        return ("split", (a, m, fa, flm, fm, left, tol / 2, depth - 1), (m, b, fm, frm, fb, right, tol / 2, depth - 1))

    # post-order evaluation: left subtree fully before right subtree, as in the recursion
    def solve(args):
        r = node(*args)
        if r[0] == "leaf":
            return r[1]
        return solve(r[1]) + solve(r[2])

    value = solve((a, b, fa, fm, fb, whole, tol, max_depth))
    return value, count[0], limited


def run(jobs):
    text = "\n".join(json.dumps(j) for j in jobs) + "\n"
    proc = subprocess.run(PROG, input=text, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    out = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
    assert len(out) == len(jobs), f"{len(out)} result lines for {len(jobs)} jobs"
    return out


def exact_jobs():
    rng = random.Random(8086)
    jobs = []
    for _ in range(3):
        k = round(rng.uniform(0.4, 2.2), 3)
        a = round(rng.uniform(-1.5, 0.5), 3)
        b = round(a + rng.uniform(0.5, 3.0), 3)
        tol = rng.choice([1e-7, 1e-8, 1e-9, 1e-10])
        jobs += [
            ({"f": f"exp({k}*x)", "a": a, "b": b, "tol": tol, "max_depth": 40},
             (math.exp(k * b) - math.exp(k * a)) / k),
            ({"f": f"cos({k}*x)", "a": a, "b": b, "tol": tol, "max_depth": 40},
             (math.sin(k * b) - math.sin(k * a)) / k),
            ({"f": f"x*exp(-{k}*x*x)", "a": a, "b": b, "tol": tol, "max_depth": 40},
             (math.exp(-k * a * a) - math.exp(-k * b * b)) / (2 * k)),
            ({"f": f"1/(x + {k + 2})", "a": a, "b": b, "tol": tol, "max_depth": 40},
             math.log((b + k + 2) / (a + k + 2))),
            ({"f": f"{k}/(1 + {k}*{k}*x*x)", "a": a, "b": b, "tol": tol, "max_depth": 40},
             math.atan(k * b) - math.atan(k * a)),
        ]
    return jobs


def test_format():
    jobs = [{"f": "x*x + 1", "a": 0, "b": 1, "tol": 1e-6, "max_depth": 10},
            {"f": "sin(5*x)", "a": -1, "b": 2, "tol": 1e-9, "max_depth": 25}]
    for rec in run(jobs):
        assert isinstance(rec, dict) and {"value", "evals", "depth_limited"} <= set(rec), rec
        assert isinstance(rec["value"], float) and math.isfinite(rec["value"])
        assert isinstance(rec["evals"], int) and not isinstance(rec["evals"], bool) and rec["evals"] >= 5
        assert isinstance(rec["depth_limited"], bool)


def test_accuracy():
    pairs = exact_jobs()
    out = run([j for j, _ in pairs])
    bad = [f"{j}: got {r['value']!r}, exact {w!r}" for (j, w), r in zip(pairs, out)
           if not abs(r["value"] - w) <= 20 * j["tol"] + 1e-12]
    assert not bad, "\n".join(bad[:5])


def test_matches_reference_value():
    pairs = exact_jobs()
    rng = random.Random(99)
    jobs = [j for j, _ in pairs] + [
        {"f": f"sin(x)**2 * exp(-x/{round(rng.uniform(1, 4), 2)})", "a": 0, "b": round(rng.uniform(3, 9), 2),
         "tol": 1e-9, "max_depth": 30},
        {"f": "sqrt(1 + cos(x)**2)", "a": 0, "b": 6.2, "tol": 1e-10, "max_depth": 30},
    ]
    out = run(jobs)
    for j, r in zip(jobs, out):
        want = reference(j["f"], j["a"], j["b"], j["tol"], j["max_depth"])[0]
        assert abs(r["value"] - want) <= 1e-12 * max(1.0, abs(want)), f"{j}: got {r['value']!r}, reference {want!r}"


def test_eval_count():
    pairs = exact_jobs()
    jobs = [j for j, _ in pairs] + [{"f": "x**3 - 2*x", "a": -1, "b": 3, "tol": 1e-3, "max_depth": 9}]
    out = run(jobs)
    bad = []
    for j, r in zip(jobs, out):
        want = reference(j["f"], j["a"], j["b"], j["tol"], j["max_depth"])[1]
        if abs(r["evals"] - want) > 4:
            bad.append(f"{j}: evals {r['evals']}, reference {want}")
    assert not bad, "\n".join(bad[:5])
    assert out[-1]["evals"] == 5, "a cubic is integrated exactly: one step, 5 evaluations"


def test_depth_limit():
    jobs = [{"f": "sqrt(fabs(x - 0.3))", "a": 0, "b": 1.1, "tol": 1e-15, "max_depth": 6},
            {"f": "1/sqrt(x)", "a": 1e-9, "b": 2, "tol": 1e-8, "max_depth": 12},
            {"f": "exp(-x*x)", "a": -2, "b": 2, "tol": 1e-4, "max_depth": 30}]
    out = run(jobs)
    for j, r in zip(jobs, out):
        value, evals, limited = reference(j["f"], j["a"], j["b"], j["tol"], j["max_depth"])
        assert r["depth_limited"] is limited, f"{j}: depth_limited {r['depth_limited']}, expected {limited}"
        assert abs(r["value"] - value) <= 1e-12 * max(1.0, abs(value)), f"{j}: {r['value']!r} vs {value!r}"
        assert r["evals"] == evals, f"{j}: evals {r['evals']}, expected {evals}"
    assert out[0]["evals"] == 3 + 2 * (2 ** 7 - 1)


def test_reversed_and_empty():
    jobs = [{"f": "exp(x/2)*cos(x)", "a": 2.5, "b": -0.5, "tol": 1e-10, "max_depth": 30},
            {"f": "log(1 + x*x)", "a": 1.25, "b": 1.25, "tol": 1e-8, "max_depth": 10}]
    out = run(jobs)
    j = jobs[0]
    value, evals, _ = reference(j["f"], j["a"], j["b"], j["tol"], j["max_depth"])
    assert abs(out[0]["value"] - value) <= 1e-12 * max(1.0, abs(value)), (out[0], value)
    fwd = reference(jobs[0]["f"], -0.5, 2.5, 1e-10, 30)[0]
    assert abs(out[0]["value"] + fwd) <= 1e-9
    assert out[1]["value"] == 0.0 and out[1]["evals"] == 5
