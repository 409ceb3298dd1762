#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
mkdir -p /app/work
cd /app/logs
# 1. merge the rotated access logs, oldest first
{ zcat access.log.3.gz; zcat access.log.2.gz; cat access.log.1; cat access.log; } > /app/work/access_all.log
# 2. 5xx entries
awk '{ if (match($0, /" [0-9][0-9][0-9] /)) { s = substr($0, RSTART + 2, 3); if (s ~ /^5/) print } }' \
  /app/work/access_all.log > /app/work/errors.log
# 3-5. correlate, stats, summary
python3 - <<'PY'
import csv, datetime, gzip, json, math, re
from collections import Counter
ACC = re.compile(r'^\S+ \S+ \S+ \[([^\]]+)\] "(\S+) (\S+) [^"]*" (\d{3}) \S+ "[^"]*" "[^"]*" rid=(\S+) rt=(\d+)\.(\d{3})\s*$')
def iso(stamp):
    return datetime.datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z").strftime("%Y-%m-%dT%H:%M:%SZ")
err_line, any_user = {}, {}
for inst in ("app-1", "app-2"):
    with gzip.open(f"/app/logs/{inst}.log.gz", "rt") as fh:
        for line in fh:
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv and not kv.startswith("msg="))
            rid = f.get("rid")
            if not rid:
                continue
            any_user.setdefault(rid, f.get("user", "-"))
            if " ERROR " in line and rid not in err_line:
                err_line[rid] = (f.get("user", "-"), f.get("code", "-"))
entries = []
with open("/app/work/access_all.log") as fh:
    for line in fh:
        m = ACC.match(line.rstrip("\n"))
        if m:
            entries.append(m)
rows = []
with open("/app/work/errors.log") as fh:
    for line in fh:
        m = ACC.match(line.rstrip("\n"))
        rid = m[5]
        if rid in err_line:
            user, code = err_line[rid]
        else:
            user, code = any_user.get(rid, "-"), "-"
        rows.append([rid, iso(m[1]), m[2], m[3], m[4], user, code])
with open("/app/work/correlated.csv", "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["rid", "time", "method", "path", "status", "user", "error_code"])
    w.writerows(rows)
n = len(entries)
rts = sorted(int(m[6]) * 1000 + int(m[7]) for m in entries)
rate = round(len(rows) / n, 4)
stats = {"requests": n, "errors": len(rows), "error_rate": rate,
         "by_status": dict(Counter(r[4] for r in rows)), "by_error_code": dict(Counter(r[6] for r in rows)),
         "p95_rt_ms": rts[math.ceil(0.95 * n) - 1]}
json.dump(stats, open("/app/work/stats.json", "w"), indent=2)
def endpoint(method, path):
    segs = ["{id}" if s.isdigit() else s for s in path.split("?")[0].split("/")]
    return method + " " + "/".join(segs)
def top(counter):
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
summary = {"first_error": rows[0][1], "last_error": rows[-1][1],
           "top_error_code": top(Counter(r[6] for r in rows if r[6] != "-")),
           "affected_users": len({r[5] for r in rows if r[5] != "-"}),
           "worst_endpoint": top(Counter(endpoint(r[2], r[3]) for r in rows)),
           "error_rate": rate}
json.dump(summary, open("/app/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
