# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Checks modes with os.stat and access by really acting as the users."""
import grp
import os
import pwd
import stat
import subprocess
import uuid

T = "/srv/projects/atlas"
# Owners as built; which files were executable by their owner.
OWNERS = {
    ".": "root", "README.md": "lee", "bin": "lee", "bin/deploy.sh": "lee", "bin/lint.sh": "mona",
    "data": "mona", "data/raw.csv": "mona", "data/clean.csv": "lee", "data/archive": "root",
    "data/archive/2023.tar.gz": "root", "docs": "lee", "docs/guide.md": "mona",
    "docs/notes.txt": "guest", "reports": "mona", "reports/q1.txt": "mona", "reports/q2.txt": "lee",
    "tools": "lee", "tools/run.py": "lee", "tools/helper.py": "lee", "tools/.cache": "lee",
    "tools/.cache/index.bin": "lee", ".env.shared": "mona",
}
EXECUTABLE = {"bin/deploy.sh", "bin/lint.sh", "tools/run.py"}
ATLAS = 4100


def walk():
    for root, dirs, files in os.walk(T):
        for name in dirs + files:
            yield os.path.join(root, name)
    yield T


def as_user(user, script):
    pw = pwd.getpwnam(user)
    groups = [g.gr_gid for g in grp.getgrall() if user in g.gr_mem]
    return subprocess.run(["sh", "-c", script], user=pw.pw_uid, group=pw.pw_gid, extra_groups=groups,
                          capture_output=True, text=True, timeout=20, cwd="/")


def require_top_fixed():
    st = os.stat(T)
    assert stat.S_IMODE(st.st_mode) == 0o2770 and st.st_gid == ATLAS, "the top directory is not fixed"


def test_directories():
    dirs = [p for p in walk() if os.path.isdir(p) and not os.path.islink(p)]
    assert len(dirs) == 8
    for d in dirs:
        st = os.stat(d)
        assert st.st_gid == ATLAS, f"{d}: group is not atlas"
        assert stat.S_IMODE(st.st_mode) == 0o2770, f"{d}: mode {oct(stat.S_IMODE(st.st_mode))}"


def test_files():
    files = [p for p in walk() if os.path.isfile(p) and not os.path.islink(p)]
    assert len(files) == 14
    for f in files:
        st = os.lstat(f)
        rel = os.path.relpath(f, T)
        want = 0o770 if rel in EXECUTABLE else 0o660
        assert st.st_gid == ATLAS, f"{rel}: group is not atlas"
        assert stat.S_IMODE(st.st_mode) == want, f"{rel}: mode {oct(stat.S_IMODE(st.st_mode))}, want {oct(want)}"


def test_owners_unchanged():
    require_top_fixed()
    for rel, owner in OWNERS.items():
        st = os.lstat(os.path.join(T, rel))
        assert pwd.getpwuid(st.st_uid).pw_name == owner, f"{rel} now belongs to {pwd.getpwuid(st.st_uid).pw_name}"


def test_outside_untouched():
    require_top_fixed()
    link = os.path.join(T, "docs/upstream-license")
    assert os.path.islink(link) and os.readlink(link) == "/opt/vendor/LICENSE", "the symlink was changed"
    st = os.stat("/opt/vendor/LICENSE")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o644, 0, 0), "a file outside the tree changed"
    st = os.stat("/srv/projects")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o755, 0, 0), "/srv/projects changed"


def test_members_collaborate():
    require_top_fixed()
    tag = uuid.uuid4().hex[:10]
    r = as_user("mona", f"echo {tag} >> {T}/data/clean.csv && cat {T}/reports/q2.txt && ls {T}/tools/.cache")
    assert r.returncode == 0, f"mona cannot work on lee's files: {r.stderr}"
    assert open(f"{T}/data/clean.csv").read().rstrip().endswith(tag)
    r = as_user("lee", f"cat {T}/data/raw.csv >/dev/null && mkdir {T}/data/archive/new-{tag} "
                       f"&& echo hi > {T}/data/archive/new-{tag}/f-{tag}")
    assert r.returncode == 0, f"lee cannot work in mona's directories: {r.stderr}"
    new_dir, new_file = f"{T}/data/archive/new-{tag}", f"{T}/data/archive/new-{tag}/f-{tag}"
    try:
        assert os.stat(new_dir).st_gid == ATLAS and os.stat(new_dir).st_mode & stat.S_ISGID, "new directory lost the group"
        assert os.stat(new_file).st_gid == ATLAS, "new file does not belong to atlas"
    finally:
        subprocess.run(["rm", "-rf", new_dir], timeout=20)


def test_outsider_denied():
    require_top_fixed()
    for script in (f"ls {T}", f"cat {T}/README.md", f"cat {T}/docs/notes.txt", f"cat {T}/.env.shared"):
        r = as_user("guest", script)
        assert r.returncode != 0, f"guest can run: {script}"
