"""Generated task families of the text-data category, continued (see :mod:`.text_data`):
conf-convert and table-reshape."""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import h1_conf, h1_table, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ conf-convert
# A configuration file (INI, dotenv or Java properties) to convert into JSON or sorted key=value
# lines; messy instances use the format's harder rules (quotes, repeated keys, ${VAR}
# expansion, continuation lines, \uXXXX escapes) that the sample shows only in part.

_CONF_SPECS = {
    "ini": ("an INI file: `[section]` headers, then `key = value` lines (the key ends at the first `=` "
            "or `:`; key and value are stripped of surrounding spaces). Lines whose first non-space "
            "character is `;` or `#` are comments, blank lines are ignored. Every key is inside a section. "
            "A value is typed: an optional `-` and digits is an integer; true/yes/on and false/no/off "
            "(any letter case) are booleans; anything else is a string, with one pair of surrounding "
            "double quotes removed if present. A key repeated in a section: the later line wins"),
    "env": ("a dotenv file: `KEY=value` lines, optionally prefixed by `export `; `#` lines and blank "
            "lines are ignored. An unquoted value ends at the end of the line or at a ` #` (comment) and "
            "is stripped; a value in single quotes is taken literally; in double quotes, `\\\\` and "
            "`\\\"` are the only escapes. Text after the closing quote is ignored. In unquoted and "
            "double-quoted values, `${NAME}` is replaced by the value of the earlier key NAME"),
    "properties": ("a Java properties file: a line whose first non-space character is `#` or `!` is a "
                   "comment; blank lines are ignored. Leading spaces are ignored; the key ends at the "
                   "first unescaped `=`, `:` or space, then spaces and at most one `=` or `:` (with spaces "
                   "around it) separate it from the value. A line ending in an odd number of backslashes "
                   "continues on the next line (the backslash and the next line's leading spaces are "
                   "dropped). In keys and values `\\t`, `\\n` and `\\uXXXX` are a tab, a newline and "
                   "a Unicode character; a backslash before any other character stands for that "
                   "character. A repeated key: the later one wins"),
}

_CONF_TESTS = '''"""Runs the agent's converter on the given file and on hidden files of the same format."""

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

import h1_conf

FMT = __FMT__
OUT = __OUT__
MESSY = __MESSY__


def want(data):
    return data if OUT == "json" else h1_conf.as_lines(FMT, data)


def got_of(text):
    return json.loads(text) if OUT == "json" else text


def run(text):
    d = Path(tempfile.mkdtemp())
    (d / "in.conf").write_text(text)
    r = subprocess.run(["python3", "/app/convert.py", str(d / "in.conf")], capture_output=True,
                       text=True, timeout=60, cwd=str(d))
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}"
    try:
        return got_of(r.stdout)
    except ValueError:
        raise AssertionError(f"output is not JSON: {r.stdout[:300]!r}")


@pytest.mark.weight(1)
def test_given_file_converted():
    data = json.loads(Path(__file__).with_name("given.json").read_text())
    path = "/app/config.json" if OUT == "json" else "/app/config.txt"
    assert got_of(Path(path).read_text()) == want(data)


@pytest.mark.weight(2)
def test_hidden_files():
    for seed in range(3):
        text, data = h1_conf.make(FMT, random.Random(300 + seed), 6, False)
        assert run(text) == want(data), f"hidden file {seed}"


@pytest.mark.weight(2)
def test_hidden_files_all_rules():
    for seed in range(3):
        text, data = h1_conf.make(FMT, random.Random(400 + seed), 8, MESSY)
        assert run(text) == want(data), f"hidden file {seed}"
'''


