"""Generated task families of the debugging category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import gzip
import random
import re

from .base import Family, Instance
from .support import functions, h2_cbugs, h2_league, h2_pybugs, h2_shbugs, source

FAMILIES: list[Family] = []

_TIER = """

@pytest.mark.weight({weight})
def {name}():
    for seed in {seeds}:
{body}"""


def _tiers(call: str, *tiers: tuple[str, int, str, int, str]) -> str:
    """The text of weighted test functions that run ``call(seed, size)`` over seeds, one per
    (test name, weight, seeds, size, failure message): with a message, ``call`` returns the
    outputs of the agent's program and of the reference, which must be equal; without, it
    checks them itself."""
    out = []
    for name, weight, seeds, size, message in tiers:
        body = (f"        got, want = {call}(seed, {size})\n        assert got == want, {message}\n"
                if message else f"        {call}(seed, {size})\n")
        out.append(_TIER.format(name=name, weight=weight, seeds=seeds, body=body))
    return "".join(out)


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
'''
_PY_TESTS += _tiers(
    "outputs",
    ("test_small_inputs", 1, "(11, 12, 13)", 1,
     r'f"wrong output on a small input:\n{got}\nexpected:\n{want}"'),
    ("test_hidden_inputs", 2, "range(100, 106)", 2, 'f"wrong output on hidden input {seed - 100}"'),
    ("test_larger_inputs", 1, "(900, 901, 902)", 4, '"wrong output on a larger input"'))


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

# ------------------------------------------------------------------ c-prog-bugfix
# A small C program (one of three) with one to three bugs from its catalogue (string compare by
# pointer, char vs EOF, floor division, aliased buffers, ...). The tests compile the agent's
# source themselves and compare it with the reference on hidden inputs.

_C_TESTS = '''"""gcc builds the repaired source and the reference (expected.c.gz); both read the same unseen
files."""

import functools
import gzip
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

PROG = __PROG__
SOURCE = __SOURCE__


@functools.lru_cache(maxsize=None)
def binaries():
    d = Path(tempfile.mkdtemp())
    packed = Path(__file__).with_name("expected.c.gz").read_bytes()
    (d / "ref.c").write_bytes(gzip.decompress(packed))
    subprocess.run(["gcc", "-O1", "-o", str(d / "ref"), str(d / "ref.c")], check=True, timeout=120)
    r = subprocess.run(["gcc", "-O1", "-o", str(d / "fixed"), SOURCE], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"{SOURCE} does not compile: {r.stderr[-1500:]}"
    return d / "ref", d / "fixed"


def both(seed, size):
    ref, fixed = binaries()
    d = Path(tempfile.mkdtemp())
    (d / "input").write_bytes(input_bytes(PROG, random.Random(seed), size))
    want = subprocess.run([str(ref), str(d / "input")], capture_output=True, timeout=60)
    got = subprocess.run([str(fixed), str(d / "input")], capture_output=True, timeout=60)
    assert got.returncode == 0, f"exit {got.returncode}: {got.stderr[-500:]!r}"
    return got.stdout.decode("latin-1"), want.stdout.decode("latin-1")
'''
_C_TESTS += _tiers(
    "both",
    ("test_short_files", 1, "(21, 22, 23)", 1,
     r'f"differs from the reference on a short file:\n{got}\nexpected:\n{want}"'),
    ("test_unseen_files", 2, "range(300, 306)", 2,
     'f"differs from the reference on unseen file {seed - 300}"'),
    ("test_big_files", 1, "(700, 701, 702)", 5, '"differs from the reference on a big file"'))


def _c_prog_bugfix(rng: random.Random, index: int) -> Instance:
    prog = rng.choice(sorted(h2_cbugs.PROGS))
    ndefects = rng.choice([1, 2, 2, 3, 3])
    defects = sorted(rng.sample(h2_cbugs.defect_names(prog), ndefects))
    told = defects if ndefects < 3 else [rng.choice(defects)]
    src = f"/app/{prog}/{prog}.c"
    reports = "\n".join(f"  * {h2_cbugs.complaint(prog, b)}" for b in told)
    more = ("" if ndefects < 3 else
            "\nThis is one complaint among possibly several defects: compare the whole program with the "
            "comment at its top.\n")
    instruction = f"""\
`{src}` is a C program whose header comment says exactly what it must print. Compile it with
`gcc -O1 -o /app/{prog}/{prog} {src}`; `/app/{prog}/sample.txt` is an example input file.

