"""Generated task families of the scientific category, continued: interp-table, a test-split
family, kept apart from the train families of :mod:`.scientific` so that its hidden tests share
neither their reference (:mod:`.support.h1_interp`) nor their harness (the cross-split rule)."""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import functions, h1_interp, source

FAMILIES: list[Family] = []

_HARNESS = '''"""Evaluates the agent's interpolation program on the given table and on hidden tables; every
value must match the reference interpolant (h1_interp.py, out of the agent's reach) within 1e-7."""

import json
import math
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

import h1_interp as ref

METHOD = __METHOD__
PROGRAM = __PROGRAM__
TOL = 1e-7


def evaluate(table):
    """The agent's values for ``table``, as a list of floats."""
    work = Path(tempfile.mkdtemp())
    (work / "table.json").write_text(json.dumps(table))
    proc = subprocess.run(["python3", PROGRAM, str(work / "table.json")], capture_output=True,
                          text=True, timeout=90, cwd=str(work))
    assert proc.returncode == 0, f"{PROGRAM} exited {proc.returncode}: {proc.stderr[-800:]}"
    try:
        values = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"{PROGRAM} did not print JSON: {proc.stdout[:300]!r}")
    return values


def agree(values, reference, label):
    assert isinstance(values, list), f"{label}: expected a JSON list, got {type(values).__name__}"
    assert len(values) == len(reference), f"{label}: {len(values)} values for {len(reference)} queries"
    for n, (v, r) in enumerate(zip(values, reference)):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        assert ok and abs(v - r) <= TOL * max(1.0, abs(r)), f"{label}, query {n}: {v!r}, want {r!r}"
__BODY__
'''

_INTERP = {
    "linear": "piecewise-linear interpolation between neighbouring table points",
    "spline": ("the natural cubic spline through the table points (piecewise cubic, continuous first "
               "and second derivatives, second derivative 0 at the first and last point)"),
    "monotone": ("monotone piecewise cubic Hermite interpolation: on [x_k, x_k+1] with h = x_k+1 - x_k "
                 "and t = (q - x_k)/h the value is `(2t^3-3t^2+1)*y_k + (t^3-2t^2+t)*h*s_k + "
                 "(-2t^3+3t^2)*y_k+1 + (t^3-t^2)*h*s_k+1`, where, with the secants "
                 "d_k = (y_k+1 - y_k)/h_k, the slopes are s_0 = d_0 and s_last = d_last at the ends and, "
                 "inside, s_k = 0 if d_k-1*d_k <= 0, else s_k = 3*(h_k-1 + h_k) / ((2*h_k + h_k-1)/d_k-1 "
                 "+ (h_k + 2*h_k-1)/d_k)"),
    "bilinear": "bilinear interpolation in the grid cell that holds the query point",
}

_INTERP_BODY = '''

def expected(data):
    if METHOD == "bilinear":
        return [ref.bilinear(data["grid"], q) for q in data["queries"]]
    return [ref.interp(METHOD, data["x"], data["y"], q) for q in data["queries"]]


def hidden_table(rng, messy):
    if METHOD == "bilinear":
        g = ref.grid_data(rng)
        qs = [[round(rng.uniform(-5, 55), 2), round(rng.uniform(-5, 55), 2)] for _ in range(30)]
        qs += [[g["x"][1], g["y"][2]], [g["x"][-1], g["y"][0]], [g["x"][0] - 3, g["y"][-1] + 1]]
        return {"grid": g, "queries": qs}
    xs, ys = ref.interp_table(rng, rng.randint(6, 25), dups=messy, scrambled=messy)
    qs = [round(rng.uniform(-10, 110), 3) for _ in range(30)] + xs[:3] + [min(xs), max(xs)]
    return {"x": xs, "y": ys, "queries": qs}


@pytest.mark.weight(1)
def test_given_values_file():
    given = json.loads(Path(__file__).with_name("given.json").read_text())
    agree(json.loads(Path("/app/values.json").read_text()), expected(given), "/app/values.json")


@pytest.mark.weight(2)
def test_hidden_tables():
    rng = random.Random(2718)
    for t in range(3):
        data = hidden_table(rng, False)
        agree(evaluate(data), expected(data), f"hidden table {t}")


@pytest.mark.weight(2)
def test_hidden_messy_tables():
    rng = random.Random(1618)
    for t in range(3):
        data = hidden_table(rng, True)
        agree(evaluate(data), expected(data), f"hidden messy table {t}")
'''


