# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Hidden signals for /app/spectrum.py, compared with a reference DFT."""

import math
import os
import random
import subprocess
import tempfile

PROG = ["python3", "/app/spectrum.py"]


def ref_spectrum(x, fs, window="rect"):
    n = len(x)
    w = [1.0] * n if window == "rect" else [0.5 - 0.5 * math.cos(2 * math.pi * i / n) for i in range(n)]
    sw = math.fsum(w)
    rows = []
    for k in range(n // 2 + 1):
        re = math.fsum(w[i] * x[i] * math.cos(2 * math.pi * ((k * i) % n) / n) for i in range(n))
        im = math.fsum(-w[i] * x[i] * math.sin(2 * math.pi * ((k * i) % n) / n) for i in range(n))
        c = 1 if k == 0 or (n % 2 == 0 and 2 * k == n) else 2
        rows.append((k * fs / n, c * math.hypot(re, im) / sw))
    return rows


def run(x, fs, *opts, comments=False):
    fd, path = tempfile.mkstemp(suffix=".txt", dir="/tmp")
    with os.fdopen(fd, "w") as fh:
        if comments:
            fh.write("# hidden test signal\n\n")
        for i, v in enumerate(x):
            fh.write(repr(v) + "\n")
            if comments and i % 17 == 3:
                fh.write("\n# marker\n")
    try:
        proc = subprocess.run(PROG + [path, str(fs), *opts], capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(path)
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-500:]}"
    lines = [l.strip() for l in proc.stdout.splitlines() if l.strip()]
    assert lines and lines[0].replace(" ", "") == "freq,amplitude", f"bad header {lines[:1]}"
    return [tuple(float(v) for v in l.split(",")) for l in lines[1:]]


def compare(got, want, peak):
    assert len(got) == len(want), f"{len(got)} rows, expected {len(want)}"
    for g, w in zip(got, want):
        assert abs(g[0] - w[0]) <= 1e-9 * max(1.0, abs(w[0])), f"frequency {g[0]} vs {w[0]}"
        assert abs(g[1] - w[1]) <= 1e-9 * peak, f"amplitude at {w[0]} Hz: {g[1]} vs {w[1]}"


def noise(seed, n):
    rng = random.Random(seed)
    return [round(rng.gauss(0, 1) + 0.3 * math.sin(0.37 * i), 9) for i in range(n)]


def test_csv_format():
    x = noise(1, 45)
    rows = run(x, 90.0)
    assert len(rows) == 23
    assert [r[0] for r in rows] == [k * 2.0 for k in range(23)] or all(
        abs(r[0] - 2.0 * k) < 1e-9 for k, r in enumerate(rows))
    rows = run(noise(2, 16), 1000, comments=True)
    assert len(rows) == 9 and abs(rows[-1][0] - 500.0) < 1e-9


def test_pure_tones():
    n, fs = 240, 480.0
    tones = {7: 2.5, 31: 0.75, 88: 1.25}
    x = [0.6 + sum(a * math.sin(2 * math.pi * k * i / n + 0.4 * k) for k, a in tones.items()) for i in range(n)]
    rows = run(x, fs)
    assert len(rows) == n // 2 + 1
    for k, (f, a) in enumerate(rows):
        want = tones.get(k, 0.6 if k == 0 else 0.0)
        assert abs(f - k * fs / n) < 1e-9
        assert abs(a - want) < 1e-9, f"bin {k} ({f} Hz): amplitude {a}, expected {want}"


def test_matches_reference_random():
    for seed, n, fs in ((11, 256, 100.0), (12, 301, 44.1), (13, 97, 8.0)):
        x = noise(seed, n)
        compare(run(x, fs), ref_spectrum(x, fs), max(map(abs, x)))


def test_dc_and_nyquist():
    n = 128
    x = [-1.75 + 0.5 * (-1) ** i for i in range(n)]
    rows = run(x, 256)
    assert abs(rows[0][1] - 1.75) < 1e-9 and abs(rows[-1][1] - 0.5) < 1e-9, (rows[0], rows[-1])
    assert abs(rows[-1][0] - 128.0) < 1e-9
    assert all(abs(a) < 1e-9 for _, a in rows[1:-1])
    odd = [3.0 + math.cos(2 * math.pi * 20 * i / 41) for i in range(41)]
    rows = run(odd, 41)
    assert len(rows) == 21 and abs(rows[20][1] - 1.0) < 1e-9 and abs(rows[0][1] - 3.0) < 1e-9


def test_hann_window():
    x = noise(21, 200)
    compare(run(x, 50, "--window", "hann"), ref_spectrum(x, 50, "hann"), max(map(abs, x)))
    n = 64
    tone = [math.cos(2 * math.pi * 8 * i / n) for i in range(n)]
    rows = run(tone, 64, "--window", "hann")
    assert abs(rows[8][1] - 1.0) < 1e-9 and abs(rows[7][1] - 0.5) < 1e-9 and abs(rows[9][1] - 0.5) < 1e-9


def test_peaks():
    n, fs = 300, 600.0
    rng = random.Random(5)
    tones = {12: 3.0, 45: 2.2, 101: 1.4, 140: 0.9}
    x = [sum(a * math.cos(2 * math.pi * k * i / n + k) for k, a in tones.items()) + 0.05 * rng.gauss(0, 1)
         for i in range(n)]
    got = run(x, fs, "--peaks", "3")
    want = sorted(ref_spectrum(x, fs), key=lambda r: -r[1])[:3]
    assert len(got) == 3, got
    compare(got, want, max(map(abs, x)))
    assert [round(g[0]) for g in got] == [24, 90, 202]
