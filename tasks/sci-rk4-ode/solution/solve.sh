#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/rk4.py <<'PY'
import json
import math
import sys

p = json.load(sys.stdin)
gamma, w0, A, omega = (float(p[k]) for k in ("gamma", "w0", "A", "omega"))
n, every = p["steps"], p["every"]
if not isinstance(n, int) or not isinstance(every, int) or n < 1 or every < 1:
    print("error: steps and every must be integers >= 1", file=sys.stderr)
    sys.exit(2)
t0, t1 = float(p["t0"]), float(p["t1"])
h = (t1 - t0) / n


def deriv(t, th, v):
    return v, -gamma * v - w0 * w0 * math.sin(th) + A * math.cos(omega * t)


th, v = map(float, p["y0"])
out = ["t,theta,v", f"{t0!r},{th!r},{v!r}"]
for i in range(n):
    t = t0 + i * h
    k1 = deriv(t, th, v)
    k2 = deriv(t + h / 2, th + h / 2 * k1[0], v + h / 2 * k1[1])
    k3 = deriv(t + h / 2, th + h / 2 * k2[0], v + h / 2 * k2[1])
    k4 = deriv(t + h, th + h * k3[0], v + h * k3[1])
    th = th + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
    v = v + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    if (i + 1) % every == 0 or i + 1 == n:
        out.append(f"{t0 + (i + 1) * h!r},{th!r},{v!r}")
print("\n".join(out))
PY
