#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# Read the sheet, then drive the shell with one command (or confirmation answer) per line.
# The price change applies to the adapters on record BEFORE the new items are added.
python3 - <<'PY' > /tmp/commands.txt
import re
text = open("/app/stocktake.txt").read()
sec = re.split(r"\n\d\. ", "\n" + text)
counted = re.findall(r"^\s+([A-Z]-\d+)\s+(\d+)\s*$", sec[1], re.M)
disc = re.findall(r"^\s+([A-Z]-\d+)\s+\(", sec[2], re.M)
new = re.findall(r"^\s+([A-Z]-\d+)\s+(.+?)\s{2,}(\w+)\s+(\d+)\s+([\d.]+)\s*$", sec[3], re.M)
cat, pct = re.search(r'category "(\w+)".*?costs ([\d.]+)% more', sec[4], re.S).groups()
out = [f"set {s} qty {q}" for s, q in counted]
for s in disc:
    out += [f"remove {s}", "y"]
out += [f"adjust-prices {cat} {pct}", "y"]
out += [f'add {s} "{n}" {c} {q} {p}' for s, n, c, q, p in new]
out += ["save", "list", "quit"]
print("\n".join(out))
PY
cat /tmp/commands.txt
/app/inventory < /tmp/commands.txt
rm -f /tmp/commands.txt
