"""Small Python command-line tools with injectable bugs (the py-tool-bugfix family).

Each tool is a template whose ``{{SITE}}`` markers take the correct or the buggy text of a bug
site; ``render(tool, bugs)`` writes the tool with the given bugs, ``render(tool, ())`` is the
reference. ``make_input(tool, rng)`` draws an input file (text) and the extra arguments; every
input it draws exercises every bug site. Standard library only."""

import re

TOOLS = {}

TOOLS["spans"] = dict(file="spans.py", template='''"""Merge ranges.

Usage: python3 spans.py FILE

FILE holds one range per line, `START END` (integers, START <= END), the half-open range
[START, END). Blank lines and lines starting with `#` are ignored. Ranges that overlap or touch
(one ends exactly where another starts) are merged into one. Prints the merged ranges in
increasing order, one per line as `START END`, then the line `covered N` where N is the total
length covered by the merged ranges.
"""
import sys


def read_ranges(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            a, b = line.split()
            out.append((int(a), int(b)))
    return out


def merge(ranges):
    merged = []
    for a, b in sorted(ranges{{SORTKEY}}):
        if merged and a {{TOUCH}} merged[-1][1]:
            merged[-1][1] = {{NEST}}
        else:
            merged.append([a, b])
    return merged


def main():
    merged = merge(read_ranges(sys.argv[1]))
    for a, b in merged:
        print(a, b)
    print("covered", sum({{LEN}} for a, b in merged))


if __name__ == "__main__":
    main()
''', bugs={
    "touching": ("TOUCH", "<=", "<", "ranges that only touch are printed separately"),
    "sort-key": ("SORTKEY", "", ", key=lambda r: r[1]", "some overlapping ranges are not merged"),
    "nested": ("NEST", "max(merged[-1][1], b)", "b", "a range inside another one cuts the merged range short"),
    "inclusive-len": ("LEN", "b - a", "b - a + 1", "the covered total is too large"),
})

TOOLS["topwords"] = dict(file="topwords.py", template='''"""Most frequent words.

Usage: python3 topwords.py FILE N

A word is a maximal run of ASCII letters and digits ([A-Za-z0-9]), compared case-insensitively
(print it in lower case). Prints the N most frequent words of FILE, one per line as
`COUNT WORD`, most frequent first; words with the same count are ordered alphabetically. If FILE
has fewer than N distinct words, prints all of them.
"""
import re
import sys


def count_words(text):
    counts = {}
    for word in re.findall(r"{{PATTERN}}", text{{CASE}}):
        counts[word] = counts.get(word, 0) + 1
    return counts


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    n = int(sys.argv[2])
    counts = count_words(text)
    ranked = sorted(counts.items(), key={{ORDER}})
    for word, count in ranked[:{{TOPN}}]:
        print(count, word)


if __name__ == "__main__":
    main()
''', bugs={
    "case": ("CASE", ".lower()", "", "`The` and `the` are counted as different words"),
    "digits": ("PATTERN", "[a-z0-9]+", "[a-z]+", "words with digits in them, like `mp3`, are counted wrong"),
    "tie-order": ("ORDER", "lambda kv: (-kv[1], kv[0])", "lambda kv: -kv[1]",
                  "words with the same count come out in a different order on every file"),
    "top-n": ("TOPN", "n", "n - 1", "it prints one word fewer than asked for"),
})

