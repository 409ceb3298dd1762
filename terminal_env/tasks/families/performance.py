"""Generated task families of the performance category (see :mod:`.base` for what a family is).

A correct but slow program must become fast with the same output. The hidden tests run it on
hidden inputs, compare its output with a reference program's and give it a time budget of a
multiple of that reference's own time on the same input, measured in the test (so a loaded
machine slows both)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support import functions, h1_perf, source

FAMILIES: list[Family] = []

_TIMED = '''"""Runs the agent's program on hidden inputs; output must equal the reference's, and time must stay
within a multiple of the reference program's own time on the same input (measured here)."""

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import h1_perf as ref

FAMILY = __FAMILY__
KIND = __KIND__
PROGRAM = __PROGRAM__
REF = str(Path(__file__).with_name("h1_perf.py"))


def timed(cmd, path, limit):
    t = time.monotonic()
    try:
        r = subprocess.run(cmd + [path], capture_output=True, text=True, timeout=limit, cwd="/tmp")
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{cmd[-1]} did not finish within {limit:.1f} s")
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}"
    return r.stdout, time.monotonic() - t


def check(text):
    path = Path(tempfile.mkdtemp()) / "input.txt"
    path.write_text(text)
    want, t_ref = timed([sys.executable, REF, FAMILY, KIND], str(path), 120)
    budget = 5 * t_ref + 2.0
    got, t = timed(["python3", PROGRAM], str(path), budget)
    assert got == want, f"output differs from the original program's: {got[:200]!r} vs {want[:200]!r}"
    return t, t_ref

__BODY__
'''


def _timed_tests(family: str, kind: str, program: str, body: str) -> str:
    return (_TIMED.replace("__FAMILY__", repr(family)).replace("__KIND__", repr(kind))
            .replace("__PROGRAM__", repr(program)).replace("__BODY__", body))


# ------------------------------------------------------------------ hot-loop

_READ = "    lines = [ln for ln in open(sys.argv[1]).read().split(\"\\n\") if ln.strip()]\n"
_LOOPS = {
    "close-pairs": ("""Input: the first line is a window W, then one integer time stamp per line.
Prints the number of pairs of lines (i < j) whose time stamps differ by at most W.""", """\
    w = int(lines[0])
    xs = [int(x) for x in lines[1:]]
    count = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            if abs(xs[i] - xs[j]) <= w:
                count += 1
    print(count)
""", 40000),
    "earlier-smaller": ("""Input: one integer per line.
Prints, for each line, how many earlier lines hold a strictly smaller integer.""", """\
    xs = [int(x) for x in lines]
    for i, x in enumerate(xs):
        c = 0
        for y in xs[:i]:
            if y < x:
                c += 1
        print(c)
""", 30000),
    "window-max": ("""Input: the first line is a window length K, then one integer per line.
Prints the maximum of every run of K consecutive values, one per line, in order.""", """\
    k = int(lines[0])
    xs = [int(x) for x in lines[1:]]
    for i in range(k - 1, len(xs)):
        print(max(xs[i - k + 1:i + 1]))
""", 120000),
    "anagram-groups": ("""Input: one word per line (no word repeats).
Prints each group of two or more words that are anagrams of each other: the group's words
sorted and joined by spaces, one group per line, the lines sorted.""", """\
    words = lines
    used = [False] * len(words)
    rows = []
    for i, w in enumerate(words):
        if used[i]:
            continue
        group = [w]
        for j in range(i + 1, len(words)):
            if not used[j] and sorted(words[j]) == sorted(w):
                group.append(words[j])
                used[j] = True
        if len(group) > 1:
            rows.append(" ".join(sorted(group)))
    for row in sorted(rows):
        print(row)
""", 20000),
    "order-lookup": ("""Input: lines `C,<id>,<name>` (a customer) and `O,<customer id>,<amount>` (an order), mixed.
Prints, for each customer name with at least one order, `<name> <total amount>`, sorted by
name (customers sharing a name are added together).""", """\
    customers = [ln.split(",") for ln in lines if ln.startswith("C,")]
    totals = {}
    for ln in lines:
        t, cid, amount = ln.split(",")
        if t != "O":
            continue
        for _, other, name in customers:
            if other == cid:
                totals[name] = totals.get(name, 0) + int(amount)
                break
    for name in sorted(totals):
        print(name, totals[name])
""", 40000),
}

_LOOP_BODY = '''
SIZE = __SIZE__