def _conf_convert(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_CONF_SPECS))
    out = rng.choice(["json", "lines"])
    messy = rng.random() < 0.5
    text, data = h1_conf.make(fmt, rng, rng.randint(4, 7), messy and rng.random() < 0.5)
    shape = {"ini": "an object of sections, each an object of typed values",
             "env": "an object of string values", "properties": "an object of string values"}[fmt]
    if out == "json":
        target = f"JSON: {shape}"
        dest = "/app/config.json"
    else:
        target = ("lines `key=value` sorted by key (plain string sort)" + (
            ", the key written `section.key`, booleans as `true`/`false`" if fmt == "ini" else "")
                  + ", each line ending in a newline")
        dest = "/app/config.txt"
    instruction = f"""\
`/app/app.conf` is {_CONF_SPECS[fmt]}.

Write `/app/convert.py`, a Python 3 program (standard library only) that reads such a file named
by its one argument and prints its content as {target}. Run it on `/app/app.conf` and save the
output to `{dest}`. It will also be run on other files that follow these rules{", including ones that use every rule above" if messy else ""}.
"""
    solution = f"""cat > /app/convert.py <<'PY'
import json, re, sys
{_CONF_PARSERS[fmt]}


data = parse(open(sys.argv[1], encoding="utf-8").read())
{"print(json.dumps(data))" if out == "json" else "sys.stdout.write(as_lines(" + repr(fmt) + ", data))"}
PY
python3 /app/convert.py /app/app.conf > {dest}
"""
    if out == "lines":
        text_src = source(h1_conf)
        solution = solution.replace("\n\n\ndata = parse", "\n\n\n" + text_src[text_src.index("def as_lines("):]
                                    + "\n\ndata = parse")
    difficulty = {"ini": "easy", "env": "medium", "properties": "medium"}[fmt]
    if messy:
        difficulty = "medium" if fmt == "ini" else "hard"
    tests = (_CONF_TESTS.replace("__FMT__", repr(fmt)).replace("__OUT__", repr(out))
             .replace("__MESSY__", repr(messy)))
    return Instance(instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
                    variant=f"{fmt}->{out}/{'all-rules' if messy else 'basic'}", files={"app.conf": text},
                    test_files={"h1_conf.py": source(h1_conf), "given.json": json.dumps(data)},
                    tags=("config", fmt), oracle_turns=2)


_CONF_PARSERS = {
    "ini": r'''def parse(text):
    data, sec = {}, None
    for line in text.splitlines():
        s = line.strip()
        if not s or s[0] in ";#":
            continue
        if s.startswith("[") and s.endswith("]"):
            sec = data.setdefault(s[1:-1], {})
            continue
        cut = min(i for i in (s.find("="), s.find(":")) if i >= 0)
        k, v = s[:cut].strip(), s[cut + 1:].strip()
        if re.fullmatch(r"-?\d+", v):
            v = int(v)
        elif v.lower() in ("true", "yes", "on", "false", "no", "off"):
            v = v.lower() in ("true", "yes", "on")
        elif len(v) >= 2 and v[0] == v[-1] == '"':
            v = v[1:-1]
        sec[k] = v
    return data''',
    "env": r'''def parse(text):
    data = {}
    expand = lambda v: re.sub(r"\$\{(\w+)\}", lambda m: data.get(m[1], ""), v)
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("export "):
            s = s[7:].lstrip()
        k, v = s.split("=", 1)
        if v.startswith("'"):
            v = v[1:v.index("'", 1)]
        elif v.startswith('"'):
            out, i = [], 1
            while v[i] != '"':
                if v[i] == "\\" and v[i + 1] in '\\"':
                    i += 1
                out.append(v[i])
                i += 1
            v = expand("".join(out))
        else:
            v = expand(re.split(r"\s#", v, 1)[0].strip())
        data[k.strip()] = v
    return data''',
    "properties": r'''def unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u":
                out.append(chr(int(s[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n"}.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse(text):
    data, lines, buf = {}, [], None
    for line in text.splitlines():
        if buf is not None:
            line = buf + line.lstrip()
            buf = None
        elif not line.strip() or line.lstrip()[0] in "#!":
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            buf = line[:-1]
            continue
        lines.append(line.lstrip())
    for s in lines:
        i = 0
        while i < len(s) and s[i] not in "=: ":
            i += 2 if s[i] == "\\" else 1
        key, rest = s[:i], s[i:].lstrip(" ")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" ")
        data[unescape(key)] = unescape(rest)
    return data''',
}

