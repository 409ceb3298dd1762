#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/customer_totals <<'PY'
#!/usr/bin/env python3
import csv, sys
from decimal import Decimal
from collections import defaultdict

agg = defaultdict(lambda: [0, Decimal(0)])
with open(sys.argv[1], newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):
        if (row.get("status") or "").strip().lower() != "paid":
            continue
        agg[row["customer"]][0] += 1
        agg[row["customer"]][1] += Decimal(row["amount"].replace(",", "").strip())
w = csv.writer(sys.stdout, lineterminator="\n")
w.writerow(["customer", "orders", "total"])
for cust in sorted(agg, key=lambda c: (-agg[c][1], c.encode())):
    w.writerow([cust, agg[cust][0], f"{agg[cust][1]:.2f}"])
PY
chmod +x /app/customer_totals
