# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""The first bad commit is recomputed here by testing every commit of main on hidden inputs;
no expected hash is stored anywhere."""
import json
import random
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = "/app/stats"
ANSWER = Path("/app/first_bad.txt")


def git(*args, **kw):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30, **kw)


def hidden_lists():
    rng = random.Random(60613)
    lists = []
    for n in (2, 4, 6, 8, 10, 12):
        for _ in range(3):
            lists.append([rng.randint(-40, 200) + rng.choice([0, 0.5, 0.25]) for _ in range(n)])
    lists += [[7, 2], [1.5, 4, 9, 10], [-3, -8, 5, 0]]
    lists += [[rng.randint(0, 99) for _ in range(n)] for n in (1, 3, 5, 9)]
    return lists


def is_good(commit):
    """True if median is right on every hidden list at `commit`."""
    with tempfile.TemporaryDirectory() as tmp:
        arch = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", commit],
                              capture_output=True, timeout=30)
        assert arch.returncode == 0
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True, timeout=30)
        prog = ("import json,sys\nsys.argv=['x']\nimport stats\n"
                "print(json.dumps([stats.median(xs) for xs in json.loads(sys.stdin.read())]))\n")
        lists = hidden_lists()
        r = subprocess.run(["python3", "-c", prog], cwd=tmp, input=json.dumps(lists),
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            return False
        got = json.loads(r.stdout)
        return all(abs(g - statistics.median(xs)) < 1e-9 for g, xs in zip(got, lists))


def first_bad():
    commits = git("rev-list", "--reverse", "--first-parent", "main").stdout.split()
    assert len(commits) > 10, "main's history is gone"
    assert is_good(commits[0]), "the root commit must be good"
    for c in commits:
        if not is_good(c):
            return c
    raise AssertionError("no bad commit on main: was the history changed?")


def answer():
    assert ANSWER.is_file(), "/app/first_bad.txt is missing"
    return ANSWER.read_text().strip()


def test_answer_format():
    text = answer()
    assert re.fullmatch(r"[0-9a-f]{40}", text), f"not a full lowercase commit hash: {text!r}"
    assert git("cat-file", "-t", text).stdout.strip() == "commit"


def test_first_bad_commit():
    text = answer()
    assert text == first_bad(), "that is not the commit that introduced the regression"


def test_repo_left_clean():
    answer()
    assert not Path(REPO, ".git", "BISECT_LOG").exists(), "a bisect session is still running"
    assert git("symbolic-ref", "-q", "HEAD").stdout.strip() == "refs/heads/main"
    assert git("status", "--porcelain", "--untracked-files=no").stdout.strip() == ""
