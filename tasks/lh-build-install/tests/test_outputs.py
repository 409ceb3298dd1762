# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""tally: build, install, wrapper, report, release; one check per step."""

import hashlib
import math
import os
import random
import shutil
import stat
import subprocess
import tarfile
import tempfile

SRC = "/app/src/tally"
ENV = {**os.environ, "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}

MAN_SHA256 = "67f0673a299b52a6e2eca7b904c7d8985a977d76c2d79ad92c36b6a6535a621e"  # environment/src/tally/tally.1


def sh(cmd, cwd=None, timeout=90, **kw):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=ENV, **kw)


def numbers_of(text):
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(float(s))
    return out


def stats(xs):
    n = len(xs)
    mean = math.fsum(xs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    return n, mean, sd


def near(text, want):
    return abs(float(text) - want) <= 1e-6 * max(1.0, abs(want)) + 1.5e-6


def expected_report(directory):
    rows, everything = [], []
    for name in sorted(f for f in os.listdir(directory) if f.endswith(".dat")):
        xs = numbers_of(open(os.path.join(directory, name)).read())
        everything += xs
        rows.append((name, stats(xs) if xs else None))
    rows.append(("TOTAL", stats(everything) if everything else None))
    return rows


def check_report(text, want):
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == len(want), f"{len(lines)} lines, expected {len(want)}:\n{text}"
    for line, (name, st) in zip(lines, want):
        f = line.split("\t")
        assert len(f) == 4 and f[0] == name, f"line {line!r}, expected name {name}"
        if st is None:
            assert f[1:] == ["0", "-", "-"], line
        else:
            assert int(f[1]) == st[0] and near(f[2], st[1]) and near(f[3], st[2]), f"line {line!r}, expected {st}"


def fresh_copy(tmp):
    dst = os.path.join(tmp, "tally")
    shutil.copytree(SRC, dst)
    return dst


def hidden_numbers(seed, n):
    rng = random.Random(seed)
    return [round(rng.gauss(rng.choice([-40, 0, 7, 900]), rng.uniform(0.5, 30)), 5) for _ in range(n)]


def test_1_build():
    tmp = tempfile.mkdtemp(dir="/tmp")
    try:
        d = fresh_copy(tmp)
        assert sh(["make", "clean"], cwd=d).returncode == 0
        proc = sh(["make"], cwd=d)
        assert proc.returncode == 0, "make failed:\n" + (proc.stdout + proc.stderr)[-800:]
        assert sh(["./tally", "--version"], cwd=d).stdout.strip() == "tally 1.4.2"
        xs = hidden_numbers(5, 57)
        out = sh(["./tally"], cwd=d, input="\n".join(map(str, xs)) + "\n").stdout.split()
        kv = dict(f.split("=") for f in out)
        n, mean, sd = stats(xs)
        assert int(kv["count"]) == n and near(kv["mean"], mean) and near(kv["stddev"], sd), out
    finally:
        shutil.rmtree(tmp)


def test_2_install():
    st = os.stat("/usr/local/bin/tally")
    assert stat.S_IMODE(st.st_mode) == 0o755, oct(st.st_mode)
    with open("/usr/local/bin/tally", "rb") as fh:
        assert fh.read(4) == b"\x7fELF"
    assert sh(["/usr/local/bin/tally", "--version"]).stdout.strip() == "tally 1.4.2"
    man = "/usr/local/share/man/man1/tally.1"
    assert stat.S_IMODE(os.stat(man).st_mode) == 0o644
    # the shipped page, by hash: the copy under /app/src is the agent's to change
    with open(man, "rb") as fh:
        assert hashlib.sha256(fh.read()).hexdigest() == MAN_SHA256, "the installed man page is not tally.1 as shipped"
    tmp = tempfile.mkdtemp(dir="/tmp")
    try:
        d = fresh_copy(tmp)
        stage = os.path.join(tmp, "stage")
        proc = sh(["make", "install", f"DESTDIR={stage}", "PREFIX=/opt/tl"], cwd=d)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-800:]
        b = os.path.join(stage, "opt/tl/bin/tally")
        assert stat.S_IMODE(os.stat(b).st_mode) == 0o755
        assert os.path.isfile(os.path.join(stage, "opt/tl/share/man/man1/tally.1"))
        assert sh([b, "--version"]).stdout.strip() == "tally 1.4.2"
    finally:
        shutil.rmtree(tmp)


def test_3_wrapper():
    tmp = tempfile.mkdtemp(dir="/tmp")
    try:
        files = {"m_line.dat": hidden_numbers(1, 33), "a_line.dat": hidden_numbers(2, 250), "solo.dat": [42.125],
                 "empty.dat": [], "b_2.dat": hidden_numbers(3, 8)}
        for name, xs in files.items():
            with open(os.path.join(tmp, name), "w") as fh:
                fh.write("# hidden export\n\n" + "".join(f"  {x}\n" + ("\n" if i % 5 == 2 else "") for i, x in enumerate(xs)))
        with open(os.path.join(tmp, "notes.txt"), "w") as fh:
            fh.write("1\n2\n3\n")
        proc = sh(["tally-report", tmp])
        assert proc.returncode == 0, proc.stderr[-500:]
        check_report(proc.stdout, expected_report(tmp))
    finally:
        shutil.rmtree(tmp)


def test_4_report():
    with open("/app/out/report.tsv") as fh:
        check_report(fh.read(), expected_report("/app/data"))


def test_5_release():
    tarball = "/app/out/tally-1.4.2.tar.gz"
    with tarfile.open(tarball) as tar:
        names = {m.name.rstrip("/") for m in tar.getmembers()}
    assert {"tally-1.4.2/tally.c", "tally-1.4.2/tally.1", "tally-1.4.2/Makefile"} <= names, sorted(names)
    assert all(n == "tally-1.4.2" or n.startswith("tally-1.4.2/") for n in names), sorted(names)
    tmp = tempfile.mkdtemp(dir="/tmp")
    try:
        assert sh(["tar", "-xzf", tarball, "-C", tmp]).returncode == 0
        d = os.path.join(tmp, "tally-1.4.2")
        proc = sh(["make"], cwd=d)
        assert proc.returncode == 0, "the released tree does not build:\n" + (proc.stdout + proc.stderr)[-500:]
        assert sh(["./tally", "--version"], cwd=d).stdout.strip() == "tally 1.4.2"
    finally:
        shutil.rmtree(tmp)
    proc = sh(["sha256sum", "-c", "SHA256SUMS"], cwd="/app/out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = {l.split()[-1].lstrip("*") for l in open("/app/out/SHA256SUMS") if l.strip()}
    assert {"report.tsv", "tally-1.4.2.tar.gz"} <= listed, listed
