# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Verifies the split by inspecting the git graph and the trees of the two new commits."""
import subprocess

REPO = "/app/gateway"
# Deterministic build: the mixed commit, its tree and its parent.
MIXED = "628808517e66710f4ef7f3f1a9ae4f0a7a086660"
MIXED_TREE = "24d35c127ff392dc95c04cc0893d33166b447868"
PARENT = "62877fffc280041f77f853a58e6ad85414bf0807"
DOC_FILES = {"README.md", "docs/usage.md"}
CODE_FILES = {"app.py", "ratelimit.py", "tests/test_ratelimit.py"}


def git(*args):
    r = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)
    return r.stdout.strip()


def changed(a, b):
    return set(git("diff", "--name-only", a, b).splitlines())


def require_rewritten():
    assert git("rev-parse", "main") != MIXED, "main still ends with the mixed commit"


def test_final_tree_unchanged():
    require_rewritten()
    assert git("rev-parse", "main^{tree}") == MIXED_TREE, "main's final tree differs from the mixed commit's"
    assert git("symbolic-ref", "-q", "HEAD") == "refs/heads/main"
    assert git("status", "--porcelain", "--untracked-files=no") == ""


def test_two_commits_on_parent():
    require_rewritten()
    assert git("rev-parse", "main~2") == PARENT, "main~2 must be the parent of the mixed commit"
    for rev in ("main", "main~1"):
        parents = git("rev-list", "--parents", "-n", "1", rev).split()[1:]
        assert len(parents) == 1, f"{rev} must be an ordinary commit with one parent"


def test_docs_commit():
    require_rewritten()
    assert git("log", "-1", "--format=%s", "main~1") == "Fix typos in documentation"
    assert changed(PARENT, "main~1") == DOC_FILES
    for f in DOC_FILES:
        assert git("rev-parse", f"main~1:{f}") == git("rev-parse", f"{MIXED}:{f}"), f"{f} differs"
    for f in ("app.py",):
        assert git("rev-parse", f"main~1:{f}") == git("rev-parse", f"{PARENT}:{f}")


def test_code_commit():
    require_rewritten()
    assert git("log", "-1", "--format=%s", "main") == "Add token-bucket rate limiter"
    assert changed("main~1", "main") == CODE_FILES


def test_authorship():
    require_rewritten()
    want = git("log", "-1", "--format=%an <%ae>", MIXED)
    for rev in ("main", "main~1"):
        assert git("log", "-1", "--format=%an <%ae>", rev) == want, f"{rev} has another author"
