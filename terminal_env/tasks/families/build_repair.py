"""Generated task families of the build-repair category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support import functions, h2_cmproj, h2_codegen, h2_cproj
from .support.hB_tgz import tgz

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ make-fault-fix
# A small C project (bitstats or wordshape) whose Makefile has two to four faults from a catalogue
# (spaces before recipes, a missing object, no -lm, a wrong -I, a wrong pattern directory, no
# build/ directory, the wrong output name, no header dependencies). The tests copy the sources,
# build them from scratch with the agent's Makefile and run the binary on hidden inputs.

_MAKEFILE = """\
CC = gcc
CFLAGS = -O1 -Wall -Iinclude
LDLIBS = -lm
OBJS = build/main.o build/{m1}.o build/{m2}.o
BIN = {binary}

all: $(BIN)

$(BIN): $(OBJS)
\t$(CC) $(CFLAGS) -o $@ $(OBJS) $(LDLIBS)

build/%.o: src/%.c $(wildcard include/*.h)
\t@mkdir -p build
\t$(CC) $(CFLAGS) -c -o $@ $<

clean:
\trm -rf build $(BIN)

.PHONY: all clean
"""

_MAKE_FAULTS = {  # name: (correct text, faulty text), applied to the Makefile in turn
    "recipe-spaces": ("\t$(CC) $(CFLAGS) -c -o $@ $<", "    $(CC) $(CFLAGS) -c -o $@ $<"),
    "missing-object": (" build/{m2}.o\n", "\n"),
    "missing-libm": ("LDLIBS = -lm", "LDLIBS ="),
    "include-dir": ("-Iinclude", "-Iinc"),
    "pattern-dir": ("build/%.o: src/%.c", "build/%.o: %.c"),
    "no-mkdir": ("\t@mkdir -p build\n", ""),
    "output-name": ("-o $@ $(OBJS)", "-o a.out $(OBJS)"),
    "no-header-deps": (" $(wildcard include/*.h)", ""),
}
_SILENT = ("output-name", "no-header-deps")

_MAKE_TESTS = '''"""Builds a fresh copy of the project with the agent's Makefile and runs it on hidden inputs
against a reference build of the shipped code (orig-src.tgz)."""

import random
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SUBJECT = __SUBJECT__
KNOB = __KNOB__
OTHER = __OTHER__
PROG = __PROG__
APP = Path("/app") / SUBJECT
MACRO = re.compile(r"(#define \\w+ )\\d+")


def set_macro(config, value):
    config.write_text(MACRO.sub(lambda m: m[1] + str(value), config.read_text()))


def reference(knob):
    d = Path(tempfile.mkdtemp())
    shutil.unpack_archive(Path(__file__).with_name("orig-src.tgz"), d)
    set_macro(d / "include" / "config.h", knob)
    units = [str(p) for p in sorted(d.glob("src/*.c"))]
    subprocess.run(["gcc", "-O1", "-I", str(d / "include"), *units, "-o", str(d / "ref"), "-lm"],
                   check=True, timeout=120)
    return d / "ref"


def scratch_tree():
    d = Path(tempfile.mkdtemp()) / SUBJECT
    shutil.copytree(APP, d, ignore=shutil.ignore_patterns("build", "*.o", PROG, "a.out"))
    return d


def make(d, *args):
    r = subprocess.run(["make", *args], cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"make {' '.join(args)} failed:\\n{(r.stdout + r.stderr)[-1500:]}"
    return r


def agrees(program, ref, draws):
    for k in draws:
        text = make_input(SUBJECT, random.Random(k), 2)
        got = subprocess.run([str(program)], input=text, capture_output=True, text=True, timeout=60)
        want = subprocess.run([str(ref)], input=text, capture_output=True, text=True, timeout=60)
        assert got.returncode == 0 and got.stdout == want.stdout, f"wrong output on hidden input {k}"


@pytest.mark.weight(2)
def test_fresh_build_runs():
    d = scratch_tree()
    make(d)
    assert (d / PROG).is_file(), f"make did not produce {PROG}"
    agrees(d / PROG, reference(KNOB), range(5))


@pytest.mark.weight(1)
def test_header_change_rebuilds():
    d = scratch_tree()
    make(d)
    set_macro(d / "include" / "config.h", OTHER)
    make(d)
    agrees(d / PROG, reference(OTHER), range(10, 13))


@pytest.mark.weight(1)
def test_up_to_date_and_clean():
    d = scratch_tree()
    make(d)
    q = subprocess.run(["make", "-q"], cwd=d, capture_output=True, timeout=120)
    assert q.returncode == 0, "right after a build, make still finds the default goal out of date"
    make(d, "clean")
    assert not (d / PROG).exists() and not list(d.rglob("*.o")), "make clean left build products"
    make(d)
    agrees(d / PROG, reference(KNOB), [20])


'''


def _make_fault_fix(rng: random.Random, index: int) -> Instance:
    subject = rng.choice(["bitstats", "wordshape"])
    spec = h2_cproj.SUBJECTS[subject]
    m1, m2 = spec["modules"]
    knob, other = rng.sample(spec["knobs"], 2)
    loud = [f for f in _MAKE_FAULTS if f not in _SILENT]
    faults = rng.sample(loud, rng.choice([1, 2, 2, 3]))
    faults += [f for f in _SILENT if rng.random() < 0.35]
    faults = sorted(faults)
    good = _MAKEFILE.format(m1=m1, m2=m2, binary=spec["binary"])
    bad = good
    for f in faults:
        old, new = (t.format(m2=m2) for t in _MAKE_FAULTS[f])
        assert old in bad, (f, old)
        bad = bad.replace(old, new, 1)
    files = {f"{subject}/{p}": t for p, t in h2_cproj.project(subject, knob).items()}
    files[f"{subject}/Makefile"] = bad
    files[f"{subject}/sample.txt"] = h2_cproj.make_input(subject, rng, 1)
    app = f"/app/{subject}"
    instruction = f"""\
`{app}` is a small C program: sources in `src/`, headers in `include/` (`include/config.h` sets a
compile-time constant), built with `{app}/Makefile`. The Makefile is broken. Fix it (fix the
Makefile, not the C code) so that, in a clean checkout of the directory without build products:

- `make` compiles each `src/*.c` into `build/<name>.o` (creating `build/`) and links them into the
  program `{app}/{spec['binary']}` (it needs the math library);
- right after a build, `make` has nothing to do (`make -q` succeeds);
- after a change to any header in `include/` (for example the constant in `config.h`), `make`
  rebuilds every object that depends on it and relinks the program;
- `make clean` removes `build/` and the program.

The program reads its input from stdin; try `{app}/{spec['binary']} < {app}/sample.txt`. It will be
built from a copy of `{app}` and run on other inputs.
"""
    solution = f"cat > {app}/Makefile <<'EOF_MAKE'\n{good}EOF_MAKE\ncd {app} && make clean && make\n"
    tests = (_MAKE_TESTS.replace("__SUBJECT__", repr(subject)).replace("__KNOB__", repr(knob))
             .replace("__OTHER__", repr(other)).replace("__PROG__", repr(spec["binary"]))
             + functions(h2_cproj, "make_input") + "\n")
    silent = sum(f in _SILENT for f in faults)
    score = (len(faults) >= 4) + silent
    difficulty = "easy" if score == 0 else "medium" if score == 1 else "hard"
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{subject}/{'+'.join(faults)}", files=files,
        test_files={"orig-src.tgz": tgz(h2_cproj.project(subject, knob))},
        tags=("make", "c", subject), image="dev", oracle_turns=2,
    )


FAMILIES.append(Family("make-fault-fix", "build-repair", "train",
                       "a C project's Makefile with one to five faults from a catalogue of eight "
                       "(tabs, objects, -lm, -I, pattern dirs, mkdir, output name, header deps), "
                       "built from scratch by the tests and run on hidden inputs", _make_fault_fix))

# ------------------------------------------------------------------ cmake-fault-fix
# A small C project (polyeval or luhncheck) whose CMakeLists.txt has faults from a catalogue:
# loud ones (version, C standard, missing source, no libm, wrong include dir) and silent ones
# (output name, include dir relative to the build tree, install destination). The tests configure
# fresh copies in and outside the tree, install, and run the program on hidden inputs.

_CMAKELISTS = """\
cmake_minimum_required(VERSION 3.16)
project({b} C)
set(CMAKE_C_STANDARD 99)
add_executable({b} src/main.c src/{m1}.c src/{m2}.c)
target_include_directories({b} PRIVATE ${{CMAKE_CURRENT_SOURCE_DIR}}/include)
target_link_libraries({b} PRIVATE m)
install(TARGETS {b} RUNTIME DESTINATION bin)
"""

_CMAKE_FAULTS = {
    "min-version": ("VERSION 3.16", "VERSION 3.40"),
    "c90": ("CMAKE_C_STANDARD 99", "CMAKE_C_STANDARD 90"),
    "missing-source": (" src/{m2}.c)", ")"),
    "missing-libm": ("target_link_libraries({b} PRIVATE m)\n", ""),
    "include-dir": ("SOURCE_DIR}/include", "SOURCE_DIR}/inc"),
    "output-name": ("install(", "set_target_properties({b} PROPERTIES OUTPUT_NAME {b}_app)\ninstall("),
    "build-tree-include": ("${CMAKE_CURRENT_SOURCE_DIR}/include", "${CMAKE_OUTNAME_DIR}/../include"),
    "install-dest": ("DESTINATION bin", "DESTINATION lib/{b}"),
}
_CMAKE_SILENT = ("output-name", "build-tree-include", "install-dest")

_CMAKE_TESTS = '''"""Sets up fresh copies of the project with the agent's CMakeLists.txt (build trees inside and
outside the copy), installs, and runs the program on hidden inputs against a reference program
compiled from the original sources."""

import random
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

PROJ = __PROJ__
SETTING = __SETTING__
OUTNAME = __OUTNAME__
APP = Path("/app") / PROJ


def reference():
    d = Path(tempfile.mkdtemp())
    with tarfile.open(Path(__file__).with_name("reference.tar.gz")) as tar:
        tar.extractall(d)
    files = sorted(str(p) for p in (d / "src").glob("*.c"))
    subprocess.run(["gcc", "-I", str(d / "include"), *files, "-o", str(d / "ref"), "-lm"],
                   check=True, timeout=120)
    return d / "ref"


def leftovers(folder, names):
    return [n for n in names
            if n.startswith("build") or n.startswith("CMake") and n != "CMakeLists.txt"]


def duplicate():
    d = Path(tempfile.mkdtemp()) / PROJ
    shutil.copytree(APP, d, ignore=leftovers)
    return d


def run(*cmd):
    r = subprocess.run(["cmake", *cmd], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\\n{(r.stdout + r.stderr)[-1500:]}"


def configure_and_compile(top, out, *extra):
    run("-S", str(top), "-B", str(out), *extra)
    run("--build", str(out))


def matches_reference(artifact, cases):
    assert artifact.is_file(), f"no program at {artifact}"
    ref = reference()
    for case in cases:
        text = stdin_for(PROJ, random.Random(case), 2)
        got = subprocess.run([str(artifact)], input=text, capture_output=True, text=True, timeout=60)
        want = subprocess.run([str(ref)], input=text, capture_output=True, text=True, timeout=60)
        assert got.returncode == 0 and got.stdout == want.stdout, f"wrong output on hidden input {case}"


@pytest.mark.weight(2)
def test_in_tree():
    d = duplicate()
    configure_and_compile(d, d / "build")
    matches_reference(d / "build" / OUTNAME, range(5))


@pytest.mark.weight(1)
def test_out_of_tree():
    d = duplicate()
    out = Path(tempfile.mkdtemp()) / "elsewhere" / "b"
    configure_and_compile(d, out, "-DCMAKE_BUILD_TYPE=Release")
    matches_reference(out / OUTNAME, range(10, 13))


@pytest.mark.weight(1)
def test_install():
    d = duplicate()
    configure_and_compile(d, d / "build")
    staging = Path(tempfile.mkdtemp()) / "staged"
    run("--install", str(d / "build"), "--prefix", str(staging))
    matches_reference(staging / "bin" / OUTNAME, [20, 21])


'''


def _cmake_fault_fix(rng: random.Random, index: int) -> Instance:
    proj = rng.choice(["polyeval", "luhncheck"])
    spec = h2_cmproj.PROGRAMS[proj]
    b = spec["exe"]
    m1, m2 = spec["units"]
    setting = rng.choice(spec["settings"])
    silent = [f for f in _CMAKE_SILENT if rng.random() < 0.45]
    loud = [f for f in _CMAKE_FAULTS if f not in _CMAKE_SILENT
            and not (f == "include-dir" and "build-tree-include" in silent)]
    faults = sorted(rng.sample(loud, rng.choice([1, 2, 2, 3])) + silent)
    good = _CMAKELISTS.format(b=b, m1=m1, m2=m2)
    bad = good
    for f in faults:
        old, new = (t.replace("{b}", b).replace("{m2}", m2) for t in _CMAKE_FAULTS[f])
        assert old in bad, (f, old)
        bad = bad.replace(old, new, 1)
    files = {f"{proj}/{p}": t for p, t in h2_cmproj.sources(proj, setting).items()}
    files[f"{proj}/CMakeLists.txt"] = bad
    files[f"{proj}/sample.txt"] = h2_cmproj.stdin_for(proj, rng, 1)
    app = f"/app/{proj}"
    instruction = f"""\
`{app}` is a small C program (sources in `src/`, headers in `include/`) with a CMake build,
`{app}/CMakeLists.txt`, that does not work. Fix `CMakeLists.txt` (not the C sources) so that, for
a fresh copy of `{app}` without any build directory:

- `cmake -S <srcdir> -B <builddir> && cmake --build <builddir>` works for any build directory, inside
  the copy (`<srcdir>/build`) or in any other place on the file system, with or without
  `-DCMAKE_BUILD_TYPE=Release`, and produces the program `<builddir>/{b}` (C99; it links against
  libm);
- `cmake --install <builddir> --prefix <prefix>` then installs the program as `<prefix>/bin/{b}`.

The program reads its input from stdin; try it on `{app}/sample.txt`. It will be built from copies
of `{app}` and run on other inputs.
"""
    solution = (f"cat > {app}/CMakeLists.txt <<'EOF_CMAKE'\n{good}EOF_CMAKE\n"
                f"cd {app} && rm -rf build && cmake -S . -B build && cmake --build build\n")
    tests = (_CMAKE_TESTS.replace("__PROJ__", repr(proj)).replace("__SETTING__", repr(setting))
             .replace("__OUTNAME__", repr(b)) + functions(h2_cmproj, "stdin_for") + "\n")
    score = (len(faults) >= 4) + len(silent)
    difficulty = "easy" if score == 0 else "medium" if score == 1 else "hard"
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{proj}/{'+'.join(faults)}", files=files,
        test_files={"reference.tar.gz": h2_cmproj.archive(proj, setting)},
        tags=("cmake", "c", proj), image="dev", oracle_turns=2, verifier_timeout_sec=300.0,
    )


FAMILIES.append(Family("cmake-fault-fix", "build-repair", "test",
                       "a C project's CMakeLists.txt with loud (version, C90, source, libm, include) "
                       "and silent (output name, build-tree include, install destination) faults; "
                       "configured in and out of tree and installed by the tests", _cmake_fault_fix))

# ------------------------------------------------------------------ make-codegen-fix
# A C project whose header is generated from a table by an awk script in the Makefile; one to
# three faults from a catalogue of seven (generated header not a prerequisite, table not a
# prerequisite of the generator rule, no -I for the generated dir, output not $@, no mkdir, the
# generator rule as the default goal, linking $<). The tests build fresh copies (also with -j),
# change the table and check the program against the table.

_CODEGEN_TESTS = (h2_codegen.TESTS_HEAD + f"\n\nMNEMONICS = {h2_codegen.MNEMONICS!r}\n\n\n"
                  + functions(h2_codegen, "table", "parse", "stream", "expected") + "\n")


def _make_codegen_fix(rng: random.Random, index: int) -> Instance:
    loud = [f for f in sorted(h2_codegen.FAULTS) if f not in h2_codegen.SILENT]
    faults = rng.sample(loud, rng.choice([1, 1, 2, 3]))
    if rng.random() < 0.4:
        faults.append("table-not-prereq")
    faults = sorted(faults)
    tbl = h2_codegen.table(rng)
    files = {f"opasm/{p}": t for p, t in h2_codegen.files(tbl, faults).items()}
    sample = " ".join(h2_codegen.stream(rng, tbl, 8))
    instruction = f"""\
`/app/opasm` is a small C program, `opasm`, that prints the codes of the mnemonics it reads from
stdin (try `echo {sample} | /app/opasm/opasm` once it builds). Its table of mnemonics is
`isa.tbl`; `make` turns it into the header `build/auto/isa_table.h` with `awk -f mkisa.awk` and
compiles `src/*.c` (headers in `include/` and `build/auto/`) into `build/*.o` and `/app/opasm/opasm`.

The Makefile is broken. Fix `/app/opasm/Makefile` (not the C sources, the table or the awk
script) so that, in a fresh copy of the directory without any build products:

- `make` (and `make -j4`) generates the header and builds `opasm`;
- after a change to `isa.tbl`, `make` regenerates the header and rebuilds everything that uses it;
- right after a build, `make -q` succeeds; `make clean` removes `build/` and `opasm`.

It will be checked with other tables.
"""
    solution = (f"cat > /app/opasm/Makefile <<'EOF_MAKE'\n{h2_codegen.makefile(())}EOF_MAKE\n"
                "cd /app/opasm && make clean && make\n")
    score = (len(faults) >= 3) + ("table-not-prereq" in faults) + ("gen-not-prereq" in faults)
    difficulty = "easy" if score == 0 else "medium" if score == 1 else "hard"
    return Instance(
        instruction=instruction, tests=_CODEGEN_TESTS, solution=solution, difficulty=difficulty,
        variant="+".join(faults), files=files,
        tags=("make", "codegen", "awk"), image="dev", oracle_turns=2,
    )


FAMILIES.append(Family("make-codegen-fix", "build-repair", "train",
                       "a Makefile that generates a C header from a table with awk, with one to "
                       "four faults (prerequisites of generated files, -I, $@, mkdir, default goal, "
                       "$<), built fresh and with -j by the tests after table changes",
                       _make_codegen_fix))
