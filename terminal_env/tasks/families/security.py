"""Generated task families of the security category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support import h4_inject, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ inject-fix
# A small back-office CLI with one to three subcommands that pass user input to a path, an SQL
# string, a shell or eval. The tests attack each with hidden payloads on hidden fixtures and
# check that legitimate (awkward) input still gives the right answer.

_HEAD = '''#!/usr/bin/env python3
"""__TOOL__: the back office's helper.

Usage: python3 __PATH__ [--root DIR] [--db FILE] SUBCOMMAND ...
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys

ROOT = "/app/__TOOL__/files"
DB = "/app/__TOOL__/shop.db"
CONSTS = __CONSTS__


def refuse(why):
    print(f"refused: {why}", file=sys.stderr)
    sys.exit(2)
'''

_CMDS = {  # kind: (vulnerable code, fixed code, argparse lines)
    "path": ('''

def cmd_show(args):
    """Print the file NAME under the root directory."""
    with open(os.path.join(args.root, args.name)) as f:
        sys.stdout.write(f.read())
''', '''

def cmd_show(args):
    """Print the file NAME under the root directory."""
    root = os.path.realpath(args.root)
    real = os.path.realpath(os.path.join(root, args.name))
    if os.path.isabs(args.name) or not real.startswith(root + os.sep):
        refuse("outside the root")
    with open(real) as f:
        sys.stdout.write(f.read())
''', '''    s = sub.add_parser("show"); s.add_argument("name"); s.set_defaults(func=cmd_show)
'''),
    "sql": ('''

def cmd_find(args):
    """Print the customers named NAME as a JSON list of [id, name, city, balance]."""
    con = sqlite3.connect(args.db)
    rows = con.execute(f"SELECT id, name, city, balance FROM customers WHERE name = '{args.name}' "
                       "ORDER BY id").fetchall()
    print(json.dumps([list(r) for r in rows]))


def cmd_top(args):
    """Print the first N customers by the column SORT (descending, ties by id)."""
    con = sqlite3.connect(args.db)
    rows = con.execute(f"SELECT id, name, city, balance FROM customers ORDER BY {args.sort} DESC, id "
                       f"LIMIT {args.n}").fetchall()
    print(json.dumps([list(r) for r in rows]))
''', '''

def cmd_find(args):
    """Print the customers named NAME as a JSON list of [id, name, city, balance]."""
    con = sqlite3.connect(args.db)
    rows = con.execute("SELECT id, name, city, balance FROM customers WHERE name = ? ORDER BY id",
                       (args.name,)).fetchall()
    print(json.dumps([list(r) for r in rows]))


def cmd_top(args):
    """Print the first N customers by the column SORT (descending, ties by id)."""
    if args.sort not in ("id", "name", "city", "balance"):
        refuse("unknown column")
    con = sqlite3.connect(args.db)
    rows = con.execute(f"SELECT id, name, city, balance FROM customers ORDER BY {args.sort} DESC, id "
                       "LIMIT ?", (args.n,)).fetchall()
    print(json.dumps([list(r) for r in rows]))
''', '''    s = sub.add_parser("find"); s.add_argument("name"); s.set_defaults(func=cmd_find)
    s = sub.add_parser("top"); s.add_argument("n", type=int); s.add_argument("--sort", default="balance")
    s.set_defaults(func=cmd_top)
'''),
    "shell": ('''

def cmd_count(args):
    """Print how many lines of FILE contain PATTERN (a fixed string)."""
    os.system(f"grep -c -F '{args.pattern}' '{args.file}'")
''', '''

def cmd_count(args):
    """Print how many lines of FILE contain PATTERN (a fixed string)."""
    out = subprocess.run(["grep", "-c", "-F", "-e", args.pattern, "--", args.file],
                         capture_output=True, text=True)
    if out.returncode > 1:
        sys.exit(out.returncode)
    sys.stdout.write(out.stdout)
''', '''    s = sub.add_parser("count"); s.add_argument("pattern"); s.add_argument("file")
    s.set_defaults(func=cmd_count)
