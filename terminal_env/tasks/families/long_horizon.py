"""Generated task families of the long-horizon category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import json
import random
import re

from .base import Family, Instance
from .support import h4_cli, source

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


@pytest.mark.weight(1)
@pytest.mark.parametrize("sub", SUBS)
def test_subcommand(sub):
    rng = random.Random(sum(map(ord, sub)))
    drive(commands(TOOL, rng, 30, EXTRA, focus=sub))


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
    journal = []
    st: dict = {}
    for argv in h4_cli.commands(tool, jr, rng.randint(25, 45), extra):
        code, _ = h4_cli.apply(tool, st, argv)
        if code == 0 or strict:
            journal.append(" ".join(argv))
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
