#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/ols.py <<'PY'
import csv
import json
import math
import sys


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(3)


def invert(a):
    """Gauss-Jordan inverse with partial pivoting; None if singular."""
    n = len(a)
    m = [row[:] + [1.0 if i == j else 0.0 for j in range(n)] for i, row in enumerate(a)]
    scale = max(abs(v) for row in a for v in row) or 1.0
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) <= 1e-11 * scale:
            return None
        m[col], m[piv] = m[piv], m[col]
        pv = m[col][col]
        m[col] = [v / pv for v in m[col]]
        for r in range(n):
            if r != col and m[r][col] != 0.0:
                fac = m[r][col]
                m[r] = [v - fac * w for v, w in zip(m[r], m[col])]
    return [row[n:] for row in m]


with open(sys.argv[1], newline="") as fh:
    reader = csv.reader(fh)
    header = [h.strip() for h in next(reader)]
    data = []
    for row in reader:
        if not row or all(not f.strip() for f in row):
            continue
        if any(f.strip() in ("", "NA") for f in row):
            continue
        data.append([float(f) for f in row])

names = ["(Intercept)"] + header[1:]
n, p = len(data), len(names)
if n <= p:
    fail("not enough observations")
y = [r[0] for r in data]
X = [[1.0] + r[1:] for r in data]
# scale columns for conditioning, undo afterwards
cs = [max(abs(X[i][j]) for i in range(n)) or 1.0 for j in range(p)]
Z = [[X[i][j] / cs[j] for j in range(p)] for i in range(n)]
ztz = [[math.fsum(Z[i][a] * Z[i][b] for i in range(n)) for b in range(p)] for a in range(p)]
zty = [math.fsum(Z[i][a] * y[i] for i in range(n)) for a in range(p)]
inv = invert(ztz)
if inv is None:
    fail("singular design matrix")
g = [math.fsum(inv[a][b] * zty[b] for b in range(p)) for a in range(p)]
beta = [g[j] / cs[j] for j in range(p)]
resid = [y[i] - math.fsum(X[i][j] * beta[j] for j in range(p)) for i in range(n)]
rss = math.fsum(r * r for r in resid)
ybar = math.fsum(y) / n
tss = math.fsum((v - ybar) ** 2 for v in y)
s2 = rss / (n - p)
se = [math.sqrt(s2 * inv[j][j]) / cs[j] for j in range(p)]
r2 = 1 - rss / tss
out = {
    "n": n, "p": p,
    "coefficients": dict(zip(names, beta)),
    "std_errors": dict(zip(names, se)),
    "t_values": {nm: b / s for nm, b, s in zip(names, beta, se)},
    "r_squared": r2,
    "adj_r_squared": 1 - (1 - r2) * (n - 1) / (n - p),
    "sigma": math.sqrt(s2),
    "f_statistic": ((tss - rss) / (p - 1)) / s2 if p > 1 else None,
}
print(json.dumps(out, indent=2))
PY
