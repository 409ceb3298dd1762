"""Inputs and fast reference programs for the performance families hot-loop and deep-recursion.

Run as ``python3 h1_perf.py KIND FILE``, it prints the reference output, which the hidden tests
time to set the agent's budget (a reference run on the same machine, under the same load)."""

import sys
from collections import deque


# ------------------------------------------------------------------ hot-loop


def loop_input(kind, rng, n):
    if kind == "close-pairs":
        w = rng.randint(5, 60)
        return f"{w}\n" + "\n".join(str(rng.randint(0, n * 20)) for _ in range(n)) + "\n"
    if kind == "earlier-smaller":
        return "\n".join(str(rng.randint(-n, n)) for _ in range(n)) + "\n"
    if kind == "window-max":
        k = rng.randint(2, max(3, n // 20))
        return f"{k}\n" + "\n".join(str(rng.randint(-10**6, 10**6)) for _ in range(n)) + "\n"
    if kind == "anagram-groups":
        letters = "aeinorst"
        words = set()
        while len(words) < n:
            words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 7))))
        words = sorted(words)
        rng.shuffle(words)
        return "\n".join(words) + "\n"
    # order-lookup: customers then orders
    ids = rng.sample(range(10**5, 10**6), max(2, n // 2))
    lines = [f"C,{i},cust{i % 9973}" for i in ids]
    lines += [f"O,{rng.choice(ids)},{rng.randint(1, 500)}" for _ in range(n)]
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def loop_fast(kind, text):
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if kind == "close-pairs":
        w, xs = int(lines[0]), sorted(int(x) for x in lines[1:])
        count, lo = 0, 0
        for hi, x in enumerate(xs):
            while x - xs[lo] > w:
                lo += 1
            count += hi - lo
        return f"{count}\n"
    if kind == "earlier-smaller":
        xs = [int(x) for x in lines]
        ranks = {v: i + 1 for i, v in enumerate(sorted(set(xs)))}
        tree, out = [0] * (len(ranks) + 1), []
        for x in xs:
            i, c = ranks[x] - 1, 0
            while i > 0:
                c += tree[i]
                i -= i & -i
            out.append(str(c))
            i = ranks[x]
            while i < len(tree):
                tree[i] += 1
                i += i & -i
        return "".join(o + "\n" for o in out)
    if kind == "window-max":
        k, xs = int(lines[0]), [int(x) for x in lines[1:]]
        dq, out = deque(), []
        for i, x in enumerate(xs):
            while dq and xs[dq[-1]] <= x:
                dq.pop()
            dq.append(i)
            if dq[0] <= i - k:
                dq.popleft()
            if i >= k - 1:
                out.append(str(xs[dq[0]]))
        return "".join(o + "\n" for o in out)
    if kind == "anagram-groups":
        groups = {}
        for w in lines:
            groups.setdefault("".join(sorted(w)), []).append(w)
        rows = [" ".join(sorted(g)) for g in groups.values() if len(g) > 1]
        return "".join(r + "\n" for r in sorted(rows))
    names, totals = {}, {}
    for ln in lines:
        t, key, val = ln.split(",")
        if t == "C":
            names[key] = val
    for ln in lines:
        t, key, val = ln.split(",")
        if t == "O":
            totals[names[key]] = totals.get(names[key], 0) + int(val)
    return "".join(f"{n} {totals[n]}\n" for n in sorted(totals))


# ------------------------------------------------------------------ deep-recursion

MOD = 1_000_000_007


def rec_input(kind, rng, size):
    if kind == "grid-paths":
        rows, cols = size, size + rng.randint(0, 5)
        grid = ["".join("#" if rng.random() < 0.15 and (r, c) not in ((0, 0), (rows - 1, cols - 1)) else "."
                        for c in range(cols)) for r in range(rows)]
        return "\n".join(grid) + "\n"
    if kind == "edit-distance":
        a = "".join(rng.choice("acgt") for _ in range(size))
        b = list(a)
        for _ in range(size // 3):
            b[rng.randrange(len(b))] = rng.choice("acgt")
        return a + "\n" + "".join(b[rng.randint(0, 3):]) + "\n"
    if kind == "coin-ways":
        # many small coins: the naive recursion makes millions of calls already at a total of 600
        coins = sorted(rng.sample(range(1, 12), rng.randint(5, 7)))
        return " ".join(map(str, coins)) + "\n" + str(size * 10) + "\n"
    # stairs: reachable with steps from a set, some stairs broken
    steps = sorted(rng.sample(range(1, 7), 3))
    broken = sorted(rng.sample(range(1, size * 10), size))
    return (f"{size * 10}\n" + " ".join(map(str, steps)) + "\n" + " ".join(map(str, broken)) + "\n")


def rec_fast(kind, text):
    lines = text.split("\n")
    if kind == "grid-paths":
        grid = [ln for ln in lines if ln]
        row = [0] * len(grid[0])
        for r, line in enumerate(grid):
            for c, ch in enumerate(line):
                if ch == "#":
                    row[c] = 0
                elif r == 0 and c == 0:
                    row[c] = 1
                else:
                    row[c] = (row[c] + (row[c - 1] if c else 0)) % MOD
        return f"{row[-1]}\n"
    if kind == "edit-distance":
        a, b = lines[0], lines[1]
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return f"{prev[-1]}\n"
    if kind == "coin-ways":
        coins, total = [int(x) for x in lines[0].split()], int(lines[1])
        ways = [1] + [0] * total
        for c in coins:
            for v in range(c, total + 1):
                ways[v] = (ways[v] + ways[v - c]) % MOD
        return f"{ways[total]}\n"
    n, steps = int(lines[0]), [int(x) for x in lines[1].split()]
    broken = set(int(x) for x in lines[2].split())
    ways = [1] + [0] * n
    for i in range(1, n + 1):
        if i not in broken:
            ways[i] = sum(ways[i - s] for s in steps if s <= i) % MOD
    return f"{ways[n]}\n"


if __name__ == "__main__":
    family, kind, path = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(path) as f:
        data = f.read()
    sys.stdout.write(loop_fast(kind, data) if family == "loop" else rec_fast(kind, data))
