"""References for the inject-fix family: what each subcommand of the little back-office tool must
print for legitimate input (lookups, line counts, arithmetic), and the hidden fixtures it is
attacked with."""

import ast
import json
import sqlite3

CITIES = ["Lyon", "Porto", "Graz", "Turku", "Cork", "Brno", "Gent", "Bergen"]
FIRST = ["Ada", "Bram", "Cleo", "Dov", "Esme", "Finn", "Gala", "Hugo", "Ines", "Jonas", "Kira"]
LAST = ["O'Brien", "Smith", "Nagy", "D'Arcy", "Lund", "Moreau", "Kowal", "Sato", "Reyes"]
COLUMNS = ["id", "name", "city", "balance"]


def make_rows(rng, n):
    rows = []
    for i in range(1, n + 1):
        rows.append([i, f"{rng.choice(FIRST)} {rng.choice(LAST)}", rng.choice(CITIES),
                     rng.randint(-5000, 90000)])
    return rows


def make_db(path, rows):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, balance INTEGER)")
    con.execute("CREATE TABLE vault (note TEXT)")
    con.execute("INSERT INTO vault VALUES ('internal: do not print')")
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()


def find_ref(rows, name):
    return json.dumps([r for r in rows if r[1] == name])


def top_ref(rows, n, col):
    k = COLUMNS.index(col)
    ordered = sorted(rows, key=lambda r: r[0])
    ordered = sorted(ordered, key=lambda r: r[k], reverse=True)
    return json.dumps(ordered[:n])


def count_ref(text, pattern):
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return str(sum(pattern in line for line in lines))


class Refused(Exception):
    pass


_BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
        ast.Pow: lambda a, b: a ** b}


def calc_ref(expr, consts):
    """The value the calc subcommand prints, or Refused."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise Refused("syntax")

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.Name) and node.id in consts:
            return consts[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else +v
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(b) > 64:
                raise Refused("exponent")
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
                raise Refused("zero")
            return _BIN[type(node.op)](a, b)
        raise Refused(type(node).__name__)

    return str(ev(tree))


def make_expr(rng, consts, depth=3):
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.5:
            return rng.choice(sorted(consts))
        return str(rng.choice([rng.randint(1, 40), round(rng.uniform(0.5, 9.5), 2)]))
    op = rng.choice(["+", "-", "*", "/", "//", "%", "**"])
    left = make_expr(rng, consts, depth - 1)
    if op == "**":
        return f"({left}) ** {rng.randint(0, 3)}"
    right = make_expr(rng, consts, depth - 1)
    if op in ("/", "//", "%"):
        right = str(rng.randint(1, 9))
    text = f"{left} {op} {right}"
    if rng.random() < 0.2:
        text = f"-({text})"
    return f"({text})" if rng.random() < 0.5 else text
