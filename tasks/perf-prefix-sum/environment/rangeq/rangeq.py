#!/usr/bin/env python3
"""rangeq.py < INPUT: answers range queries over an array of integers.

INPUT (whitespace-separated tokens, line breaks anywhere):
    N  a_1 ... a_N  Q  then Q queries, each an operation and two integers:
      sum L R     prints a_L + ... + a_R                       (1 <= L <= R <= N)
      mean L R    prints (a_L + ... + a_R) / (R - L + 1) with 6 decimals ("%.6f" of the float
                  quotient of the exact integer sum)
      set I V     sets a_I = V and prints nothing                (1 <= I <= N)
A query whose positions are out of range prints "error" (and changes nothing).
Values are integers of any size (Python ints). One output line per printing query.
"""

import sys


def build_prefix(values):
    prefix = [0]
    for v in values:
        prefix.append(prefix[-1] + v)
    return prefix


def answer(values, queries):
    out = []
    n = len(values)
    for op, a, b in queries:
        if op == "set":
            if not 1 <= a <= n:
                out.append("error")
                continue
            values[a - 1] = b
            continue
        if not 1 <= a <= b <= n:
            out.append("error")
            continue
        prefix = build_prefix(values)
        total = prefix[b] - prefix[a - 1]
        if op == "sum":
            out.append(str(total))
        else:
            out.append(f"{total / (b - a + 1):.6f}")
    return out


def main() -> int:
    tokens = sys.stdin.read().split()
    n = int(tokens[0])
    values = [int(t) for t in tokens[1:1 + n]]
    q = int(tokens[1 + n])
    pos = 2 + n
    queries = []
    for _ in range(q):
        queries.append((tokens[pos], int(tokens[pos + 1]), int(tokens[pos + 2])))
        pos += 3
    out = answer(values, queries)
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
