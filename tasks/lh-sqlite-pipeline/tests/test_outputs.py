# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Sales pipeline: one check per step; expected data is derived here from the archive itself."""

import csv
import io
import os
import re
import shutil
import sqlite3
import tarfile
import tempfile
from collections import defaultdict

ARCHIVE = "/app/incoming/sales_2023.tar.gz"
DB = "/app/sales.db"


def members():
    with tarfile.open(ARCHIVE) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def parse_date(s):
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", s) or re.fullmatch(r"(\d{4})/(\d{2})/(\d{2})", s)
    if m:
        return f"{m[1]}-{m[2]}-{m[3]}"
    m = re.fullmatch(r"(\d{2})/(\d{2})/(\d{4})", s)
    assert m, s
    return f"{m[3]}-{m[2]}-{m[1]}"


def expected():
    files = members()
    prods = {}
    for r in list(csv.reader(io.StringIO(files["sales/products.csv"].decode())))[1:]:
        if r:
            prods[r[0].strip().upper()] = (r[0].strip().upper(), r[1].strip(), r[2].strip())
    out = {}
    for q in ("q1", "q2", "q3"):
        for r in list(csv.reader(io.StringIO(files[f"sales/orders_{q}.csv"].decode())))[1:]:
            if not r:
                continue
            oid, date, sku, qty, price, cust = (f.strip() for f in r)
            sku = sku.upper()
            if not qty.isdigit() or int(qty) < 1 or sku not in prods or int(oid) in out:
                continue
            out[int(oid)] = (int(oid), parse_date(date), sku, int(qty), round(float(price.lstrip("$")), 2), cust)
    return [out[k] for k in sorted(out)], prods


def money_close(a, b):
    return abs(float(a) - b) <= 0.006


def test_1_extracted():
    for name, data in members().items():
        path = os.path.join("/app/raw", name)
        assert os.path.isfile(path), f"missing {path}"
        with open(path, "rb") as fh:
            assert fh.read() == data, f"{path} differs from the archive"


def test_2_clean_csv():
    rows, _ = expected()
    with open("/app/clean/orders.csv", newline="") as fh:
        got = list(csv.reader(fh))
    assert got[0] == ["order_id", "order_date", "sku", "quantity", "unit_price", "customer"], got[0]
    body = [r for r in got[1:] if r]
    assert len(body) == len(rows), f"{len(body)} rows, expected {len(rows)}"
    for g, w in zip(body, rows):
        assert re.fullmatch(r"-?\d+\.\d\d", g[4]), f"price not written with two decimals: {g}"
        assert (int(g[0]), g[1], g[2], int(g[3]), float(g[4]), g[5]) == w, f"row {g}, expected {w}"


def test_3_loaded():
    rows, prods = expected()
    db = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        cols = db.execute("PRAGMA table_info(orders)").fetchall()
        assert [c[1] for c in cols] == ["order_id", "order_date", "sku", "quantity", "unit_price", "customer"], cols
        assert [c[5] for c in cols][0] == 1, "order_id must be the primary key"
        got = db.execute("SELECT order_id, order_date, sku, quantity, unit_price, customer FROM orders "
                         "ORDER BY order_id").fetchall()
        assert len(got) == len(rows), f"{len(got)} orders, expected {len(rows)}"
        for g, w in zip(got, rows):
            assert g[:4] == w[:4] and g[5] == w[5] and abs(g[4] - w[4]) < 1e-9, f"{g} vs {w}"
        types = db.execute("SELECT DISTINCT typeof(quantity), typeof(unit_price) FROM orders").fetchall()
        assert types == [("integer", "real")], f"column types {types}"
        assert sorted(db.execute("SELECT sku, name, category FROM products").fetchall()) == sorted(prods.values())
    finally:
        db.close()


def test_4_index_and_view():
    db = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    try:
        idx = db.execute("SELECT tbl_name FROM sqlite_master WHERE type='index' AND name='idx_orders_sku_date'").fetchall()
        assert idx == [("orders",)], "index idx_orders_sku_date on orders is missing"
        assert [r[2] for r in db.execute("PRAGMA index_info(idx_orders_sku_date)")] == ["sku", "order_date"]
        plan = " ".join(str(r) for r in db.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM orders WHERE sku = 'X' AND order_date >= '2023-02-01'"))
        assert "idx_orders_sku_date" in plan, plan
    finally:
        db.close()
    d = tempfile.mkdtemp(dir="/tmp")
    try:  # the view must follow the table: add hidden orders to a copy
        copy = os.path.join(d, "copy.db")
        shutil.copy(DB, copy)
        db = sqlite3.connect(copy)
        skus = [r[0] for r in db.execute("SELECT sku FROM products ORDER BY sku")]
        top = db.execute("SELECT MAX(order_id) FROM orders").fetchone()[0]
        extra = [(top + 1 + i, f"2024-0{1 + i % 3}-1{i % 9}", skus[(i * 5) % len(skus)], 1 + i % 4, 3.25 + i, "zeta")
                 for i in range(9)] + [(top + 20, "2023-03-15", skus[0], 1000, 0.5, "zeta")]
        db.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?)", extra)
        db.commit()
        want = defaultdict(float)
        cat = dict(db.execute("SELECT sku, category FROM products"))
        for _, date, sku, q, p, _ in db.execute("SELECT * FROM orders"):
            want[(date[:7], cat[sku])] += q * p
        got = db.execute("SELECT month, category, revenue FROM monthly_revenue").fetchall()
        db.close()
        assert len(got) == len(want), f"{len(got)} view rows, expected {len(want)}"
        for month, c, rev in got:
            assert abs(rev - want[(month, c)]) < 1e-6, f"{month} {c}: {rev}, expected {want[(month, c)]}"
    finally:
        shutil.rmtree(d)


def test_5_results():
    rows, prods = expected()
    by_cat, by_cust, n_cust = defaultdict(float), defaultdict(float), defaultdict(int)
    for _, _, sku, q, p, cust in rows:
        by_cat[prods[sku][2]] += q * p
        by_cust[cust] += q * p
        n_cust[cust] += 1
    with open("/app/results/revenue_by_category.csv", newline="") as fh:
        got = [r for r in csv.reader(fh) if r]
    assert got[0] == ["category", "revenue"], got[0]
    want = sorted(by_cat.items(), key=lambda kv: -kv[1])
    assert [r[0] for r in got[1:]] == [c for c, _ in want], got
    for r, (_, v) in zip(got[1:], want):
        assert re.fullmatch(r"\d+\.\d\d", r[1]) and money_close(r[1], v), (r, v)
    with open("/app/results/top_customers.csv", newline="") as fh:
        got = [r for r in csv.reader(fh) if r]
    assert got[0] == ["customer", "orders", "revenue"], got[0]
    want = sorted(by_cust.items(), key=lambda kv: (-round(kv[1], 2), kv[0]))[:5]
    assert [r[0] for r in got[1:]] == [c for c, _ in want], got
    for r, (c, v) in zip(got[1:], want):
        assert int(r[1]) == n_cust[c] and re.fullmatch(r"\d+\.\d\d", r[2]) and money_close(r[2], v), (r, v)
