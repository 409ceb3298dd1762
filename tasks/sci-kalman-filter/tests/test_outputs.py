# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden tracks for /app/kalman.py, compared with the scalar-algebra reference filter/smoother below."""

import json
import math
import os
import random
import subprocess
import tempfile

PROG = ["python3", "/app/kalman.py"]
COLS = ["t", "pos", "vel", "p00", "p01", "p11", "nis"]


def reference(cfg, rows, rts=False):
    q, r = cfg["q"], cfg["r"]
    p, v = cfg["x0"]
    a, b, c = cfg["P0"][0][0], cfg["P0"][0][1], cfg["P0"][1][1]  # P = [[a, b], [b, c]]
    filt, pred, dts, nis = [], [], [], []
    t_prev = rows[0][0]
    for t, z in rows:
        d = t - t_prev
        t_prev = t
        p = p + d * v
        a, b, c = a + 2 * d * b + d * d * c + q * d ** 3 / 3, b + d * c + q * d * d / 2, c + q * d
        pred.append((p, v, a, b, c))
        dts.append(d)
        if z is None:
            nis.append(None)
        else:
            s = a + r
            k0, k1 = a / s, b / s
            y = z - p
            p, v = p + k0 * y, v + k1 * y
            a, b, c = (1 - k0) * a, (1 - k0) * b, c - k1 * b
            nis.append(y * y / s)
        filt.append((p, v, a, b, c))
    if not rts:
        return filt, nis
    sm = [None] * len(filt)
    sm[-1] = filt[-1]
    for i in range(len(filt) - 2, -1, -1):
        fp, fv, fa, fb, fc = filt[i]
        pp, pv, pa, pb, pc = pred[i + 1]
        sp, sv, sa, sb, sc = sm[i + 1]
        d = dts[i + 1]
        # G = Pf F^T,  C = G Pp^-1
        g00, g01, g10, g11 = fa + d * fb, fb, fb + d * fc, fc
        det = pa * pc - pb * pb
        i00, i01, i11 = pc / det, -pb / det, pa / det
        c00, c01 = g00 * i00 + g01 * i01, g00 * i01 + g01 * i11
        c10, c11 = g10 * i00 + g11 * i01, g10 * i01 + g11 * i11
        dx0, dx1 = sp - pp, sv - pv
        da, db, dc = sa - pa, sb - pb, sc - pc
        m00, m01 = c00 * da + c01 * db, c00 * db + c01 * dc
        m10, m11 = c10 * da + c11 * db, c10 * db + c11 * dc
        sm[i] = (fp + c00 * dx0 + c01 * dx1, fv + c10 * dx0 + c11 * dx1,
                 fa + m00 * c00 + m01 * c01, fb + m00 * c10 + m01 * c11, fc + m10 * c10 + m11 * c11)
    return sm, nis


def make_track(seed, n, missing=0.15, repeats=0.1):
    rng = random.Random(seed)
    cfg = {"q": round(rng.uniform(0.01, 0.5), 4), "r": round(rng.uniform(0.1, 3.0), 3),
           "x0": [round(rng.uniform(-5, 5), 2), round(rng.uniform(-2, 2), 2)],
           "P0": [[round(rng.uniform(1, 10), 2), 0.3], [0.3, round(rng.uniform(0.5, 4), 2)]]}
    t, pos, vel, rows = round(rng.uniform(0, 100), 2), cfg["x0"][0], cfg["x0"][1], []
    for i in range(n):
        if i and rng.random() >= repeats:
            dt = round(rng.choice([0.1, 0.25, 0.5, 1.0, 2.0]) * rng.uniform(0.5, 1.5), 3)
            t = round(t + dt, 3)
            vel += rng.gauss(0, 0.3)
            pos += vel * dt
        z = None if rng.random() < missing else round(pos + rng.gauss(0, math.sqrt(cfg["r"])), 4)
        rows.append((t, z))
    return cfg, rows


def run(cfg, rows, rts=False, missing_token="nan"):
    d = tempfile.mkdtemp(dir="/tmp")
    cp, mp = os.path.join(d, "cfg.json"), os.path.join(d, "m.csv")
    with open(cp, "w") as fh:
        json.dump(cfg, fh)
    with open(mp, "w") as fh:
        fh.write("t,z\n")
        for i, (t, z) in enumerate(rows):
            tok = missing_token if i % 2 else ""
            fh.write(f"{t!r},{tok if z is None else repr(z)}\n")
    try:
        proc = subprocess.run(PROG + [cp, mp] + (["--rts"] if rts else []), capture_output=True, text=True,
                              timeout=60)
    finally:
        os.unlink(cp)
        os.unlink(mp)
        os.rmdir(d)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    lines = [l.strip() for l in proc.stdout.splitlines() if l.strip()]
    assert lines and lines[0].replace(" ", "") == ",".join(COLS), f"bad header {lines[:1]}"
    out = []
    for l in lines[1:]:
        f = l.split(",")
        assert len(f) == 7, f"bad row {l!r}"
        out.append([float(x) for x in f[:6]] + [None if f[6].strip() == "" else float(f[6])])
    assert len(out) == len(rows), f"{len(out)} rows for {len(rows)} measurements"
    return out


def compare(out, want, cols):
    for j in cols:
        scale = max(abs(w[j - 1]) for w in want) or 1.0
        for i, (o, w) in enumerate(zip(out, want)):
            assert abs(o[j] - w[j - 1]) <= 1e-8 * max(abs(w[j - 1]), scale * 1e-3) + 1e-12, \
                f"row {i} {COLS[j]}: {o[j]!r}, reference {w[j - 1]!r}"


TRACKS = [make_track(1001, 40), make_track(1002, 80, missing=0.3), make_track(1003, 25, repeats=0.3)]


def test_output_shape():
    cfg, rows = TRACKS[0]
    out = run(cfg, rows)
    assert [o[0] for o in out] == [t for t, _ in rows]


def test_filter_states():
    for cfg, rows in TRACKS:
        compare(run(cfg, rows), reference(cfg, rows)[0], [1, 2])


def test_filter_covariance():
    for cfg, rows in TRACKS:
        compare(run(cfg, rows), reference(cfg, rows)[0], [3, 4, 5])


def test_missing_and_nis():
    cfg, rows = TRACKS[1]
    out = run(cfg, rows)
    _, nis = reference(cfg, rows)
    for i, (o, n, (_, z)) in enumerate(zip(out, nis, rows)):
        if z is None:
            assert o[6] is None, f"row {i}: nis {o[6]} for a missing measurement"
        else:
            assert o[6] is not None and abs(o[6] - n) <= 1e-8 * max(1.0, n), f"row {i}: nis {o[6]} vs {n}"


def test_irregular_and_repeated_times():
    cfg = {"q": 0.2, "r": 0.4, "x0": [1.0, -0.5], "P0": [[2.0, -0.4], [-0.4, 1.5]]}
    rows = [(3.0, 1.1), (3.0, 0.7), (3.0, None), (4.75, -0.2), (4.75, 0.1), (9.5, None), (9.51, -2.9), (20.0, -8.3)]
    want, _ = reference(cfg, rows)
    compare(run(cfg, rows), want, [1, 2, 3, 4, 5])


def test_rts_smoother():
    for cfg, rows in TRACKS + [make_track(1004, 60, missing=0.2, repeats=0.15)]:
        want, _ = reference(cfg, rows, rts=True)
        compare(run(cfg, rows, rts=True), want, [1, 2, 3, 4, 5])
