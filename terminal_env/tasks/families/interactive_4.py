"""Generated task families of the interactive category, part 4 (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .tty import pty_driver
from .support import hD_panel, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ ia-control-panel
# A terminal control panel (it reads /dev/tty, flushing typeahead before each prompt) for a small
# machine: water tanks, coupled dials, a lamp grid with hidden wiring, or discs on pegs. The goal
# state and a command budget are given; the panel keeps an HMAC-chained journal that the tests
# replay with the same machine model.

_PANEL = r'''
import json, os, sys, termios

KIND, P, START, GOAL, KEY = __KIND__, __P__, __START__, __GOAL__, __KEY__
JOURNAL = "/app/panel/journal.json"
HELP = __HELP__


def freeze(s):
    return tuple(freeze(x) for x in s) if isinstance(s, list) else s


def save(log, state, sealed):
    tmp = JOURNAL + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"machine": KIND, "log": log, "state": state, "sealed": sealed,
                   "mac": chain(KEY, log)}, f)
    os.replace(tmp, JOURNAL)


def main():
    try:
        tin, tout = open("/dev/tty"), open("/dev/tty", "w")
    except OSError:
        sys.exit("panel: run me on a terminal")
    log, state = [], freeze(START)
    if os.path.exists(JOURNAL):
        j = json.load(open(JOURNAL))
        if j.get("mac") == chain(KEY, j["log"]):
            log, state = j["log"], replay(KIND, P, freeze(START), j["log"])
        if j.get("sealed"):
            sys.exit("panel: the journal is sealed")
    tout.write("Control panel (" + KIND + "). Type help for the commands.\n")
    while True:
        tout.write(render(KIND, P, state) + "\n")
        termios.tcflush(tin.fileno(), termios.TCIFLUSH)
        tout.write("> ")
        tout.flush()
        line = tin.readline()
        if not line:
            return
        cmd = " ".join(line.split())
        if cmd in ("", "status"):
            continue
        if cmd == "help":
            tout.write(HELP + "\n")
        elif cmd == "quit":
            return
        elif cmd == "seal":
            if not reached(KIND, P, state, freeze(GOAL)):
                tout.write("the goal state is not reached\n")
                continue
            save(log + ["seal"], state, True)
            tout.write("journal sealed\n")
            return
        elif cmd == "reset":
            log, state = log + ["reset"], freeze(START)
            save(log, state, False)
        else:
            new = step(KIND, P, state, cmd)
            if isinstance(new, str):
                tout.write("error: " + new + "\n")
                continue
            log, state = log + [cmd], new
            save(log, state, False)


main()
'''

_HELP = {
    "tanks": "fill T (fill tank T from the main), drain T (empty it), pour T U (pour T into U until T is "
             "empty or U full); reset, status, seal, quit",
    "dials": "up N / down N (turn dial N one notch; the gearing may move the next dial too); reset, "
             "status, seal, quit",
    "lamps": "press R C (the switch at row R, column C toggles its lamp and some others, as wired); "
             "reset, status, seal, quit",
    "pegs": "move X Y (top disc of peg X onto peg Y; never onto a smaller disc); reset, status, seal, quit",
}

_TESTS = '''"""Replays the panel's journal with the machine model and checks the goal and the budget."""

import json
from pathlib import Path

import pytest

from hD_panel import chain, reached, replay

KIND, P, START, GOAL, KEY, LIMIT = __KIND__, __P__, __START__, __GOAL__, __KEY__, __LIMIT__


def freeze(s):
    return tuple(freeze(x) for x in s) if isinstance(s, list) else s


def final():
    p = Path("/app/panel/journal.json")
    assert p.is_file(), "no journal"
    j = json.loads(p.read_text())
    log = j.get("log")
    assert isinstance(log, list) and all(isinstance(c, str) for c in log)
    assert j.get("mac") == chain(KEY, log), "the journal was not written by the panel"
    s = replay(KIND, P, freeze(START), log)
    assert s is not None, "the journal holds a command the panel would refuse"
    assert freeze(j.get("state")) == s, "the journal's state is not the one its commands make"
    assert reached(KIND, P, s, freeze(GOAL)), "the machine is not in the goal state"
    return j, log


@pytest.mark.weight(2)
def test_goal_state_reached():
    final()


@pytest.mark.weight(1)
def test_within_the_budget():
    _, log = final()
    used = [c for c in log if c != "seal"]
    assert len(used) <= LIMIT, f"{len(used)} commands, the budget is {LIMIT}"


@pytest.mark.weight(1)
def test_journal_sealed():
    j, log = final()
    assert log and log[-1] == "seal" and j.get("sealed") is True, "the journal was not sealed"
