#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/dedupe
python3 - <<'PY'
from pathlib import Path
p = Path("finddups.py")
s = p.read_text()
start = s.index("def find_duplicates(lines):")
end = s.index("def main()")
s = s[:start] + '''def find_duplicates(lines):
    # a dict instead of list membership + list.index: O(n) instead of O(n^2);
    # dicts keep insertion order, which is the order of first occurrence
    seen = {}        # normalised line -> [count, first occurrence]
    for line in lines:
        key = normalize(line)
        if not key:
            continue
        entry = seen.get(key)
        if entry is None:
            seen[key] = [1, line]
        else:
            entry[0] += 1
    return [(c, t) for c, t in seen.values() if c > 1]


''' + s[end:]
p.write_text(s)
PY
printf 'b\nA\n a \nb\nc\n' > /tmp/dd.txt && python3 finddups.py /tmp/dd.txt && rm /tmp/dd.txt