def big(seed, factor=1.0):
    rng = random.Random(seed)
    text = ref.loop_input(KIND, rng, int(SIZE * factor))
    if KIND == "window-max":  # a wide window: the per-window max() is what is slow
        lines = text.split("\\n")
        lines[0] = str(int(SIZE * factor) // 25)
        text = "\\n".join(lines)
    return text


@pytest.mark.weight(1)
def test_small_and_large_input():
    rng = random.Random(11)
    for n in (1, 2, 7, 50):
        check(ref.loop_input(KIND, rng, n))
    check(big(12, 0.6))


@pytest.mark.weight(2)
def test_large_input_in_time():
    t, t_ref = check(big(13))
    print(f"{t:.2f} s, reference {t_ref:.2f} s")


@pytest.mark.weight(1)
def test_repeated_values_large():
    text = big(14)
    lines = text.split("\\n")
    head = 1 if KIND in ("close-pairs", "window-max") else 0
    if KIND != "anagram-groups" and KIND != "order-lookup":
        lines[head + 1::3] = [lines[head + 1]] * len(lines[head + 1::3])
    check("\\n".join(lines))
'''


def _hot_loop(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_LOOPS))
    doc, body, size = _LOOPS[kind]
    name = rng.choice(["tally", "scan", "crunch", "digest", "sweep"])
    program = f"/app/{name}.py"
    slow = f'''"""{doc}
"""
import sys


def main():
{_READ}{body}

if __name__ == "__main__":
    main()
'''
    sample = h1_perf.loop_input(kind, rng, rng.randint(20, 60))
    instruction = f"""\
`{program} FILE` is correct but far too slow: it takes minutes on inputs of tens of thousands of
lines. Its docstring describes the input and output; `/app/sample.txt` is a small example input.

Make `{program}` fast: with the same command line it must print exactly the same output as now,
byte for byte, for every valid input, and finish inputs of {size:,} lines in about a second or two.
Keep it a Python 3 program that uses only the standard library.
"""
    solution = f"""cat > {program} <<'PY'
import sys
{_fast_source("loop_fast")}


sys.stdout.write(loop_fast({kind!r}, open(sys.argv[1]).read()))
PY
"""
    tests = _timed_tests("loop", kind, program, _LOOP_BODY.replace("__SIZE__", str(size)))
    difficulty = {"order-lookup": "easy", "anagram-groups": "easy", "close-pairs": "medium",
                  "window-max": "medium", "earlier-smaller": "medium"}[kind]
    return Instance(instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
                    variant=kind, files={f"{name}.py": slow, "sample.txt": sample},
                    test_files={"h1_perf.py": source(h1_perf)}, tags=("python", "algorithms"),
                    verifier_timeout_sec=240.0)


def _fast_source(name: str) -> str:
    return "from collections import deque\n\n" + functions(h1_perf, name)


FAMILIES.append(Family("hot-loop", "performance", "train",
                       "a quadratic loop (pair counting, rank counting, window max, anagram grouping, "
                       "lookup by scan) to replace, same output, timed against a reference", _hot_loop))


# ------------------------------------------------------------------ deep-recursion

_RECS = {
    "grid-paths": ("""Input: a grid of `.` (open) and `#` (blocked) cells, one row per line.
Prints the number of paths from the top-left to the bottom-right cell that move only right or
down through open cells, modulo 1000000007.""", """\
    grid = [ln for ln in open(sys.argv[1]).read().split("\\n") if ln]

    def paths(r, c):
        if r < 0 or c < 0 or grid[r][c] == "#":
            return 0
        if r == 0 and c == 0:
            return 1
        return (paths(r - 1, c) + paths(r, c - 1)) % MOD

    print(paths(len(grid) - 1, len(grid[0]) - 1))
""", {False: (300, "grids of 300 x 305 cells"), True: (900, "grids of 900 x 905 cells")}),
    "edit-distance": ("""Input: two lines, strings A and B.
Prints the edit distance between A and B (insertions, deletions and substitutions cost 1).""", """\
    a, b = open(sys.argv[1]).read().split("\\n")[:2]

    def dist(i, j):
        if i == 0:
            return j
        if j == 0:
            return i
        return min(dist(i - 1, j) + 1, dist(i, j - 1) + 1, dist(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    print(dist(len(a), len(b)))
""", {False: (400, "strings of 400 characters"), True: (1500, "strings of 1500 characters")}),
    "coin-ways": ("""Input: a line of distinct coin values (increasing), then a line with a total.
Prints the number of ways to pay the total with any number of coins of each value (order does
not matter), modulo 1000000007.""", """\
    lines = open(sys.argv[1]).read().split("\\n")
    coins, total = [int(x) for x in lines[0].split()], int(lines[1])

    def ways(i, rest):
        if rest == 0:
            return 1
        if i == len(coins) or rest < 0:
            return 0
        return (ways(i, rest - coins[i]) + ways(i + 1, rest)) % MOD

    print(ways(0, total))
""", {False: (60, "totals up to 600"), True: (500, "totals up to 5000")}),
    "stairs": ("""Input: a line with N, a line of allowed step sizes, a line of broken stairs.
Prints the number of ways to climb from stair 0 to stair N with the allowed steps without
landing on a broken stair, modulo 1000000007.""", """\
    lines = open(sys.argv[1]).read().split("\\n")
    n, steps = int(lines[0]), [int(x) for x in lines[1].split()]
    broken = [int(x) for x in lines[2].split()]

    def ways(i):
        if i < 0 or i in broken:
            return 0
        if i == 0:
            return 1
        return sum(ways(i - s) for s in steps) % MOD

    print(ways(n))
""", {False: (60, "N up to 600 with 60 broken stairs"), True: (500, "N up to 5000 with 500 broken stairs")}),
}

_REC_BODY = '''
SIZE = __SIZE__


@pytest.mark.weight(1)
def test_small_inputs():
    rng = random.Random(21)
    for size in (1, 2, 3, 5, 8):
        check(ref.rec_input(KIND, rng, size))
    check(ref.rec_input(KIND, rng, SIZE // 3))


@pytest.mark.weight(2)
def test_largest_input_in_time():
    t, t_ref = check(ref.rec_input(KIND, random.Random(22), SIZE))
    print(f"{t:.2f} s, reference {t_ref:.2f} s")


@pytest.mark.weight(1)
def test_another_largest_input():
    check(ref.rec_input(KIND, random.Random(23), SIZE))
'''


def _deep_recursion(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_RECS))
    deep = rng.random() < 0.5
    doc, body, sizes = _RECS[kind]
    size, limit = sizes[deep]
    name = rng.choice(["count", "solve", "ways", "calc"])
    program = f"/app/{name}.py"
    slow = f'''"""{doc}
"""
import sys

MOD = 1000000007


def main():
{body}

if __name__ == "__main__":
    main()
'''
    sample = h1_perf.rec_input(kind, rng, rng.randint(3, 6))
    instruction = f"""\
`{program} FILE` computes the right answer, but its running time explodes with the input size:
it never finishes on real inputs. Its docstring describes the input and output;
`/app/sample.txt` is a small example.

Make `{program}` fast: with the same command line it must print exactly the same output for every
valid input, and finish inputs as large as {limit} in a few seconds. Keep it a Python 3
program that uses only the standard library.
"""
    solution = f"""cat > {program} <<'PY'
import sys
MOD = 1_000_000_007
{_fast_source("rec_fast").replace("from collections import deque", "")}


sys.stdout.write(rec_fast({kind!r}, open(sys.argv[1]).read()))
PY
"""
    tests = _timed_tests("rec", kind, program, _REC_BODY.replace("__SIZE__", str(size)))
    difficulty = ("hard" if kind in ("grid-paths", "edit-distance") else "medium") if deep else \
        ("easy" if kind == "stairs" else "medium")
    return Instance(instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
                    variant=f"{kind}/{'deep' if deep else 'shallow'}",
                    files={f"{name}.py": slow, "sample.txt": sample},
                    test_files={"h1_perf.py": source(h1_perf)}, tags=("python", "dynamic-programming"),
                    verifier_timeout_sec=240.0)


FAMILIES.append(Family("deep-recursion", "performance", "train",
                       "an exponential recursion (grid paths, edit distance, coin change, stairs) to "
                       "turn into a fast computation, some inputs deeper than Python's recursion limit",
                       _deep_recursion))
