# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""The expected commit is fixed: environment/build_repo.py pins every author, committer, tagger
and date, so the build always gives the same hashes (git 2.39 of the base image; two builds
compared). Nothing is recomputed from /app/stats, whose history the agent could rewrite, and the
checks on the repository's state count only together with the right answer."""
import re
import subprocess
from pathlib import Path

REPO = "/app/stats"
ANSWER = Path("/app/first_bad.txt")
FIRST_BAD = "0182533c5003d749b5129b496e4bd8bec9c1ce7e"  # "Tidy: route min and max through ..."
MAIN_TIP = "22a4b4ee0b86d8064a7f8a53dd4c7c25236f5917"  # main as built (27 commits)
V1_0 = "2101ece9d76418ee62e4a452a4bd03e87b37c84b"  # the commit tagged v1.0


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)


def answer():
    assert ANSWER.is_file(), "/app/first_bad.txt is missing"
    return ANSWER.read_text().strip()


def right_answer():
    """The state checks below only count when the answer is the first bad commit."""
    assert answer() == FIRST_BAD, "no credit for the repository's state without the right answer"


def test_first_bad_commit():
    text = answer()
    assert re.fullmatch(r"[0-9a-f]{40}", text), f"not a full lowercase commit hash: {text!r}"
    assert text == FIRST_BAD, "that is not the commit that introduced the regression"


def test_history_unchanged():
    right_answer()
    assert git("rev-parse", "--verify", "-q", "refs/heads/main").stdout.strip() == MAIN_TIP, \
        "main no longer points at the commit it had: the history was changed"
    assert git("rev-parse", "--verify", "-q", "v1.0^{commit}").stdout.strip() == V1_0, \
        "the tag v1.0 was moved"


def test_repo_left_clean():
    right_answer()
    assert not Path(REPO, ".git", "BISECT_LOG").exists(), "a bisect session is still running"
    assert git("symbolic-ref", "-q", "HEAD").stdout.strip() == "refs/heads/main", \
        "main is not checked out"
    assert git("status", "--porcelain", "--untracked-files=no").stdout.strip() == "", \
        "the working tree is not clean"
