"""Generated task families of the debugging category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support import h2_pybugs, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ py-tool-bugfix
# A small Python command-line tool (one of four) with one to three bugs from its catalogue. The
# tests run the agent's fixed tool and the reference on hidden inputs that exercise every bug site.

_PY_TESTS = '''"""Runs the fixed tool and the reference on hidden inputs that exercise every bug site."""

import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h2_pybugs import make_input, render

TOOL = __TOOL__
PROGRAM = __PROGRAM__


def outputs(seed, size):
    rng = random.Random(seed)
    text, args = make_input(TOOL, rng, size)
    d = Path(tempfile.mkdtemp())
    (d / "input.txt").write_text(text)
    (d / "ref.py").write_text(render(TOOL, ()))
    want = subprocess.run(["python3", str(d / "ref.py"), str(d / "input.txt"), *args],
                          capture_output=True, text=True, timeout=60)
    got = subprocess.run(["python3", PROGRAM, str(d / "input.txt"), *args], capture_output=True,
                         text=True, timeout=60, cwd=str(d))
    assert got.returncode == 0, f"exit {got.returncode}: {got.stderr[-800:]}"
    return got.stdout, want.stdout


@pytest.mark.weight(1)
def test_small_inputs():
    for seed in (11, 12, 13):
        got, want = outputs(seed, 1)
        assert got == want, f"wrong output on a small input:\\n{got}\\nexpected:\\n{want}"


@pytest.mark.weight(2)
def test_hidden_inputs():
    for seed in range(100, 106):
        got, want = outputs(seed, 2)
        assert got == want, f"wrong output on hidden input {seed - 100}"


@pytest.mark.weight(1)
def test_larger_inputs():
    for seed in (900, 901, 902):
        got, want = outputs(seed, 4)
        assert got == want, "wrong output on a larger input"
'''


def _py_tool_bugfix(rng: random.Random, index: int) -> Instance:
    tool = rng.choice(sorted(h2_pybugs.TOOLS))
    nbugs = rng.choice([1, 1, 2, 2, 3])
    bugs = sorted(rng.sample(h2_pybugs.bug_sites(tool), nbugs))
    told = bugs if nbugs < 3 else [rng.choice(bugs)]
    spec = h2_pybugs.TOOLS[tool]
    path = f"/app/{tool}/{spec['file']}"
    text, args = h2_pybugs.make_input(tool, rng, 2)
    reports = "\n".join(f"- {h2_pybugs.symptom(tool, b)}" for b in told)
    more = ("" if nbugs < 3 else
            "\nThat is the only report so far, but the tool has not been reviewed against its "
            "specification; do not assume it is the only defect.\n")
    usage = f"python3 {path} FILE" + (" N" if tool == "topwords" else "")
    try_it = f"python3 {path} /app/{tool}/sample.txt {' '.join(args)}".strip()
    instruction = f"""\
`{path}` is a small command-line tool; its module docstring is its specification. A sample
input is in `/app/{tool}/sample.txt` (try `{try_it}`).

Users report:
{reports}
{more}
Fix `{path}` so that `{usage}` prints exactly what the docstring
specifies, for any valid input file. Keep the command line and the output format; use only the Python standard library. The
tool will be run on other inputs than the sample.
"""
    solution = f"cat > {path} <<'EOF_FIXED'\n{h2_pybugs.render(tool, ())}EOF_FIXED\n"
    tests = _PY_TESTS.replace("__TOOL__", repr(tool)).replace("__PROGRAM__", repr(path))
    difficulty = {1: "easy", 2: "medium", 3: "hard"}[nbugs]
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{tool}/{'+'.join(bugs)}",
        files={f"{tool}/{spec['file']}": h2_pybugs.render(tool, bugs), f"{tool}/sample.txt": text},
        test_files={"h2_pybugs.py": source(h2_pybugs)},
        tags=("python", "bugfix", tool), oracle_turns=1,
    )


FAMILIES.append(Family("py-tool-bugfix", "debugging", "train",
                       "one to three catalogued bugs (off-by-one, anchoring, mutable default, "
                       "shadowing, ...) in one of four small Python tools, checked on hidden inputs",
                       _py_tool_bugfix))
