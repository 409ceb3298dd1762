"""The install/uninstall rules of a small C project's Makefile, with faults (the make-install-fix
family), and its hidden tests. The project's sources are h2_cproj's. Standard library only."""

MAKEFILE = """\
CC = gcc
CFLAGS = -O1 -Wall -Iinclude
LDLIBS = -lm
PREFIX ?= /usr/local
BINDIR = $(PREFIX)/bin
MANDIR = $(PREFIX)/share/man/man1
BIN = {binary}
OBJS = $(patsubst src/%.c,build/%.o,$(wildcard src/*.c))

all: $(BIN)

$(BIN): $(OBJS)
\t$(CC) -o $@ $(OBJS) $(LDLIBS)

build/%.o: src/%.c $(wildcard include/*.h)
\t@mkdir -p build
\t$(CC) $(CFLAGS) -c -o $@ $<

install: $(BIN)
\tinstall -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)
\tinstall -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/$(BIN)
\tinstall -m 0644 doc/$(BIN).1 $(DESTDIR)$(MANDIR)/$(BIN).1

uninstall:
\trm -f $(DESTDIR)$(BINDIR)/$(BIN) $(DESTDIR)$(MANDIR)/$(BIN).1

clean:
\trm -rf build $(BIN)

.PHONY: all install uninstall clean
"""

FAULTS = {  # name: (correct text, faulty text)
    "no-install-dirs": ("\tinstall -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)\n", ""),
    "install-no-build": ("install: $(BIN)\n", "install:\n"),
    "phony-install": (".PHONY: all install uninstall clean", ".PHONY: all clean"),
    "no-destdir": ("$(BIN) $(DESTDIR)$(BINDIR)/$(BIN)", "$(BIN) $(BINDIR)/$(BIN)"),
    "binary-mode": ("-m 0755 $(BIN)", "-m 0644 $(BIN)"),
    "man-dir": ("MANDIR = $(PREFIX)/share/man/man1", "MANDIR = $(PREFIX)/man1"),
    "prefix-fixed": ("PREFIX ?= /usr/local\nBINDIR = $(PREFIX)/bin", "PREFIX ?= /usr/local\nBINDIR = /usr/local/bin"),
    "uninstall-man": (" $(DESTDIR)$(MANDIR)/$(BIN).1\n\nclean", "\n\nclean"),
}
LOUD = ("no-install-dirs", "install-no-build", "phony-install")

INSTALL_SCRIPT = """#!/bin/sh
# install: build and install into /usr/local (a shortcut for `make && make install`)
set -e
cd "$(dirname "$0")"
make
make install
"""


def makefile(binary, faults):
    text = MAKEFILE.format(binary=binary)
    if "phony-install" in faults and "install-no-build" not in faults:
        faults = [*faults, "install-no-build"]  # a file named install is newer than no prerequisite
    for f in faults:
        old, new = FAULTS[f]
        assert old in text, f
        text = text.replace(old, new, 1)
    return text


def manpage(binary):
    return f""".TH {binary.upper()} 1
.SH NAME
{binary} \\- reads numbers or words from stdin and prints a summary
.SH SYNOPSIS
.B {binary}
< input
"""


TESTS = '''"""Builds and installs fresh copies of the project with the agent's Makefile (staged with
DESTDIR, with and without PREFIX), runs the installed program, uninstalls."""

import os
import random
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from h2_cproj import make_input, project

SUBJECT = __SUBJECT__
KNOB = __KNOB__
BIN = __BIN__
APP = Path("/app") / SUBJECT
OUTSIDE = [Path("/usr/local/bin") / BIN, Path("/usr/bin") / BIN, Path("/usr/local/share/man/man1") / (BIN + ".1")]


def reference():
    d = Path(tempfile.mkdtemp())
    for rel, text in project(SUBJECT, KNOB).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    srcs = sorted(str(p) for p in (d / "src").glob("*.c"))
    subprocess.run(["gcc", "-I", str(d / "include"), *srcs, "-o", str(d / "ref"), "-lm"], check=True, timeout=120)
    return d / "ref"


def fresh_copy():
    for p in OUTSIDE:
        if p.exists():
            p.unlink()
    d = Path(tempfile.mkdtemp()) / SUBJECT
    shutil.copytree(APP, d, ignore=shutil.ignore_patterns("build", "*.o", BIN))
    return d


def make(d, *args):
    r = subprocess.run(["make", *args], cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"make {' '.join(args)} failed:\\\\n{(r.stdout + r.stderr)[-1500:]}"


def installed(stage, prefix):
    binary = stage / prefix.lstrip("/") / "bin" / BIN
    man = stage / prefix.lstrip("/") / "share/man/man1" / (BIN + ".1")
    assert binary.is_file(), f"no {prefix}/bin/{BIN} under DESTDIR"
    assert stat.S_IMODE(binary.stat().st_mode) == 0o755, f"{prefix}/bin/{BIN} is not mode 0755"
    assert man.is_file() and stat.S_IMODE(man.stat().st_mode) == 0o644, f"no {prefix}/share/man/man1/{BIN}.1 (0644)"
    leaked = [str(p) for p in OUTSIDE if p.exists()]
    assert not leaked, f"installed outside DESTDIR: {leaked}"
    ref = reference()
    for seed in range(3):
        text = make_input(SUBJECT, random.Random(seed), 2)
        got = subprocess.run([str(binary)], input=text, capture_output=True, text=True, timeout=60)
        want = subprocess.run([str(ref)], input=text, capture_output=True, text=True, timeout=60)
        assert got.stdout == want.stdout, "the installed program prints the wrong output"
    return binary, man


@pytest.mark.weight(2)
def test_staged_install_with_prefix():
    d = fresh_copy()
    stage = Path(tempfile.mkdtemp())
    make(d, "install", f"DESTDIR={stage}", "PREFIX=/usr")
    installed(stage, "/usr")


@pytest.mark.weight(1)
def test_staged_install_default_prefix():
    d = fresh_copy()
    stage = Path(tempfile.mkdtemp())
    make(d, "install", f"DESTDIR={stage}")
    installed(stage, "/usr/local")


@pytest.mark.weight(1)
def test_uninstall():
    d = fresh_copy()
    stage = Path(tempfile.mkdtemp())
    make(d, "install", f"DESTDIR={stage}", "PREFIX=/opt/tool")
    binary, man = installed(stage, "/opt/tool")
    make(d, "uninstall", f"DESTDIR={stage}", "PREFIX=/opt/tool")
    assert not binary.exists() and not man.exists(), "make uninstall left installed files"
'''
