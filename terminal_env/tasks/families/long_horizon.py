"""Generated task families of the long-horizon category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import ast
import json
import random
import re

from .base import Family, Instance
from .support import h4_cli, h4_pipe, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ spec-cli
# A record-keeping CLI (stock, budget or tickets) built from a spec, its state kept in a JSON store
# between runs; then a journal of commands replayed through it into a report. Hidden command
# sequences per subcommand are compared with the reference, exit codes included.

_SPECS = {
    "stock": ("a stock keeper for SKUs", "stock", [
        "`receive SKU QTY`: add QTY units; print `SKU NEW_QUANTITY`.",
        "`ship SKU QTY`: remove QTY units; print `SKU NEW_QUANTITY`. Shipping more than is in stock "
        "fails with exit status 3.",
        "`stock`: one line `SKU QUANTITY` per SKU whose quantity is not 0, sorted by SKU (plain "
        "string order).",
        "`history SKU`: one line `N OPERATION QTY` per successful `receive`/`ship` of that SKU, oldest "
        "first, where N numbers all successful receives and ships of all SKUs from 1.",
    ], ("low", "`low THRESHOLD`: the SKUs ever received whose quantity is below THRESHOLD (a positive "
                "integer), one per line, sorted."),
        "QTY must be a positive integer written with digits only."),
    "budget": ("a spending tracker with per-category limits", "status", [
        "`limit CATEGORY AMOUNT`: set (or replace) the category's limit; print `CATEGORY LIMIT`.",
        "`spend CATEGORY AMOUNT NOTE...`: record a spend (the note is the remaining arguments "
        "joined by single spaces); print `CATEGORY SPENT/LIMIT` with the category's new total. A "
        "category without a limit fails with exit status 3.",
        "`status`: one line `CATEGORY SPENT LIMIT REMAINING` per category with a limit, sorted by "
        "name (plain string order), with ` OVER` appended when SPENT exceeds LIMIT (REMAINING is "
        "then negative, e.g. `-3.50`).",
        "`top N`: the N largest spends, one line `AMOUNT CATEGORY NOTE` each, largest first, equal "
        "amounts in the order they were recorded.",
    ], ("undo", "`undo`: remove the most recent spend still recorded; print `undid CATEGORY AMOUNT "
                 "NOTE`. Nothing to undo fails with exit status 3."),
        "AMOUNT is digits with an optional `.` and one or two decimals (`12`, `12.5`, `12.50`); "
        "amounts are printed with exactly two decimals. Use exact arithmetic (cents), not floats."),
    "tickets": ("a small ticket tracker", "list --all", [
        "`open TITLE...`: create a ticket (title: the arguments joined by single spaces), state "
        "`open`, user `-`; print its id: `T1`, `T2`, ... in order of creation.",
        "`assign ID USER`: set the ticket's user; print `ID USER`.",
        "`close ID`: close the ticket; print `ID closed`.",
        "`list [--all]`: one line `ID STATE USER TITLE` per open ticket (every ticket with "
        "`--all`), in id order.",
    ], ("stats", "`stats`: the lines `open N` and `closed N`, then one line `USER N` per user with "
                  "open tickets assigned, most first, ties by name."),
        "An unknown ID, or assigning or closing a closed ticket, fails with exit status 3."),
}

_CLI_TESTS = '''"""Drives the agent's CLI through hidden command sequences and compares every exit status and
output with the reference; checks the journal's report."""

import ast
import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h4_cli import apply, commands

TOOL = __TOOL__
PROG = __PROG__
EXTRA = __EXTRA__
STRICT = __STRICT__
SUBS = __SUBS__


def drive(cmds):
    store = Path(tempfile.mkdtemp()) / "store.json"
    st = {}
    for i, argv in enumerate(cmds):
        code, out = apply(TOOL, st, argv)
        if not STRICT and code:
            continue
        r = subprocess.run(["python3", PROG, "--store", str(store), *argv], capture_output=True,
                           text=True, timeout=30, cwd="/tmp")
        assert r.returncode == code, f"command {i + 1} {argv!r}: exit {r.returncode}, expected {code}; {r.stderr[-300:]}"
        if code == 0:
            assert r.stdout == out, f"command {i + 1} {argv!r}: printed {r.stdout!r}, expected {out!r}"
        else:
            assert r.stdout == "", f"command {i + 1} {argv!r} failed but printed {r.stdout!r}"