FAMILIES.append(Family("conf-convert", "text-data", "train",
                       "an INI, dotenv or Java properties file to JSON or sorted key=value lines, basic "
                       "or with every rule (quotes, repeats, ${VAR}, continuations, escapes)", _conf_convert))


# ------------------------------------------------------------------ table-reshape
# One of four reshaping operations (pivot, unpivot, join on messy keys, group sums of formatted
# amounts) on delimited files with one of three delimiters; messy instances add a BOM, CRLF,
# blank lines and padded cells. The agent's program runs on hidden tables.

_OPS = {
    "pivot": ("`{input}` has the columns entity, metric, value (integers). Print one row per entity "
              "(sorted), with the header `entity` followed by every metric that occurs, sorted; a cell is "
              "the sum of the values of that entity and metric, or empty if there is none"),
    "unpivot": ("`{input}` has an `id` column and one column per metric. Print the header "
                "`id,column,value` and one row per non-empty metric cell, in input row order and, within a "
                "row, in column order"),
    "join": ("`{orders}` has the columns order_id, customer; `{customers}` has code, name, country. A "
             "customer matches a code ignoring letter case and surrounding spaces. Print the header "
             "`order_id,customer,name,country` and one row per order, in input order, with the matched "
             "code as written in the customers file and its name and country (both empty when no code "
             "matches; then `customer` is the order's value upper-cased and stripped)"),
    "group-sum": ("`{input}` has the columns region, amount; amounts are written like `1234.50`, "
                  "`1,234.50`, `$1234.50` or `$ 1,234.50`. Print the header `region,total` and one row per "
                  "region (sorted) with the exact sum of its amounts, with two decimals and no other "
                  "formatting (`2469.00`)"),
}
_DELIMS = {",": "comma", ";": "semicolon", "\t": "tab"}

_TABLE_TESTS = '''"""Runs the agent's reshaping program on the given files and on hidden ones."""

import csv
import io
import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

import h1_table

OP = __OP__
DELIM = __DELIM__
MESSY = __MESSY__
NAMES = __NAMES__


def rows_of(text):
    return [r for r in csv.reader(io.StringIO(text)) if r]


def run(tables, messy, rng):
    d = Path(tempfile.mkdtemp())
    for name in NAMES:
        (d / name).write_bytes(h1_table.render(tables[name], DELIM, messy, rng).encode("utf-8"))
    r = subprocess.run(["python3", "/app/reshape.py"] + [str(d / n) for n in NAMES], capture_output=True,
                       text=True, timeout=60, cwd=str(d))
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-800:]}"
    return rows_of(r.stdout)


@pytest.mark.weight(1)
def test_given_result_file():
    expected = json.loads(Path(__file__).with_name("given.json").read_text())
    assert rows_of(Path("/app/result.csv").read_text(encoding="utf-8")) == expected


@pytest.mark.weight(2)
def test_hidden_tables():
    for seed in range(3):
        rng = random.Random(800 + seed)
        tables, expected = h1_table.make(OP, rng, rng.randint(5, 40))
        assert run(tables, False, rng) == expected, f"hidden tables {seed}"


@pytest.mark.weight(2)
def test_hidden_tables_as_exported():
    for seed in range(3):
        rng = random.Random(900 + seed)
        tables, expected = h1_table.make(OP, rng, rng.randint(5, 40))
        assert run(tables, MESSY, rng) == expected, f"hidden tables {seed}"
'''