def _interp_table(rng: random.Random, index: int) -> Instance:
    method = rng.choices(["linear", "spline", "monotone", "bilinear"], [2, 4, 3, 2])[0]
    messy = method != "bilinear" and rng.random() < 0.6
    if method == "bilinear":
        g = h1_interp.grid_data(rng)
        qs = [[round(rng.uniform(-5, 55), 2), round(rng.uniform(-5, 55), 2)] for _ in range(12)]
        data = {"grid": g, "queries": qs}
        layout = ("`{\"grid\": {\"x\": [...], \"y\": [...], \"z\": [[...], ...]}, \"queries\": [[qx, qy], ...]}`: "
                  "`x` and `y` are increasing, and `z[j][i]` is the value at `(x[i], y[j])`. A query "
                  "outside the grid is first moved to the nearest point of the grid's rectangle "
                  "(each coordinate clamped to its range)")
    else:
        xs, ys = h1_interp.interp_table(rng, rng.randint(6, 14), dups=messy, scrambled=messy)
        data = {"x": xs, "y": ys, "queries": [round(rng.uniform(-10, 110), 3) for _ in range(15)]}
        layout = ("`{\"x\": [...], \"y\": [...], \"queries\": [...]}`: a table of points `(x[i], y[i])` and "
                  "the x values to evaluate. The table is not necessarily sorted by x, and an x can "
                  "occur more than once: such points are replaced by one point with the mean of their "
                  "y values before anything else. A query below the smallest x gets the first y, one "
                  "above the largest x the last y")
    instruction = f"""\
`/app/table.json` holds {layout}.

Write `/app/interp.py`, a Python 3 program (standard library only; no numpy or scipy) that reads a
file like `/app/table.json` named by its one argument and prints a JSON list with the value of
{_INTERP[method]} at each query, in order, within 1e-7. Run it on `/app/table.json` and save the output
to `/app/values.json`. It will also be run on other tables.
"""
    funcs = ("bilinear",) if method == "bilinear" else ("merge_table", "spline_m", "interp")
    call = ("[bilinear(d['grid'], q) for q in d['queries']]" if method == "bilinear" else
            f"[interp({method!r}, d['x'], d['y'], q) for q in d['queries']]")
    solution = f"""cat > /app/interp.py <<'PY'
import json, sys
{functions(h1_interp, *funcs)}


d = json.load(open(sys.argv[1]))
print(json.dumps({call}))
PY
python3 /app/interp.py /app/table.json > /app/values.json
"""
    difficulty = {"linear": "easy", "bilinear": "medium", "monotone": "medium", "spline": "medium"}[method]
    if messy:
        difficulty = {"linear": "medium", "monotone": "hard", "spline": "hard"}[method]
    tests = (_HARNESS.replace("__METHOD__", repr(method)).replace("__PROGRAM__", repr("/app/interp.py"))
             .replace("__BODY__", _INTERP_BODY))
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{method}/{'messy' if messy else 'clean'}",
        files={"table.json": json.dumps(data, indent=1) + "\n"},
        test_files={"h1_interp.py": source(h1_interp), "given.json": json.dumps(data)},
        tags=("numerics", "interpolation"), oracle_turns=2)


FAMILIES.append(Family("interp-table", "scientific", "test",
                       "values of an interpolant (linear, natural spline, monotone Hermite, bilinear) "
                       "of a possibly unsorted table with repeated x, on hidden tables", _interp_table))