@pytest.mark.weight(2)
def test_journal_report():
    st = {}
    for line in json.loads(Path(__file__).with_name("journal.json").read_text()):
        apply(TOOL, st, line.split())
    code, out = apply(TOOL, st, __REPORT__.split())
    got = Path(f"/app/{TOOL}/report.txt").read_text()
    assert got.strip() == out.strip(), "report.txt is not the report after the journal"


def focused(rng, sub, n=30):
    """A sequence stressing ``sub`` in which ``sub`` itself succeeds with output at least once
    (a sequence where it only ever prints nothing would credit a program that prints nothing)."""
    while True:
        cmds = commands(TOOL, rng, n, EXTRA, focus=sub)
        st = {}
        if any(code == 0 and out and argv[0] == sub for argv in cmds for code, out in [apply(TOOL, st, argv)]):
            return cmds


@pytest.mark.weight(1)
@pytest.mark.parametrize("sub", SUBS)
def test_subcommand(sub):
    rng = random.Random(sum(map(ord, sub)))
    drive(focused(rng, sub))


@pytest.mark.weight(2)
def test_long_sequence():
    rng = random.Random(4242)
    drive(commands(TOOL, rng, 70, EXTRA))
'''

_CLI_MAIN = '''
import argparse, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref import apply

def main():
    argv = sys.argv[1:]
    store = "/app/__TOOL__/store.json"
    if argv[:1] == ["--store"] and len(argv) > 1:
        store, argv = argv[1], argv[2:]
    st = json.load(open(store)) if os.path.exists(store) else {}
    code, out = apply("__TOOL__", st, argv)
    if code:
        print("error", file=sys.stderr)
        sys.exit(code)
    with open(store, "w") as f:
        json.dump(st, f)
    sys.stdout.write(out)

