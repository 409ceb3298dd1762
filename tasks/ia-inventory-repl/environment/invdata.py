# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Initial inventory and the stock-take sheet; the expected final state is computed from them."""
import random
from decimal import ROUND_HALF_UP, Decimal

CATS = {"A": "adapters", "B": "batteries", "C": "cables", "D": "displays"}
NOUNS = {"adapters": ["USB-C to HDMI", "Travel plug EU-UK", "DisplayPort to DVI", "USB-A to USB-C", "Audio jack splitter", "Mini DP to HDMI", "Lightning to USB"],
         "batteries": ["AA alkaline 4-pack", "AAA NiMH 2-pack", "CR2032 coin cell", "9V block", "18650 Li-ion"],
         "cables": ["HDMI 2m", "Cat6 patch 5m", "USB-C 1m braided", "Power cord C13", "SATA data 50cm", "Fibre LC-LC 3m"],
         "displays": ["24in IPS monitor", "27in 4K monitor", "Portable 15in display", "Monitor arm single"]}


def initial():
    rng = random.Random(20241001)
    items = {}
    for prefix, cat in CATS.items():
        for i, name in enumerate(NOUNS[cat]):
            sku = f"{prefix}-{1001 + i * 7}"
            cents = rng.randint(99, 45999) if cat == "displays" else rng.randint(49, 4999)
            items[sku] = {"name": name, "category": cat, "qty": rng.randint(0, 300), "price_cents": cents}
    return items


def stocktake():
    items = initial()
    rng = random.Random(7)
    skus = sorted(items)
    counted = {s: (items[s]["qty"] if rng.random() < 0.25 else max(0, items[s]["qty"] + rng.randint(-30, 12)))
               for s in rng.sample(skus, 12)}
    rest = [s for s in skus if s not in counted]
    discontinued = rng.sample(rest, 2)
    new = [("C-1101", "Thunderbolt 4 cable 0.8m", "cables", 35, "29.90"),
           ("A-1101", "USB-C multiport hub", "adapters", 12, "54.50"),
           ("B-1101", "AA lithium 8-pack", "batteries", 80, "17.99")]
    return counted, discontinued, new, ("adapters", Decimal("12.5"))


def sheet():
    counted, discontinued, new, (cat, pct) = stocktake()
    items = initial()
    lines = ["STOCK TAKE 2024-10-01 -- warehouse B", "", "1. Counted quantities (replace the quantity on record):", "",
             "   SKU        counted"]
    lines += [f"   {s:<10} {q}" for s, q in counted.items()]
    lines += ["", "2. Discontinued (remove from the inventory):", ""]
    lines += [f"   {s}  ({items[s]['name']})" for s in discontinued]
    lines += ["", "3. New items received (add them):", "",
              "   SKU        name                          category    qty   unit price"]
    lines += [f"   {s:<10} {n:<29} {c:<11} {q:<5} {p}" for s, n, c, q, p in new]
    lines += ["", f"4. Supplier price change: every item of category \"{cat}\" that is in the inventory",
              f"   BEFORE the new items are added costs {pct}% more (rounded to the cent, half up).", ""]
    return "\n".join(lines)


def adjusted(cents, pct):
    return int((Decimal(cents) * (Decimal(100) + pct) / Decimal(100)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def expected():
    items = initial()
    counted, discontinued, new, (cat, pct) = stocktake()
    for s, q in counted.items():
        items[s]["qty"] = q
    for s in discontinued:
        del items[s]
    for s, it in items.items():
        if it["category"] == cat:
            it["price_cents"] = adjusted(it["price_cents"], pct)
    for s, n, c, q, p in new:
        items[s] = {"name": n, "category": c, "qty": q, "price_cents": int(Decimal(p) * 100)}
    return items
