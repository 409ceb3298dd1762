"""Reference stages of the pipe-gaps family: extract (three raw formats), clean, aggregate (three
summaries) and render, plus raw sensor data with the dirt the cleaning must remove."""

import json

RANGES = {"pm25": (0, 500), "noise": (20, 140), "temp": (-40, 60)}
STATIONS = ["ab12", "cd34", "ef56", "gh78", "ij90"]


def make_rows(rng, n):
    rows = []
    for _ in range(n):
        metric = rng.choice(sorted(RANGES))
        lo, hi = RANGES[metric]
        value = rng.choice([rng.randint(lo, hi)] * 8 + [None, lo - rng.randint(1, 50), hi + rng.randint(1, 50)])
        st = rng.choice(STATIONS)
        st = rng.choice([st, st.upper(), f" {st}", f"{st.upper()} "])
        ts = f"2026-04-{rng.randint(1, 4):02d}T{rng.randint(0, 23):02d}:{rng.choice([0, 30]):02d}:00"
        rows.append([st, ts, metric, value])
        if rng.random() < 0.15:
            rows.append([st.strip().lower(), ts, metric, rng.randint(lo, hi)])
    return rows


def render_raw(fmt, rows, rng):
    out = []
    if fmt == "csv":
        out.append("station;timestamp;metric;value")
        out += [f"{s};{t};{m};{'NA' if v is None else v}" for s, t, m, v in rows]
    elif fmt == "jsonl":
        out += [json.dumps({"time": t, "stn": s, "kind": m, "reading": v}) for s, t, m, v in rows]
    else:
        for s, t, m, v in rows:
            kv = [f'station="{s}"', f"metric={m}", f"value={'NA' if v is None else v}"]
            rng.shuffle(kv)
            out.append(f"{t} " + " ".join(kv))
    return "\n".join(out) + "\n"


def extract_csv(text):
    """Rows of `station;timestamp;metric;value` after a header line; value `NA` is null."""
    recs = []
    for line in text.splitlines()[1:]:
        if line.strip():
            s, t, m, v = line.split(";")
            recs.append({"station": s, "ts": t, "metric": m, "value": None if v == "NA" else int(v)})
    return recs


def extract_jsonl(text):
    """One JSON object per line with the keys time, stn, kind and reading (null when missing)."""
    recs = []
    for line in text.splitlines():
        if line.strip():
            o = json.loads(line)
            recs.append({"station": o["stn"], "ts": o["time"], "metric": o["kind"], "value": o["reading"]})
    return recs


def extract_logfmt(text):
    """Lines `TIMESTAMP key=value ...` with the keys station (double-quoted, may hold spaces),
    metric and value (`NA` is null), in any order."""
    recs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        ts, rest = line.split(" ", 1)
        kv = {}
        while rest.strip():
            rest = rest.strip()
            key, rest = rest.split("=", 1)
            if rest.startswith('"'):
                val, rest = rest[1:].split('"', 1)
            else:
                val, _, rest = rest.partition(" ")
            kv[key] = val
        v = kv["value"]
        recs.append({"station": kv["station"], "ts": ts, "metric": kv["metric"],
                     "value": None if v == "NA" else int(v)})
    return recs


def clean(recs):
    """Station ids trimmed and lower-cased; records without a value or with a value outside the
    metric's range (RANGES, inclusive) dropped; of records with the same (station, ts, metric)
    only the last one in input order kept; sorted by (station, ts, metric)."""
    last = {}
    for r in recs:
        r = dict(r, station=r["station"].strip().lower())
        lo, hi = RANGES[r["metric"]]
        if r["value"] is None or not lo <= r["value"] <= hi:
            continue
        last[(r["station"], r["ts"], r["metric"])] = r
    return [last[k] for k in sorted(last)]


def agg_daily(recs):
    """{station: {day: {metric: sum of values}}}, day being the first 10 characters of ts."""
    out = {}
    for r in recs:
        d = out.setdefault(r["station"], {}).setdefault(r["ts"][:10], {})
        d[r["metric"]] = d.get(r["metric"], 0) + r["value"]
    return out


def agg_range(recs):
    """{station: {metric: [min, max, count]}}."""
    out = {}
    for r in recs:
        cur = out.setdefault(r["station"], {}).get(r["metric"])
        v = r["value"]
        out[r["station"]][r["metric"]] = [v, v, 1] if cur is None else [min(cur[0], v), max(cur[1], v), cur[2] + 1]
    return out


def agg_median(recs):
    """{station: {metric: median of values}} (the mean of the two middle values for an even count)."""
    by = {}
    for r in recs:
        by.setdefault(r["station"], {}).setdefault(r["metric"], []).append(r["value"])
    out = {}
    for st, ms in by.items():
        for m, vs in ms.items():
            vs = sorted(vs)
            k = len(vs) // 2
            out.setdefault(st, {})[m] = vs[k] if len(vs) % 2 else (vs[k - 1] + vs[k]) / 2
    return out


def render_daily(agg):
    """CSV `station,day,metric,total`, rows sorted by station, day, metric."""
    lines = ["station,day,metric,total"]
    for st in sorted(agg):
        for day in sorted(agg[st]):
            lines += [f"{st},{day},{m},{v}" for m, v in sorted(agg[st][day].items())]
    return "\n".join(lines) + "\n"


def render_range(agg):
    """CSV `station,metric,min,max,count`, rows sorted by station, metric."""
    lines = ["station,metric,min,max,count"]
    for st in sorted(agg):
        lines += [f"{st},{m},{a},{b},{c}" for m, (a, b, c) in sorted(agg[st].items())]
    return "\n".join(lines) + "\n"


def render_median(agg):
    """CSV `station,metric,median`, the median with one decimal (`17.0`, `17.5`), rows sorted by
    station, metric."""
    lines = ["station,metric,median"]
    for st in sorted(agg):
        lines += [f"{st},{m},{float(v):.1f}" for m, v in sorted(agg[st].items())]
    return "\n".join(lines) + "\n"
