"""Builds /app/ledger deterministically (fixed identities and dates)."""
import os
import subprocess
from pathlib import Path

REPO = Path("/app/ledger")
T0 = 1709280000  # 2024-03-01 08:00:00 UTC
STEP = [0]


def git(*args, who=("Dana Whitfield", "dana@ledger.test")):
    STEP[0] += 1
    when = f"{T0 + STEP[0] * 5400} +0000"
    env = dict(os.environ, GIT_AUTHOR_NAME=who[0], GIT_AUTHOR_EMAIL=who[1], GIT_AUTHOR_DATE=when,
               GIT_COMMITTER_NAME=who[0], GIT_COMMITTER_EMAIL=who[1], GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", *args], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True).stdout


def write(rel, text):
    p = REPO / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def commit(msg, who=("Dana Whitfield", "dana@ledger.test")):
    git("add", "-A", who=who)
    git("commit", "-q", "-m", msg, who=who)


REPO.mkdir(parents=True)
git("init", "-q", "-b", "main")
git("config", "user.name", "Dana Whitfield")
git("config", "user.email", "dana@ledger.test")
git("config", "gc.reflogExpire", "never")
git("config", "gc.reflogExpireUnreachable", "never")

write("README.md", "# ledger\n\nA tiny household ledger.\n")
write("ledger/__init__.py", "")
write("ledger/model.py", '''"""Ledger entries: one per line, `DATE;DESCRIPTION;AMOUNT`."""
from dataclasses import dataclass


@dataclass
class Entry:
    date: str
    description: str
    amount: str  # decimal text as written by the user, e.g. "12.50" or "-3.2"


def parse(text):
    entries = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        date, description, amount = line.split(";")
        entries.append(Entry(date.strip(), description.strip(), amount.strip()))
    return entries
''')
commit("Initial ledger model and parser")

write("ledger/report.py", '''"""Plain-text reports."""
from decimal import Decimal


def balance(entries):
    return sum((Decimal(e.amount) for e in entries), Decimal("0"))


def summary(entries):
    return f"{len(entries)} entries, balance {balance(entries):.2f}"
''')
commit("Add balance summary report")

write("ledger/cli.py", '''"""Command line: python3 -m ledger.cli FILE"""
import sys

from . import model, report


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        entries = model.parse(f.read())
    print(report.summary(entries))


if __name__ == "__main__":
    main()
''')
commit("Add command line entry point")

git("checkout", "-q", "-b", "experiment/sqlite")
write("ledger/store.py", '"""Experimental: store entries in sqlite (unfinished)."""\n')
commit("WIP sqlite storage")
git("checkout", "-q", "main")

write("ledger/export.py", '''"""CSV export: amounts become integer cents."""
import csv
import io


def to_cents(amount):
    return round(float(amount) * 100)


def to_csv(entries):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\\n")
    w.writerow(["date", "description", "amount_cents"])
    for e in entries:
        w.writerow([e.date, e.description, to_cents(e.amount)])
    return out.getvalue()
''')
commit("Add CSV export of entries", who=("Ravi Okafor", "ravi@ledger.test"))

write("ledger/export.py", '''"""CSV export: amounts become integer cents."""
import csv
import io
from decimal import ROUND_HALF_UP, Decimal


def to_cents(amount):
    """Exact decimal conversion; half a cent rounds away from zero."""
    cents = (Decimal(amount) * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP)
    return int(cents)


def to_csv(entries):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\\n")
    w.writerow(["date", "description", "amount_cents"])
    for e in entries:
        w.writerow([e.date, e.description, to_cents(e.amount)])
    return out.getvalue()
''')
commit("Export: exact half-up rounding to cents", who=("Ravi Okafor", "ravi@ledger.test"))

# The accident: two commits thrown away, then work continued on top.
git("reset", "-q", "--hard", "HEAD~2")
git("checkout", "-q", "experiment/sqlite")
git("checkout", "-q", "main")
write("README.md", "# ledger\n\nA tiny household ledger.\n\n## Usage\n\n    python3 -m ledger.cli entries.txt\n")
commit("Document command line usage")
print(git("log", "--oneline", "--all"))
