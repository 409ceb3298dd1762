# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Builds a copy of /app/calc from a clean tree and runs rpn on hidden expressions."""

import math
import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SRC = Path("/app/calc")
ARTIFACT_SUFFIXES = (".o", ".d")


def clean_copy() -> Path:
    dest = Path(tempfile.mkdtemp(prefix="calc-")) / "calc"
    shutil.copytree(SRC, dest, symlinks=True)
    for p in list(dest.rglob("*")):
        if p.is_file() and (p.suffix in ARTIFACT_SUFFIXES or p.name == "rpn"):
            p.unlink()
    return dest


def make(d: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=d, capture_output=True, text=True, timeout=120)


_BUILT: dict[str, Path] = {}


def built() -> Path:
    if "d" not in _BUILT:
        d = clean_copy()
        r = make(d)
        assert r.returncode == 0, f"make failed:\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
        assert (d / "rpn").is_file() and os.access(d / "rpn", os.X_OK), "make did not produce ./rpn"
        _BUILT["d"] = d
    return _BUILT["d"]


def run_rpn(lines: list[str]) -> list[str]:
    exe = built() / "rpn"
    r = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr[-500:]
    return r.stdout.splitlines()


def gen(rng: random.Random, depth: int, ops: list[str]) -> tuple[list[str], float]:
    """A random well-formed expression (tokens, value), evaluated like the C program."""
    if depth == 0 or rng.random() < 0.25:
        v = rng.choice([rng.randint(-40, 40), round(rng.uniform(-50, 50), rng.randint(1, 3))])
        return [repr(v) if isinstance(v, float) else str(v)], float(v)
    op = rng.choice(ops)
    if op in ("sqrt", "neg", "dup*"):
        toks, a = gen(rng, depth - 1, ops)
        if op == "neg":
            return toks + ["neg"], -a
        if op == "dup*":
            return toks + ["dup", "*"], a * a
        return toks + ["dup", "*", "sqrt"], math.sqrt(a * a)
    lt, a = gen(rng, depth - 1, ops)
    rt, b = gen(rng, depth - 1, ops)
    if op == "swap-":
        return rt + lt + ["swap", "-"], a - b
    if op in ("/", "%"):
        if abs(b) < 0.5:
            rt, b = rt + ["3", "+"], b + 3
        return lt + rt + [op], (a / b if op == "/" else math.fmod(a, b))
    if op == "^":
        e = rng.choice([0, 1, 2, 3, 0.5])
        base_t, base = lt + ["dup", "*", "1", "+"], a * a + 1
        if base > 1e6:
            base_t, base = ["7"], 7.0
        return base_t + [str(e), "^"], math.pow(base, e)
    if op == "+":
        return lt + rt + ["+"], a + b
    if op == "-":
        return lt + rt + ["-"], a - b
    return lt + rt + ["*"], a * b


def check(cases: list[tuple[str, object]]):
    got = run_rpn([c for c, _ in cases])
    assert len(got) == len(cases), f"expected {len(cases)} output lines, got {len(got)}"
    for (expr, want), line in zip(cases, got):
        if want == "error":
            assert line.strip() == "error", f"{expr!r}: expected error, got {line!r}"
        else:
            try:
                val = float(line)
            except ValueError:
                pytest.fail(f"{expr!r}: expected a number, got {line!r}")
            assert math.isclose(val, want, rel_tol=1e-8, abs_tol=1e-8), f"{expr!r}: got {val}, want {want}"


def test_builds_from_clean():
    d = built()
    r = subprocess.run([str(d / "rpn")], input="2 3 +\n", capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "5"


def test_basic_arithmetic():
    rng = random.Random(4417)
    cases = []
    for _ in range(60):
        toks, v = gen(rng, rng.randint(1, 4), ["+", "-", "*", "neg"])
        cases.append((" ".join(toks), v))
    cases += [("4 +", "error"), ("1 2", "error"), ("1 2 3 * foo", "error"), ("", None)]
    cases = [c for c in cases if c[1] is not None]
    check(cases)


def test_division_and_math():
    rng = random.Random(99120)
    cases = []
    for _ in range(80):
        toks, v = gen(rng, rng.randint(2, 4), ["/", "%", "^", "sqrt", "swap-", "+", "*", "dup*", "/"])
        cases.append((" ".join(toks), v))
    cases += [("9 0 /", "error"), ("2 neg sqrt", "error"), ("5 0 %", "error"),
              ("13 4 /", 3.25), ("1 8 /", 0.125), ("-7 2 /", -3.5), ("7.5 2 %", 1.5)]
    check(cases)


def test_header_dependencies():
    d = clean_copy()
    r = make(d)
    assert r.returncode == 0, r.stderr[-1500:]
    old = time.time() - 1000
    for p in d.rglob("*"):
        if p.is_file():
            os.utime(p, (old, old))
    cutoff = time.time() - 100
    os.utime(d / "stack.h", None)          # stack.h is now the newest file
    r = make(d)
    assert r.returncode == 0, r.stderr[-1500:]
    for obj in ("main.o", "stack.o", "ops.o"):    # ops.o includes stack.h through ops.h
        assert (d / obj).stat().st_mtime > cutoff, f"{obj} was not rebuilt after stack.h changed"
    assert (d / "rpn").stat().st_mtime > cutoff, "rpn was not relinked after stack.h changed"
    # nothing to do after a second make when nothing changed
    old2 = time.time() - 2000
    for p in d.rglob("*"):
        if p.is_file() and p.suffix not in ARTIFACT_SUFFIXES and p.name != "rpn":
            os.utime(p, (old2, old2))
    q = subprocess.run(["make", "-q"], cwd=d, capture_output=True, timeout=60)
    assert q.returncode == 0, "make still wants to rebuild although nothing changed"


def test_clean():
    d = clean_copy()
    sources = sorted(p.name for p in d.iterdir() if p.suffix in (".c", ".h"))
    assert make(d).returncode == 0
    r = make(d, "clean")
    assert r.returncode == 0, f"make clean failed: {r.stderr[-800:]}"
    assert not list(d.glob("*.o")), "object files left after make clean"
    assert not (d / "rpn").exists(), "rpn left after make clean"
    assert sorted(p.name for p in d.iterdir() if p.suffix in (".c", ".h")) == sources
    assert (d / "Makefile").exists()
    r = make(d, "clean")
    assert r.returncode == 0, "make clean fails when there is nothing to clean"
    r = make(d)
    assert r.returncode == 0 and (d / "rpn").exists(), "cannot rebuild after make clean"
