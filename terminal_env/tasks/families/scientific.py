"""Generated task families of the scientific category (see :mod:`.base` for what a family is).

Each family asks for a Python program ``/app/<name>.py INPUT.json`` that prints JSON; the hidden
tests run it on the given input (its expected answer computed from a copy the agent cannot
rewrite) and on hidden inputs, comparing with :mod:`.support.h1_num`'s reference within tolerances.
"""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import h1_num, source

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


def _ref_func(*names: str) -> str:
    """Reference functions copied out of h1_num for the oracle's program."""
    text = source(h1_num)
    parts = []
    for name in names:
        start = text.index(f"def {name}(")
        end = text.find("\ndef ", start + 1)
        parts.append(text[start:end if end > 0 else len(text)].rstrip())
    return "\n\n\n".join(parts)


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
{_ref_func("npv", "bisect", "norm_cdf", "root_answer")}


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
