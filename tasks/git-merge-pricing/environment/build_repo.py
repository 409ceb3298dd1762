"""Builds /app/shop deterministically (fixed identities and dates)."""
import os
import subprocess
from pathlib import Path

REPO = Path("/app/shop")
T0 = 1711962000  # 2024-04-01 09:00:00 UTC
STEP = [0]
MIRA = ("Mira Castellanos", "mira@shop.test")
JONAS = ("Jonas Eberhardt", "jonas@shop.test")


def git(*args, who=MIRA):
    STEP[0] += 1
    when = f"{T0 + STEP[0] * 3600} +0000"
    env = dict(os.environ, GIT_AUTHOR_NAME=who[0], GIT_AUTHOR_EMAIL=who[1], GIT_AUTHOR_DATE=when,
               GIT_COMMITTER_NAME=who[0], GIT_COMMITTER_EMAIL=who[1], GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", *args], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True).stdout


def write(rel, text):
    p = REPO / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def commit(msg, who=MIRA):
    git("add", "-A", who=who)
    git("commit", "-q", "-m", msg, who=who)


HEAD = '''"""Order pricing. All money is in integer cents.

An order is JSON: {"items": [{"sku": "A1", "qty": 2, "unit_cents": 1299}, ...], ...}
Usage: python3 pricing.py < order.json   (prints the total in cents)
"""
import json
import sys

'''
SUBTOTAL = '''

def subtotal(items):
    return sum(item["qty"] * item["unit_cents"] for item in items)
'''
MAIN = '''

def main():
    order = json.load(sys.stdin)
    print(total(order))


if __name__ == "__main__":
    main()
'''

REPO.mkdir(parents=True)
git("init", "-q", "-b", "main")
git("config", "user.name", MIRA[0])
git("config", "user.email", MIRA[1])

write("README.md", "# shop\n\nPricing for the web shop: `python3 pricing.py < order.json`.\n")
write("CHANGELOG.md", "# Changelog\n\n- Initial pricing: subtotal plus flat shipping.\n")
write("pricing.py", HEAD + '''SHIPPING_FEE = 499
FREE_SHIPPING_FROM = 5000
''' + SUBTOTAL + '''

def total(order):
    sub = subtotal(order["items"])
    shipping = 0 if sub >= FREE_SHIPPING_FROM else SHIPPING_FEE
    return sub + shipping
''' + MAIN)
commit("Initial pricing")

write(".gitignore", "__pycache__/\n")
commit("Ignore bytecode")

# feature branch: discount codes
git("checkout", "-q", "-b", "feature/discounts")
write("pricing.py", HEAD + '''SHIPPING_FEE = 499
FREE_SHIPPING_FROM = 5000
PERCENT_CODES = {"SAVE10": 10, "SAVE25": 25}
FLAT_CODES = {"FLAT5": 500, "FLAT20": 2000}
''' + SUBTOTAL + '''

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
    # free shipping is judged on what the customer actually pays for the goods
    shipping = 0 if net >= FREE_SHIPPING_FROM else SHIPPING_FEE
    return net + shipping
''' + MAIN)
commit("Discount codes: percent and flat", who=JONAS)
write("CHANGELOG.md", "# Changelog\n\n- Initial pricing: subtotal plus flat shipping.\n"
      "- Discount codes (optional \"code\" in the order); shipping judged after discount.\n")
commit("Changelog: discount codes", who=JONAS)

# main moves on: regional tax and new shipping rates
git("checkout", "-q", "main")
write("pricing.py", HEAD + '''SHIPPING_FEE = 599
FREE_SHIPPING_FROM = 7500
TAX_BP = {"north": 800, "south": 650, "east": 0, "west": 925}  # basis points
''' + SUBTOTAL + '''

def tax(amount, region):
    """Sales tax for the order's optional region, rounded half up to a cent."""
    return (amount * TAX_BP.get(region, 0) + 5000) // 10000


def total(order):
    sub = subtotal(order["items"])
    shipping = 0 if sub >= FREE_SHIPPING_FROM else SHIPPING_FEE
    return sub + tax(sub, order.get("region")) + shipping
''' + MAIN)
commit("Regional sales tax; new carrier shipping rates")
write("CHANGELOG.md", "# Changelog\n\n- Initial pricing: subtotal plus flat shipping.\n"
      "- Regional sales tax (optional \"region\"); shipping 5.99, free from 75.00.\n")
commit("Changelog: tax and shipping")
