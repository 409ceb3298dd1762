import sqlite3
from invdata import initial, sheet
db = sqlite3.connect("/app/data/inventory.db")
db.execute("CREATE TABLE items (sku TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, qty INTEGER NOT NULL, price_cents INTEGER NOT NULL)")
db.execute("CREATE TABLE audit (id INTEGER PRIMARY KEY, at TEXT DEFAULT CURRENT_TIMESTAMP, entry TEXT)")
db.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)", [(s, i["name"], i["category"], i["qty"], i["price_cents"]) for s, i in initial().items()])
db.commit()
open("/app/stocktake.txt", "w").write(sheet())
