# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Configures and builds a clean copy of /app/geo; runs geodist and the library on hidden points."""

import math
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

SRC = Path("/app/geo")
_CACHE: dict[str, Path] = {}


def built() -> Path:
    if "d" not in _CACHE:
        d = Path(tempfile.mkdtemp(prefix="geo-")) / "geo"
        shutil.copytree(SRC, d, symlinks=True,
                        ignore=shutil.ignore_patterns("build", "CMakeCache.txt", "CMakeFiles"))
        r = subprocess.run(["cmake", "-S", str(d), "-B", str(d / "build")], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, f"configure failed:\n{r.stdout[-1000:]}\n{r.stderr[-1500:]}"
        r = subprocess.run(["cmake", "--build", str(d / "build")], capture_output=True, text=True,
                           timeout=180)
        assert r.returncode == 0, f"build failed:\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
        _CACHE["d"] = d
    return _CACHE["d"]


def haversine(a, b):
    p1, p2 = math.radians(a[0]), math.radians(b[0])
    dp, dl = p2 - p1, math.radians(b[1] - a[1])
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(min(h, 1.0)))


def bearing(a, b):
    p1, p2, dl = math.radians(a[0]), math.radians(b[0]), math.radians(b[1] - a[1])
    y = math.sin(dl) * math.cos(p2)
    x = math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl)
    return math.fmod(math.degrees(math.atan2(y, x)) + 360.0, 360.0)


def hidden_pairs(seed: int, n: int):
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < n:
        a = (round(rng.uniform(-89, 89), 4), round(rng.uniform(-179.9, 179.9), 4))
        b = (round(rng.uniform(-89, 89), 4), round(rng.uniform(-179.9, 179.9), 4))
        if haversine(a, b) > 5:
            pairs.append((a, b))
    return pairs


def run_geodist(lines):
    exe = built() / "build" / "geodist"
    r = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr[-500:]
    out = r.stdout.splitlines()
    assert len(out) == len(lines), f"expected {len(lines)} lines, got {len(out)}"
    return out


def parse(line):
    t = line.split()
    assert len(t) == 8 and t[1] == "km" and t[3] == "mi" and t[5] == "nmi" and t[7] == "deg", line
    return float(t[0]), float(t[2]), float(t[4]), float(t[6])


def test_configure_and_build():
    exe = built() / "build" / "geodist"
    assert exe.is_file(), "build/geodist was not produced"
    out = run_geodist(["0 0 0 1", "91 0 0 0", "1 2 3"])
    assert out[1] == "error" and out[2] == "error"


def test_distance_and_bearing():
    pairs = hidden_pairs(5150, 120)
    out = run_geodist([f"{a[0]} {a[1]} {b[0]} {b[1]}" for a, b in pairs])
    for (a, b), line in zip(pairs, out):
        km, _, _, deg = parse(line)
        assert abs(km - haversine(a, b)) < 0.002, f"{a} {b}: km {km}"
        diff = abs(deg - bearing(a, b)) % 360
        assert min(diff, 360 - diff) < 0.06, f"{a} {b}: bearing {deg}"


def test_unit_conversions():
    pairs = hidden_pairs(6262, 80)
    out = run_geodist([f"{a[0]} {a[1]} {b[0]} {b[1]}" for a, b in pairs])
    for (a, b), line in zip(pairs, out):
        km, mi, nmi, _ = parse(line)
        assert abs(mi - haversine(a, b) / 1.609344) < 0.002, f"{a} {b}: miles {mi}"
        assert abs(nmi - haversine(a, b) / 1.852) < 0.002, f"{a} {b}: nautical miles {nmi}"


LIB_PROGRAM = r"""
#include <stdio.h>
#include <geomath/geo.h>
int main(void) {
    geo_point a, b;
    while (scanf("%lf %lf %lf %lf", &a.lat, &a.lon, &b.lat, &b.lon) == 4)
        printf("%.6f %.6f\n", geo_haversine_km(a, b), geo_bearing_deg(a, b));
    return 0;
}
"""


def test_static_library():
    d = built()
    libs = sorted((d / "build").rglob("libgeomath.a"))
    assert libs, "no libgeomath.a under build/"
    work = Path(tempfile.mkdtemp(prefix="geolib-"))
    (work / "t.c").write_text(LIB_PROGRAM)
    r = subprocess.run(["gcc", "-I", str(d / "include"), str(work / "t.c"), str(libs[0]), "-lm",
                        "-o", str(work / "t")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"cannot link a program against libgeomath.a:\n{r.stderr[-1500:]}"
    pairs = hidden_pairs(7373, 50)
    r = subprocess.run([str(work / "t")], input="\n".join(f"{a[0]} {a[1]} {b[0]} {b[1]}" for a, b in pairs),
                       capture_output=True, text=True, timeout=30)
    out = r.stdout.splitlines()
    assert len(out) == len(pairs)
    for (a, b), line in zip(pairs, out):
        km, deg = map(float, line.split())
        assert abs(km - haversine(a, b)) < 1e-4
        diff = abs(deg - bearing(a, b)) % 360
        assert min(diff, 360 - diff) < 1e-4