Bug tracker:
{reports}
{more}
Repair `{src}` so that `{prog} FILE` follows its header comment on every valid input file, with the
same command line and output format, compiling with the gcc command above (C standard library
only). The graders compile `{src}` themselves and feed the binary files you have not seen.
"""
    solution = f"cat > {src} <<'EOF_FIXED'\n{h2_cbugs.program_text(prog, ())}EOF_FIXED\n" \
               f"gcc -O1 -o /app/{prog}/{prog} {src}\n"
    tests = (_C_TESTS.replace("__PROG__", repr(prog)).replace("__SOURCE__", repr(src))
             + "\n\n" + functions(h2_cbugs, "input_bytes") + "\n")
    difficulty = {1: "easy", 2: "medium", 3: "hard"}[ndefects]
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{prog}/{'+'.join(defects)}",
        files={f"{prog}/{prog}.c": h2_cbugs.program_text(prog, defects),
               f"{prog}/sample.txt": h2_cbugs.input_bytes(prog, rng, 2)},
        test_files={"expected.c.gz": gzip.compress(h2_cbugs.program_text(prog, ()).encode(),
                                                   mtime=0)},
        tags=("c", "bugfix", prog), image="dev", oracle_turns=2,
    )


FAMILIES.append(Family("c-prog-bugfix", "debugging", "test",
                       "one to three catalogued C bugs (pointer string compare, char vs EOF, floor "
                       "division, aliased buffers, ...) in one of three small C programs, compiled "
                       "by the tests and run on hidden inputs", _c_prog_bugfix))

# ------------------------------------------------------------------ league-table-bugs
# A football league table library (a class with a documented API) with one to four bugs from a
# catalogue of seven (mutable default / aliasing of the caller's list, unanchored regex, wrong dict
# key, draw points, sort order on ties, history window, rows aliasing internal state). The tests
# drive the agent's module and the reference through hidden operation sequences in a subprocess.

_LEAGUE_TESTS = '''"""Drives the fixed module and the reference through hidden operation sequences."""

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

MODULE = "/app/league/league.py"
HERE = Path(__file__).parent


def compare(seed, size):
    d = Path(tempfile.mkdtemp())
    (d / "season.json").write_text(json.dumps(scenario(random.Random(seed), size)))
    runner = d / "runner.py"
    runner.write_text(RUNNER)
    want = subprocess.run(["python3", str(runner), str(HERE / "league_ref.py"), str(d / "season.json")],
                          capture_output=True, text=True, timeout=60)
    got = subprocess.run(["python3", str(runner), MODULE, str(d / "season.json")], capture_output=True,
                         text=True, timeout=60, cwd=str(d))
    assert got.returncode == 0, f"the module failed: {got.stderr[-1200:]}"
    a, b = json.loads(got.stdout), json.loads(want.stdout)
    assert a["results"] == b["results"], f"wrong answers in hidden scenario {seed}"
    assert a["snapshots"] == b["snapshots"], f"wrong snapshots in hidden scenario {seed}"
'''
_LEAGUE_TESTS += _tiers("compare", ("test_short_seasons", 1, "(31, 32, 33)", 1, ""),
                        ("test_hidden_seasons", 2, "range(500, 506)", 2, ""),
                        ("test_long_seasons", 1, "(800, 801, 802)", 5, ""))


def _league_table_bugs(rng: random.Random, index: int) -> Instance:
    nbugs = rng.choice([1, 2, 2, 3, 4])
    bugs = sorted(rng.sample(sorted(h2_league.BUGS), nbugs))
    told = rng.sample(bugs, max(1, nbugs - (nbugs >= 3) - (nbugs >= 4)))
    reports = "\n".join(f"- {h2_league.symptom(b)}" for b in sorted(told))
    more = ("" if len(told) == nbugs else
            "\nThose are the reports so far; nobody has checked the class against its docstring, "
            "so do not assume they are the only defects.\n")
    example = "\n".join(f"lg.record({op[2]!r})" for op in h2_league.scenario(rng, 1)
                        if op[0] == "rec" and op[1] == "a" and re.fullmatch(r"\\S+ \\d+-\\d+ \\S+", op[2]))[:600].rsplit("\n", 1)[0]
    instruction = f"""\
`/app/league/league.py` is a small library: the class `League` keeps a football league table. Its
module docstring is the specification. `/app/league/example.py` shows how it is used.

