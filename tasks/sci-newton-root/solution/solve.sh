#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/newton.py <<'PY'
import json
import sys


def horner(coeffs, x):
    p, dp = 0.0, 0.0
    for c in coeffs:
        dp = dp * x + p
        p = p * x + c
    return p, dp


def newton(coeffs, x0, xtol, ftol, max_iter):
    x = float(x0)
    fx, dfx = horner(coeffs, x)
    if abs(fx) <= ftol:
        return "converged", x, 0, fx
    for k in range(1, max_iter + 1):
        if dfx == 0:
            return "zero-derivative", x, k - 1, fx
        x_new = x - fx / dfx
        fx, dfx = horner(coeffs, x_new)
        step = abs(x_new - x)
        x = x_new
        if abs(fx) <= ftol or step <= xtol * (1 + abs(x)):
            return "converged", x, k, fx
    return "max-iter", x, max_iter, fx


for line in sys.stdin:
    if line.strip():
        j = json.loads(line)
        s, x, k, fx = newton([float(c) for c in j["coeffs"]], j["x0"], float(j["xtol"]), float(j["ftol"]), int(j["max_iter"]))
        print(json.dumps({"status": s, "root": x, "iterations": k, "residual": fx}))
PY
