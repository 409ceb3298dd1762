# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Verifies the history rewrite: the file is gone everywhere, purged, and nothing else changed."""
import subprocess

REPO = "/app/sitegen"
BIG = "assets/raw/footage.bin"
# The two versions of the big file (blob ids of the deterministic build).
BIG_BLOBS = ["39430c96779a4bf0fd6e703e6ea61c6174592cd5", "70f1f835fbb9649d984a4c546ca964c4514c431e"]
FIXTURE_BLOB = "7f9390734a080baf65f5a3e467437875dbaf613f"

COMMON = [
    "Yuki Tanabe|yuki@sitegen.test|1722519300|76de81b2a1c5e9f5de54424927da1dd583c51770|Initial generator",
    "Yuki Tanabe|yuki@sitegen.test|1722525900|37110d85c1bf27ff979ea015caaf337bbf8d7712|Page template",
    "Paul Achterberg|paul@sitegen.test|1722535800|b3d97ca5e3be5c16adb68d8c305b7cda2346b1e3|Render test with a small binary fixture",
    "Paul Achterberg|paul@sitegen.test|1722542400|88dafe3fcfe46beb6323b976ccfb30a63fd3d7c5|Add intro assets",
    "Yuki Tanabe|yuki@sitegen.test|1722549000|9e7b519727fe493257dcf677784384c6e627deae|Wrap rendered content in the page template",
]
# Expected history (author, email, author date, tree without the big file, subject).
EXPECTED = {
    "main": COMMON + [
        "Paul Achterberg|paul@sitegen.test|1722562200|493d31f40ca85f46516d3984ea5b6c9357cd592b|Re-encode intro footage",
        "Paul Achterberg|paul@sitegen.test|1722582000|088b95ad2e108ac8216acde6edf075d3ba8aabe7|Host intro footage externally; ignore raw assets",
        "Yuki Tanabe|yuki@sitegen.test|1722588600|385d762a9953b031a7553e822131c060ea03f095|Document where raw media lives",
    ],
    "release/0.x": COMMON + [
        "Yuki Tanabe|yuki@sitegen.test|1722572100|5e47e49b85bd80ee466991f99cbb52818256d119|Escape page titles (0.2.1)",
    ],
}


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=60)


def require_file_gone():
    hits = git("log", "--all", "--format=%H", "--", BIG).stdout.split()
    assert not hits, f"{len(hits)} commits still touch {BIG}"
    objs = git("rev-list", "--all", "--objects").stdout.splitlines()
    assert not [o for o in objs if o.endswith(" " + BIG)], f"{BIG} is still reachable"


def test_no_commit_contains_file():
    require_file_gone()
    for c in git("rev-list", "--all").stdout.split():
        assert git("ls-tree", "-r", "--name-only", c, "--", BIG).stdout.strip() == "", c


def test_big_blobs_purged():
    for blob in BIG_BLOBS:
        assert git("cat-file", "-e", blob).returncode != 0, f"blob {blob} of {BIG} is still stored"
    stats = dict(line.split(": ") for line in git("count-objects", "-v").stdout.splitlines())
    kib = int(stats["size"]) + int(stats["size-pack"]) + int(stats.get("size-garbage", 0))
    assert kib < 1024, f".git objects still take {kib} KiB"


def test_history_preserved():
    for branch, want in EXPECTED.items():
        r = git("log", "--reverse", "--format=%an|%ae|%at|%T|%s", branch)
        assert r.returncode == 0, f"branch {branch} is missing"
        assert r.stdout.splitlines() == want, f"history of {branch} differs"
        merges = git("rev-list", "--merges", branch).stdout.strip()
        assert merges == "", f"{branch} gained merge commits"


def test_tags_rewritten():
    require_file_gone()
    assert git("rev-parse", "v0.1^{tree}").stdout.strip() == COMMON[1].split("|")[3]
    assert git("cat-file", "-t", "v0.2").stdout.strip() == "tag", "v0.2 must stay an annotated tag"
    assert git("rev-parse", "v0.2^{tree}").stdout.strip() == COMMON[4].split("|")[3], "v0.2 points elsewhere"
    assert git("for-each-ref", "--format=%(contents:subject)", "refs/tags/v0.2").stdout.strip() == "sitegen 0.2"
    assert sorted(git("tag").stdout.split()) == ["v0.1", "v0.2"]


def test_fixture_and_checkout():
    require_file_gone()
    assert git("rev-parse", "main:tests/fixtures/footage.bin").stdout.strip() == FIXTURE_BLOB
    assert git("symbolic-ref", "-q", "HEAD").stdout.strip() == "refs/heads/main"
    assert git("status", "--porcelain", "--untracked-files=no").stdout.strip() == ""