main()
'''


def _spec_cli(rng: random.Random, index: int) -> Instance:
    tool = rng.choice(sorted(_SPECS))
    extra = rng.random() < 0.6
    strict = rng.random() < 0.45
    what, report, subs, (xname, xspec), rules = _SPECS[tool]
    names = [re.match(r"`(\w+)", s)[1] for s in subs] + ([xname] if extra else [])
    prog = f"/app/{tool}/{tool}.py"
    jr = random.Random(rng.randint(0, 10**9))
    length = rng.randint(25, 45)
    while True:  # a journal whose report is empty would credit an empty report.txt
        journal = []
        st: dict = {}
        for argv in h4_cli.commands(tool, jr, length, extra):
            code, _ = h4_cli.apply(tool, st, argv)
            if code == 0 or strict:
                journal.append(" ".join(argv))
        if h4_cli.apply(tool, st, report.split())[1].strip():
            break
    journal_text = "\n".join(journal) + "\n"
    bullet = "\n".join(f"- {s}" for s in subs + ([xspec] if extra else []))
    fail_rule = ("A command that fails (wrong arguments: exit status 2; the failures named above: "
                 "exit status 3) prints nothing on standard output and leaves the store exactly as "
                 "it was." if strict else
                 "Wrong arguments exit with status 2 and the failures named above with status 3; "
                 "they print nothing on standard output.")
    instruction = f"""\
Build `{prog}`, {what}: a Python 3 command-line program (standard library only) run as

    python3 {prog} [--store FILE] SUBCOMMAND ARGS...

Its state lives in a JSON file, `FILE` (default `/app/{tool}/store.json`; layout of your choice);
a missing file means an empty state, and every successful command saves the state for the next
run. Subcommands:

{bullet}

{rules} {fail_rule} Output is plain text, one item per line, each line ending in a newline;
nothing at all when there is nothing to list. Exit status 0 on success.

Then replay the journal `/app/{tool}/journal.txt` (one command per line, arguments separated by
single spaces) through your program, in order, into a fresh `/app/{tool}/store.json`, and save the
output of `{report}` after the last line to `/app/{tool}/report.txt`. Your program will also be run
on other command sequences.
"""
    ref = source(h4_cli)
    solution = f"""cat > /app/{tool}/ref.py <<'PY_EOF'
{ref}
PY_EOF
cat > {prog} <<'PY_EOF'
{_CLI_MAIN.replace("__TOOL__", tool)}
PY_EOF
cd /app/{tool} && rm -f store.json
while read -r line; do python3 {prog} $line > /dev/null || true; done < journal.txt
python3 {prog} {report} > report.txt
"""
    tests = (_CLI_TESTS.replace("__TOOL__", repr(tool)).replace("__PROG__", repr(prog))
             .replace("__EXTRA__", repr(extra)).replace("__STRICT__", repr(strict))
             .replace("__SUBS__", repr(names)).replace("__REPORT__", repr(report)))
    total = 2 + 1 + 1 + int(strict) + int(extra and tool == "budget")
    difficulty = "medium" if total <= 4 else "hard"
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{tool}/{xname if extra else 'core'}/{'strict' if strict else 'lenient'}",
        files={f"{tool}/journal.txt": journal_text},
        test_files={"h4_cli.py": ref, "journal.json": json.dumps(journal)}, tags=("cli", "spec", tool),
        oracle_turns=4,
    )


FAMILIES.append(Family("spec-cli", "long-horizon", "test",
                       "a stock/budget/tickets CLI with a JSON store built from a spec, then a journal "
                       "replayed into a report; hidden command sequences per subcommand", _spec_cli))

# ------------------------------------------------------------------ pipe-gaps
# A four-stage sensor pipeline (extract, clean, aggregate, render) whose scripts each may have a
# gap: a function with its specification and no body. Fill the gaps, fix the runner, run it end to
# end; the tests run each stage and the runner on hidden raw data.

_EXT = {"csv": "csv", "jsonl": "jsonl", "logfmt": "log"}
_STAGES = [("1_extract.py", "extract", "raw text", "extracted.jsonl"),
           ("2_clean.py", "clean", "extracted.jsonl", "cleaned.jsonl"),
           ("3_aggregate.py", "agg", "cleaned.jsonl", "summary.json"),
           ("4_render.py", "render", "summary.json", "report.csv")]
_IO = {
    "extract": ("data = open(sys.argv[1], encoding='utf-8').read()",
                "out.write(''.join(json.dumps(r) + '\\n' for r in result))"),
    "clean": ("data = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]",
              "out.write(''.join(json.dumps(r) + '\\n' for r in result))"),
    "agg": ("data = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]",
            "json.dump(result, out, sort_keys=True, indent=1)"),
    "render": ("data = json.load(open(sys.argv[1]))", "out.write(result)"),
}

_PIPE_TESTS = '''"""Runs the pipeline's stages and its runner on hidden raw data; compares every stage's output
with the reference stages."""

import ast
import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

import h4_pipe as ref

FMT, AGG, GAPS = __FMT__, __AGG__, __GAPS__
DIR = Path("/app/pipeline")
FUNCS = {"extract": getattr(ref, "extract_" + FMT), "clean": ref.clean,
         "agg": getattr(ref, "agg_" + AGG), "render": getattr(ref, "render_" + AGG)}
SCRIPTS = {"extract": "1_extract.py", "clean": "2_clean.py", "agg": "3_aggregate.py", "render": "4_render.py"}


def chain(raw):
    out = {"raw": raw}
    out["extract"] = FUNCS["extract"](raw)
    out["clean"] = FUNCS["clean"](out["extract"])
    out["agg"] = json.loads(json.dumps(FUNCS["agg"](out["clean"])))
    out["render"] = FUNCS["render"](out["agg"])
    return out


def hidden(seed, n=120):
    rng = random.Random(seed)
    return ref.render_raw(FMT, ref.make_rows(rng, n), rng)


def load(path, stage):
    text = Path(path).read_text()
    if stage in ("extract", "clean"):
        return [json.loads(l) for l in text.splitlines() if l.strip()]
    return json.loads(text) if stage == "agg" else text


