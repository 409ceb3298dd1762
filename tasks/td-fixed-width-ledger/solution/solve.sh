#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/ledger2csv <<'PY'
#!/usr/bin/env python3
import csv, sys

recs = []
with open(sys.argv[1], encoding="utf-8", newline="") as f:
    for raw in f:
        line = raw.rstrip("\r\n")
        if len(line) >= 10 and line[:10].isdigit() and line[:10].isascii():
            amt = line[54:69].strip()
            neg = amt.endswith("-")
            amt = amt.rstrip("-").replace(",", "").strip()
            d = line[44:52]
            recs.append([line[:10], line[12:42].strip(), f"{d[:4]}-{d[4:6]}-{d[6:]}",
                         ("-" if neg else "") + amt, line[70:73].strip()])
        elif recs and line[:12].strip() == "" and line[12:42].strip() and not line[42:].strip():
            recs[-1][1] += " " + line[12:42].strip()
w = csv.writer(sys.stdout, lineterminator="\n")
w.writerow(["account", "name", "date", "amount", "currency"])
w.writerows(recs)
PY
chmod +x /app/ledger2csv
