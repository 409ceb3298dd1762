"""Order batches for the io-churn family, and the known-good pricing run.

Shipped to the hidden tests as ``pricing.py``: ``python3 pricing.py DIR USES_ALIASES`` writes
the known-good ``DIR/out.txt``, and its duration sets the job's wall-clock allowance."""

import json
import os
import sys


def make_dir(rng, n, path, aliases=False, dups=False):
    os.makedirs(path, exist_ok=True)
    codes = [f"{rng.choice('ABCDEFGHJK')}{rng.choice('LMNPQRSTUV')}-{i:05d}" for i in rng.sample(range(99999), n)]
    table = [(c, rng.randint(5, 99999)) for c in codes]
    if dups:
        for _ in range(max(1, n // 8)):
            c = rng.choice(codes)
            table.insert(rng.randint(0, len(table)), (c, rng.randint(5, 99999)))
    with open(os.path.join(path, "table.csv"), "w") as f:
        f.write("".join(f"{c},{p}\n" for c, p in table))
    alias = {}
    if aliases:
        for c in rng.sample(codes, max(1, n // 3)):
            alias[f"x{c.lower()}"] = rng.choice(codes)
        if dups:  # an alias that names another alias is not followed further
            keys = sorted(alias)
            for k in rng.sample(keys, max(1, len(keys) // 10)):
                alias[k] = rng.choice(keys)
        with open(os.path.join(path, "settings.json"), "w") as f:
            json.dump({"aliases": alias, "currency": "EUR"}, f, indent=1)
    names = codes + sorted(alias) + ["ZZ-00000", "unknown"]
    lines = []
    for i in range(n):
        lines.append(f"r{i:06d} {rng.choice(names)} {rng.randint(1, 40)}")
        if dups and rng.random() < 0.05:
            lines.append("")
    with open(os.path.join(path, "records.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def reference(path, aliases):
    prices = {}
    with open(os.path.join(path, "table.csv")) as f:
        for line in f:
            code, price = line.strip().split(",")
            prices.setdefault(code, int(price))
    alias = {}
    if aliases:
        with open(os.path.join(path, "settings.json")) as f:
            alias = json.load(f)["aliases"]
    out = []
    with open(os.path.join(path, "records.txt")) as f:
        for line in f:
            if not line.strip():
                continue
            rid, code, qty = line.split()
            code = alias.get(code, code)
            out.append(f"{rid} {code} {prices[code] * int(qty)}" if code in prices else f"{rid} {code} ?")
    with open(os.path.join(path, "out.txt"), "w") as f:
        f.write("".join(line + "\n" for line in out))


if __name__ == "__main__":
    reference(sys.argv[1], sys.argv[2] == "1")
