"""SQLite databases for the sqlite-lookups family and the reference report (read-only, whole-table
reads). ``python3 h1_sql.py KIND DB`` prints the reference report; the tests time it."""

import bisect
import sqlite3
import sys

SCHEMAS = {
    "customer-totals": ["CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)",
                        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount_cents INTEGER)"],
    "latest-reading": ["CREATE TABLE sensors (id INTEGER PRIMARY KEY, label TEXT)",
                       "CREATE TABLE readings (id INTEGER PRIMARY KEY, sensor_id INTEGER, ts INTEGER, value REAL)"],
    "window-counts": ["CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, kind TEXT)",
                      "CREATE TABLE windows (id INTEGER PRIMARY KEY, start INTEGER, stop INTEGER)"],
    "email-match": ["CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)",
                    "CREATE TABLE signups (id INTEGER PRIMARY KEY, email TEXT)"],
}


def _case(rng, s):
    return "".join(c.upper() if rng.random() < 0.3 else c for c in s)


def make_db(kind, rng, scale, path):
    """A database of the kind's schema with about ``scale`` rows in the big table."""
    con = sqlite3.connect(path)
    for stmt in SCHEMAS[kind]:
        con.execute(stmt)
    small = max(3, scale // 20)
    if kind == "customer-totals":
        con.executemany("INSERT INTO customers VALUES (?, ?)",
                        [(i, f"{rng.choice(['acme', 'blue', 'nord', 'vega', 'kilo'])}-{i * 7 % 10007}")
                         for i in range(1, small + 1)])
        con.executemany("INSERT INTO orders (customer_id, amount_cents) VALUES (?, ?)",
                        [(rng.randint(1, small + small // 10), rng.randint(100, 99999)) for _ in range(scale)])
    elif kind == "latest-reading":
        con.executemany("INSERT INTO sensors VALUES (?, ?)", [(i, f"s{i:05d}") for i in range(1, small + 1)])
        stamps = rng.sample(range(10**6, 10**6 + scale * 5), scale)
        con.executemany("INSERT INTO readings (sensor_id, ts, value) VALUES (?, ?, ?)",
                        [(rng.randint(1, small + small // 10), t, round(rng.uniform(-40, 90), 2))
                         for t in stamps])
    elif kind == "window-counts":
        con.executemany("INSERT INTO events (ts, kind) VALUES (?, ?)",
                        [(rng.randint(0, scale * 50), rng.choice(["open", "close", "ping"]))
                         for _ in range(scale)])
        wins = []
        for _ in range(small):
            a = rng.randint(-100, scale * 50)
            wins.append((a, a + rng.randint(0, 400)))
        con.executemany("INSERT INTO windows (start, stop) VALUES (?, ?)", wins)
    else:
        names = rng.sample(range(10**6), scale)
        emails = [f"user{n}@{rng.choice(['mail.example', 'corp.test', 'web.example'])}" for n in names]
        con.executemany("INSERT INTO users (email) VALUES (?)", [(_case(rng, e),) for e in emails])
        picks = [_case(rng, rng.choice(emails)) if rng.random() < 0.6 else f"nobody{rng.randint(0, 999)}@x.test"
                 for _ in range(small)]
        con.executemany("INSERT INTO signups (email) VALUES (?)", [(p,) for p in picks])
    con.commit()
    con.close()


def report(kind, path):
    con = sqlite3.connect(path)
    q = lambda sql: con.execute(sql).fetchall()
    out = []
    if kind == "customer-totals":
        agg = {}
        for cid, amount in q("SELECT customer_id, amount_cents FROM orders"):
            a = agg.setdefault(cid, [0, 0])
            a[0] += 1
            a[1] += amount
        for cid, name in q("SELECT id, name FROM customers ORDER BY id"):
            n, total = agg.get(cid, (0, 0))
            out.append(f"{name}\t{n}\t{total}")
    elif kind == "latest-reading":
        last = {}
        for sid, ts, value in q("SELECT sensor_id, ts, value FROM readings"):
            if sid not in last or ts > last[sid][0]:
                last[sid] = (ts, value)
        for sid, label in q("SELECT id, label FROM sensors ORDER BY id"):
            out.append(f"{label}\t{last[sid][0]}\t{last[sid][1]}" if sid in last else f"{label}\t-")
    elif kind == "window-counts":
        ts = sorted(t for (t,) in q("SELECT ts FROM events"))
        for wid, a, b in q("SELECT id, start, stop FROM windows ORDER BY id"):
            out.append(f"{wid}\t{bisect.bisect_right(ts, b) - bisect.bisect_left(ts, a)}")
    else:
        users = {}
        for uid, email in q("SELECT id, email FROM users ORDER BY id"):
            users.setdefault(email.lower(), uid)
        for _, email in q("SELECT id, email FROM signups ORDER BY id"):
            out.append(f"{email}\t{users.get(email.lower(), '-')}")
    con.close()
    return "".join(line + "\n" for line in out)


if __name__ == "__main__":
    sys.stdout.write(report(sys.argv[1], sys.argv[2]))
