# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Parses hidden CSV texts with csvparse.parse (with the csv module made unavailable) and runs
csvq.py; the reference is Python's csv module."""

import csv
import io
import json
import random
import subprocess
import tempfile
from pathlib import Path

DRIVER = r"""
import json, sys
sys.path.insert(0, "/app/csvq")
sys.path.insert(0, sys.argv[1])          # a csv module that cannot be imported
import csvparse
texts = json.loads(sys.stdin.read())
print(json.dumps([csvparse.parse(t) for t in texts]))
"""

WORDS = ["alpha", "Beta", "x", "42", "3.14", "hello world", "  padded  ", "tab\tin", "caf\u00e9",
         "semi;colon", "slash/back\\slash", "'single'"]


def blocked_csv_dir() -> str:
    d = Path(tempfile.mkdtemp())
    (d / "csv.py").write_text("raise ImportError('the csv module is not available here')\n")
    return str(d)


def parse_all(texts):
    r = subprocess.run(["python3", "-c", DRIVER, blocked_csv_dir()], input=json.dumps(texts),
                       capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert r.returncode == 0, r.stderr[-1500:]
    return json.loads(r.stdout)


def reference(text):
    return [rec for rec in csv.reader(io.StringIO(text, newline="")) if rec]


def encode(records, rng, eol="\n", final_eol=True):
    lines = []
    for rec in records:
        out = []
        for f in rec:
            if any(c in f for c in ',"\r\n') or (f and rng.random() < 0.2) or (not f and rng.random() < 0.1):
                out.append('"' + f.replace('"', '""') + '"')
            else:
                out.append(f)
        lines.append(",".join(out))
    return eol.join(lines) + (eol if final_eol else "")


def gen_records(rng, n, make_field, width=None):
    w = width or rng.randint(2, 6)
    return [[make_field(rng) for _ in range(w)] for _ in range(n)]


def check(texts):
    got = parse_all(texts)
    for i, (t, g) in enumerate(zip(texts, got)):
        want = reference(t)
        assert g == want, f"text {i} ({t[:120]!r}...): first difference in record " \
            f"{next((j for j, (a, b) in enumerate(zip(g, want)) if a != b), min(len(g), len(want)))}"


def test_simple_records():
    rng = random.Random(8101)

    def field(r):
        return r.choice(WORDS + ["", "", "a,b", "1,000", ""])
    texts = []
    for k in range(12):
        recs = gen_records(rng, rng.randint(1, 30), field)
        recs.append(["last"] + [""] * rng.randint(1, 3))           # trailing empty fields
        texts.append(encode(recs, rng, final_eol=k % 3 != 0))
    texts += ["a,b,\n,,\n", "x\n\ny\n", '"",b\n']
    check(texts)


def test_escaped_quotes():
    rng = random.Random(8102)

    def field(r):
        return r.choice(['say "hi"', '"', '""', 'a"b"c', '"quoted"', 'end"', '"start', '5\'11"',
                         'He said ""ok""', 'mix, "of" both']) if r.random() < 0.6 else r.choice(WORDS)
    texts = [encode(gen_records(rng, rng.randint(1, 25), field), rng) for _ in range(12)]
    check(texts)


def test_multiline_fields():
    rng = random.Random(8103)

    def field(r):
        return r.choice(["line1\nline2", "a\r\nb", "trailing\n", "\nleading", "x\n\ny",
                         "addr: 1 Main St\nSpringfield, IL"]) if r.random() < 0.4 else r.choice(WORDS)
    texts = [encode(gen_records(rng, rng.randint(1, 25), field), rng) for _ in range(12)]
    check(texts)


def test_crlf_records():
    rng = random.Random(8104)

    def field(r):
        return r.choice(WORDS + ["a,b", "9"])
    texts = [encode(gen_records(rng, rng.randint(1, 30), field), rng, eol="\r\n",
                    final_eol=k % 2 == 0) for k in range(12)]
    check(texts)


def test_cli_columns():
    rng = random.Random(8105)
    header = ["id", "name", "comment", "city", "score"]
    rows = []
    for i in range(80):
        rows.append([str(i), rng.choice(["Ann", "Bob", 'Dee "DJ" Jones', "Li, Wei"]),
                     rng.choice(["", "ok", 'said "no"', "two\nlines", "a,b,c", ""]),
                     rng.choice(["Oslo", "S\u00e3o Paulo", "", "New York, NY"]),
                     str(rng.randint(0, 100))])
    text = encode([header] + rows, rng)
    f = Path(tempfile.mkdtemp()) / "data.csv"
    f.write_text(text, encoding="utf-8", newline="")
    for cols in (["name", "comment"], ["score", "id", "city"], ["comment"]):
        r = subprocess.run(["python3", "/app/csvq/csvq.py", str(f), *cols], capture_output=True,
                           text=True, timeout=60, cwd="/tmp")
        assert r.returncode == 0, r.stderr[-1000:]
        want = [json.dumps([row[header.index(c)] for c in cols]) for row in rows]
        assert r.stdout.splitlines() == want, f"columns {cols}"
    r = subprocess.run(["python3", "/app/csvq/csvq.py", str(f), "nope"], capture_output=True,
                       text=True, timeout=60, cwd="/tmp")
    assert r.returncode == 2 and r.stdout == ""
