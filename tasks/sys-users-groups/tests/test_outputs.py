# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Checks accounts through the system databases and the file system (pwd, grp, shadow, os.stat)."""
import grp
import os
import pwd
import stat
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import crypt


def shadow(user):
    for line in open("/etc/shadow"):
        fields = line.rstrip("\n").split(":")
        if fields[0] == user:
            return fields[1]
    raise AssertionError(f"{user} has no /etc/shadow entry")


def supplementary(user):
    return {g.gr_name for g in grp.getgrall() if user in g.gr_mem}


def mode_owner(path):
    st = os.stat(path)
    return stat.S_IMODE(st.st_mode), pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name


def test_groups():
    assert grp.getgrnam("webdev").gr_gid == 3100
    assert grp.getgrnam("dbadmin").gr_gid == 3200
    grp.getgrnam("auditors")


def test_maria_account():
    p = pwd.getpwnam("maria")
    assert p.pw_uid == 3101 and p.pw_gid == 3100, (p.pw_uid, p.pw_gid)
    assert p.pw_shell == "/bin/bash" and p.pw_dir == "/home/maria"
    assert supplementary("maria") == {"dbadmin"}, supplementary("maria")
    assert mode_owner("/home/maria") == (0o750, "maria", "webdev")
    assert os.path.isfile("/home/maria/.bashrc"), "home not populated from /etc/skel"


def test_maria_password():
    h = shadow("maria")
    assert h and h[0] not in "!*", "maria's password is missing or locked"
    assert crypt.crypt("Harbor-Lantern-2024", h) == h, "maria's password does not match"


def test_maria_ssh_key():
    assert mode_owner("/home/maria/.ssh")[:2] == (0o700, "maria")
    assert mode_owner("/home/maria/.ssh/authorized_keys")[:2] == (0o600, "maria")
    key = open("/app/keys/maria.pub").read().split()[:2]
    lines = [l.split() for l in open("/home/maria/.ssh/authorized_keys") if l.strip()]
    assert any(l[:2] == key for l in lines), "maria's key is not authorized"


def test_kenji():
    p = pwd.getpwnam("kenji")
    assert p.pw_uid == 3102 and p.pw_gid == 3100 and p.pw_shell == "/bin/bash"
    assert supplementary("kenji") == {"auditors"}, supplementary("kenji")
    assert mode_owner(p.pw_dir) == (0o700, "kenji", "webdev") and p.pw_dir == "/home/kenji"
    h = shadow("kenji")
    assert h.startswith("!") or h.startswith("*"), "kenji's password is not locked"


def test_backupd():
    p = pwd.getpwnam("backupd")
    assert 0 < p.pw_uid < 1000, f"not a system account: uid {p.pw_uid}"
    assert grp.getgrgid(p.pw_gid).gr_name == "backupd"
    assert p.pw_shell == "/usr/sbin/nologin" and p.pw_dir == "/var/lib/backupd"
    assert supplementary("backupd") == {"auditors"}
    assert mode_owner("/var/lib/backupd") == (0o750, "backupd", "backupd")
    assert set(grp.getgrnam("auditors").gr_mem) == {"kenji", "backupd"}
    assert set(grp.getgrnam("dbadmin").gr_mem) == {"maria"}
