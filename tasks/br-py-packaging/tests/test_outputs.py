# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Imports and runs unitconv from foreign working directories on hidden conversions."""

import json
import math
import os
import random
import subprocess
import tempfile
from pathlib import Path

SRC = "/app/unitconv/src"
UNITS = {
    "length": {"m": (1, 0), "km": (1000, 0), "cm": (0.01, 0), "mm": (0.001, 0), "mi": (1609.344, 0),
               "yd": (0.9144, 0), "ft": (0.3048, 0), "in": (0.0254, 0), "nmi": (1852, 0)},
    "mass": {"kg": (1, 0), "g": (0.001, 0), "mg": (1e-06, 0), "t": (1000, 0), "lb": (0.45359237, 0),
             "oz": (0.028349523125, 0)},
    "time": {"s": (1, 0), "ms": (0.001, 0), "min": (60, 0), "h": (3600, 0), "d": (86400, 0),
             "wk": (604800, 0)},
    "temperature": {"K": (1, 0), "C": (1, 273.15), "F": (5 / 9, 273.15 - 32 * 5 / 9)},
}


def env(pythonpath: str | None) -> dict:
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        e["PYTHONPATH"] = pythonpath
    return e


def py(code: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["python3", "-c", code], cwd=cwd, env=env(SRC), capture_output=True,
                          text=True, timeout=30)


def expected(v, src, dst):
    kind = next(k for k, t in UNITS.items() if src in t)
    (s1, o1), (s2, o2) = UNITS[kind][src], UNITS[kind][dst]
    return ((v * s1 + o1) - o2) / s2


def hidden_cases(seed, n):
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        kind = rng.choice(list(UNITS))
        a, b = rng.choice(list(UNITS[kind])), rng.choice(list(UNITS[kind]))
        v = round(rng.uniform(-500, 5000), rng.randint(0, 3))
        cases.append((v, a, b))
    return cases


def test_import_api():
    cases = hidden_cases(1201, 150)
    code = ("import json, unitconv\n"
            f"cases = {cases!r}\n"
            "print(json.dumps({'v': [unitconv.convert(*c) for c in cases],"
            " 'time': unitconv.units('time'), 'all': unitconv.units(),"
            " 'version': unitconv.__version__}))")
    r = py(code, tempfile.mkdtemp())
    assert r.returncode == 0, f"import/convert failed from another directory:\n{r.stderr[-1500:]}"
    got = json.loads(r.stdout)
    for c, v in zip(cases, got["v"]):
        assert math.isclose(v, expected(*c), rel_tol=1e-9, abs_tol=1e-9), f"convert{c} = {v}"
    assert got["time"] == sorted(UNITS["time"])
    assert got["all"] == sorted(u for t in UNITS.values() for u in t)
    assert got["version"] == "1.4.0"


def test_errors():
    code = ("import unitconv\n"
            "assert issubclass(unitconv.UnitError, ValueError)\n"
            "for a, b in [('km', 'kg'), ('C', 's'), ('parsec', 'm'), ('m', 'furlong')]:\n"
            "    try:\n"
            "        unitconv.convert(1, a, b)\n"
            "    except unitconv.UnitError:\n"
            "        print('raised')\n")
    r = py(code, "/")
    assert r.returncode == 0, r.stderr[-1500:]
    assert r.stdout.split() == ["raised"] * 4


def run_cli(argv_prefix, args, cwd, pythonpath):
    return subprocess.run([*argv_prefix, *args], cwd=cwd, env=env(pythonpath), capture_output=True,
                          text=True, timeout=30)


def check_cli(argv_prefix, pythonpath, seed, n):
    cwd = tempfile.mkdtemp()
    for v, a, b in hidden_cases(seed, n):
        r = run_cli(argv_prefix, [str(v), a, b], cwd, pythonpath)
        assert r.returncode == 0, f"{v} {a} {b}: exit {r.returncode}: {r.stderr[-800:]}"
        num, unit = r.stdout.split()
        assert unit == b
        assert math.isclose(float(num), expected(v, a, b), rel_tol=1e-5, abs_tol=1e-9), \
            f"{v} {a} -> {b}: {r.stdout.strip()}"
    for bad in (["3", "km", "s"], ["x", "m", "km"], ["1", "m"]):
        r = run_cli(argv_prefix, bad, cwd, pythonpath)
        assert r.returncode == 2 and r.stdout == "", f"{bad}: expected exit 2 and no output"


def test_module_entry():
    check_cli(["python3", "-m", "unitconv"], SRC, 1301, 25)


def test_wrapper_script():
    check_cli(["/app/unitconv/bin/unitconv"], None, 1401, 8)
    d = Path(tempfile.mkdtemp())
    (d / "uc").symlink_to("/app/unitconv/bin/unitconv")
    check_cli([str(d / "uc")], None, 1402, 8)
