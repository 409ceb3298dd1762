# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Git release chores: each check inspects the repository graph left by one step."""

import json
import os
import random
import subprocess
import sys

REPO = "/app/project"
WHO = ("Release Bot", "release@example.com")


def git(*args, check=True):
    proc = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=30)
    if check:
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr.strip()[:300]}"
    return proc.stdout.strip()


def commit_info(rev):
    out = git("show", "-s", "--format=%H%n%P%n%an%n%ae%n%cn%n%ce%n%s", rev)
    h, parents, an, ae, cn, ce, subject = out.split("\n")
    return {"hash": h, "parents": parents.split(), "author": (an, ae), "committer": (cn, ce), "subject": subject}


def first_parent_chain():
    return git("rev-list", "--first-parent", "--reverse", "main").split()


def run_calc(rev, probes):
    """Run calc.py as stored at `rev` in a fresh interpreter; return results of the probes."""
    source = git("show", f"{rev}:calc.py")
    code = source + "\n\nimport json as _j, sys as _s\n_out = []\nfor _fn, _arg in _j.loads(_s.argv[1]):\n" \
        "    try:\n        _out.append(['ok', globals()[_fn](_arg)])\n" \
        "    except Exception as _e:\n        _out.append([type(_e).__name__, str(_e)])\nprint(_j.dumps(_out))\n"
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(probes)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr[-500:]
    return json.loads(proc.stdout)


def probes(seed):
    rng = random.Random(seed)
    data = [[round(rng.uniform(-50, 50), 3) for _ in range(rng.randint(1, 9))] for _ in range(6)]
    return data


def check_values(rev, fns):
    data = probes(9)
    got = run_calc(rev, [[fn, d] for d in data for fn in fns])
    i = 0
    for d in data:
        m = sum(d) / len(d)
        s = sorted(d)
        want = {"mean": m, "variance": sum((v - m) ** 2 for v in d) / len(d),
                "median": s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2}
        for fn in fns:
            status, value = got[i]
            i += 1
            assert status == "ok" and abs(value - want[fn]) < 1e-9, f"{fn}({d}) at {rev[:8]}: {got[i - 1]}"


def test_1_init_commit():
    assert os.path.isdir(os.path.join(REPO, ".git")), "no repository in /app/project"
    roots = git("rev-list", "--max-parents=0", "main").split()
    assert len(roots) == 1, f"main has {len(roots)} root commits"
    info = commit_info(roots[0])
    assert info["subject"] == "Initial import" and info["author"] == WHO and info["committer"] == WHO, info
    files = set(git("ls-tree", "-r", "--name-only", roots[0]).split("\n"))
    assert files == {".gitignore", "LICENSE", "README.md", "calc.py"}, f"first commit holds {sorted(files)}"
    for path in ("build/calc.o", "build/x/y.txt", "__pycache__/calc.cpython-311.pyc", "pkg/__pycache__/m.pyc",
                 "draft.tmp", "sub/dir/other.tmp"):
        assert subprocess.run(["git", "-C", REPO, "check-ignore", "-q", "--no-index", path],
                              timeout=30).returncode == 0, f"{path} is not ignored"
    assert subprocess.run(["git", "-C", REPO, "check-ignore", "-q", "--no-index", "calc.py"],
                          timeout=30).returncode == 1, "calc.py must not be ignored"


def test_2_patch_commit():
    chain = first_parent_chain()
    assert len(chain) >= 2
    info = commit_info(chain[1])
    assert info["subject"] == "Add median function" and info["author"] == WHO, info
    assert info["parents"] == [chain[0]]
    changed = set(git("diff", "--name-only", chain[0], chain[1]).split("\n"))
    assert changed == {"calc.py", "README.md"}, changed
    assert "`median(values)`" in git("show", f"{chain[1]}:README.md")
    check_values(chain[1], ["mean", "variance", "median"])


def test_3_release_tag():
    assert git("cat-file", "-t", "v1.0.0") == "tag", "v1.0.0 must be an annotated tag"
    assert git("tag", "-l", "--format=%(contents:subject)", "v1.0.0") == "Release 1.0.0"
    assert git("tag", "-l", "--format=%(taggername)|%(taggeremail)", "v1.0.0") == "Release Bot|<release@example.com>"
    chain = first_parent_chain()
    assert git("rev-parse", "v1.0.0^{commit}") == chain[1], "v1.0.0 must tag the 'Add median function' commit"


def test_4_fix_branch():
    tip = git("rev-parse", "refs/heads/fix/mean-empty")
    info = commit_info(tip)
    assert info["subject"] == "Fix mean of empty list" and info["author"] == WHO, info
    assert info["parents"] == [git("rev-parse", "v1.0.0^{commit}")], "the fix must be one commit on top of v1.0.0"
    assert git("diff", "--name-only", "v1.0.0", tip) == "calc.py"
    got = run_calc(tip, [["mean", []], ["variance", []], ["median", []]])
    for fn, (status, msg) in zip(("mean", "variance", "median"), got):
        assert status == "ValueError" and "empty data" in msg, f"{fn}([]) gave {status}: {msg}"
    check_values(tip, ["mean", "variance", "median"])


def test_5_merge_and_tag():
    assert git("cat-file", "-t", "v1.0.1") == "tag", "v1.0.1 must be an annotated tag"
    assert git("tag", "-l", "--format=%(contents:subject)", "v1.0.1") == "Release 1.0.1"
    assert git("tag", "-l", "--format=%(taggername)|%(taggeremail)", "v1.0.1") == "Release Bot|<release@example.com>"
    merge = git("rev-parse", "v1.0.1^{commit}")
    info = commit_info(merge)
    assert info["parents"] == [git("rev-parse", "v1.0.0^{commit}"), git("rev-parse", "refs/heads/fix/mean-empty")], \
        "v1.0.1 must tag a merge commit of v1.0.0 (first parent) and fix/mean-empty"
    assert info["committer"] == WHO
    assert subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", merge, "main"], timeout=30).returncode == 0
    got = run_calc(merge, [["mean", []]])
    assert got[0][0] == "ValueError"
    check_values(merge, ["mean", "median"])


def expected_changelog():
    tags = sorted(git("tag", "-l", "v*").split(), key=lambda t: [int(x) for x in t[1:].split(".")], reverse=True)
    lines = ["# Changelog"]
    for i, tag in enumerate(tags):
        rng = [f"{tags[i + 1]}..{tag}"] if i + 1 < len(tags) else [tag]
        subjects = git("log", "--no-merges", "--format=%s", *rng).split("\n")
        lines += ["", f"## {tag}"] + [f"- {s}" for s in subjects if s]
    return lines


def test_6_changelog_commit():
    tip = commit_info("main")
    assert tip["subject"] == "Update changelog" and tip["author"] == WHO, tip
    assert tip["parents"] == [git("rev-parse", "v1.0.1^{commit}")], "the changelog commit must follow the v1.0.1 merge"
    content = git("show", "main:CHANGELOG.md")
    got = [l.rstrip() for l in content.strip("\n").split("\n")]
    assert got == expected_changelog(), "CHANGELOG.md:\n" + content
    assert git("status", "--porcelain") == "", "the working tree is not clean"
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    authors = set(git("log", "--all", "--format=%an <%ae>").split("\n"))
    assert authors == {"Release Bot <release@example.com>"}, authors