'''

def _machine(rng: random.Random, kind: str):
    """(params, start, goal, goal sentence) with a shortest solution of a sensible length."""
    while True:
        if kind == "tanks":
            caps = rng.choice([[3, 5], [4, 7], [5, 9], [7, 11], [3, 8], [5, 13]] if rng.random() < 0.5
                              else [[3, 5, 8], [4, 9, 13], [3, 7, 10], [5, 6, 11]])
            names = ["A", "B", "C"][:len(caps)]
            p, start = {"names": names, "caps": caps}, tuple(0 for _ in caps)
            goal = (rng.choice(names), rng.randint(1, max(caps) - 1))
            if goal[1] > caps[names.index(goal[0])]:
                continue
            text = f"tank {goal[0]} holds exactly {goal[1]} litres (the other tanks may hold anything)"
        elif kind == "dials":
            p = {"links": [rng.randint(1, 9) for _ in range(4)]}
            start, goal = (tuple(rng.randint(0, 9) for _ in range(4)) for _ in "sg")
            text = "the dials show " + " ".join(map(str, goal))
        elif kind == "lamps":
            shape = rng.choice([[(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)], [(0, 0), (0, 1), (1, 0), (1, 1)],
                                [(0, 0), (1, 1), (-1, -1), (1, -1), (-1, 1)]])
            p = {"rows": 3, "cols": rng.choice([3, 4]), "shape": shape}
            goal = tuple(1 for _ in range(p["rows"] * p["cols"]))
            start = goal
            for cmd in rng.sample(hD_panel.commands(kind, p), rng.randint(3, 6)):
                start = hD_panel.step(kind, p, start, cmd)
            text = "every lamp is lit (`#`)"
        else:
            n, p = rng.choice([4, 5]), {}
            where = [rng.choice("LMR") for _ in range(n)]
            start = tuple(tuple(d for d in range(n, 0, -1) if where[d - 1] == peg) for peg in "LMR")
            dest = rng.choice("MR")
            goal = tuple(tuple(range(n, 0, -1)) if peg == dest else () for peg in "LMR")
            text = f"all {n} discs are on peg {dest}"
        if kind == "tanks" or not hD_panel.reached(kind, p, start, goal):
            try:
                path = hD_panel.shortest(kind, p, start, goal)
            except ValueError:
                continue
            if len(path) >= 4:
                return p, start, goal, text, path


def _panel(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(["tanks", "tanks", "dials", "lamps", "lamps", "pegs", "pegs"])
    p, start, goal, text, path = _machine(rng, kind)
    slack = rng.choice([0, 2, 4])
    limit = len(path) + slack
    key = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(24))
    subs = {"__KIND__": repr(kind), "__P__": repr(p), "__START__": repr(start), "__GOAL__": repr(goal),
            "__KEY__": repr(key)}
    program = "#!/usr/bin/env python3\n" + source(hD_panel).split('"""', 2)[2] + _PANEL
    tests = _TESTS.replace("__LIMIT__", str(limit))
    for k, v in subs.items():
        program, tests = program.replace(k, v), tests.replace(k, v)
    program = program.replace("__HELP__", repr(_HELP[kind]))
    instruction = f"""\
`/app/panel/panel` is the control panel of a small machine ({kind}). It reads its commands from
the terminal itself (not from standard input, and it discards anything typed before its `> `
prompt), shows the machine after every command, and keeps a journal of the accepted commands in
`/app/panel/journal.json`. Type `help` in it for the commands. If you leave it and start it again,
it carries on from its journal.

Use the panel to bring the machine into the state where {text},
with at most {limit} accepted commands in total (`reset`, which brings the machine back to where it started, counts as one;
`help`, `status` and refused commands do not count). Then type `seal`, which closes the journal.
The journal must be the panel's own (do not write, edit or delete it yourself).
"""
    scores = {"tanks": len(p.get("caps", [])) - 2, "dials": 2, "pegs": len(path) > 15, "lamps": 1}
    score = scores[kind] + (slack == 0)
    shape = {5: "cross", 4: "square"}.get(len(p.get("shape", [])), "")
    variant = {"tanks": f"tanks/{len(start)}", "dials": "dials/coupled", "lamps": f"lamps/{shape}",
               "pegs": f"pegs/{len(path) > 15 and 'long' or 'short'}"}[kind]
    if kind == "lamps" and p["shape"][1] == (1, 1):
        variant = "lamps/diagonal"
    solution = (pty_driver(["/app/panel/panel"], list(path) + ["seal"], prompt="> ")
                + "cat /app/panel/journal.json\n")
    return Instance(
        instruction=instruction, tests=tests, solution=solution,
        difficulty=("easy", "medium", "hard", "hard")[score], variant=variant,
        files={"panel/panel": program}, test_files={"hD_panel.py": source(hD_panel)},
        executable=("panel/panel",), tags=("tty", "puzzle", "state"), oracle_turns=6,
    )


FAMILIES.append(Family("ia-control-panel", "interactive", "train",
                       "drive a terminal control panel (water tanks, coupled dials, a lamp grid with hidden "
                       "wiring, discs on pegs) into a goal state within a command budget; the tests replay "
                       "its HMAC-chained journal", _panel))
