"""Generated task families of the scientific category (see :mod:`.base` for what a family is).

Each family asks for a Python program ``/app/<name>.py INPUT.json`` that prints JSON; the hidden
tests run it on the given input (its expected answer computed from a copy the agent cannot
rewrite) and on hidden inputs, comparing with :mod:`.support.h1_num`'s reference within
tolerances. interp-table, a test-split family, is in :mod:`.scientific_2`, with a reference and
tests of its own.
"""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import functions, h1_num, source

FAMILIES: list[Family] = []

_TESTS = '''"""Runs the agent's program on the given input and on hidden inputs; compares with the reference."""

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

import h1_num as ref

KIND = __KIND__
HARD = __HARD__
PROGRAM = __PROGRAM__


def run(data):
    d = Path(tempfile.mkdtemp())
    (d / "in.json").write_text(json.dumps(data))
    r = subprocess.run(["python3", PROGRAM, str(d / "in.json")], capture_output=True, text=True,
                       timeout=90, cwd=str(d))
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}"
    try:
        return json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"output is not JSON: {r.stdout[:300]!r}")


def close(got, want, rel, abs_tol, where="$"):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            close(g, w, rel, abs_tol, f"{where}[{i}]")
        return
    assert isinstance(got, (int, float)) and not isinstance(got, bool), f"{where}: {got!r} is not a number"
    assert abs(got - want) <= max(rel * abs(want), abs_tol), f"{where}: {got!r}, expected {want!r}"

__BODY__
'''


def _sci_instance(kind, hard, program, body, given, answers_file, instruction, solution, difficulty,
                  variant, input_name, tags):
    tests = (_TESTS.replace("__KIND__", repr(kind)).replace("__HARD__", repr(hard))
             .replace("__PROGRAM__", repr(program)).replace("__BODY__", body))
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty, variant=variant,
        files={input_name: json.dumps(given, indent=1) + "\n"},
        test_files={"h1_num.py": source(h1_num), "given.json": json.dumps(given)},
        tags=tags, oracle_turns=2)


# ------------------------------------------------------------------ root-solve

_ROOT_TASKS = {
    "irr": ("the internal rate of return of each cash-flow series: `flows[t]` is paid (negative) or "
            "received (positive) at the end of year `t` (`flows[0]` now). The answer is the rate `r > -0.99` "
            "at which the net present value `sum(flows[t] / (1 + r) ** t)` is zero (every series has "
            "exactly one such rate); print it as a fraction (0.05 for 5%)"),
    "kepler": ("the eccentric anomaly `E` (radians) solving Kepler's equation `E - e*sin(E) = M` for "
               "each case's mean anomaly `M` (radians, any real number, not reduced to [0, 2*pi)) and "
               "eccentricity `e` (0 <= e < 1). The equation has exactly one real solution"),
    "quantile": ("the `p`-quantile of the normal distribution with mean `mu` and standard deviation `sigma`: "
                 "the `x` with `P(X <= x) = p`"),
    "cubic": ("all real roots of the cubic `a*x^3 + b*x^2 + c*x + d` for each case's `coef = [a, b, c, d]` "
              "(a is never 0; the roots are simple), as a list in increasing order (one or three numbers)"),
}

_ROOT_BODY = '''
TOL = {"irr": (1e-9, 1e-8), "kepler": (1e-9, 1e-8), "cubic": (1e-7, 1e-7)}.get(KIND, (1e-7, 0))


def check(cases, got):
    assert isinstance(got, list) and len(got) == len(cases), "one answer per case, in order"
    for i, case in enumerate(cases):
        want = ref.root_answer(KIND, case)
        abs_tol = TOL[1] if KIND != "quantile" else 1e-7 * case["sigma"]
        close(got[i], want, TOL[0], abs_tol, f"case {i} {case}")


@pytest.mark.weight(1)
def test_given_answers_file():
    given = json.loads(Path(__file__).with_name("given.json").read_text())
    check(given["cases"], json.loads(Path("/app/answers.json").read_text()))


@pytest.mark.weight(2)
def test_hidden_cases():
    rng = random.Random(4242)
    cases = ref.root_cases(KIND, rng, 25)
    check(cases, run({"cases": cases}))


@pytest.mark.weight(2)
def test_hidden_hard_cases():
    rng = random.Random(777)
    cases = ref.root_cases(KIND, rng, 25, hard=True)
    check(cases, run({"cases": cases}))
'''


