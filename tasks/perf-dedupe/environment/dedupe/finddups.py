#!/usr/bin/env python3
"""finddups.py FILE: reports the lines of FILE that occur more than once.

Lines are compared after normalisation: leading and trailing whitespace removed, runs of
whitespace inside the line replaced by one space, and lower-cased (str.lower). Lines that are
empty after normalisation are ignored.

For every normalised line that occurs at least twice, prints "COUNT<TAB>TEXT", in the order of
the first occurrence of each line; TEXT is that first occurrence exactly as in the file (without
its line break). Then prints "duplicates: D", D being the number of lines that repeat an earlier
line (the sum of COUNT - 1).
"""

import sys


def normalize(line: str) -> str:
    return " ".join(line.split()).lower()


def find_duplicates(lines):
    keys = []        # normalised lines, in order of first occurrence
    firsts = []      # the first occurrence of each, as written
    counts = []
    for line in lines:
        key = normalize(line)
        if not key:
            continue
        if key in keys:
            counts[keys.index(key)] += 1
        else:
            keys.append(key)
            firsts.append(line)
            counts.append(1)
    return [(c, t) for c, t in zip(counts, firsts) if c > 1]


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: finddups.py FILE", file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8", newline="\n") as f:
        lines = [line[:-1] if line.endswith("\n") else line for line in f]
    dups = find_duplicates(lines)
    out = [f"{count}\t{text}" for count, text in dups]
    out.append(f"duplicates: {sum(c - 1 for c, _ in dups)}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
