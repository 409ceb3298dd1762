#!/bin/bash
# Reference solution.
cat > /app/stats.py <<'PY'
from collections import Counter


def median(values):
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def mode(values):
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)
PY
