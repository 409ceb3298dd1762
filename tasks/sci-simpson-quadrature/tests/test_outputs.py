# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden jobs for /app/simpson.py; expected values come from the reference below."""

import json
import math
import random
import subprocess

PROG = ["python3", "/app/simpson.py"]
MATH = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}


def ref_simpson(expr, a, b, n):
    code = compile(expr, "<f>", "eval")
    f = lambda x: eval(code, {"__builtins__": {}, **MATH}, {"x": x})  # noqa: E731
    h = (b - a) / n
    odd = math.fsum(f(a + i * h) for i in range(1, n, 2))
    even = math.fsum(f(a + i * h) for i in range(2, n, 2))
    return h / 3 * (f(a) + 4 * odd + 2 * even + f(b))


def run(jobs, blank_lines=False):
    lines = []
    for j in jobs:
        lines.append(json.dumps(j))
        if blank_lines:
            lines.append("")
    proc = subprocess.run(PROG, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    return [l.strip() for l in proc.stdout.splitlines() if l.strip()]


def close(got, want, rel=1e-10, abs_=1e-12):
    return math.isfinite(got) and abs(got - want) <= max(rel * abs(want), abs_)


def test_output_shape():
    rng = random.Random(71)
    jobs = [{"f": "sin(%d*x) + x" % rng.randint(1, 5), "a": 0, "b": rng.randint(1, 4), "n": 2 * rng.randint(1, 30)}
            for _ in range(9)]
    out = run(jobs, blank_lines=True)
    assert len(out) == len(jobs), f"{len(out)} lines for {len(jobs)} jobs"
    for line in out:
        value = float(line)
        assert math.isfinite(value)
    for j, line in zip(jobs, out):
        assert close(float(line), ref_simpson(j["f"], j["a"], j["b"], j["n"]), 1e-6, 1e-9), f"{j}: {line}"


def test_cubic_exact():
    rng = random.Random(2718)
    jobs, want = [], []
    for _ in range(8):
        c = [rng.uniform(-3, 3) for _ in range(4)]
        a, b = rng.uniform(-2, 0), rng.uniform(0.5, 3)
        expr = f"({c[0]!r}) + ({c[1]!r})*x + ({c[2]!r})*x**2 + ({c[3]!r})*x**3"
        prim = lambda x: c[0] * x + c[1] * x**2 / 2 + c[2] * x**3 / 3 + c[3] * x**4 / 4  # noqa: E731
        jobs.append({"f": expr, "a": a, "b": b, "n": 2})
        want.append(prim(b) - prim(a))
    out = run(jobs)
    assert len(out) == len(jobs)
    for j, line, w in zip(jobs, out, want):
        assert close(float(line), w, 1e-9, 1e-10), f"{j}: got {line}, exact {w!r}"


def test_matches_reference():
    rng = random.Random(314159)
    templates = ["exp(-%s*x)*cos(x)", "sqrt(1 + %s*x*x)", "log(2 + sin(%s*x))", "x/(1 + %s*x**4)",
                 "atan(%s*x) - x", "cosh(x/%s)", "sin(x)**2 * %s"]
    jobs = []
    for t in templates:
        for _ in range(3):
            k = round(rng.uniform(0.3, 3.0), 3)
            a = round(rng.uniform(-2, 1), 4)
            b = a + round(rng.uniform(0.2, 5), 4)
            jobs.append({"f": t % k, "a": a, "b": b, "n": rng.choice([2, 4, 6, 10, 18, 64, 150])})
    out = run(jobs)
    assert len(out) == len(jobs)
    bad = []
    for j, line in zip(jobs, out):
        w = ref_simpson(j["f"], j["a"], j["b"], j["n"])
        if not close(float(line), w):
            bad.append(f"{j}: got {line}, reference {w!r}")
    assert not bad, "\n".join(bad[:5])


def test_reversed_and_degenerate():
    jobs = [{"f": "exp(0.7*x)*sin(3*x)", "a": 2.5, "b": -0.25, "n": 12},
            {"f": "1/(2 + cos(x))", "a": 4.0, "b": 1.0, "n": 8},
            {"f": "x**5 - 3*x", "a": 1.75, "b": 1.75, "n": 6}]
    out = run(jobs)
    assert len(out) == 3
    for j, line in zip(jobs, out):
        w = ref_simpson(j["f"], j["a"], j["b"], j["n"])
        assert close(float(line), w), f"{j}: got {line}, reference {w!r}"
    assert float(out[2]) == 0.0


def test_invalid_n():
    jobs = [{"f": "x*x", "a": 0, "b": 1, "n": 7},
            {"f": "sin(x)", "a": 0, "b": 2, "n": 8},
            {"f": "x", "a": 0, "b": 1, "n": 0},
            {"f": "x", "a": 0, "b": 1, "n": -4},
            {"f": "cos(x)", "a": 0, "b": 1, "n": 1},
            {"f": "exp(x)", "a": -1, "b": 1, "n": 14}]
    out = run(jobs)
    assert len(out) == len(jobs), f"{len(out)} lines for {len(jobs)} jobs"
    for idx in (0, 2, 3, 4):
        assert out[idx] == "ERROR n", f"job {jobs[idx]} gave {out[idx]!r}"
    for idx in (1, 5):
        j = jobs[idx]
        assert close(float(out[idx]), ref_simpson(j["f"], j["a"], j["b"], j["n"]))
