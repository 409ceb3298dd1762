# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""The old token is only known here by its SHA-256; every token-shaped string is hashed and compared."""

import configparser
import hashlib
import os
import re
import stat
import subprocess

REPO = "/app/service"
SECRET = "/app/secrets/payment_token"
OLD_SHA256 = "fc8909cd8d3efec320ac07be7a8ae9b3a69a0777342a2064615df93bdfd1a1f1"
APP_SHA256 = "537da8498bfbadb7298a906b660c51aac7f7de6bef726d14d2468ee93f667791"  # sha256 of the original app.py
SHAPE = re.compile(rb"pk_live_[0-9a-f]{32}")
MAIN_SUBJECTS = ["initial app skeleton", "add payment client configuration", "tweak timeouts",
                 "move token to env file", "update README"]
FEATURE_SUBJECTS = ["initial app skeleton", "add payment client configuration", "tweak timeouts",
                    "add metrics module", "debug payment failure", "remove debug log"]


def git(*args, check=True):
    out = subprocess.run(["git", "-C", REPO, *args], capture_output=True, timeout=60)
    if check:
        assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr.decode()[-300:]}"
    return out.stdout


def has_old(data: bytes) -> bool:
    return any(hashlib.sha256(m).hexdigest() == OLD_SHA256 for m in SHAPE.findall(data))


def subjects(ref):
    return git("log", "--reverse", "--format=%s", ref).decode().splitlines()


def test_working_tree_clean():
    for d, dirs, files in os.walk(REPO):
        if ".git" in dirs:
            dirs.remove(".git")
        for f in files:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                assert not has_old(open(p, "rb").read()), f"the old token is still in {p}"
    tracked = git("ls-files").decode().split()
    assert ".env" not in tracked, ".env is still tracked"
    ignored = subprocess.run(["git", "-C", REPO, "check-ignore", "-q", ".env"], timeout=30).returncode == 0
    assert ignored, ".env is not ignored"


def test_reachable_history_clean():
    refs = git("for-each-ref", "--format=%(refname)").decode().split()
    assert refs, "no refs"
    objs = git("rev-list", "--objects", "--all").decode().split("\n")
    ids = [l.split()[0] for l in objs if l.strip()]
    ids += git("for-each-ref", "--format=%(objectname)", "refs/tags").decode().split()
    batch = subprocess.run(["git", "-C", REPO, "cat-file", "--batch"], input="\n".join(ids).encode() + b"\n",
                           capture_output=True, timeout=120).stdout
    assert not has_old(batch), "a commit, tag, tree or blob reachable from a ref still holds the old token"
    assert not has_old(git("log", "--all", "--format=%B")), "a commit message still holds the old token"


def test_object_database_clean():
    out = subprocess.run(["git", "-C", REPO, "cat-file", "--batch-all-objects", "--batch"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0
    assert not has_old(out.stdout), "the old token is still recoverable from .git's object database"
    for d, _, files in os.walk(os.path.join(REPO, ".git")):
        for f in files:
            p = os.path.join(d, f)
            if not p.endswith((".pack", ".idx")) and "/objects/" not in p:
                assert not has_old(open(p, "rb").read()), f"the old token is still in {p}"


def test_history_preserved():
    main = subjects("main")
    assert main[: len(MAIN_SUBJECTS)] == MAIN_SUBJECTS, main
    assert len(main) > len(MAIN_SUBJECTS), "the configuration change was not committed on main"
    assert subjects("feature/metrics") == FEATURE_SUBJECTS
    tag_commit = git("rev-parse", "v1.0^{commit}").decode().strip()
    assert git("log", "-1", "--format=%s", tag_commit).decode().strip() == "tweak timeouts"
    assert git("cat-file", "-t", "v1.0").decode().strip() == "tag", "v1.0 must stay an annotated tag"
    for ref in ("main", "feature/metrics"):
        blob = git("show", f"{ref}:app.py")
        assert hashlib.sha256(blob).hexdigest() == APP_SHA256, f"app.py changed on {ref}"
    assert b"record" in git("show", "feature/metrics:metrics.py")


def test_new_token_in_use():
    assert os.path.isfile(SECRET), f"{SECRET} is missing"
    assert stat.S_IMODE(os.stat(SECRET).st_mode) == 0o600, oct(os.stat(SECRET).st_mode)
    token = open(SECRET).read().strip()
    assert re.fullmatch(r"pk_live_[0-9a-f]{32}", token), "the new token has the wrong format"
    assert hashlib.sha256(token.encode()).hexdigest() != OLD_SHA256, "that is the old token"
    cfg = configparser.ConfigParser()
    cfg.read_string(git("show", "main:config/settings.ini").decode())
    assert cfg.get("payments", "api_token_file", fallback=None) == SECRET
    assert not cfg.has_option("payments", "api_token")
    assert git("status", "--porcelain", "--untracked-files=no").strip() == b"", "uncommitted changes in tracked files"
    out = subprocess.run(["python3", "app.py", "--check"], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split()[-1] == hashlib.sha256(token.encode()).hexdigest()[:16]
