# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Checks ownership and modes with os.stat, and that the keys still work for their owner only."""

import hashlib
import os
import pwd
import stat
import subprocess

D = "/home/deploy/.ssh"
EXPECTED_FILES = 9
# The files that hold a private key, with their content as built (environment/keys): which files
# are private comes from here, not from their live content, which the agent could rewrite.
PRIVATE = {
    "ci.bak": "ddd1f1522141c62c5821306bea0da65b90badd6fcfdb83032e895fbf1d416283",
    "deploy_rsa": "8df8cead95566eaf58d1eee12d1d0bf93ccb34d0ca234644b58e8ae26d749176",
    "id_ed25519": "2645dac00be50aaa5f0bee675496ec6e0778b3ffb3ed7e94632e111b35125f26",
}


def files():
    names = sorted(os.listdir(D))
    assert len(names) == EXPECTED_FILES, f"files were added or removed: {names}"
    return [os.path.join(D, n) for n in names]


def is_private(path):
    return os.path.basename(path) in PRIVATE


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_ownership():
    pw = pwd.getpwnam("deploy")
    for p in [D] + files():
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (pw.pw_uid, pw.pw_gid), f"{p} owned by {st.st_uid}:{st.st_gid}"


def test_directory_mode():
    assert os.path.isdir(D) and not os.path.islink(D)
    assert mode(D) == 0o700, oct(mode(D))


def test_private_key_modes():
    privs = [p for p in files() if is_private(p)]
    assert len(privs) == 3, f"private keys were renamed or removed: {privs}"
    for p in privs:
        with open(p, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == PRIVATE[os.path.basename(p)], f"{p} was changed"
        assert mode(p) == 0o600, f"{p}: {oct(mode(p))}"


def test_other_file_modes():
    for p in files():
        if is_private(p):
            continue
        want = 0o600 if os.path.basename(p) in ("authorized_keys", "config") else 0o644
        assert mode(p) == want, f"{p}: {oct(mode(p))}, want {oct(want)}"


def as_user(name, cmd):
    pw = pwd.getpwnam(name)

    def drop():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)

    return subprocess.run(cmd, capture_output=True, timeout=30, preexec_fn=drop, cwd="/")


def test_keys_usable_by_owner_only():
    for key, pub in (("id_ed25519", "id_ed25519.pub"), ("deploy_rsa", "deploy_rsa.pub")):
        out = as_user("deploy", ["openssl", "pkey", "-in", f"{D}/{key}", "-pubout"])
        assert out.returncode == 0, f"deploy cannot use {key}: {out.stderr[-300:]!r}"
        assert out.stdout == open(f"{D}/{pub}", "rb").read(), f"{key} does not match {pub} any more"
    for p in files():
        if is_private(p):
            out = as_user("nobody", ["cat", p])
            assert out.returncode != 0, f"user nobody can read {p}"
