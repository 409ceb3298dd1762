# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Queries the repaired database and compares it with the expected repair of the original data
(regenerated here from the same deterministic generator)."""
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from shopdata import generate  # noqa: E402

DB = "/app/data/shop.db"
CUSTOMERS, ORDERS, ITEMS = generate()


def norm(email):
    return email.strip(" \t\r\n").lower()


CANON = {}
for cid, _, email, _ in sorted(CUSTOMERS):
    CANON.setdefault(norm(email), cid)
CANON_OF = {c[0]: CANON[norm(c[2])] for c in CUSTOMERS}
ORDER_IDS = {o[0] for o in ORDERS}
VALID_ITEMS = sorted(tuple(i) for i in ITEMS if i[1] in ORDER_IDS)


def q(sql, *args):
    db = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def test_emails_normalized():
    rows = q("SELECT id, email FROM customers")
    assert rows, "no customers left"
    bad = [(i, e) for i, e in rows if e != norm(e)]
    assert not bad, f"{len(bad)} emails not normalized, e.g. {bad[:3]}"


def test_duplicates_merged():
    rows = q("SELECT id, name, email, created FROM customers ORDER BY id")
    want = sorted((c[0], c[1], norm(c[2]), c[3]) for c in CUSTOMERS if c[0] == CANON_OF[c[0]])
    assert rows == want, f"customers: {len(rows)} rows, expected {len(want)}"


def test_orders_reassigned():
    rows = q("SELECT id, customer_id, placed FROM orders ORDER BY id")
    want = [(o[0], CANON_OF[o[1]], o[2]) for o in sorted(ORDERS)]
    assert len(rows) == len(want), "orders were deleted or added"
    wrong = [(r, w) for r, w in zip(rows, want) if r != w]
    assert not wrong, f"{len(wrong)} orders belong to the wrong customer, e.g. {wrong[:2]}"


def test_orphan_items_removed():
    rows = q("SELECT id, order_id, sku, qty, price_cents FROM order_items ORDER BY id")
    assert rows == VALID_ITEMS, f"order_items: {len(rows)} rows, expected {len(VALID_ITEMS)}"


def test_totals_recomputed():
    sums = {}
    for _, oid, _, qty, price in VALID_ITEMS:
        sums[oid] = sums.get(oid, 0) + qty * price
    rows = dict(q("SELECT id, total_cents FROM orders"))
    wrong = [oid for oid in ORDER_IDS if rows.get(oid) != sums.get(oid, 0)]
    assert not wrong, f"{len(wrong)} orders have a wrong total, e.g. order {wrong[:3]}"


def test_unique_index():
    idx = {name: unique for _, name, unique, *_ in q("PRAGMA index_list(customers)")}
    assert idx.get("idx_customers_email") == 1, f"indexes on customers: {idx}"
    cols = [r[2] for r in q("PRAGMA index_info(idx_customers_email)")]
    assert cols == ["email"]
    assert q("PRAGMA integrity_check") == [("ok",)]
    with tempfile.TemporaryDirectory() as tmp:
        copy = shutil.copy(DB, os.path.join(tmp, "copy.db"))
        db = sqlite3.connect(copy)
        email = db.execute("SELECT email FROM customers LIMIT 1").fetchone()[0]
        try:
            db.execute("INSERT INTO customers (name, email) VALUES ('x', ?)", (email,))
            raise AssertionError("a duplicate email could be inserted")
        except sqlite3.IntegrityError:
            pass
        finally:
            db.close()
