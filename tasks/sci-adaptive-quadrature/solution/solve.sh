#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/adaptive.py <<'PY'
import json
import math
import sys

NS = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}
sys.setrecursionlimit(10000)


def integrate(expr, a, b, tol, max_depth):
    code = compile(expr, "<f>", "eval")
    state = {"evals": 0, "limited": False}

    def f(x):
        state["evals"] += 1
        return eval(code, {"__builtins__": {}, **NS}, {"x": x})

    def step(a, b, fa, fm, fb, whole, tol, depth):
        m = (a + b) / 2
        lm = (a + m) / 2
        rm = (m + b) / 2
        flm = f(lm)
        frm = f(rm)
        left = (m - a) / 6 * (fa + 4 * flm + fm)
        right = (b - m) / 6 * (fm + 4 * frm + fb)
        delta = left + right - whole
        if depth <= 0 or abs(delta) <= 15 * tol:
            if abs(delta) > 15 * tol:
                state["limited"] = True
            return left + right + delta / 15
        return (step(a, m, fa, flm, fm, left, tol / 2, depth - 1)
                + step(m, b, fm, frm, fb, right, tol / 2, depth - 1))

    fa = f(a)
    fm = f((a + b) / 2)
    fb = f(b)
    whole = (b - a) / 6 * (fa + 4 * fm + fb)
    value = step(a, b, fa, fm, fb, whole, tol, max_depth)
    return {"value": value, "evals": state["evals"], "depth_limited": state["limited"]}


for line in sys.stdin:
    if line.strip():
        j = json.loads(line)
        print(json.dumps(integrate(j["f"], float(j["a"]), float(j["b"]), float(j["tol"]), int(j["max_depth"]))))
PY
