"""A C project with a generated header (the make-codegen-fix family): ``ops.tbl`` is turned into
``build/gen/ops_table.h`` by ``gen_ops.awk``; the program ``opasm`` maps mnemonics read from stdin
to their codes. ``expected`` is the reference output computed from the table text. Standard
library only."""

MNEMONICS = ["push", "pop", "add", "sub", "mul", "div", "jmp", "jz", "call", "ret", "load", "store",
             "halt", "nop", "dup", "swap", "cmp", "and", "or", "xor"]

AWK = r'''# gen_ops.awk: ops.tbl -> a C table of mnemonics and codes
BEGIN { n = 0; print "/* generated from ops.tbl by gen_ops.awk: do not edit */" }
NF == 2 && $1 !~ /^#/ { name[n] = $1; code[n] = $2; n++ }
END {
    printf "#define NOPS %d\n", n
    print "static const struct op OPS[NOPS] = {"
    for (i = 0; i < n; i++) printf "    {\"%s\", %s},\n", name[i], code[i]
    print "};"
}
'''

OP_H = """#ifndef OP_H
#define OP_H
struct op {
    const char *name;
    int code;
};
int op_code(const char *name);
int op_count(void);
#endif
"""

LOOKUP_C = """#include <string.h>
#include "op.h"
#include "ops_table.h"

int op_code(const char *name)
{
    for (int i = 0; i < NOPS; i++)
        if (strcmp(OPS[i].name, name) == 0)
            return OPS[i].code;
    return -1;
}
"""

MAIN_C = """#include <stdio.h>
#include "op.h"
#include "ops_table.h"

/* reads mnemonics from stdin; prints each one's code as 0xNN, or ?NAME for an unknown one */
int main(void)
{
    char tok[64];
    while (scanf("%63s", tok) == 1) {
        int c = op_code(tok);
        if (c < 0)
            printf("?%s\\n", tok);
        else
            printf("0x%02x\\n", c);
    }
    printf("table %d\\n", NOPS);
    return 0;
}
"""

MAKEFILE = """\
CC = gcc
CFLAGS = -O1 -Wall -Iinclude -Ibuild/gen
BIN = opasm
OBJS = build/main.o build/lookup.o

all: $(BIN)

$(BIN): $(OBJS)
\t$(CC) -o $@ $(OBJS)

build/gen/ops_table.h: ops.tbl gen_ops.awk
\t@mkdir -p build/gen
\tawk -f gen_ops.awk ops.tbl > $@

build/main.o: src/main.c include/op.h build/gen/ops_table.h
\t@mkdir -p build
\t$(CC) $(CFLAGS) -c -o $@ src/main.c

build/lookup.o: src/lookup.c include/op.h build/gen/ops_table.h
\t@mkdir -p build
\t$(CC) $(CFLAGS) -c -o $@ src/lookup.c

clean:
\trm -rf build $(BIN)

.PHONY: all clean
"""

# name: (correct text, faulty text) in the Makefile; "default-goal" moves the generator rule first
FAULTS = {
    "gen-not-prereq": ("build/main.o: src/main.c include/op.h build/gen/ops_table.h",
                       "build/main.o: src/main.c include/op.h"),
    "table-not-prereq": ("build/gen/ops_table.h: ops.tbl gen_ops.awk", "build/gen/ops_table.h: gen_ops.awk"),
    "gen-include": ("-Iinclude -Ibuild/gen", "-Iinclude"),
    "redirect": ("ops.tbl > $@", "ops.tbl > ops_table.h"),
    "gen-mkdir": ("\t@mkdir -p build/gen\n", ""),
    "default-goal": ("all: $(BIN)\n\n", ""),
    "link-objs": ("-o $@ $(OBJS)", "-o $@ $<"),
}
SILENT = ("table-not-prereq",)


