# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Builds a clean copy of /app/libcsum; checks the archive, its symbols and its checksums."""

import random
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

SRC = Path("/app/libcsum")
API = {"csum_crc32", "csum_crc32_update", "csum_adler32", "csum_fletcher16", "csum_version"}
_CACHE: dict[str, Path] = {}


def built() -> Path:
    if "d" not in _CACHE:
        d = Path(tempfile.mkdtemp(prefix="csum-")) / "libcsum"
        shutil.copytree(SRC, d, symlinks=True)
        for p in list(d.rglob("*")):
            if p.is_file() and (p.suffix in (".o", ".a", ".so", ".d")):
                p.unlink()
        r = subprocess.run(["make"], cwd=d, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"make failed:\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
        assert (d / "libcsum.a").is_file(), "make did not produce libcsum.a"
        _CACHE["d"] = d
    return _CACHE["d"]


def fletcher16(data: bytes) -> int:
    s1 = s2 = 0
    for b in data:
        s1 = (s1 + b) % 255
        s2 = (s2 + s1) % 255
    return (s2 << 8) | s1


def hidden_blobs() -> list[bytes]:
    rng = random.Random(90210)
    blobs = [b"", b"a", bytes(range(256)), b"\xff" * 70000]
    blobs += [bytes(rng.getrandbits(8) for _ in range(rng.choice([3, 100, 5551, 5553, 20000])))
              for _ in range(8)]
    return blobs


PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "csum.h"
%(extra)s
int main(int argc, char **argv) {
    %(call)s
    printf("version %%s\n", csum_version());
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        static unsigned char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        size_t half = n / 3;
        uint32_t inc = csum_crc32_update(csum_crc32(buf, half), buf + half, n - half);
        printf("%%08x %%08x %%08x %%04x\n", (unsigned)csum_crc32(buf, n), (unsigned)inc,
               (unsigned)csum_adler32(buf, n), (unsigned)csum_fletcher16(buf, n));
    }
    return 0;
}
"""

USER_SYMBOLS = r"""
unsigned int crc_table[256];
int tables_ready = 7;
void init_tables(void) { for (int i = 0; i < 256; i++) crc_table[i] = 0; }
unsigned int mod_adler(unsigned int x) { return x; }
unsigned short mod255(unsigned int x) { return (unsigned short)x; }
"""


def run_program(extra: str, call: str) -> tuple[list[str], list[bytes]]:
    d = built()
    work = Path(tempfile.mkdtemp(prefix="csumt-"))
    (work / "t.c").write_text(PROGRAM % {"extra": extra, "call": call})
    r = subprocess.run(["gcc", "-O1", "-I", str(d / "include"), str(work / "t.c"), str(d / "libcsum.a"),
                        "-o", str(work / "t")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"linking a program with libcsum.a failed:\n{r.stderr[-1500:]}"
    blobs = hidden_blobs()
    files = []
    for i, b in enumerate(blobs):
        (work / f"b{i}").write_bytes(b)
        files.append(str(work / f"b{i}"))
    r = subprocess.run([str(work / "t"), *files], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"program failed: {r.stderr[-500:]}"
    return r.stdout.splitlines(), blobs


def expected_lines(blobs):
    return ["version 2.1.0"] + [
        f"{zlib.crc32(b):08x} {zlib.crc32(b):08x} {zlib.adler32(b):08x} {fletcher16(b):04x}" for b in blobs]


def test_static_archive():
    lib = built() / "libcsum.a"
    assert lib.read_bytes()[:8] == b"!<arch>\n", "libcsum.a is not an ar archive"
    r = subprocess.run(["ar", "t", str(lib)], capture_output=True, text=True, timeout=30)
    members = r.stdout.split()
    assert r.returncode == 0 and members and all(m.endswith(".o") for m in members), members


def test_exported_symbols():
    lib = built() / "libcsum.a"
    r = subprocess.run(["nm", "-g", "--defined-only", str(lib)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    syms = set()
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms.add(parts[2])
    assert syms == API, f"missing: {sorted(API - syms)}; extra: {sorted(syms - API)}"


def test_checksums_hidden_data():
    got, blobs = run_program("", "")
    assert got == expected_lines(blobs)


def test_no_clash_with_user_symbols():
    got, blobs = run_program(USER_SYMBOLS, "init_tables(); (void)mod_adler(1); (void)mod255(1);")
    assert got == expected_lines(blobs), "the library's results change when the program defines its own symbols"
