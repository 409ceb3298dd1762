#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/simpson.py <<'PY'
import json
import math
import sys

NS = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}


def simpson(expr, a, b, n):
    code = compile(expr, "<f>", "eval")
    f = lambda x: eval(code, {"__builtins__": {}, **NS}, {"x": x})
    h = (b - a) / n
    odd = math.fsum(f(a + i * h) for i in range(1, n, 2))
    even = math.fsum(f(a + i * h) for i in range(2, n, 2))
    return h / 3 * (f(a) + 4 * odd + 2 * even + f(b))


for line in sys.stdin:
    if not line.strip():
        continue
    job = json.loads(line)
    n = job["n"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 2 or n % 2:
        print("ERROR n")
        continue
    print(repr(simpson(job["f"], float(job["a"]), float(job["b"]), n)))
PY
