# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Builds a copy of /app/sizestat and runs it on hidden size lists."""

import math
import random
import shutil
import subprocess
import tempfile
from fractions import Fraction
from pathlib import Path

_CACHE: dict[str, Path] = {}


def exe() -> Path:
    if "x" not in _CACHE:
        d = Path(tempfile.mkdtemp()) / "sizestat"
        shutil.copytree("/app/sizestat", d)
        (d / "sizestat").unlink(missing_ok=True)
        r = subprocess.run(["make"], cwd=d, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"make failed:\n{r.stderr[-1500:]}"
        _CACHE["x"] = d / "sizestat"
    return _CACHE["x"]


def run(values, extra_lines=()) -> dict:
    f = Path(tempfile.mkdtemp()) / "sizes.txt"
    lines = [str(v) for v in values]
    for pos, text in extra_lines:
        lines.insert(pos, text)
    f.write_text("".join(x + "\n" for x in lines))
    r = subprocess.run([str(exe()), str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"exit status {r.returncode}: {r.stderr[-500:]}"
    out = {}
    for line in r.stdout.splitlines():
        k, _, val = line.partition(" ")
        out[k] = val
    return out, r.stdout


def stats(values):
    n, s = len(values), sum(values)
    var = Fraction(n * sum(v * v for v in values) - s * s, n * n)
    return {"count": n, "total": s, "min": min(values), "max": max(values),
            "mean": s / n, "median": sorted(values)[(n - 1) // 2], "stddev": math.sqrt(var)}


def typical_sizes(seed, n, hi):
    rng = random.Random(seed)
    return [min(hi, int(rng.lognormvariate(12, 4))) for _ in range(n)]


def test_totals():
    for seed, n, hi in ((41, 20000, 8_000_000_000), (42, 3000, 10**15)):
        values = typical_sizes(seed, n, hi)
        got, _ = run(values, [(5, "# comment"), (9, "")])
        want = stats(values)
        for k in ("count", "total", "min", "max"):
            assert got.get(k) == str(want[k]), f"{k}: got {got.get(k)}, want {want[k]}"


def test_median():
    rng = random.Random(43)
    for n in (999, 1000, 4001):
        values = [rng.choice([rng.randint(0, 4096), rng.randint(0, 4 * 10**12)]) for _ in range(n)]
        got, _ = run(values)
        assert got.get("median") == str(stats(values)["median"]), f"median of {n} values"


def close(text, want):
    return text is not None and abs(float(text) - want) <= max(0.0051, abs(want) * 1e-12)


def test_mean_stddev():
    rng = random.Random(44)
    cases = [[10**12 + rng.randint(-10**9, 10**9) for _ in range(50000)],
             typical_sizes(45, 30000, 10**13)]
    for values in cases:
        got, _ = run(values)
        want = stats(values)
        assert close(got.get("mean"), want["mean"]), f"mean: got {got.get('mean')}, want {want['mean']:.2f}"
        assert close(got.get("stddev"), want["stddev"]), \
            f"stddev: got {got.get('stddev')}, want {want['stddev']:.2f}"


def test_edge_cases():
    got, text = run([], [(0, "# nothing here")])
    assert text == "count 0\ntotal 0\n", f"empty input printed {text!r}"
    for values in ([10**15], [0], [10**15, 10**15 + 2, 10**15 + 4], [7, 3]):
        got, _ = run(values)
        want = stats(values)
        for k in ("count", "total", "min", "max", "median"):
            assert got.get(k) == str(want[k]), f"{values}: {k} = {got.get(k)}"
        assert close(got.get("mean"), want["mean"]) and close(got.get("stddev"), want["stddev"]), values
