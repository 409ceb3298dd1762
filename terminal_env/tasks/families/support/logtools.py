"""Access logs for the log-rollup family: hits (one per request), three formats, three reports.

``given_hits(seed)`` rebuilds the hits behind an instance's /app/access.log from its seed."""

import json
import math
import random

ENDPOINTS = ["/api/users", "/api/orders", "/login", "/static/app.js", "/api/search", "/health",
             "/api/cart", "/admin", "/api/items", "/logout"]
USERS = ["ana", "bo", "chen", "dara", "eli", "fay", "gus", "hana", "ivo", "jun", "kai", "lea"]
STATUSES = [200, 200, 200, 201, 204, 301, 304, 400, 401, 403, 404, 500, 502, 503]


def make_hits(rng, n):
    hits = []
    for _ in range(n):
        day = rng.randint(1, 4)
        hits.append({
            "ts": f"2026-03-0{day}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
            "user": rng.choice(USERS), "method": rng.choice(["GET", "GET", "POST", "DELETE"]),
            "path": rng.choice(ENDPOINTS), "status": rng.choice(STATUSES),
            "bytes": rng.randint(0, 9000), "ms": rng.randint(1, 900),
        })
    return hits


def given_hits(seed):
    rng = random.Random(seed)
    return make_hits(rng, rng.randint(40, 120))


def render(fmt, hits, rng):
    out = []
    for r in hits:
        if fmt == "clf":
            out.append(f'10.0.{rng.randint(0, 9)}.{rng.randint(1, 250)} - {r["user"]} [{r["ts"]}] '
                       f'"{r["method"]} {r["path"]}" {r["status"]} {r["bytes"]} {r["ms"]}ms')
        elif fmt == "jsonl":
            keys = list(r)
            rng.shuffle(keys)
            out.append(json.dumps({k: r[k] for k in keys}))
        else:
            pairs = [f"{k}={r[k]}" for k in r]
            rng.shuffle(pairs)
            out.append(" ".join(pairs))
    return "\n".join(out) + "\n"


def report(kind, hits):
    if kind == "status-by-path":
        res = {}
        for r in hits:
            cls = f"{r['status'] // 100}xx"
            res.setdefault(r["path"], {}).setdefault(cls, 0)
            res[r["path"]][cls] += 1
        return res
    if kind == "p90-latency":
        by = {}
        for r in hits:
            by.setdefault(r["path"], []).append(r["ms"])
        return {p: sorted(v)[math.ceil(0.9 * len(v)) - 1] for p, v in by.items()}
    days = {}
    for r in hits:
        if r["status"] < 500:
            days.setdefault(r["ts"][:10], set()).add(r["user"])
    return {d: len(u) for d, u in days.items()}
