# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Compares the saved database with the state the sheet describes."""

import sqlite3
import sys

import pytest

sys.path.insert(0, "/tests")
from invdata import expected, initial, stocktake  # noqa: E402

DB = "/app/data/inventory.db"


@pytest.fixture(scope="module")
def db():
    con = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    items = {r[0]: {"name": r[1], "category": r[2], "qty": r[3], "price_cents": r[4]}
             for r in con.execute("SELECT sku, name, category, qty, price_cents FROM items")}
    audit = [r[0] for r in con.execute("SELECT entry FROM audit")]
    return items, audit


def test_counted_quantities(db):
    items, _ = db
    counted, discontinued, _, _ = stocktake()
    for sku, q in counted.items():
        assert sku in items, f"{sku} is missing"
        assert items[sku]["qty"] == q, (sku, items[sku]["qty"], q)


def test_discontinued_removed(db):
    items, _ = db
    _, discontinued, _, _ = stocktake()
    for sku in discontinued:
        assert sku not in items, f"{sku} is still there"


def test_new_items(db):
    items, _ = db
    exp = expected()
    for sku, name, cat, _, _ in stocktake()[2]:
        assert sku in items, f"{sku} was not added"
        assert items[sku] == exp[sku], (sku, items[sku], exp[sku])


def test_price_change(db):
    items, _ = db
    exp = expected()
    cat = stocktake()[3][0]
    new = {s for s, *_ in stocktake()[2]}
    for sku, it in exp.items():
        if sku in items and sku not in new:
            assert items[sku]["price_cents"] == it["price_cents"], (sku, items[sku]["price_cents"], it["price_cents"])
    assert any(it["category"] == cat for it in items.values())


def test_nothing_else_changed(db):
    items, audit = db
    assert set(items) == set(expected()), f"extra {set(items) - set(expected())}, missing {set(expected()) - set(items)}"
    start = initial()
    counted, _, new, (cat, _) = stocktake()
    new_skus = {n[0] for n in new}
    for sku, it in items.items():
        if sku in new_skus:
            continue
        for field in ("name", "category"):
            assert it[field] == start[sku][field], (sku, field)
        if sku not in counted:
            assert it["qty"] == start[sku]["qty"], (sku, "qty")
        if start[sku]["category"] != cat:
            assert it["price_cents"] == start[sku]["price_cents"], (sku, "price")
    assert audit, "the changes were not saved through the inventory shell"
