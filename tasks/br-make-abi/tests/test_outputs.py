# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Builds a clean copy of /app/ledger; checks the report and the library ABI on hidden ledgers."""

import os
import random
import shutil
import string
import subprocess
import tempfile
import time
from pathlib import Path

SRC = Path("/app/ledger")
_CACHE: dict[str, Path] = {}


def clean_copy() -> Path:
    dest = Path(tempfile.mkdtemp(prefix="ledger-")) / "ledger"
    shutil.copytree(SRC, dest, symlinks=True, ignore=shutil.ignore_patterns("build"))
    for p in list(dest.rglob("*")):
        if p.is_file() and p.suffix in (".o", ".a", ".d"):
            p.unlink()
    return dest


def make(d: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=d, capture_output=True, text=True, timeout=120)


def built() -> Path:
    if "d" not in _CACHE:
        d = clean_copy()
        r = make(d)
        assert r.returncode == 0, f"make failed:\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
        assert (d / "build" / "libledger.a").is_file(), "build/libledger.a missing"
        assert os.access(d / "build" / "ledger-report", os.X_OK), "build/ledger-report missing"
        _CACHE["d"] = d
    return _CACHE["d"]


def gen_ledger(seed: int, n: int) -> tuple[str, list[tuple[int, str, int, int]]]:
    rng = random.Random(seed)
    alphabet = string.ascii_lowercase + string.digits + "_-"
    accounts = ["".join(rng.choice(alphabet) for _ in range(rng.choice([3, 5, 8, 12, 15, 17, 20, 23])))
                for _ in range(rng.randint(4, 12))]
    accounts = [a if a[0].isalpha() else "x" + a[1:] for a in accounts]
    lines, entries = [f"# hidden ledger {seed}"], []
    for i in range(n):
        day = rng.randint(1, 366)
        acct = rng.choice(accounts)
        cents = rng.randint(-500000, 500000)
        style = rng.randint(0, 2)
        sign = "-" if cents < 0 else rng.choice(["", "", "+"])
        a = abs(cents)
        if style == 0:
            cents = (a // 100) * 100 * (-1 if cents < 0 else 1)
            amount = f"{sign}{a // 100}"
        elif style == 1:
            cents = (a // 10) * 10 * (-1 if cents < 0 else 1)
            amount = f"{sign}{a // 100}.{(a // 10) % 10}"
        else:
            amount = f"{sign}{a // 100}.{a % 100:02d}"
        flags = rng.choice(["", "", "", "D", "R", "DR", "RD"])
        fl = (1 if "D" in flags else 0) | (2 if "R" in flags else 0)
        sep = rng.choice([" ", "\t", "  "])
        lines.append(sep.join(x for x in (str(day), acct, amount, flags) if x))
        entries.append((day, acct, cents, fl))
        if rng.random() < 0.05:
            lines.append(rng.choice(["", "# comment " + acct]))
    return "\n".join(lines) + "\n", entries


def money(c: int) -> str:
    return ("-" if c < 0 else "") + f"{abs(c) // 100}.{abs(c) % 100:02d}"


def expected_report(entries) -> str:
    out = [f"entries {len(entries)}",
           f"days {min(e[0] for e in entries)}-{max(e[0] for e in entries)}",
           f"total {money(sum(e[2] for e in entries))}"]
    for acct in sorted({e[1] for e in entries}):
        out.append(f"account {acct} {money(sum(e[2] for e in entries if e[1] == acct))}")
    out.append(f"disputed {sum(1 for e in entries if e[3] & 1)}")
    out.append(f"recurring {sum(1 for e in entries if e[3] & 2)}")
    return "\n".join(out) + "\n"


def write_tmp(text: str) -> Path:
    fd, name = tempfile.mkstemp(suffix=".ledger")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return Path(name)


def parse_ledger(text: str) -> list[tuple[int, str, int, int]]:
    entries = []
    for line in text.splitlines():
        t = line.split()
        if not t or t[0].startswith("#"):
            continue
        whole, _, frac = t[2].lstrip("+-").partition(".")
        c = int(whole) * 100 + int((frac + "00")[:2])
        fl = t[3] if len(t) > 3 else ""
        entries.append((int(t[0]), t[1], -c if t[2].startswith("-") else c,
                        (1 if "D" in fl else 0) | (2 if "R" in fl else 0)))
    return entries


def test_sample_report():
    d = built()
    r = subprocess.run([str(d / "build" / "ledger-report"), str(d / "sample.ledger")],
                       capture_output=True, text=True, errors="replace", timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == expected_report(parse_ledger((d / "sample.ledger").read_text()))


def test_report_hidden_ledgers():
    exe = built() / "build" / "ledger-report"
    for seed, n in ((7301, 40), (7302, 900), (7303, 5)):
        text, entries = gen_ledger(seed, n)
        r = subprocess.run([str(exe), str(write_tmp(text))], capture_output=True, text=True,
                           errors="replace", timeout=30)
        assert r.returncode == 0, r.stderr
        assert r.stdout == expected_report(entries), f"wrong report for hidden ledger {seed}"


ABI_PROGRAM = r"""
#include <stdio.h>
#include <stddef.h>
#include "ledger.h"
int main(int argc, char **argv) {
    ledger lg;
    printf("layout %zu %zu %zu %zu %zu\n", sizeof(ledger_entry), offsetof(ledger_entry, account),
           offsetof(ledger_entry, cents), offsetof(ledger_entry, flags), offsetof(ledger_entry, day));
    if (ledger_load(&lg, argv[1]) != 0) { puts("load failed"); return 1; }
    for (size_t i = 0; i < lg.count; i++)
        printf("%d %s %lld %u\n", lg.entries[i].day, lg.entries[i].account,
               lg.entries[i].cents, (unsigned)lg.entries[i].flags);
    printf("sum %lld flagged %zu\n", ledger_total(&lg, NULL), ledger_count_flag(&lg, 1u));
    ledger_free(&lg);
    return 0;
}
"""


def test_library_abi():
    d = built()
    work = Path(tempfile.mkdtemp(prefix="abi-"))
    (work / "abi.c").write_text(ABI_PROGRAM)
    r = subprocess.run(["gcc", "-O0", "-I", str(d / "include"), str(work / "abi.c"),
                        str(d / "build" / "libledger.a"), "-o", str(work / "abi")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"cannot build against include/ledger.h + libledger.a:\n{r.stderr[-1500:]}"
    text, entries = gen_ledger(8811, 300)
    r = subprocess.run([str(work / "abi"), str(write_tmp(text))], capture_output=True, text=True,
                       errors="replace", timeout=30)
    lines = r.stdout.splitlines()
    assert lines and lines[0] == "layout 40 0 24 32 36", "public ledger_entry layout was changed"
    want = [f"{day} {acct} {c} {fl}" for day, acct, c, fl in entries]
    want.append(f"sum {sum(e[2] for e in entries)} flagged {sum(1 for e in entries if e[3] & 1)}")
    assert lines[1:] == want, "entries read through the public header are wrong"


def test_header_dependencies():
    d = clean_copy()
    r = make(d)
    assert r.returncode == 0, r.stderr[-1500:]
    old = time.time() - 1000
    for p in d.rglob("*"):
        if p.is_file():
            os.utime(p, (old, old))
    cutoff = time.time() - 100
    os.utime(d / "include" / "ledger.h", None)
    r = make(d)
    assert r.returncode == 0, r.stderr[-1500:]
    b = d / "build"
    for name in ("libledger.a", "ledger-report"):
        assert (b / name).stat().st_mtime > cutoff, f"build/{name} not rebuilt after include/ledger.h changed"
    objs = list(b.glob("*.o"))
    assert len(objs) >= 3, "expected the objects of the library and of the report under build/"
    stale = [o.name for o in objs if o.stat().st_mtime <= cutoff]
    assert not stale, f"objects not recompiled after include/ledger.h changed: {stale}"
