"""A C project with a generated header (the make-codegen-fix family): ``isa.tbl`` is turned into
``build/auto/isa_table.h`` by ``mkisa.awk``; the program ``opasm`` maps mnemonics read from stdin
to their codes. ``expected`` is the reference output computed from the table text; the hidden
tests are ``TESTS_HEAD`` followed by the reference functions cut out of this module. Standard
library only."""

MNEMONICS = ["mov", "lea", "add", "sub", "imul", "idiv", "jmp", "jne", "call", "ret", "inc", "dec",
             "hlt", "nop", "shl", "shr", "cmp", "and", "rol", "xor"]

AWK = r'''# mkisa.awk: isa.tbl -> a C table of mnemonics and codes
BEGIN { n = 0; print "/* generated from isa.tbl by mkisa.awk: do not edit */" }
NF == 2 && $1 !~ /^#/ { name[n] = $1; code[n] = $2; n++ }
END {
    printf "#define NINSN %d\n", n
    print "static const struct insn INSNS[NINSN] = {"
    for (i = 0; i < n; i++) printf "    {\"%s\", %s},\n", name[i], code[i]
    print "};"
}
'''

INSN_H_TEXT = """#ifndef INSN_H
#define INSN_H
struct insn {
    const char *name;
    int code;
};
int insn_code(const char *name);
int insn_count(void);
#endif
"""

LOOKUP_C = """#include <string.h>
#include "insn.h"
#include "isa_table.h"

int insn_code(const char *name)
{
    for (int i = 0; i < NINSN; i++)
        if (strcmp(INSNS[i].name, name) == 0)
            return INSNS[i].code;
    return -1;
}
"""

MAIN_C = """#include <stdio.h>
#include "insn.h"
#include "isa_table.h"

/* reads mnemonics from stdin; prints each one's code as 0xNN, or ?NAME for an unknown one */
int main(void)
{
    char tok[64];
    while (scanf("%63s", tok) == 1) {
        int c = insn_code(tok);
        if (c < 0)
            printf("?%s\\n", tok);
        else
            printf("0x%02x\\n", c);
    }
    printf("table %d\\n", NINSN);
    return 0;
}
"""

MAKEFILE = """\
CC = gcc
CFLAGS = -O1 -Wall -Iinclude -Ibuild/auto
BIN = opasm
OBJS = build/main.o build/lookup.o

all: $(BIN)

$(BIN): $(OBJS)
\t$(CC) -o $@ $(OBJS)

build/auto/isa_table.h: isa.tbl mkisa.awk
\t@mkdir -p build/auto
\tawk -f mkisa.awk isa.tbl > $@

build/main.o: src/main.c include/insn.h build/auto/isa_table.h
\t@mkdir -p build
\t$(CC) $(CFLAGS) -c -o $@ src/main.c

build/lookup.o: src/lookup.c include/insn.h build/auto/isa_table.h
\t@mkdir -p build
\t$(CC) $(CFLAGS) -c -o $@ src/lookup.c

clean:
\trm -rf build $(BIN)

.PHONY: all clean
"""

# name: (correct text, faulty text) in the Makefile; "default-goal" moves the generator rule first
FAULTS = {
    "gen-not-prereq": ("build/main.o: src/main.c include/insn.h build/auto/isa_table.h",
                       "build/main.o: src/main.c include/insn.h"),
    "table-not-prereq": ("build/auto/isa_table.h: isa.tbl mkisa.awk",
                         "build/auto/isa_table.h: mkisa.awk"),
    "gen-include": ("-Iinclude -Ibuild/auto", "-Iinclude"),
    "redirect": ("isa.tbl > $@", "isa.tbl > isa_table.h"),
    "gen-mkdir": ("\t@mkdir -p build/auto\n", ""),
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
        gen = text[text.index("build/auto/isa_table.h:"):text.index("build/main.o:")]
        text = gen + text.replace(gen, "").replace(".PHONY: all clean", ".PHONY: clean")
    return text


def table(rng):
    names = rng.sample(MNEMONICS, rng.randint(8, 12))
    codes = rng.sample(range(1, 200), len(names))
    lines = ["# mnemonic code"] + [f"{n} {c if rng.random() < 0.5 else hex(c)}" for n, c in zip(names, codes)]
    return "\n".join(lines) + "\n"


def parse(table_text):
    codes = {}
    for line in table_text.splitlines():
        f = line.split()
        if len(f) == 2 and not f[0].startswith("#") and f[0] not in codes:
            codes[f[0]] = int(f[1], 0)
    return codes


def stream(rng, table_text, n=20):
    known = sorted(parse(table_text))
    return [rng.choice(known) if rng.random() < 0.8 else rng.choice(["bogus", "MOV", "nop2", "x"])
            for _ in range(n)]


def expected(table_text, seq):
    codes = parse(table_text)
    rows = [f"0x{codes[t]:02x}" if t in codes else f"?{t}" for t in seq]
    n = sum(1 for line in table_text.splitlines() if len(line.split()) == 2 and not line.startswith("#"))
    return "\n".join(rows + [f"table {n}"]) + "\n"


def files(table_text, faults):
    return {"isa.tbl": table_text, "mkisa.awk": AWK, "include/insn.h": INSN_H_TEXT,
            "src/lookup.c": LOOKUP_C, "src/main.c": MAIN_C, "Makefile": makefile(faults)}


# the hidden tests of an instance (the same for every instance: the table changes in the tests);
# they carry the reference functions above, cut out of this module
TESTS_HEAD = '''"""Builds fresh copies with the agent's Makefile, changes the table, runs the program."""

import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

APP = Path("/app/opasm")


def pristine():
    d = Path(tempfile.mkdtemp()) / "opasm"
    shutil.copytree(APP, d, ignore=shutil.ignore_patterns("build", "*.o", "opasm", "isa_table.h"))
    return d


def make(d, *args):
    r = subprocess.run(["make", *args], cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"make {' '.join(args)} failed:\\n{(r.stdout + r.stderr)[-1500:]}"


def check_program(d, seed):
    text = (d / "isa.tbl").read_text()
    seq = stream(random.Random(seed), text)
    assert (d / "opasm").is_file(), "make did not produce opasm"
    r = subprocess.run([str(d / "opasm")], input=" ".join(seq), capture_output=True, text=True, timeout=60)
    assert r.stdout == expected(text, seq), f"wrong output for the table:\\n{r.stdout}"


@pytest.mark.weight(2)
def test_fresh_build_and_new_table():
    d = pristine()
    (d / "isa.tbl").write_text(table(random.Random(7)))
    make(d)
    check_program(d, 1)


@pytest.mark.weight(1)
def test_table_change_rebuilds():
    d = pristine()
    make(d)
    check_program(d, 2)
    (d / "isa.tbl").write_text(table(random.Random(8)) + "extra1 0x7e\\n")
    make(d)
    check_program(d, 3)


@pytest.mark.weight(1)
def test_parallel_build_and_clean():
    d = pristine()
    (d / "isa.tbl").write_text(table(random.Random(9)))
    make(d, "-j4")
    check_program(d, 4)
    assert subprocess.run(["make", "-q"], cwd=d, timeout=120).returncode == 0, "make -q: not up to date"
    (d / "isa.tbl").write_text(table(random.Random(10)) + "extra2 0x6d\\n")
    make(d, "-j4")
    check_program(d, 5)
    make(d, "clean")
    assert not (d / "opasm").exists() and not (d / "build").exists(), "make clean left build products"
'''
