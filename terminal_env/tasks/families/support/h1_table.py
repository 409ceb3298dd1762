"""Delimited tables for the table-reshape family: canonical tables, the expected result of each
operation (computed from the canonical data), and a renderer with optional mess (BOM, CRLF,
blank lines, padded cells)."""

import csv
import io

METRICS = ["cpu", "mem", "disk", "net", "gpu", "io", "temp"]
REGIONS = ["north", "south", "east", "west", "central"]
NAMES = ["Ada Ltd", "Borealis", "Cobalt & Co", "Delta, Inc.", "Ember", "Fjord AB", "Gale"]


def make(op, rng, n):
    """(tables: name -> rows including header, expected rows including header)."""
    if op == "pivot":
        ents = [f"host{rng.randint(1, 99):02d}" for _ in range(max(2, n // 3))]
        rows, acc = [["entity", "metric", "value"]], {}
        for _ in range(n):
            e, m, v = rng.choice(ents), rng.choice(METRICS), rng.randint(-50, 500)
            rows.append([e, m, str(v)])
            acc[(e, m)] = acc.get((e, m), 0) + v
        ms = sorted({m for _, m in acc})
        exp = [["entity"] + ms] + [[e] + [str(acc[(e, m)]) if (e, m) in acc else "" for m in ms]
                                   for e in sorted({e for e, _ in acc})]
        return {"input.csv": rows}, exp
    if op == "unpivot":
        cols = rng.sample(METRICS, rng.randint(2, 5))
        rows, exp = [["id"] + cols], [["id", "column", "value"]]
        for i in range(n):
            rid = f"r{i + 1}"
            vals = ["" if rng.random() < 0.25 else str(rng.randint(0, 999)) for _ in cols]
            rows.append([rid] + vals)
            exp += [[rid, c, v] for c, v in zip(cols, vals) if v != ""]
        return {"input.csv": rows}, exp
    if op == "join":
        codes = rng.sample(range(100, 999), len(NAMES))
        custs = [["code", "name", "country"]] + [[f"C{c}", nm, rng.choice(["NO", "DE", "JP", "BR"])]
                                                  for c, nm in zip(codes, NAMES)]
        by = {r[0]: r for r in custs[1:]}
        orders, exp = [["order_id", "customer"]], [["order_id", "customer", "name", "country"]]
        for i in range(n):
            code = f"C{rng.choice(codes)}" if rng.random() < 0.85 else f"C{rng.randint(1000, 1999)}"
            shown = rng.choice([code, code.lower(), f" {code}", f"{code}  "])
            orders.append([f"o{i + 1:04d}", shown])
            hit = by.get(code)
            exp.append([f"o{i + 1:04d}", code, hit[1] if hit else "", hit[2] if hit else ""])
        return {"orders.csv": orders, "customers.csv": custs}, exp
    rows, acc = [["region", "amount"]], {}
    for _ in range(n):
        reg, cents = rng.choice(REGIONS), rng.randint(1, 500000)
        acc[reg] = acc.get(reg, 0) + cents
        whole, frac = divmod(cents, 100)
        text = rng.choice([f"{whole:,}.{frac:02d}", f"${whole}.{frac:02d}", f"{whole}.{frac:02d}",
                           f"$ {whole:,}.{frac:02d}"])
        rows.append([reg, text])
    exp = [["region", "total"]] + [[r, f"{acc[r] // 100}.{acc[r] % 100:02d}"] for r in sorted(acc)]
    return {"input.csv": rows}, exp


def render(rows, delim, messy, rng):
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delim, lineterminator="\n")
    for i, row in enumerate(rows):
        if messy and i and rng.random() < 0.3:
            row = [(" " * rng.randint(0, 2)) + c + (" " * rng.randint(0, 2)) if c.strip() == c else c
                   for c in row]
        w.writerow(row)
        if messy and rng.random() < 0.1:
            buf.write("\n")
    text = buf.getvalue()
    return ("\ufeff" + text.replace("\n", "\r\n")) if messy else text