Users report:
{reports}
{more}
Fix `/app/league/league.py` so that `League` behaves exactly as its docstring says. Keep the class,
method names and row format; standard library only. It will be exercised with other teams,
results and call sequences than the example's.
"""
    example_py = ("import sys\nsys.path.insert(0, '/app/league')\nfrom league import League\n\n"
                  "lg = League()\n" + example.replace("lg.record", "lg.record") +
                  "\nfor row in lg.table():\n    print(row)\n")
    solution = f"cat > /app/league/league.py <<'EOF_FIXED'\n{h2_league.render(())}EOF_FIXED\n"
    difficulty = {1: "easy", 2: "medium", 3: "hard", 4: "hard"}[nbugs]
    return Instance(
        instruction=instruction, solution=solution, difficulty=difficulty,
        tests=(_LEAGUE_TESTS + f"\n\nTEAMS = {h2_league.TEAMS!r}\n\n\n"
               + functions(h2_league, "scenario") + "\n\n\n# the runner runs in its own process: "
               "python3 runner.py MODULE.py SEASON.json\nRUNNER = \'\'\'" + h2_league.DRIVER + "\'\'\'\n"),
        variant="+".join(bugs),
        files={"league/league.py": h2_league.render(bugs), "league/example.py": example_py},
        test_files={"league_ref.py": h2_league.render(())},
        tags=("python", "bugfix", "classes"), oracle_turns=1,
    )


FAMILIES.append(Family("league-table-bugs", "debugging", "validation",
                       "one to four of seven catalogued bugs (aliasing, mutable default, regex "
                       "anchoring, dict key, tie order, window, state leak) in a league-table "
                       "class, driven through hidden call sequences", _league_table_bugs))

# ------------------------------------------------------------------ sh-script-bugfix
# A bash script (one of two: a column sum with awk, PATH deduplication) with one to three bugs
# from its catalogue (header and blank rows, awk regex match, number format, substring match,
# unquoted arrays, empty entries, joining), run with the reference on hidden cases.

_SH_TESTS = '''"""Runs the fixed script and the reference on hidden cases."""

import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h2_shbugs import make_case, render

SCRIPT = __SCRIPT__
PATH = __PATH__


def compare(seed, size):
    files, args = make_case(SCRIPT, random.Random(seed), size)
    d = Path(tempfile.mkdtemp())
    (d / "in").mkdir()
    for rel, text in files.items():
        (d / "in" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "in" / rel).write_text(text)
    (d / "ref.sh").write_text(render(SCRIPT, ()))
    argv = [a.replace("@DIR", str(d / "in")) for a in args]
    want = subprocess.run(["bash", str(d / "ref.sh"), *argv], capture_output=True, text=True, timeout=60)
    got = subprocess.run(["bash", PATH, *argv], capture_output=True, text=True, timeout=60, cwd=str(d))
    assert (got.stdout, got.returncode) == (want.stdout, want.returncode), \\
        f"hidden case {seed}: got {got.stdout!r} (exit {got.returncode}), expected {want.stdout!r}"
'''
_SH_TESTS += _tiers("compare", ("test_small_cases", 1, "(41, 42, 43)", 1, ""),
                    ("test_hidden_cases", 2, "range(600, 606)", 2, ""),
                    ("test_larger_cases", 1, "(650, 651, 652)", 4, ""))


def _sh_script_bugfix(rng: random.Random, index: int) -> Instance:
    script = rng.choice(sorted(h2_shbugs.SCRIPTS))
    spec = h2_shbugs.SCRIPTS[script]
    names = sorted(spec["bugs"])
    nbugs = rng.choice([1, 1, 2, 2, 3])
    while True:
        bugs = sorted(rng.sample(names, nbugs))
        if not all(b in bugs for b in spec["exclusive"]) or not spec["exclusive"]:
            break
    told = bugs if nbugs < 3 else rng.sample(bugs, 1)
    path = f"/app/scripts/{script}.sh"
    files, args = h2_shbugs.make_case(script, rng, 1)
    example = ""
    if files and args == ["@DIR"]:
        example = f"A sample tree is in `/app/scripts/sample/`: try `bash {path} /app/scripts/sample`."
    elif files:
        example = f"A sample table is in `/app/scripts/sample/table.txt`: try `bash {path} /app/scripts/sample/table.txt {args[1]}`."
    else:
        example = f"Try `bash {path} '{args[0]}'`."
    reports = "\n".join(f"- {h2_shbugs.symptom(script, b)}" for b in told)
    more = ("" if nbugs < 3 else "\nThat is the only report so far; nobody has checked the script "
            "against its header comment, so do not assume it is the only defect.\n")
    instruction = f"""\
`{path}` is a bash script; the comment at its top is its specification (usage:
`{spec['usage']}`). {example}

Users report:
{reports}
{more}
Fix `{path}` so that it prints exactly what its specification says (and exits with the status it
says) for any valid input. Keep the usage and the output format; bash and the standard tools of
this image only. It will be run on other inputs than the sample.
"""
    solution = f"cat > {path} <<'EOF_FIXED'\n{h2_shbugs.render(script, ())}EOF_FIXED\nchmod +x {path}\n"
    tests = _SH_TESTS.replace("__SCRIPT__", repr(script)).replace("__PATH__", repr(path))
    difficulty = {1: "easy", 2: "medium", 3: "hard"}[nbugs]
    app = {f"scripts/{script}.sh": h2_shbugs.render(script, bugs)}
    app.update({f"scripts/sample/{rel}": text for rel, text in files.items()})
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{script}/{'+'.join(bugs)}", files=app, executable=(f"scripts/{script}.sh",),
        test_files={"h2_shbugs.py": source(h2_shbugs)},
        tags=("bash", "bugfix", script), oracle_turns=1,
    )


FAMILIES.append(Family("sh-script-bugfix", "debugging", "train",
                       "one to three catalogued bash bugs (awk header/blank rows, regex match, "
                       "number format, substring match, unquoted arrays, empty entries, joining) "
                       "in one of two scripts, run on hidden cases", _sh_script_bugfix))
