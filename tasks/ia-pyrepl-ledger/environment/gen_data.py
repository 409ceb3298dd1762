"""Writes /app/data/tx.bin and /app/data/rates.json (deterministic)."""
import datetime as dt
import json
import random
import struct

rng = random.Random(90210)
EPOCH = dt.date(2024, 1, 1)
BASE = {"USD": 0.92, "GBP": 1.17, "CHF": 1.04, "SEK": 0.087}
rates = {}
for cur, base in BASE.items():
    table, day, r = {}, 0, base
    while day < 366:
        r = round(r * (1 + rng.uniform(-0.02, 0.02)), 5)
        table[(EPOCH + dt.timedelta(days=day)).isoformat()] = r
        day += rng.randint(3, 12)
    rates[cur] = table
records = []
accounts = rng.sample(range(100, 999), 40)
for _ in range(2500):
    records.append(struct.pack("<HHBbi", rng.choice(accounts), rng.randrange(366), rng.choice([0, 0, 1, 1, 2, 3, 4]),
                               1 if rng.random() < 0.06 else 0, rng.randint(-250000, 400000)))
# an account whose every transaction was reversed
for day in (40, 41, 90):
    records.insert(rng.randrange(len(records)), struct.pack("<HHBbi", 77, day, 1, 1, rng.randint(1000, 90000)))
with open("/app/data/tx.bin", "wb") as f:
    f.write(struct.pack("<4sI", b"LKT1", len(records)) + b"".join(records))
with open("/app/data/rates.json", "w") as f:
    json.dump(rates, f, indent=1)
