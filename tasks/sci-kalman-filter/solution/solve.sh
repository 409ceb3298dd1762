#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/kalman.py <<'PY'
import csv
import json
import math
import sys


def mm(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(2)) for j in range(2)] for i in range(2)]


def tr(a):
    return [[a[0][0], a[1][0]], [a[0][1], a[1][1]]]


def inv(a):
    det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
    return [[a[1][1] / det, -a[0][1] / det], [-a[1][0] / det, a[0][0] / det]]


def main():
    args = [a for a in sys.argv[1:] if a != "--rts"]
    rts = "--rts" in sys.argv[1:]
    cfg = json.load(open(args[0]))
    q, r = float(cfg["q"]), float(cfg["r"])
    x = [float(v) for v in cfg["x0"]]
    P = [[float(v) for v in row] for row in cfg["P0"]]
    rows = []
    with open(args[1], newline="") as fh:
        for rec in csv.DictReader(fh):
            z = (rec.get("z") or "").strip()
            zv = None if z == "" or z.lower() == "nan" else float(z)
            if zv is not None and math.isnan(zv):
                zv = None
            rows.append((float(rec["t"]), zv))
    filt, pred, Fs, nis = [], [], [], []
    prev_t = rows[0][0] if rows else 0.0
    for t, z in rows:
        dt = t - prev_t
        prev_t = t
        F = [[1.0, dt], [0.0, 1.0]]
        Q = [[q * dt ** 3 / 3, q * dt ** 2 / 2], [q * dt ** 2 / 2, q * dt]]
        x = [x[0] + dt * x[1], x[1]]
        P = mm(mm(F, P), tr(F))
        P = [[P[i][j] + Q[i][j] for j in range(2)] for i in range(2)]
        pred.append((x[:], [row[:] for row in P]))
        Fs.append(F)
        if z is not None:
            y = z - x[0]
            S = P[0][0] + r
            K = [P[0][0] / S, P[1][0] / S]
            x = [x[0] + K[0] * y, x[1] + K[1] * y]
            IKH = [[1 - K[0], 0.0], [-K[1], 1.0]]
            P = mm(IKH, P)
            off = (P[0][1] + P[1][0]) / 2
            P[0][1] = P[1][0] = off
            nis.append(y * y / S)
        else:
            nis.append(None)
        filt.append((x[:], [row[:] for row in P]))
    out = filt
    if rts and filt:
        sm = [None] * len(filt)
        sm[-1] = filt[-1]
        for i in range(len(filt) - 2, -1, -1):
            xf, Pf = filt[i]
            xp, Pp = pred[i + 1]
            xs1, Ps1 = sm[i + 1]
            C = mm(mm(Pf, tr(Fs[i + 1])), inv(Pp))
            dx = [xs1[0] - xp[0], xs1[1] - xp[1]]
            xs = [xf[0] + C[0][0] * dx[0] + C[0][1] * dx[1], xf[1] + C[1][0] * dx[0] + C[1][1] * dx[1]]
            dP = [[Ps1[a][b] - Pp[a][b] for b in range(2)] for a in range(2)]
            Ps = mm(mm(C, dP), tr(C))
            Ps = [[Pf[a][b] + Ps[a][b] for b in range(2)] for a in range(2)]
            sm[i] = (xs, Ps)
        out = sm
    print("t,pos,vel,p00,p01,p11,nis")
    for (t, _), (xv, Pv), n in zip(rows, out, nis):
        print(",".join([repr(t), repr(xv[0]), repr(xv[1]), repr(Pv[0][0]), repr(Pv[0][1]), repr(Pv[1][1]),
                        "" if n is None else repr(n)]))


main()
PY
