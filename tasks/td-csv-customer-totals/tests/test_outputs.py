# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/customer_totals on hidden exports generated here (never present in the image)."""

import csv
import io
import random
import subprocess
import tempfile
from collections import defaultdict

PROG = "/app/customer_totals"
PLAIN = ["Northwind", "Contoso", "Fabrikam", "Initech", "Umbrella", "Globex", "Hooli", "Vandelay"]
TRICKY = ["Lee, Ada", 'Bob "Bobby" Tables', "Zeta,Inc", '"Quoted"', "O'Brien, Pat & Co", "Globex ",
          "globex", "Wu,  Li"]
STATUSES_PAID = ["paid", "PAID", " Paid", "paid  "]
STATUSES_OTHER = ["refunded", "pending", "unpaid", "paid-back", "cancelled"]
NOTES_PLAIN = ["", "ok", "gift", "rush order", "leave at desk"]
NOTES_TRICKY = ["first line\nsecond line", "a, b, c", 'he said "no"', "x\r\ny", "\n", "line1\n\nline3"]


def make(seed, customers, notes, thousands, crlf, always_quote=False):
    rng = random.Random(seed)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n" if crlf else "\n",
                   quoting=csv.QUOTE_ALL if always_quote else csv.QUOTE_MINIMAL)
    w.writerow(["order_id", "customer", "amount", "note", "status"])
    agg = defaultdict(lambda: [0, 0])
    for i in range(rng.randint(120, 220)):
        cust = rng.choice(customers)
        cents = rng.randint(1, 2_500_000)
        if thousands and rng.random() < 0.5:
            amt = f"{cents / 100:,.2f}"
        else:
            amt = f"{cents // 100}.{cents % 100:02d}" if rng.random() < 0.8 else f"{cents / 100:g}"
        cents = round(float(amt.replace(",", "")) * 100)
        paid = rng.random() < 0.6
        status = rng.choice(STATUSES_PAID if paid else STATUSES_OTHER)
        w.writerow([50000 + i, cust, amt, rng.choice(notes), status])
        if paid:
            agg[cust][0] += 1
            agg[cust][1] += cents
    return buf.getvalue(), dict(agg)


def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, dir="/tmp", newline="") as f:
        f.write(text)
    out = subprocess.run([PROG, f.name], capture_output=True, timeout=30)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]!r}"
    rows = list(csv.reader(io.StringIO(out.stdout.decode("utf-8"), newline="")))
    rows = [r for r in rows if r]
    assert rows and rows[0] == ["customer", "orders", "total"], f"bad header: {rows[:1]}"
    return rows[1:]


def compare(text, agg):
    rows = run(text)
    got = {}
    for r in rows:
        assert len(r) == 3, f"row with {len(r)} fields: {r}"
        assert r[0] not in got, f"customer listed twice: {r[0]!r}"
        got[r[0]] = r
    assert set(got) == set(agg), f"customers differ: extra {set(got) - set(agg)}, missing {set(agg) - set(got)}"
    for cust, (n, cents) in agg.items():
        _, orders, total = got[cust]
        assert int(orders) == n, (cust, orders, n)
        assert "," not in total and len(total.split(".")[-1]) == 2 and "." in total, f"bad total {total!r}"
        assert abs(float(total) * 100 - cents) < 0.6, (cust, total, cents / 100)
    return rows


def test_plain_file():
    compare(*make(101, PLAIN, NOTES_PLAIN, thousands=False, crlf=False))


def test_quoted_customer_names():
    compare(*make(202, PLAIN[:3] + TRICKY, NOTES_PLAIN, thousands=False, crlf=False))
    compare(*make(203, PLAIN[:2] + TRICKY, NOTES_PLAIN, thousands=False, crlf=False, always_quote=True))


def test_thousands_separators():
    compare(*make(303, PLAIN, NOTES_PLAIN, thousands=True, crlf=False))


def test_multiline_notes_and_crlf():
    compare(*make(404, PLAIN, NOTES_TRICKY, thousands=False, crlf=True))


def test_everything_and_order():
    for seed in (505, 506):
        text, agg = make(seed, PLAIN + TRICKY, NOTES_PLAIN + NOTES_TRICKY, thousands=True, crlf=seed % 2 == 0)
        rows = compare(text, agg)
        expected = sorted(agg, key=lambda c: (-agg[c][1], c.encode()))
        assert [r[0] for r in rows] == expected
