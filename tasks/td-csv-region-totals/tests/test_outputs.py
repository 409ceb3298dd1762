# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/region_totals.sh on hidden CSV files generated here, never present in the image."""

import random
import subprocess
import tempfile
from collections import defaultdict

SCRIPT = "/app/region_totals.sh"


def make_csv(seed: int):
    rng = random.Random(seed)
    regions = ["apac", "emea-2", "latam", "na_east", "Oceania", "zz-other", "Atlantis"]
    lines = ["region,product,units,unit_price"]
    agg = defaultdict(lambda: [0, 0, 0])  # orders, units, cents
    for i in range(rng.randint(150, 300)):
        region = rng.choice(regions)
        units = rng.randint(0, 500)
        cents = rng.randint(1, 250000)
        price = f"{cents // 100}.{cents % 100:02d}" if rng.random() < 0.7 else f"{cents / 100:g}"
        price_cents = round(float(price) * 100)
        lines.append(f"{region},item{rng.randint(1, 99)},{units},{price}")
        agg[region][0] += 1
        agg[region][1] += units
        agg[region][2] += units * price_cents
        if rng.random() < 0.03:
            lines.append("")
    return "\n".join(lines) + "\n", agg


def run(text: str) -> list[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, dir="/tmp") as f:
        f.write(text)
    out = subprocess.run([SCRIPT, f.name], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]}"
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    assert lines, "no output"
    return lines


def rows(lines):
    return {l.split(",")[0]: l.split(",") for l in lines[1:]}


def test_header_and_region_order():
    for seed in (11, 12):
        text, agg = make_csv(seed)
        lines = run(text)
        assert lines[0].strip() == "region,orders,units,revenue"
        got = [l.split(",")[0] for l in lines[1:]]
        assert got == sorted(agg, key=lambda s: s.encode()), got


def test_orders_and_units():
    for seed in (21, 22, 23):
        text, agg = make_csv(seed)
        r = rows(run(text))
        for region, (orders, units, _) in agg.items():
            assert region in r, f"region {region} missing"
            assert int(r[region][1]) == orders, (region, r[region])
            assert int(r[region][2]) == units, (region, r[region])


def test_revenue():
    for seed in (31, 32, 33):
        text, agg = make_csv(seed)
        r = rows(run(text))
        for region, (_, _, cents) in agg.items():
            assert region in r, f"region {region} missing"
            field = r[region][3]
            assert "." in field and len(field.split(".")[1]) == 2, f"not two decimals: {field}"
            assert abs(float(field) * 100 - cents) < 0.6, (region, field, cents / 100)
