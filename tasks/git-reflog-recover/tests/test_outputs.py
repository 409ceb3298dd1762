# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Verifies the recovered CSV export by running the code committed on `main` on hidden inputs."""
import csv
import io
import json
import random
import subprocess
import tempfile
from decimal import ROUND_HALF_UP, Decimal

REPO = "/app/ledger"
# Tip of main as built (deterministic build: fixed identities and dates).
ORIGINAL_TIP = "dd54701ac29628b74fb29d9c9c7450888536b836"


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)


def ref_csv(rows):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["date", "description", "amount_cents"])
    for d, desc, amt in rows:
        cents = (Decimal(amt) * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP)
        w.writerow([d, desc, int(cents)])
    return out.getvalue()


def run_export(rows):
    """Export `main`'s committed tree (not the working tree) and run its to_csv on `rows`."""
    with tempfile.TemporaryDirectory() as tmp:
        arch = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", "main"],
                              capture_output=True, timeout=30)
        assert arch.returncode == 0, arch.stderr.decode()
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True, timeout=30)
        text = "".join(f"{d}; {desc} ;{amt}\n" for d, desc, amt in rows)
        prog = ("import json,sys\nfrom ledger import model, export\n"
                "print(json.dumps(export.to_csv(model.parse(sys.stdin.read()))))\n")
        r = subprocess.run(["python3", "-c", prog], cwd=tmp, input=text, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, f"running to_csv from main failed: {r.stderr[-800:]}"
        return json.loads(r.stdout)


def test_export_recovered():
    rng = random.Random(4471)
    words = ["rent", "groceries, weekly", "power bill", 'the "big" shop', "bus pass", "refund"]
    rows = []
    for i in range(40):
        cents = rng.randint(-90000, 250000)
        amt = f"{cents // 100}.{cents % 100:02d}" if rng.random() < 0.7 else str(cents // 100)
        rows.append((f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", rng.choice(words), amt))
    assert run_export(rows) == ref_csv(rows)


def test_rounding_fix_recovered():
    rng = random.Random(9083)
    rows = [("2024-05-01", "half cent a", "1.005"), ("2024-05-02", "half cent b", "0.125"),
            ("2024-05-03", "half cent c", "-0.125"), ("2024-05-04", "half cent d", "2.675")]
    for i in range(30):
        base = rng.randint(-5000, 50000)
        rows.append((f"2024-06-{i % 28 + 1:02d}", f"item {i}", f"{Decimal(base) / 100 + Decimal('0.005')}"))
    assert run_export(rows) == ref_csv(rows)


def test_history_intact():
    assert git("rev-parse", "main").stdout.strip() != ORIGINAL_TIP, "nothing was added to main"
    assert git("cat-file", "-e", "main:ledger/export.py").returncode == 0, "main has no ledger/export.py"
    r = git("merge-base", "--is-ancestor", ORIGINAL_TIP, "main")
    assert r.returncode == 0, "the commits that were on main are no longer in main's history"
    first_parent = git("rev-list", "--first-parent", "main").stdout.split()
    assert ORIGINAL_TIP in first_parent, "main's original commits must stay on its first-parent line"
    assert git("rev-parse", "main:README.md").stdout == git("rev-parse", f"{ORIGINAL_TIP}:README.md").stdout
    for path in ("ledger/model.py", "ledger/report.py", "ledger/cli.py"):
        assert git("rev-parse", f"main:{path}").stdout == git("rev-parse", f"{ORIGINAL_TIP}:{path}").stdout, path


def test_authorship_kept():
    new = git("rev-list", f"{ORIGINAL_TIP}..main").stdout.split()
    assert new, "no commits on top of the original main"
    touching = git("log", "--format=%H %an <%ae>", f"{ORIGINAL_TIP}..main", "--", "ledger/export.py").stdout.splitlines()
    assert len(touching) >= 2, "expected both lost commits (two changes to ledger/export.py)"
    authors = {line.split(" ", 1)[1] for line in touching}
    assert len(authors) == 1 and "Dana Whitfield" not in authors.pop(), \
        "the recovered commits must keep the author of the lost commits"


def test_clean_main_checkout():
    assert git("cat-file", "-e", "main:ledger/export.py").returncode == 0, "main has no ledger/export.py"
    assert git("symbolic-ref", "-q", "HEAD").stdout.strip() == "refs/heads/main"
    status = git("status", "--porcelain", "--untracked-files=no")
    assert status.returncode == 0 and status.stdout.strip() == "", status.stdout
    assert git("rev-parse", "HEAD").stdout == git("rev-parse", "main").stdout