def _root_solve(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_ROOT_TASKS))
    hard = kind != "cubic" and rng.random() < 0.5
    cases = h1_num.root_cases(kind, rng, rng.randint(8, 14), hard=False)
    notes = {
        "irr": (" Some series are long (up to 30 years) and some rates are negative (down to -50%)."
                if hard else ""),
        "kepler": (" Eccentricities go up to 0.995 and `M` can be far outside [0, 2*pi)." if hard else ""),
        "quantile": (" `p` can be as close to 0 or 1 as 1e-13; the answer must still be accurate."
                     if hard else ""),
        "cubic": "",
    }[kind]
    tol = {"quantile": "within 1e-7 relative (or 1e-7*sigma absolute)",
           "cubic": "within 1e-7"}.get(kind, "within 1e-9 relative (or 1e-8 absolute)")
    instruction = f"""\
`/app/cases.json` holds a JSON object `{{"cases": [...]}}`. For each case, compute {_ROOT_TASKS[kind]}.{notes}

Write `/app/solve.py`, a Python 3 program (standard library only; there is no numpy) that reads a
file like `/app/cases.json` named by its one argument and prints a JSON list with one answer per
case, in order. Answers must be accurate {tol}. Run it on `/app/cases.json` and save its output to
`/app/answers.json`. Your program will also be run on other cases of the same kind.
"""
    solution = f"""cat > /app/solve.py <<'PY'
import json, math, sys
{functions(h1_num, "npv", "bisect", "norm_cdf", "root_answer")}


cases = json.load(open(sys.argv[1]))["cases"]
print(json.dumps([root_answer({kind!r}, c) for c in cases]))
PY
python3 /app/solve.py /app/cases.json > /app/answers.json
"""
    difficulty = {"irr": "easy", "kepler": "medium", "cubic": "medium", "quantile": "medium"}[kind]
    if hard:
        difficulty = {"irr": "medium", "kepler": "medium", "quantile": "hard"}[kind]
    return _sci_instance(kind, hard, "/app/solve.py", _ROOT_BODY, {"cases": cases}, "answers.json",
                         instruction, solution, difficulty, f"{kind}/{'stiff' if hard else 'plain'}",
                         "cases.json", ("numerics", "root-finding"))


FAMILIES.append(Family("root-solve", "scientific", "train",
                       "roots to tolerance (IRR, Kepler's equation, normal quantiles, cubic roots) by a "
                       "program run on hidden cases, some near the method's weak spots", _root_solve))


# ------------------------------------------------------------------ ode-states

_ODE_MODELS = {
    "decay-chain": ("a radioactive decay chain A -> B -> C: `dA/dt = -k1*A`, `dB/dt = k1*A - k2*B`, "
                    "`dC/dt = k2*B`; the state is `[A, B, C]`", "k1, k2"),
    "damped-spring": ("a driven damped oscillator: `x'' = -2*zeta*omega*x' - omega^2*x + "
                      "force*cos(drive*t)`; the state is `[x, x']`", "omega, zeta, force, drive"),
    "predator-prey": ("a Lotka-Volterra system: `dx/dt = a*x - b*x*y`, `dy/dt = d*x*y - c*y`; the "
                      "state is `[x, y]`", "a, b, c, d"),
    "pendulum": ("a damped pendulum (no small-angle approximation): `theta'' = -(g/L)*sin(theta) - "
                 "damp*theta'`; the state is `[theta, theta']`", "g, L, damp"),
}

_ODE_BODY = '''

def check(cases, got):
    assert isinstance(got, list) and len(got) == len(cases), "one answer per case, in order"
    for i, case in enumerate(cases):
        close(got[i], ref.ode_answer(KIND, case), 1e-5, 1e-6, f"case {i}")


@pytest.mark.weight(1)
def test_given_states_file():
    given = json.loads(Path(__file__).with_name("given.json").read_text())
    check(given["cases"], json.loads(Path("/app/states.json").read_text()))


@pytest.mark.weight(2)
def test_hidden_systems():
    rng = random.Random(5150)
    cases = [ref.ode_case(KIND, rng) for _ in range(4)]
    check(cases, run({"cases": cases}))


@pytest.mark.weight(2 if HARD else 1)
def test_times_in_any_order():
    rng = random.Random(99)
    cases = [ref.ode_case(KIND, rng, shuffled=True) for _ in range(3)]
    check(cases, run({"cases": cases}))
'''


def _ode_states(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_ODE_MODELS))
    hard = rng.random() < 0.4
    cases = [h1_num.ode_case(kind, rng, shuffled=hard) for _ in range(rng.randint(2, 4))]
    model, names = _ODE_MODELS[kind]
    order = ("The `times` of a case are NOT sorted and may repeat or include 0 (the initial state); "
             "answer them in the order given." if hard else
             "The `times` of a case are increasing (they may also come unsorted in other inputs; "
             "answer them in the order given).")
    instruction = f"""\
`/app/systems.json` holds `{{"cases": [...]}}`; each case describes {model}. A case has
`params` (the numbers {names}), `y0` (the state at t = 0) and `times` (a list of times t >= 0).
{order}

Write `/app/simulate.py`, a Python 3 program (standard library only; no numpy or scipy) that reads
a file like `/app/systems.json` named by its one argument and prints a JSON list with, for each
case, the list of states at its `times` (each state a list of numbers, as `y0`). Every component
must be within 1e-5 relative (or 1e-6 absolute) of the exact solution. Run it on
`/app/systems.json` and save the output to `/app/states.json`. It will also be run on other cases.
"""
    solution = f"""cat > /app/simulate.py <<'PY'
import json, math, sys
{functions(h1_num, "ode_rhs", "rk4", "ode_answer")}


cases = json.load(open(sys.argv[1]))["cases"]
print(json.dumps([ode_answer({kind!r}, c) for c in cases]))
PY
python3 /app/simulate.py /app/systems.json > /app/states.json
"""
    difficulty = "easy" if kind == "decay-chain" and not hard else "medium"
    return _sci_instance(kind, hard, "/app/simulate.py", _ODE_BODY, {"cases": cases}, "states.json",
                         instruction, solution, difficulty, f"{kind}/{'unsorted' if hard else 'sorted'}",
                         "systems.json", ("numerics", "ode"))


