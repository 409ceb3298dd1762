#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
# 1. extract
mkdir -p /app/raw
tar -xzf /app/incoming/sales_2023.tar.gz -C /app/raw
# 2. clean
mkdir -p /app/clean
python3 - <<'PY'
import csv, datetime, re
products = {}
with open("/app/raw/sales/products.csv", newline="") as fh:
    for r in csv.DictReader(fh):
        products[r["sku"].strip().upper()] = r
def iso(s):
    for f in ("%Y-%m-%d", "%d/%m/%Y", "%Y/%m/%d"):
        try:
            return datetime.datetime.strptime(s, f).date().isoformat()
        except ValueError:
            pass
    raise ValueError(s)
seen, rows = set(), []
for q in (1, 2, 3):
    with open(f"/app/raw/sales/orders_q{q}.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            r = {k: (v or "").strip() for k, v in r.items()}
            if not re.fullmatch(r"\d+", r["quantity"]) or int(r["quantity"]) < 1:
                continue
            sku = r["sku"].upper()
            if sku not in products:
                continue
            oid = int(r["order_id"])
            if oid in seen:
                continue
            seen.add(oid)
            price = float(r["unit_price"].lstrip("$"))
            rows.append((oid, iso(r["order_date"]), sku, int(r["quantity"]), f"{price:.2f}", r["customer"]))
rows.sort()
with open("/app/clean/orders.csv", "w", newline="") as fh:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["order_id", "order_date", "sku", "quantity", "unit_price", "customer"])
    w.writerows(rows)
PY
# 3. load
rm -f /app/sales.db
python3 - <<'PY'
import csv, sqlite3
db = sqlite3.connect("/app/sales.db")
db.executescript("""
CREATE TABLE orders(order_id INTEGER PRIMARY KEY, order_date TEXT, sku TEXT, quantity INTEGER, unit_price REAL, customer TEXT);
CREATE TABLE products(sku TEXT PRIMARY KEY, name TEXT, category TEXT);
""")
with open("/app/clean/orders.csv", newline="") as fh:
    rows = [(int(r["order_id"]), r["order_date"], r["sku"], int(r["quantity"]), float(r["unit_price"]), r["customer"])
            for r in csv.DictReader(fh)]
db.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?)", rows)
with open("/app/raw/sales/products.csv", newline="") as fh:
    db.executemany("INSERT INTO products VALUES (?,?,?)",
                   [(r["sku"].strip().upper(), r["name"].strip(), r["category"].strip()) for r in csv.DictReader(fh)])
db.commit()
PY
# 4. index and view
sqlite3 /app/sales.db <<'SQL'
CREATE INDEX idx_orders_sku_date ON orders(sku, order_date);
CREATE VIEW monthly_revenue AS
  SELECT substr(o.order_date, 1, 7) AS month, p.category AS category, SUM(o.quantity * o.unit_price) AS revenue
  FROM orders o JOIN products p ON p.sku = o.sku
  GROUP BY month, p.category;
SQL
# 5. results
mkdir -p /app/results
sqlite3 -csv -header /app/sales.db \
  "SELECT p.category AS category, printf('%.2f', SUM(o.quantity * o.unit_price)) AS revenue
   FROM orders o JOIN products p ON p.sku = o.sku GROUP BY p.category ORDER BY SUM(o.quantity * o.unit_price) DESC;" \
  > /app/results/revenue_by_category.csv
sqlite3 -csv -header /app/sales.db \
  "SELECT customer, COUNT(*) AS orders, printf('%.2f', SUM(quantity * unit_price)) AS revenue
   FROM orders GROUP BY customer ORDER BY SUM(quantity * unit_price) DESC, customer ASC LIMIT 5;" \
  > /app/results/top_customers.csv
