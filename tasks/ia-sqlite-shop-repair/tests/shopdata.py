# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Deterministic generator of the (damaged) shop data."""
import random

FIRST = ["Ada", "Bela", "Chen", "Dario", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jana", "Kofi",
         "Lior", "Mina", "Nils", "Oona", "Priya", "Quinn", "Rosa", "Sami", "Tove"]
LAST = ["Berg", "Costa", "Dahl", "Engel", "Fischer", "Gomez", "Horvat", "Ito", "Jensen", "Kowalski",
        "Lund", "Moreau", "Novak", "Okoro", "Petrov", "Quist", "Rossi", "Silva", "Tanaka", "Ueda"]


def generate(seed=5150):
    rng = random.Random(seed)
    customers, emails = [], []
    for cid in range(1, 61):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last}{cid}@example.com".lower()
        emails.append(email)
        customers.append([cid, f"{first} {last}", email, f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"])
    # duplicates: same person signed up again with a differently written email
    for cid in range(61, 75):
        base = customers[rng.randrange(60)]
        variant = rng.choice([base[2].upper(), " " + base[2], base[2] + "  ", base[2].title(), "\t" + base[2].capitalize()])
        customers.append([cid, base[1], variant, f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"])
    # a few originals themselves written sloppily
    for c in rng.sample(customers[:60], 8):
        c[2] = rng.choice([c[2].upper() + " ", " " + c[2].title()])
    orders, items = [], []
    iid = 1
    for oid in range(1, 301):
        cust = rng.choice(customers)[0]
        n = rng.randint(1, 5)
        total = 0
        for _ in range(n):
            qty, price = rng.randint(1, 6), rng.randint(99, 15999)
            items.append([iid, oid, f"SKU-{rng.randint(1000, 9999)}", qty, price])
            total += qty * price
            iid += 1
        if rng.random() < 0.1:
            total += rng.choice([-1, 1]) * rng.randint(1, 5000)
        orders.append([oid, cust, f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", total])
    for _ in range(15):
        items.append([iid, rng.randint(301, 400), f"SKU-{rng.randint(1000, 9999)}", rng.randint(1, 3), rng.randint(99, 999)])
        iid += 1
    rng.shuffle(items)
    return customers, orders, items


def build(path):
    import sqlite3
    customers, orders, items = generate()
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, created TEXT);
        CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, placed TEXT, total_cents INTEGER);
        CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, sku TEXT,
                                  qty INTEGER NOT NULL, price_cents INTEGER NOT NULL);
    """)
    db.executemany("INSERT INTO customers VALUES (?,?,?,?)", customers)
    db.executemany("INSERT INTO orders VALUES (?,?,?,?)", orders)
    db.executemany("INSERT INTO order_items VALUES (?,?,?,?,?)", items)
    db.commit()
    db.close()


if __name__ == "__main__":
    import sys
    build(sys.argv[1])
