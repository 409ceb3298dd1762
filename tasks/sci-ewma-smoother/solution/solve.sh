#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/smooth.py <<'PY'
import argparse
import math
import sys


class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


ap = Parser()
ap.add_argument("--ewma", type=float)
ap.add_argument("--adjust", action="store_true")
ap.add_argument("--sma", type=int)
a = ap.parse_args()
if (a.ewma is None) == (a.sma is None):
    ap.error("choose exactly one of --ewma and --sma")
if a.ewma is not None and not (0 < a.ewma <= 1):
    ap.error("ALPHA must be in (0, 1]")
if a.sma is not None and (a.sma < 1 or a.sma % 2 == 0):
    ap.error("W must be odd and >= 1")

xs = []
for line in sys.stdin:
    s = line.strip()
    if s:
        xs.append(None if s == "NA" else float(s))

out = []
if a.sma is not None:
    h = a.sma // 2
    for t in range(len(xs)):
        win = [v for v in xs[max(0, t - h): t + h + 1] if v is not None]
        out.append(math.fsum(win) / len(win) if win else None)
elif a.adjust:
    num = den = 0.0
    seen = False
    d = 1 - a.ewma
    for x in xs:
        num *= d
        den *= d
        if x is not None:
            num += x
            den += 1.0
            seen = True
        out.append(num / den if seen else None)
else:
    s = None
    for x in xs:
        if x is not None:
            s = x if s is None else a.ewma * x + (1 - a.ewma) * s
        out.append(s)
sys.stdout.write("".join(("NA" if v is None else repr(v)) + "\n" for v in out))
PY
