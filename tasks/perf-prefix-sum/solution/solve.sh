#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/rangeq
python3 - <<'PY'
from pathlib import Path
p = Path("rangeq.py")
s = p.read_text()
start = s.index("def build_prefix(values):")
end = s.index("def main()")
s = s[:start] + '''def answer(values, queries):
    """A Fenwick (binary indexed) tree: O(log n) per sum and per update, instead of
    rebuilding all prefix sums for every query."""
    n = len(values)
    tree = [0] * (n + 1)
    for i, v in enumerate(values, 1):          # O(n) construction
        tree[i] += v
        j = i + (i & -i)
        if j <= n:
            tree[j] += tree[i]

    def prefix(i):
        s = 0
        while i > 0:
            s += tree[i]
            i &= i - 1
        return s

    out = []
    for op, a, b in queries:
        if op == "set":
            if not 1 <= a <= n:
                out.append("error")
                continue
            delta = b - values[a - 1]
            values[a - 1] = b
            i = a
            while i <= n:
                tree[i] += delta
                i += i & -i
            continue
        if not 1 <= a <= b <= n:
            out.append("error")
            continue
        total = prefix(b) - prefix(a - 1)
        if op == "sum":
            out.append(str(total))
        else:
            out.append(f"{total / (b - a + 1):.6f}")
    return out


''' + s[end:]
p.write_text(s)
PY
python3 rangeq.py < example.txt