FAMILIES.append(Family("ode-states", "scientific", "train",
                       "states of an ODE system (decay chain, driven oscillator, Lotka-Volterra, "
                       "pendulum) at requested times, to tolerance, on hidden systems", _ode_states))


# ------------------------------------------------------------------ curve-fit

_FITS = {
    "line": ("the straight line `y = a + b*x` minimising the sum of squared residuals", "[a, b]"),
    "quadratic": ("the parabola `y = a + b*x + c*x^2` minimising the sum of squared residuals", "[a, b, c]"),
    "origin": ("the line through the origin `y = b*x` minimising the sum of squared residuals", "[b]"),
    "exp": ("the exponential `y = A*exp(B*x)` whose logarithm `ln y = ln A + B*x` minimises the sum of "
            "squared residuals of `ln y` (all y are positive)", "[A, B]"),
    "weighted": ("the straight line `y = a + b*x` minimising the weighted sum of squared residuals "
                 "`sum(w_i * (y_i - a - b*x_i)^2)`, with the weights `w`", "[a, b]"),
}

_FIT_BODY = '''

def expected(data):
    kind = "line" if KIND == "weighted" else KIND
    return ref.fit(kind, data["x"], data["y"], data["w"] if KIND == "weighted" else None)


def dataset(rng, offset):
    xs, ys, ws = ref.fit_data("line" if KIND == "weighted" else KIND, rng, rng.randint(8, 60), offset)
    return {"x": xs, "y": ys, "w": ws} if KIND == "weighted" else {"x": xs, "y": ys}


@pytest.mark.weight(1)
def test_given_fit_file():
    given = json.loads(Path(__file__).with_name("given.json").read_text())
    close(json.loads(Path("/app/fit.json").read_text()), expected(given), 1e-6, 1e-9)


@pytest.mark.weight(2)
def test_hidden_datasets():
    rng = random.Random(31337)
    for _ in range(4):
        data = dataset(rng, 0.0)
        close(run(data), expected(data), 1e-6, 1e-9)


@pytest.mark.weight(2 if HARD else 1)
def test_large_x_values():
    rng = random.Random(8080)
    for offset in (1e4, 1e5):
        data = dataset(rng, offset)
        close(run(data), expected(data), 1e-6, 1e-9, f"x around {offset:g}")
'''


def _curve_fit(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_FITS))
    hard = rng.random() < 0.5
    offset = rng.choice([1e4, 5e4, 1e5]) if hard else 0.0
    xs, ys, ws = h1_num.fit_data("line" if kind == "weighted" else kind, rng, rng.randint(12, 40), offset)
    data = {"x": xs, "y": ys, "w": ws} if kind == "weighted" else {"x": xs, "y": ys}
    what, shape = _FITS[kind]
    instruction = f"""\
`/app/data.json` holds measurements `{{"x": [...], "y": [...]{', "w": [...]' if kind == "weighted" else ''}}}`.
Find {what}.

Write `/app/fit.py`, a Python 3 program (standard library only; no numpy) that reads a file like
`/app/data.json` named by its one argument and prints the coefficients as a JSON list `{shape}`,
each within 1e-6 relative of the exact least-squares solution. Run it on `/app/data.json` and save
the output to `/app/fit.json`. It will also be run on other data sets, with x values that may be
large (around 1e5) compared with their spread.
"""
    call = ("fit('line', d['x'], d['y'], d['w'])" if kind == "weighted" else f"fit({kind!r}, d['x'], d['y'])")
    solution = f"""cat > /app/fit.py <<'PY'
import json, math, sys
{functions(h1_num, "solve", "fit")}


d = json.load(open(sys.argv[1]))
print(json.dumps({call}))
PY
python3 /app/fit.py /app/data.json > /app/fit.json
"""
    difficulty = {"line": "easy", "origin": "easy", "exp": "medium", "weighted": "medium",
                  "quadratic": "medium"}[kind]
    if hard and kind in ("quadratic", "weighted"):
        difficulty = "hard" if kind == "quadratic" else "medium"
    return _sci_instance(kind, hard, "/app/fit.py", _FIT_BODY, data, "fit.json", instruction, solution,
                         difficulty, f"{kind}/{'offset' if hard else 'centred'}", "data.json",
                         ("numerics", "least-squares"))


FAMILIES.append(Family("curve-fit", "scientific", "train",
                       "least-squares coefficients (line, parabola, through origin, exponential, "
                       "weighted) to 1e-6, on hidden data with badly conditioned x", _curve_fit))
