# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs summarize.sh on hidden logs. Every input is large enough that a process-per-line loop
cannot finish within the per-run timeout, while a single pass needs well under a second."""

import os
import random
import signal
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import te_checks as te

TIMEOUT = 20   # seconds per run; the original script needs minutes to hours on these inputs

# One budget for all runs (te_checks.Budget): a program too slow for the task fails the first run
# that spends it and every later one at once, so verifying it costs 30 s, not 20 s per test.
BUDGET = te.Budget(30)
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def gen_log(seed, n, paths=None, big_bytes=False):
    rng = random.Random(seed)
    paths = paths or [f"/{rng.choice(['shop', 'api/v2', 'static', 'blog', 'u'])}/{rng.randint(0, 400)}"
                      for _ in range(n)]
    recs, lines = [], []
    for i in range(n):
        path = paths[i] if len(paths) == n else rng.choice(paths)
        target = path + (rng.choice(["?id=7", "?q=a:b&x=1", "?", "?utm=[x]"]) if rng.random() < 0.3 else "")
        status = rng.choice([200, 200, 200, 201, 301, 304, 404, 403, 500, 503])
        size = "-" if rng.random() < 0.1 else str(rng.randint(0, 10**6 if big_bytes else 60000))
        hour = rng.choice([rng.randint(0, 23), 9, 14])
        ts = (f"{rng.randint(1, 28):02d}/{rng.choice(MONTHS)}/2023:{hour:02d}:"
              f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} {rng.choice(['+0000', '-0700', '+0530'])}")
        user = rng.choice(["-", "-", "alice", "bob"])
        method = rng.choice(["GET", "GET", "POST", "HEAD", "PUT"])
        lines.append(f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)} - {user} "
                     f"[{ts}] \"{method} {target} HTTP/1.1\" {status} {size}")
        recs.append((status, 0 if size == "-" else int(size), path, f"{hour:02d}"))
        if rng.random() < 0.01:
            lines.append("")
    return "\n".join(lines) + "\n", recs


def reference(recs):
    out = [f"requests {len(recs)}", f"bytes {sum(r[1] for r in recs)}"]
    for code, n in sorted(Counter(r[0] for r in recs).items()):
        out.append(f"status {code} {n}")
    out.append("top_paths")
    top = sorted(Counter(r[2] for r in recs).items(), key=lambda kv: (-kv[1], kv[0].encode()))[:5]
    out += [f"{n} {p}" for p, n in top]
    out += [f"hour {h} {n}" for h, n in sorted(Counter(r[3] for r in recs).items())]
    return out


def run(text):
    f = Path(tempfile.mkdtemp()) / "access.log"
    f.write_text(text)
    p = subprocess.Popen(["bash", "/app/logsum/summarize.sh", str(f)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd="/tmp", start_new_session=True)
    with BUDGET.limit(TIMEOUT) as timeout:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise AssertionError(f"summarize.sh did not finish within {timeout:g} s")
    assert p.returncode == 0, err.decode()[-1000:]
    return out.decode().splitlines()


def section(lines, start, stop):
    """Lines from the first one starting with start up to (excluding) the first with stop."""
    i = next((k for k, l in enumerate(lines) if l.startswith(start)), len(lines))
    j = next((k for k, l in enumerate(lines) if k > i and l.startswith(stop)), len(lines))
    return lines[i:j]


def test_requests_bytes_status():
    text, recs = gen_log(1101, 8000, big_bytes=True)
    got, want = run(text), reference(recs)
    assert section(got, "requests", "top_paths") == section(want, "requests", "top_paths")


def test_top_paths():
    rng = random.Random(1102)
    names = [f"/p/{c}" for c in "qwertyuiopasdfgh"]
    paths = []
    for k, name in enumerate(names):
        paths += [name] * (700 if k < 9 else rng.randint(1, 690))   # nine paths tie for first
    rng.shuffle(paths)
    text, recs = gen_log(1103, len(paths), paths=paths)
    got, want = run(text), reference(recs)
    assert section(got, "top_paths", "hour") == section(want, "top_paths", "hour")


def test_hours():
    text, recs = gen_log(1104, 8000)
    got, want = run(text), reference(recs)
    assert [l for l in got if l.startswith("hour ")] == [l for l in want if l.startswith("hour ")]


def test_large_input():
    text, recs = gen_log(1105, 200_000, big_bytes=True)
    assert run(text) == reference(recs)
