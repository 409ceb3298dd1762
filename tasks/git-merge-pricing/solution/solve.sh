#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/shop
git checkout -q main
git merge feature/discounts || true
python3 - <<'PY'
import re
text = open("pricing.py").read()
head, rest = text.split("<<<<<<< HEAD\n", 1)
consts = '''SHIPPING_FEE = 599
FREE_SHIPPING_FROM = 7500
TAX_BP = {"north": 800, "south": 650, "east": 0, "west": 925}  # basis points
PERCENT_CODES = {"SAVE10": 10, "SAVE25": 25}
FLAT_CODES = {"FLAT5": 500, "FLAT20": 2000}


def subtotal(items):
    return sum(item["qty"] * item["unit_cents"] for item in items)


def tax(amount, region):
    """Sales tax for the order's optional region, rounded half up to a cent."""
    return (amount * TAX_BP.get(region, 0) + 5000) // 10000


def discount(amount, code):
    """Discount for an optional code; unknown codes give nothing. Never more than the amount."""
    if code in PERCENT_CODES:
        return amount * PERCENT_CODES[code] // 100
    if code in FLAT_CODES:
        return min(amount, FLAT_CODES[code])
    return 0


def total(order):
    sub = subtotal(order["items"])
    net = sub - discount(sub, order.get("code"))
    shipping = 0 if net >= FREE_SHIPPING_FROM else SHIPPING_FEE
    return net + tax(net, order.get("region")) + shipping
'''
tail = text[text.index("\n\ndef main():"):]
open("pricing.py", "w").write(head + consts + tail)

log = open("CHANGELOG.md").read()
log = re.sub(r"^(<<<<<<<.*|=======|>>>>>>>.*)\n", "", log, flags=re.M)
open("CHANGELOG.md", "w").write(log)
PY
echo '{"items": [{"sku": "A", "qty": 3, "unit_cents": 2999}], "region": "west", "code": "SAVE10"}' | python3 pricing.py
git add pricing.py CHANGELOG.md
git commit -q --no-edit
git log --oneline --graph -5