TOOLS["runlength"] = dict(file="runlength.py", template='''"""Run-length coding.

Usage: python3 runlength.py FILE

Each non-blank line of FILE is a command: `enc TEXT` or `dec CODE`. TEXT is a run of lower-case
letters; `enc` prints its run-length code: each maximal run of one letter as its length followed
by the letter (`aaab` -> `3a1b`). `dec` prints the text that a code stands for. A code is valid
only if the whole of it is a sequence of (a positive count without leading zeros, one lower-case
letter) pairs; for an invalid code `dec` prints `error`. Counts may have several digits.
"""
import re
import sys

CODE = re.compile(r"{{ANCHOR}}")


def encode(text):
    out = []
    run = 1
    for i in range(1, {{RANGE}}):
        if i < len(text) and text[i] == text[i - 1]:
            run += 1
        else:
            out.append(f"{run}{text[i - 1]}")
            run = 1
    return "".join(out)


def decode(code):
    if not CODE.{{MATCH}}(code):
        return "error"
    return "".join(ch * int(n) for n, ch in re.findall(r"{{COUNT}}([a-z])", code))


def main():
    for line in open(sys.argv[1]):
        line = line.strip()
        if not line:
            continue
        cmd, _, arg = line.partition(" ")
        print(encode(arg) if cmd == "enc" else decode(arg))


if __name__ == "__main__":
    main()
''', bugs={
    "last-run": ("RANGE", "len(text) + 1", "len(text)", "the last run of a text is missing from its code"),
    "anchoring": ("MATCH", "fullmatch", "match", "codes with trailing garbage are decoded instead of rejected"),
    "multi-digit": ("COUNT", "([1-9][0-9]*)", "([0-9])", "runs longer than nine letters decode wrong"),
    "leading-zero": ("ANCHOR", "(?:[1-9][0-9]*[a-z])+", "(?:[0-9]+[a-z])+", "codes like `03a` are accepted"),
})

TOOLS["shelves"] = dict(file="shelves.py", template='''"""Warehouse shelves.

Usage: python3 shelves.py FILE

Each non-blank line of FILE is an operation on a shelf:
  `put SHELF ITEM QTY`   adds QTY (a positive integer) units of ITEM to SHELF,
  `take SHELF ITEM QTY`  removes up to QTY units of ITEM from SHELF (no more than it holds; an
                         item whose count reaches 0 is no longer on the shelf).
Shelves come into existence with their first operation, empty. At the end, prints every shelf
in alphabetical order as `SHELF: ITEM=QTY ITEM=QTY ...` (its items alphabetically; nothing after
the colon for an empty shelf, and no space after it either), then `average A` where A is the
mean number of units per shelf with exactly two decimals, then `largest SHELF`, the shelf with
the most units (the alphabetically first one on a tie).
"""
import sys


class Shelf:
    def __init__(self, name, items{{DEFAULT}}):
        self.name = name
        self.items = items{{INIT}}

    def put(self, item, qty):
        self.items[item] = self.items.get(item, 0) + qty

    def take(self, item, qty):
        left = self.items.get(item, 0) - qty
        if left {{EMPTY}} 0:
            self.items.pop(item, None)
        else:
            self.items[item] = left

    def units(self):
        return sum(self.items.values())


def main():
    shelves = {}
    for line in open(sys.argv[1]):
        parts = line.split()
        if not parts:
            continue
        op, shelf, item, qty = parts
        if shelf not in shelves:
            shelves[shelf] = Shelf(shelf)
        getattr(shelves[shelf], op)(item, int(qty))
    for name in sorted(shelves):
        items = " ".join(f"{k}={v}" for k, v in sorted(shelves[name].items.items()))
        print(f"{name}: {items}".rstrip())
    total = sum(s.units() for s in shelves.values())
    best, most = None, -1
    for name in sorted(shelves):
        {{LOOPVAR}} = shelves[name].units()
        if {{LOOPVAR}} > most:
            best, most = name, {{LOOPVAR}}
    print(f"average {{{AVG}}:.2f}")
    print("largest", best)


if __name__ == "__main__":
    main()
''', bugs={
    "mutable-default": ("DEFAULT", "=None", "={}", "every shelf lists the items of all the others"),
    "int-division": ("AVG", "total / len(shelves)", "total // len(shelves)", "the average is always a whole number"),
    "zero-left": ("EMPTY", "<=", "<", "items taken down to exactly zero still show up as ITEM=0"),
    "shadowed": ("LOOPVAR", "units", "total", "the average is wrong even when every shelf is right"),
})
# the correct constructor keeps its own dict
_INIT = {"=None": " if items is not None else {}", "={}": ""}


def render(tool, bugs):
    """The tool's source with ``bugs`` (names of its bug sites) injected."""
    spec = TOOLS[tool]
    text = spec["template"]
    chosen = {}
    for bug, (site, good, bad, _) in spec["bugs"].items():
        chosen[site] = bad if bug in bugs else good
    for site, value in chosen.items():
        text = text.replace("{{" + site + "}}", value)
    if "{{INIT}}" in text:
        text = text.replace("{{INIT}}", _INIT[chosen["DEFAULT"]])
    return text