def put(path, stage, value):
    if stage == "extract":
        Path(path).write_text(value)
    elif stage in ("clean", "agg"):
        Path(path).write_text("".join(json.dumps(r) + "\\n" for r in value))
    else:
        Path(path).write_text(json.dumps(value))


@pytest.mark.weight(1)
@pytest.mark.parametrize("stage", GAPS)
def test_stage(stage):
    prev = {"extract": "raw", "clean": "extract", "agg": "clean", "render": "agg"}[stage]
    for seed in (1, 2):
        want = chain(hidden(seed))
        d = Path(tempfile.mkdtemp())
        put(d / "in", stage, want[prev])
        r = subprocess.run(["python3", str(DIR / SCRIPTS[stage]), str(d / "in"), str(d / "out")],
                           capture_output=True, text=True, timeout=60, cwd=str(d))
        assert r.returncode == 0, f"{SCRIPTS[stage]} failed: {r.stderr[-600:]}"
        assert load(d / "out", stage) == want[stage], f"{SCRIPTS[stage]}: wrong output on hidden input {seed}"


@pytest.mark.weight(2)
def test_runner_end_to_end():
    want = chain(hidden(7, 200))
    d = Path(tempfile.mkdtemp())
    (d / "raw.txt").write_text(want["raw"])
    r = subprocess.run(["bash", str(DIR / "run.sh"), str(d / "raw.txt"), str(d / "out")],
                       capture_output=True, text=True, timeout=120, cwd="/tmp")
    assert r.returncode == 0, f"run.sh failed: {r.stderr[-600:]}"
    for stage, name in [("extract", "extracted.jsonl"), ("clean", "cleaned.jsonl"), ("agg", "summary.json"),
                        ("render", "report.csv")]:
        assert load(d / "out" / name, stage) == want[stage], f"run.sh: {name} is wrong"


@pytest.mark.weight(1)
def test_sample_report():
    raw = ref.render_raw(FMT, json.loads(Path(__file__).with_name("rows.json").read_text()), random.Random(0))
    want = chain(raw)
    assert (DIR / "out" / "report.csv").read_text() == want["render"], "out/report.csv is not the sample's report"
