#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cat > /app/latency_report.sh <<'SCRIPT'
#!/usr/bin/env python3
import gzip, math, re, sys
from collections import defaultdict

PAIR = re.compile(r'(?:^|\s)([^\s=]+)=("[^"]*"|\S*)')
lat = defaultdict(list)
for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            kv = {}
            pos = 0
            for m in PAIR.finditer(line):
                kv.setdefault(m.group(1), m.group(2))
            if kv.get("event") == "http_request" and "route" in kv and "latency_ms" in kv:
                lat[kv["route"]].append(float(kv["latency_ms"]))
for route in sorted(lat, key=str.encode):
    v = sorted(lat[route]); n = len(v)
    pct = [v[max(1, -(-p * n // 100)) - 1] for p in (50, 90, 99)]
    print("\t".join([route, str(n)] + [f"{x:.3f}" for x in pct + [v[-1]]]))
SCRIPT
chmod +x /app/latency_report.sh