def symptom(tool, bug):
    return TOOLS[tool]["bugs"][bug][3]


def _words(rng, k):
    base = ["alpha", "beta", "gamma", "delta", "mp3", "x86", "route", "node", "edge", "v2", "cache",
            "queue", "stack", "heap", "tree", "graph", "pixel", "r2d2", "kernel", "shell"]
    return rng.sample(base, k)


def make_input(tool, rng, size=1):
    """(file text, extra args) exercising every bug site of ``tool``."""
    if tool == "spans":
        rows = []
        x = rng.randint(0, 50)
        for _ in range(4 + 4 * size):
            a = x + rng.randint(1, 30)
            b = a + rng.randint(1, 40)
            rows.append((a, b))
            kind = rng.choice(["touch", "nest", "overlap", "gap"])
            if kind == "touch":
                rows.append((b, b + rng.randint(1, 9)))
            elif kind == "nest":
                rows.append((a + 1, max(a + 1, b - 2)))
            elif kind == "overlap":
                rows.append((a + (b - a) // 2, b + rng.randint(1, 20)))
            x = max(r[1] for r in rows)
        t = rows[0]
        rows += [(t[1], t[1] + 3), (t[0], t[0] + 1), (t[0] - 5, t[1] + 2)]
        rng.shuffle(rows)
        lines = [f"{a} {b}" for a, b in rows]
        lines.insert(rng.randint(0, len(lines)), "# ranges")
        lines.insert(rng.randint(0, len(lines)), "")
        return "\n".join(lines) + "\n", []
    if tool == "topwords":
        words = _words(rng, 8 + size)
        if not any(c.isdigit() for w in words[3:] for c in w):
            words[-1] = rng.choice(["mp3", "x86", "v2", "r2d2"])
        toks = []
        for i, w in enumerate(words):
            toks += [w] * (2 + (i // 2))  # pairs of words with the same count
        toks += [words[-2].upper(), words[-3].capitalize()] * 2
        rng.shuffle(toks)
        seps = [" ", ", ", ". ", "\n", " -- ", "; ", " (", ") "]
        text = "".join(t + rng.choice(seps) for t in toks)
        return text + "\n", [str(rng.randint(len(words) - 3, len(words) - 1))]
    if tool == "runlength":
        lines = []
        for _ in range(3 + 2 * size):
            text = "".join(rng.choice("abcxyz") * rng.choice([1, 1, 2, 3, 11, 12]) for _ in range(rng.randint(2, 5)))
            lines.append(f"enc {text}")
            code = "".join(f"{rng.choice([1, 2, 5, 10, 13])}{rng.choice('abcde')}" for _ in range(rng.randint(1, 4)))
            lines.append(f"dec {code}")
        lines += [f"dec 2a3b{rng.choice(['!', 'x9', '7', '-'])}", f"dec 0{rng.randint(1, 9)}a1b", "enc q",
                  f"dec {rng.randint(10, 30)}k"]
        rng.shuffle(lines)
        return "\n".join(lines) + "\n", []
    names = sorted(rng.sample(["a1", "b7", "c3", "dock", "east", "west", "north", "cold"], 3 + min(size, 3)))
    items = ["bolt", "nut", "gear", "pipe", "valve", "fuse", "cable"]
    lines, held = [], {}
    for _ in range(8 + 6 * size):
        s, it = rng.choice(names), rng.choice(items)
        if held.get((s, it)) and rng.random() < 0.4:
            q = rng.choice([held[(s, it)], rng.randint(1, held[(s, it)] + 3)])
            lines.append(f"take {s} {it} {q}")
            held[(s, it)] = max(0, held[(s, it)] - q)
        else:
            q = rng.randint(1, 20)
            lines.append(f"put {s} {it} {q}")
            held[(s, it)] = held.get((s, it), 0) + q
    lines += [f"put {names[0]} spare 7", f"take {names[0]} spare 7", f"put {names[-1]} crate 1",
              f"take {names[1]} ghost 2"]
    return "\n".join(lines) + "\n", []


def bug_sites(tool):
    return sorted(TOOLS[tool]["bugs"])