def makefile(faults):
    text = MAKEFILE
    for f in faults:
        old, new = FAULTS[f]
        assert old in text, f
        text = text.replace(old, new, 1)
    if "default-goal" in faults:  # the generator rule comes first, and becomes the default goal
        gen = text[text.index("build/gen/ops_table.h:"):text.index("build/main.o:")]
        text = gen + text.replace(gen, "").replace(".PHONY: all clean", ".PHONY: clean")
    return text


def table(rng):
    names = rng.sample(MNEMONICS, rng.randint(8, 12))
    codes = rng.sample(range(1, 200), len(names))
    lines = ["# mnemonic code"] + [f"{n} {c if rng.random() < 0.5 else hex(c)}" for n, c in zip(names, codes)]
    return "\n".join(lines) + "\n"


def parse(table_text):
    ops = {}
    for line in table_text.splitlines():
        f = line.split()
        if len(f) == 2 and not f[0].startswith("#") and f[0] not in ops:
            ops[f[0]] = int(f[1], 0)
    return ops


def tokens(rng, table_text, n=20):
    known = sorted(parse(table_text))
    return [rng.choice(known) if rng.random() < 0.8 else rng.choice(["bogus", "PUSH", "nop2", "x"])
            for _ in range(n)]


def expected(table_text, toks):
    ops = parse(table_text)
    rows = [f"0x{ops[t]:02x}" if t in ops else f"?{t}" for t in toks]
    n = sum(1 for line in table_text.splitlines() if len(line.split()) == 2 and not line.startswith("#"))
    return "\n".join(rows + [f"table {n}"]) + "\n"


def files(table_text, faults):
    return {"ops.tbl": table_text, "gen_ops.awk": AWK, "include/op.h": OP_H, "src/lookup.c": LOOKUP_C,
            "src/main.c": MAIN_C, "Makefile": makefile(faults)}


# the hidden tests of an instance (the same for every instance: the table changes in the tests)
TESTS = '''"""Builds fresh copies with the agent's Makefile, changes the table, runs the program."""

import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from h2_codegen import expected, table, tokens

APP = Path("/app/opasm")


def fresh_copy():
    d = Path(tempfile.mkdtemp()) / "opasm"
    shutil.copytree(APP, d, ignore=shutil.ignore_patterns("build", "*.o", "opasm", "ops_table.h"))
    return d


def make(d, *args):
    r = subprocess.run(["make", *args], cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"make {' '.join(args)} failed:\\n{(r.stdout + r.stderr)[-1500:]}"


def check_program(d, seed):
    text = (d / "ops.tbl").read_text()
    toks = tokens(random.Random(seed), text)
    assert (d / "opasm").is_file(), "make did not produce opasm"
    r = subprocess.run([str(d / "opasm")], input=" ".join(toks), capture_output=True, text=True, timeout=60)
    assert r.stdout == expected(text, toks), f"wrong output for the table:\\n{r.stdout}"


@pytest.mark.weight(2)
def test_fresh_build_and_new_table():
    d = fresh_copy()
    (d / "ops.tbl").write_text(table(random.Random(7)))
    make(d)
    check_program(d, 1)


@pytest.mark.weight(1)
def test_table_change_rebuilds():
    d = fresh_copy()
    make(d)
    check_program(d, 2)
    (d / "ops.tbl").write_text(table(random.Random(8)) + "extra1 0x7e\\n")
    make(d)
    check_program(d, 3)


@pytest.mark.weight(1)
def test_parallel_build_and_clean():
    d = fresh_copy()
    (d / "ops.tbl").write_text(table(random.Random(9)))
    make(d, "-j4")
    check_program(d, 4)
    assert subprocess.run(["make", "-q"], cwd=d, timeout=120).returncode == 0, "make -q: not up to date"
    (d / "ops.tbl").write_text(table(random.Random(10)) + "extra2 0x6d\\n")
    make(d, "-j4")
    check_program(d, 5)
    make(d, "clean")
    assert not (d / "opasm").exists() and not (d / "build").exists(), "make clean left build products"
'''