def _table_reshape(rng: random.Random, index: int) -> Instance:
    op = rng.choice(sorted(_OPS))
    delim = rng.choice(sorted(_DELIMS))
    messy = rng.random() < 0.5
    tables, expected = h1_table.make(op, rng, rng.randint(8, 20))
    names = sorted(tables) if op != "join" else ["orders.csv", "customers.csv"]
    files = {n: h1_table.render(tables[n], delim, False, rng) for n in names}
    args = " ".join(f"/app/{n}" for n in names)
    what = _OPS[op].format(input="/app/input.csv", orders="/app/orders.csv", customers="/app/customers.csv")
    mess = (" The files come from a spreadsheet export: they may start with a UTF-8 byte order mark, "
            "end lines in CRLF, contain blank lines (ignore them) and have spaces around cell values "
            "(strip every cell).") if messy else ""
    instruction = f"""\
The files below are {_DELIMS[delim]}-separated, with a header line and standard CSV quoting.{mess}
{what}.

Write `/app/reshape.py`, a Python 3 program (standard library only) run as
`python3 /app/reshape.py {args.replace('/app/', 'DIR/')}` that prints the result as comma-separated CSV
(standard quoting). Run it on the given files and save its output to `/app/result.csv`. It will
also be run on other files of the same kind.
"""
    solution = f"""cat > /app/reshape.py <<'PY'
import csv, sys
{_RESHAPERS[op]}


def read(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return [[c.strip() for c in r] for r in csv.reader(f, delimiter={delim!r}) if any(c.strip() for c in r)]


csv.writer(sys.stdout, lineterminator="\\n").writerows(reshape(*[read(p) for p in sys.argv[1:]]))
PY
python3 /app/reshape.py {args} > /app/result.csv
"""
    difficulty = {"pivot": "medium", "unpivot": "easy", "join": "medium", "group-sum": "easy"}[op]
    if messy:
        difficulty = {"pivot": "hard", "unpivot": "medium", "join": "hard", "group-sum": "medium"}[op]
    tests = (_TABLE_TESTS.replace("__OP__", repr(op)).replace("__DELIM__", repr(delim))
             .replace("__MESSY__", repr(messy)).replace("__NAMES__", repr(names)))
    return Instance(instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
                    variant=f"{op}/{_DELIMS[delim]}/{'export' if messy else 'clean'}", files=files,
                    test_files={"h1_table.py": source(h1_table), "given.json": json.dumps(expected)},
                    tags=("csv", op), oracle_turns=2)


_RESHAPERS = {
    "pivot": '''def reshape(rows):
    acc = {}
    for e, m, v in rows[1:]:
        acc[(e, m)] = acc.get((e, m), 0) + int(v)
    ms = sorted({m for _, m in acc})
    return [["entity"] + ms] + [[e] + [str(acc[(e, m)]) if (e, m) in acc else "" for m in ms]
                                for e in sorted({e for e, _ in acc})]''',
    "unpivot": '''def reshape(rows):
    out = [["id", "column", "value"]]
    for r in rows[1:]:
        out += [[r[0], c, v] for c, v in zip(rows[0][1:], r[1:]) if v != ""]
    return out''',
    "join": '''def reshape(orders, custs):
    by = {c[0].strip().upper(): c for c in custs[1:]}
    out = [["order_id", "customer", "name", "country"]]
    for oid, key in orders[1:]:
        hit = by.get(key.strip().upper())
        out.append([oid, hit[0] if hit else key.strip().upper(), hit[1] if hit else "", hit[2] if hit else ""])
    return out''',
    "group-sum": '''def reshape(rows):
    acc = {}
    for reg, amount in rows[1:]:
        whole, frac = amount.replace("$", "").replace(",", "").strip().split(".")
        acc[reg] = acc.get(reg, 0) + int(whole) * 100 + int(frac)
    return [["region", "total"]] + [[r, f"{acc[r] // 100}.{acc[r] % 100:02d}"] for r in sorted(acc)]''',
}

FAMILIES.append(Family("table-reshape", "text-data", "train",
                       "pivot, unpivot, join on messy keys or group sums of formatted amounts over "
                       "comma/semicolon/tab files, clean or as exported (BOM, CRLF, padding)", _table_reshape))
