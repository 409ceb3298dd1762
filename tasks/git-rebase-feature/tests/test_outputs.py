# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Verifies the rebase: graph shape, authorship, and the program at the tip on hidden notes."""
import random
import re
import subprocess
import tempfile
from pathlib import Path

REPO = "/app/notes"
# Deterministic build: tips of main and of the original feature branch, and the fork point.
MAIN_TIP = "d13059e1e02fb1494d66f065813b2285a7bfe594"
OLD_FEATURE = "5db02df6b7aa258a4c2492c48d7cbabf2d57e2d4"
FORK = "4977682e9b7ff33c718474750c15a05b28d3b8a3"
BRANCH = "feature/search"


def git(*args):
    r = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)
    return r.stdout.strip()


def require_rebased():
    r = subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", MAIN_TIP, BRANCH],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, "feature/search does not contain the current main"


# ---- reference behaviour -------------------------------------------------------------------
def parse(text):
    """Reference reading of a notes file (same rules as main's parser)."""
    result = []
    for block in re.split(r"\n---\n", "\n" + text + "\n"):
        rows = block.strip().split("\n") if block.strip() else []
        if not rows:
            continue
        head, rest = rows[0].strip(), rows[1:]
        tag_rows = [r for r in rest if r.lower().startswith("tags:")]
        tags = [t.strip() for r in tag_rows for t in r[5:].split(",") if t.strip()]
        body = "\n".join(r for r in rest if not r.lower().startswith("tags:")).strip()
        result.append({"title": head, "body": body, "tags": tags})
    return result


def ref_search(notes, words):
    words = [w.lower() for w in words]
    scored = []
    for n in notes:
        text = (n["title"] + "\n" + n["body"]).lower()
        if all(w in text for w in words):
            scored.append((-sum(text.count(w) for w in words), n["title"]))
    return [t for _, t in sorted(scored)]


VOCAB = ["harbor", "lantern", "copper", "meadow", "quartz", "violet", "saddle", "ember", "tundra",
         "orchid", "pylon", "walrus", "zephyr", "gable", "nectar"]


def hidden_notes():
    rng = random.Random(2718)
    chunks = []
    for i in range(24):
        title = f"{rng.choice(VOCAB).title()} {rng.choice(VOCAB)} {i}"
        body = [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(3, 9))) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.7:
            body.insert(rng.randint(0, len(body)), "tags: " + ", ".join(rng.sample(["work", "home", "ideas", "travel", "misc"], rng.randint(1, 3))))
        chunks.append("\n".join([title] + body))
    return "\n---\n".join(chunks) + "\n"


def run_cli(*args):
    with tempfile.TemporaryDirectory() as tmp:
        arch = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", BRANCH], capture_output=True, timeout=30)
        assert arch.returncode == 0
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True, timeout=30)
        notes = Path(tmp, "hidden-notes.txt")
        notes.write_text(hidden_notes())
        r = subprocess.run(["python3", "cli.py", args[0], str(notes), *args[1:]], cwd=tmp,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"cli.py {args[0]} failed: {r.stderr[-600:]}"
        return r.stdout.splitlines()


# ---- checks -------------------------------------------------------------------------------
def test_linear_on_main():
    require_rebased()
    assert git("rev-parse", "main") == MAIN_TIP, "main was moved"
    new = git("rev-list", f"{MAIN_TIP}..{BRANCH}").split()
    assert len(new) == 4, f"expected the 4 feature commits on top of main, found {len(new)}"
    assert git("rev-list", "--merges", f"{MAIN_TIP}..{BRANCH}") == "", "merge commits are not allowed"
    assert git("rev-parse", f"{BRANCH}~4") == MAIN_TIP


def test_authorship_preserved():
    require_rebased()
    fmt = "--format=%an|%ae|%at|%s"
    old = git("log", "--reverse", fmt, f"{FORK}..{OLD_FEATURE}").splitlines()
    new = git("log", "--reverse", fmt, f"{MAIN_TIP}..{BRANCH}").splitlines()
    assert new == old, f"author or message changed:\n{new}\nvs\n{old}"


def test_search_works():
    require_rebased()
    notes = parse(hidden_notes())
    for words in (["harbor"], ["copper", "meadow"], ["EMBER"], ["walrus", "zephyr", "gable"], ["nectar"]):
        assert run_cli("search", *words) == ref_search(notes, words), f"search {words}"


def test_main_features_kept():
    require_rebased()
    notes = parse(hidden_notes())
    assert run_cli("list") == [n["title"] for n in notes]
    counts = {}
    for n in notes:
        for t in n["tags"]:
            counts[t] = counts.get(t, 0) + 1
    assert run_cli("tags") == [f"{t} {counts[t]}" for t in sorted(counts)]


def test_clean_finish():
    require_rebased()
    git_dir = Path(REPO, ".git")
    assert not (git_dir / "rebase-merge").exists() and not (git_dir / "rebase-apply").exists(), "rebase in progress"
    assert git("symbolic-ref", "-q", "HEAD") == f"refs/heads/{BRANCH}"
    assert git("status", "--porcelain", "--untracked-files=no") == ""
    assert git("grep", "-n", "-E", "^(<<<<<<<|>>>>>>>)", BRANCH) == "", "conflict markers committed"