'''


def _func_source(name: str) -> str:
    text = source(h4_pipe)
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(text, node) or ""


def _gap(src: str) -> str:
    head, _, rest = src.partition('"""')
    doc, _, _ = rest.partition('"""')
    return f'{head}"""{doc}"""\n    raise NotImplementedError("TODO: implement as documented")\n'


def _pipe_gaps(rng: random.Random, index: int) -> Instance:
    fmt = rng.choices(["csv", "jsonl", "logfmt"], [3, 2, 5])[0]
    agg = rng.choice(["daily", "range", "median"])
    stages = ["extract", "clean", "agg", "render"]
    gaps = sorted(rng.sample(stages, rng.randint(2, 4)), key=stages.index)
    if "clean" not in gaps and rng.random() < 0.6:
        gaps = sorted(gaps + ["clean"], key=stages.index)
    broken = rng.random() < 0.5
    func = {"extract": f"extract_{fmt}", "clean": "clean", "agg": f"agg_{agg}", "render": f"render_{agg}"}
    files: dict[str, str | bytes] = {}
    fixed_files = {}
    for script, stage, src_name, dst in _STAGES:
        fsrc = _func_source(func[stage])
        read, write = _IO[stage]
        consts = f"RANGES = {h4_pipe.RANGES!r}\n\n\n" if stage == "clean" else ""

        def body(f: str) -> str:
            return (f'#!/usr/bin/env python3\n"""Stage {script[0]} of the sensor pipeline: {src_name} -> '
                    f'{dst}.\n\nUsage: python3 {script} IN OUT\n"""\nimport json\nimport sys\n\n{consts}'
                    f"{f}\n\n\ndef main():\n    {read}\n    result = {func[stage]}(data)\n"
                    f"    with open(sys.argv[2], 'w', encoding='utf-8') as out:\n        {write}\n\n\n"
                    "if __name__ == '__main__':\n    main()\n")
        files[f"pipeline/{script}"] = body(_gap(fsrc) if stage in gaps else fsrc)
        fixed_files[script] = body(fsrc)
    order = ["1_extract.py", "2_clean.py", "3_aggregate.py", "4_render.py"]
    ins = ['"$RAW"', '"$OUT/extracted.jsonl"', '"$OUT/cleaned.jsonl"', '"$OUT/summary.json"']
    outs = ['"$OUT/extracted.jsonl"', '"$OUT/cleaned.jsonl"', '"$OUT/summary.json"', '"$OUT/report.csv"']
    runner_lines = [f"python3 {s} {i} {o}" for s, i, o in zip(order, ins, outs)]
    good_runner = runner_lines
    if broken:
        bad = list(runner_lines)
        bad[2] = bad[2].replace('"$OUT/cleaned.jsonl"', '"$OUT/extracted.jsonl"', 1)
        runner_lines = bad
    def runner(lines: list[str]) -> str:
        return ("#!/bin/bash\n# Runs the pipeline: run.sh [RAW [OUTDIR]]\nset -e\n"
                f'RAW="${{1:-/app/pipeline/raw/readings.{_EXT[fmt]}}}"\nOUT="${{2:-/app/pipeline/out}}"\n'
                'mkdir -p "$OUT"\ncd "$(dirname "$0")"\n' + "\n".join(lines) + "\n")
    files["pipeline/run.sh"] = runner(runner_lines)
    rows = h4_pipe.make_rows(rng, rng.randint(60, 110))
    files[f"pipeline/raw/readings.{_EXT[fmt]}"] = h4_pipe.render_raw(fmt, rows, random.Random(0))
    gap_names = ", ".join(f"`{dict((s[1], s[0]) for s in _STAGES)[g]}`" for g in gaps)
    instruction = f"""\
`/app/pipeline/` holds a four-stage pipeline for air-quality sensor readings: `1_extract.py`
(raw readings to JSON lines), `2_clean.py`, `3_aggregate.py` (a JSON summary) and `4_render.py`
(a CSV report), each run as `python3 SCRIPT IN OUT`, and `run.sh [RAW [OUTDIR]]` which runs them in
order, each stage reading the previous stage's output (`extracted.jsonl`, `cleaned.jsonl`,
`summary.json`, `report.csv` in OUTDIR; defaults: `/app/pipeline/raw/readings.{_EXT[fmt]}` and
`/app/pipeline/out`).

The pipeline was never finished: in {gap_names} the core function has only its docstring, which
is its specification. Implement those functions as documented (standard library only), keeping
each script's command line and file formats. Make sure `run.sh` really chains the four stages as
described, then run it with its defaults so that `/app/pipeline/out/` holds all four outputs for
the sample readings. The stages and `run.sh` will also be run on other raw files of the same
format.
"""
    solution = "".join(f"cat > /app/pipeline/{s} <<'PY_EOF'\n{fixed_files[s]}PY_EOF\n" for s in order)
    solution += (f"cat > /app/pipeline/run.sh <<'SH_EOF'\n{runner(good_runner)}SH_EOF\n"
                 "bash /app/pipeline/run.sh\n")
    tests = (_PIPE_TESTS.replace("__FMT__", repr(fmt)).replace("__AGG__", repr(agg))
             .replace("__GAPS__", repr(gaps)))
    knowledge = int(fmt == "logfmt")
    traps = int("clean" in gaps) + int(broken)
    total = 2 + knowledge + traps
    return Instance(
        instruction=instruction, tests=tests, solution=solution,
        difficulty="medium" if total <= 4 else "hard",
        variant=f"{fmt}/{agg}/gaps-{'-'.join(g[0] for g in gaps)}" + ("/runner" if broken else ""),
        files=files, executable=("pipeline/run.sh",),
        test_files={"h4_pipe.py": source(h4_pipe), "rows.json": json.dumps(rows)},
        tags=("pipeline", "etl", fmt), oracle_turns=6,
    )


FAMILIES.append(Family("pipe-gaps", "long-horizon", "validation",
                       "a four-stage sensor pipeline (three raw formats, three summaries) with unfinished "
                       "stages and a miswired runner; stages and runner run on hidden raw data", _pipe_gaps))
