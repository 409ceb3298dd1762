#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/spectrum.py <<'PY'
import argparse
import cmath
import math

ap = argparse.ArgumentParser()
ap.add_argument("signal")
ap.add_argument("fs", type=float)
ap.add_argument("--window", choices=["rect", "hann"], default="rect")
ap.add_argument("--peaks", type=int, default=None)
args = ap.parse_args()

x = []
with open(args.signal) as fh:
    for line in fh:
        s = line.strip()
        if s and not s.startswith("#"):
            x.append(float(s))
n = len(x)
w = [1.0] * n if args.window == "rect" else [0.5 - 0.5 * math.cos(2 * math.pi * i / n) for i in range(n)]
xw = [a * b for a, b in zip(x, w)]
sw = math.fsum(w)
tw = [cmath.exp(-2j * math.pi * m / n) for m in range(n)]
rows = []
for k in range(n // 2 + 1):
    acc = sum(xw[i] * tw[(k * i) % n] for i in range(n))
    c = 1 if k == 0 or (n % 2 == 0 and k == n // 2) else 2
    rows.append((k * args.fs / n, c * abs(acc) / sw))
if args.peaks is not None:
    rows = sorted(rows, key=lambda r: (-r[1], r[0]))[: args.peaks]
print("freq,amplitude")
for f, a in rows:
    print(f"{f!r},{a!r}")
PY