'''),
    "eval": ('''

def cmd_calc(args):
    """Evaluate an arithmetic expression over numbers and the names in CONSTS."""
    print(eval(args.expr, {"__builtins__": {}}, dict(CONSTS)))
''', '''

import ast
BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
       ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
       ast.Pow: lambda a, b: a ** b}


def ev(node):
    if isinstance(node, ast.Expression):
        return ev(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in CONSTS:
        return CONSTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = ev(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in BIN:
        a, b = ev(node.left), ev(node.right)
        if isinstance(node.op, ast.Pow) and abs(b) > 64:
            refuse("exponent too large")
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
            refuse("division by zero")
        return BIN[type(node.op)](a, b)
    refuse("not arithmetic")


def cmd_calc(args):
    """Evaluate an arithmetic expression over numbers and the names in CONSTS."""
    try:
        tree = ast.parse(args.expr, mode="eval")
    except SyntaxError:
        refuse("syntax")
    print(ev(tree))
''', '''    s = sub.add_parser("calc"); s.add_argument("expr"); s.set_defaults(func=cmd_calc)
'''),
}

_MAIN = '''

def main():
    p = argparse.ArgumentParser(prog="__TOOL__")
    p.add_argument("--root", default=ROOT)
    p.add_argument("--db", default=DB)
    sub = p.add_subparsers(dest="cmd", required=True)
__PARSERS__    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
'''

_SPEC = {
    "path": ("`show NAME` prints the file `NAME` (a path relative to the root directory, `--root`). "
             "A NAME that is absolute or whose file, once `..` and symbolic links are resolved, "
             "lies outside the root must be refused. File names may legitimately contain dots "
             "(`notes..old.txt` is a file in the root)."),
    "sql": ("`find NAME` prints the customers whose name is exactly NAME (any text, quotes "
            "included, is a name to look for; no match prints `[]`). `top N [--sort COL]` prints "
            "the first N customers ordered by COL descending, ties by id ascending; COL must be "
            "one of `id`, `name`, `city`, `balance`, anything else is refused."),
    "shell": ("`count [--] PATTERN FILE` prints the number of lines of FILE that contain PATTERN "
              "as a fixed string (like `grep -c -F`). PATTERN and FILE are data, whatever "
              "characters they hold (quotes, `;`, `$( )`, spaces, a leading `-`); no shell may "
              "interpret them."),
    "eval": ("`calc EXPR` prints the value of an arithmetic expression (Python's `print` of the "
             "number): int and float literals, the names in `CONSTS`, `+ - * / // % **`, unary "
             "`-`/`+` and parentheses, with Python's semantics. Anything else (other names, "
             "attributes, calls, strings, subscripts, ...) is refused, and so are a division or "
             "modulo by zero and a power whose exponent's absolute value exceeds 64."),
}

_CMD_OF = {"path": "show", "sql": "find/top", "shell": "count", "eval": "calc"}

_INJECT_TESTS = '''"""Attacks the tool's subcommands with hidden payloads on hidden fixtures, and checks that
legitimate input still gives the right answer."""

import json
import os
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h4_inject import Refused, calc_ref, count_ref, find_ref, make_db, make_expr, make_rows, top_ref

PROG = __PROG__
KINDS = __KINDS__
TRAP = __TRAP__
CONSTS = __CONSTS__


def run(*args, cwd="/tmp"):
    r = subprocess.run(["python3", PROG, *args], capture_output=True, text=True, timeout=60, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def refused(*args, cwd="/tmp"):
    code, out, err = run(*args, cwd=cwd)
    assert code == 2 and out == "", f"{args!r} not refused: exit {code}, stdout {out[:200]!r}"
    assert err.startswith("refused"), f"{args!r}: stderr should start with 'refused': {err[:200]!r}"


def ok(want, *args, cwd="/tmp"):
    code, out, err = run(*args, cwd=cwd)
    assert code == 0, f"{args!r}: exit {code}: {err[-400:]}"
    assert out.strip() == want, f"{args!r}: printed {out[:300]!r}, expected {want[:300]!r}"


def tree():
    base = Path(tempfile.mkdtemp())
    root = base / "files"
    (root / "2026" / "q1").mkdir(parents=True)
    rng = random.Random(11)
    files = {"readme.txt": "", "2026/q1/plan.txt": "", "2026/summary.md": "", "notes..old.txt": ""}
    for rel in files:
        files[rel] = "".join(f"line {rng.randint(0, 10**6)}\\n" for _ in range(rng.randint(1, 5)))
        (root / rel).write_text(files[rel])
    (base / "private.txt").write_text("private-" + str(rng.randint(10**8, 10**9)) + "\\n")
    return base, root, files


def db():
    d = Path(tempfile.mkdtemp())
    rows = make_rows(random.Random(23), 40)
    make_db(str(d / "shop.db"), rows)
    return str(d / "shop.db"), rows


def need(kind):
    if kind not in KINDS:
        pytest.skip("not part of this instance")


@pytest.mark.weight(2)
@pytest.mark.parametrize("kind", ["path"])
def test_path_traversal_refused(kind):
    need(kind)
    base, root, files = tree()
    ok(files["2026/q1/plan.txt"].strip(), "--root", str(root), "show", "2026/q1/plan.txt")
    for name in ["../private.txt", "2026/../../private.txt", str(base / "private.txt"),
                 "./../files/../private.txt", "2026/q1/../../../private.txt"]:
        refused("--root", str(root), "show", name)


@pytest.mark.weight(2)
@pytest.mark.parametrize("kind", ["sql"])
def test_sql_payloads_are_data(kind):
    need(kind)
    path, rows = db()
    for name in ["' OR '1'='1", "x' UNION SELECT 1, note, 3, 4 FROM vault --", "' OR 1=1 --"]:
        ok("[]", "--db", path, "find", name)
    ok(find_ref(rows, rows[3][1]), "--db", path, "find", rows[3][1])


@pytest.mark.weight(1)
@pytest.mark.parametrize("kind", ["sql"])
def test_sql_names_with_quotes(kind):
    need(kind)
    path, rows = db()
    names = sorted({r[1] for r in rows if "'" in r[1]})[:4] + ["Nobody O'Hara"]
    for name in names:
        ok(find_ref(rows, name), "--db", path, "find", name)
    ok("[]", "--db", path, "find", "Ada' --")


@pytest.mark.weight(2)
@pytest.mark.parametrize("kind", ["shell"])
def test_shell_payloads_run_nothing(kind):
    need(kind)
    d = Path(tempfile.mkdtemp())
    marker = d / "pwned"
    text = "alpha beta\\nit's here\\nbeta; gamma\\nnothing\\n"
    (d / "data.txt").write_text(text)
    for pat in [f"x' data.txt; touch {marker}; echo '", f"$(touch {marker})", f"`touch {marker}`",
                f"'; touch {marker} #"]:
        ok(count_ref(text, pat), "count", "--", pat, "data.txt", cwd=str(d))
        assert not marker.exists(), f"the pattern {pat!r} ran a command"
    ok(count_ref(text, "beta"), "count", "beta", "data.txt", cwd=str(d))


@pytest.mark.weight(1)
@pytest.mark.parametrize("kind", ["shell"])
def test_shell_awkward_names(kind):
    need(kind)
    d = Path(tempfile.mkdtemp())
    marker = d / "pwned"
    name = "it's $(touch pwned) `touch pwned` notes.txt"
    text = "don't panic\\nplain\\ndon't stop\\n"
    (d / name).write_text(text)
    ok(count_ref(text, "don't"), "count", "don't", name, cwd=str(d))
    assert not marker.exists(), "the file name ran a command"


@pytest.mark.weight(2)
@pytest.mark.parametrize("kind", ["eval"])
def test_eval_code_refused(kind):
    need(kind)
    d = Path(tempfile.mkdtemp())
    marker = d / "pwned"
    ok(calc_ref("(1 + 2) * 7", CONSTS), "calc", "(1 + 2) * 7")
    for expr in [f"__import__('os').system('touch {marker}')",
                 "().__class__.__bases__[0].__subclasses__()", "open('/etc/hostname').read()",
                 "'ab' * 3", "[1, 2]", "(lambda: 1)()", "True + 1"]:
        refused("calc", expr)
    assert not marker.exists()


@pytest.mark.weight(1)
@pytest.mark.parametrize("kind", ["eval"])
def test_eval_arithmetic(kind):
    need(kind)
    rng = random.Random(5)
    for _ in range(12):
        expr = make_expr(rng, CONSTS)
        ok(calc_ref(expr, CONSTS), "calc", expr)
    refused("calc", "__name__")


@pytest.mark.weight(1)
@pytest.mark.parametrize("kind", KINDS)
def test_more_legit_input(kind):
    rng = random.Random(99)
    if kind == "path":
        base, root, files = tree()
        for rel in ["readme.txt", "2026/summary.md", "2026/q1/plan.txt", "./2026/q1/../summary.md"]:
            want = files[os.path.normpath(rel)].strip()
            ok(want, "--root", str(root), "show", rel)
        refused("--root", str(root), "show", "/etc/hostname")
    elif kind == "sql":
        path, rows = db()
        for r in rng.sample(rows, 4):
            ok(find_ref(rows, r[1]), "--db", path, "find", r[1])
        for n in (1, 7):
            ok(top_ref(rows, n, "balance"), "--db", path, "top", str(n))
        ok("[]", "--db", path, "find", "' OR name LIKE '%")
    elif kind == "shell":
        d = Path(tempfile.mkdtemp())
        words = ["red", "green", "blue", "a;b", "x|y", "q'q", "$HOME", "*"]
        text = "".join(" ".join(rng.sample(words, 3)) + "\\n" for _ in range(30))
        (d / "mix.txt").write_text(text)
        for pat in words:
            ok(count_ref(text, pat), "count", "--", pat, "mix.txt", cwd=str(d))
    else:
        for name in sorted(CONSTS):
            expr = f"{name} * 3 - ({name} // 2)"
            ok(calc_ref(expr, CONSTS), "calc", expr)
        refused("calc", f"{sorted(CONSTS)[0]}.__class__")


@pytest.mark.weight(1)
@pytest.mark.parametrize("kind", KINDS)
def test_edge_cases(kind):
    if not TRAP:
        pytest.skip("no edge case in this instance")
    if kind == "path":
        base, root, files = tree()
        os.symlink(str(base / "private.txt"), str(root / "2026" / "latest.txt"))
        refused("--root", str(root), "show", "2026/latest.txt")
        ok(files["notes..old.txt"].strip(), "--root", str(root), "show", "notes..old.txt")
    elif kind == "sql":
        path, rows = db()
        for col in ["balance", "name", "city"]:
            ok(top_ref(rows, 5, col), "--db", path, "top", "5", "--sort", col)
        for col in ["(SELECT note FROM vault)", "balance; --", "balance DESC, (SELECT 1)"]:
            refused("--db", path, "top", "5", "--sort", col)
    elif kind == "shell":
        d = Path(tempfile.mkdtemp())
        text = "-v flag\\nplain\\n--help me\\n-v again\\n"
        (d / "-opts.txt").write_text(text)
        ok(count_ref(text, "-v"), "count", "--", "-v", "-opts.txt", cwd=str(d))
        ok(count_ref(text, "--help"), "count", "--", "--help", "-opts.txt", cwd=str(d))
    else:
        refused("calc", "2 ** 1000")
        refused("calc", "7 // (3 - 3)")
        ok(calc_ref("2 ** -3", CONSTS), "calc", "2 ** -3")
'''


def _inject_fix(rng: random.Random, index: int) -> Instance:
    kinds = sorted(rng.sample(sorted(_CMDS), rng.choices([1, 2, 3], [25, 30, 45])[0]))
    # the path check alone is one hidden test: its edge cases make the three a gated task needs
    trap = rng.random() < 0.65 or kinds == ["path"]
    tool = rng.choice(["deskctl", "opsdesk", "backoffice", "clerk", "shopadm", "ledgerctl"])
    prog = f"/app/{tool}/{tool}.py"
    consts = {name: rng.choice([rng.randint(2, 30), round(rng.uniform(0.5, 20), 2)])
              for name in rng.sample(["rate", "fee", "days", "tax", "qty", "base", "cap"], 3)}

    def program(fixed: bool) -> str:
        head = _HEAD.replace("__TOOL__", tool).replace("__PATH__", prog).replace("__CONSTS__", repr(consts))
        body = "".join(_CMDS[k][1 if fixed else 0] for k in kinds)
        parsers = "".join(_CMDS[k][2] for k in kinds)
        return head + body + _MAIN.replace("__TOOL__", tool).replace("__PARSERS__", parsers)

    files = {f"{tool}/{tool}.py": program(False)}
    if "path" in kinds:
        files[f"{tool}/files/readme.txt"] = "Files the back office may show.\n"
        files[f"{tool}/files/2026/plan.txt"] = "Q1: tidy the archive\nQ2: new labels\n"
    if "shell" in kinds:
        files[f"{tool}/files/orders.txt"] = "".join(
            f"order {rng.randint(100, 999)} {rng.choice(['open', 'paid', 'void'])}\n" for _ in range(12))
    if "sql" in kinds:
        files[f"{tool}/make_db.py"] = (
            "import random, sys\nsys.path.insert(0, '/app/" + tool + "')\n"
            "from fixtures import make_db, make_rows\n"
            f"make_db('/app/{tool}/shop.db', make_rows(random.Random({rng.randint(1, 999)}), 25))\n")
        text = source(h4_inject)
        files[f"{tool}/fixtures.py"] = text[:text.index("def find_ref(")]
    specs = "\n".join(f"- {_SPEC[k]}" for k in kinds)
    names = ", ".join(f"`{_CMD_OF[k]}`" for k in kinds)
    db_note = (f" (`python3 /app/{tool}/make_db.py` creates its sample database `/app/{tool}/shop.db`)"
               if "sql" in kinds else "")
    instruction = f"""\
`{prog}` is a small command-line tool the back office runs with input typed by customers and
staff{db_note}. A review found that its subcommands {names} pass that input unchecked into places
where it is interpreted (file paths, SQL, a shell, Python's `eval`), so crafted input can read
files it should not, dump or change the database, or run commands.

Fix `{prog}` in place. Keep its command line, its global options `--root DIR` and `--db FILE`,
and its output formats. What each subcommand must do:

{specs}

Refused input: exit status 2, nothing on standard output, and a message starting with `refused`
on standard error. Nothing the input holds may ever be executed. Legitimate input must keep
working exactly as before, however odd its characters. The tool will be tested on other files,
databases and input than the samples here. Only the Python standard library is available.
"""
    fixed = program(True)
    solution = f"cat > {prog} <<'PY_EOF'\n{fixed}PY_EOF\n"
    tests = (_INJECT_TESTS.replace("__PROG__", repr(prog)).replace("__KINDS__", repr(kinds))
             .replace("__TRAP__", repr(trap)).replace("__CONSTS__", repr(consts)))
    knowledge = 1 if len(kinds) == 1 else 2
    traps = int(trap) + int(len(kinds) == 3)
    total = 1 + knowledge + traps
    difficulty = "easy" if total <= 2 else "medium" if total <= 4 else "hard"
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant="+".join(kinds) + ("/edge" if trap else ""), files=files,
        test_files={"h4_inject.py": source(h4_inject)}, tags=("injection", *kinds), oracle_turns=1,
    )


FAMILIES.append(Family("inject-fix", "security", "test",
                       "close path-traversal, SQL, shell and eval injection holes in a small CLI; "
                       "hidden payloads and legitimate awkward input on hidden fixtures", _inject_fix))
