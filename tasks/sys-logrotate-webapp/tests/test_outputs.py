# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs the rotator (a pristine copy shipped with the tests) with the agent's configuration
over simulated days with hidden log contents, and inspects the files it leaves behind."""
import fnmatch
import glob
import gzip
import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import rotator_ref as minirotate  # noqa: E402

TOOL = os.path.join(os.path.dirname(__file__), "rotator_ref.py")
CONF = "/etc/minirotate.d"
LOGDIR = "/var/log/webapp"
ACCESS, ERROR, AUDIT = (f"{LOGDIR}/{n}.log" for n in ("access", "error", "audit"))
REOPEN = "/var/lib/webapp/reopen.log"


def reset_logs():
    shutil.rmtree(LOGDIR, ignore_errors=True)
    os.makedirs(LOGDIR)
    if os.path.exists(REOPEN):
        os.unlink(REOPEN)


def write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)


def reopens():
    return len(open(REOPEN).read().splitlines()) if os.path.exists(REOPEN) else 0


def rotate(state, now):
    r = subprocess.run([sys.executable, TOOL, "--state", state, "--now", now, CONF],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"rotator failed at {now}: {r.stderr[-500:]}"


@pytest.fixture(scope="module")
def sim():
    """Twelve simulated days; records what the tests look at."""
    reset_logs()
    obs = {"reopen": []}
    tmp = tempfile.mkdtemp()
    state = os.path.join(tmp, "state.json")
    tags = {d: f"access day {d} {uuid.uuid4().hex}\n" * 3 for d in range(1, 13)}
    err1 = f"error {uuid.uuid4().hex}\n"
    try:
        write(ACCESS, tags[1]); write(ERROR, err1); write(AUDIT, "a" * 600_000)
        rotate(state, "2025-03-01T00:05")
        obs["day1"] = {p: open(p).read() if os.path.exists(p) else None
                       for p in (ACCESS, ACCESS + ".1", ERROR, ERROR + ".1", AUDIT + ".1")}
        obs["created"] = [os.stat(p) for p in (ACCESS, ERROR)] if os.path.exists(ERROR) else None
        obs["reopen"].append(reopens())
        write(ACCESS, tags[2])
        rotate(state, "2025-03-01T13:00")
        obs["day1_later"] = (open(ACCESS).read(), os.path.exists(ACCESS + ".2") or os.path.exists(ACCESS + ".2.gz"))
        obs["reopen"].append(reopens())
        audit_inode = os.stat(AUDIT).st_ino
        write(AUDIT, "b" * 900_000, "a")                      # now 1.5 MB
        rotate(state, "2025-03-02T00:05")
        obs["day2"] = {"access1": open(ACCESS + ".1").read() if os.path.exists(ACCESS + ".1") else None,
                       "access2gz": gzip.open(ACCESS + ".2.gz").read().decode() if os.path.exists(ACCESS + ".2.gz") else None,
                       "error_rotated": os.path.exists(ERROR + ".2") or os.path.exists(ERROR + ".2.gz"),
                       "audit1_size": os.path.getsize(AUDIT + ".1") if os.path.exists(AUDIT + ".1") else None,
                       "audit_size": os.path.getsize(AUDIT), "audit_same_inode": os.stat(AUDIT).st_ino == audit_inode}
        obs["reopen"].append(reopens())
        for d in range(3, 13):
            write(ACCESS, tags[d])
            if d == 5:
                write(ERROR, f"error day 5 {uuid.uuid4().hex}\n")
            rotate(state, f"2025-03-{d:02d}T00:05")
            obs["reopen"].append(reopens())
        obs["final"] = sorted(os.path.basename(p) for p in glob.glob(ACCESS + ".*"))
        obs["final_contents"] = {}
        for n in range(1, 8):
            plain, zipped = f"{ACCESS}.{n}", f"{ACCESS}.{n}.gz"
            if os.path.exists(zipped):
                obs["final_contents"][n] = ("gz", gzip.open(zipped).read().decode())
            elif os.path.exists(plain):
                obs["final_contents"][n] = ("plain", open(plain).read())
        obs["tags"] = tags
        yield obs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_config_parses():
    path = os.path.join(CONF, "webapp")
    assert os.path.isfile(path), f"{path} is missing"
    blocks = minirotate.parse(open(path).read(), path)
    covered = {p for b in blocks for p in b["patterns"]}
    for log in (ACCESS, ERROR, AUDIT):
        assert any(fnmatch.fnmatch(log, p) for p in covered), f"{log} is not configured"


def test_daily_rotation(sim):
    day1 = sim["day1"]
    assert day1[ACCESS + ".1"] == sim["tags"][1], "access.log was not rotated on the first run"
    assert day1[ACCESS] == "", "access.log was not recreated empty"
    assert sim["day1_later"] == (sim["tags"][2], False), "rotated twice on the same day"
    assert sim["day2"]["access1"] == sim["tags"][2], "access.log was not rotated the next day"


def test_retention_and_compression(sim):
    assert sim["day2"]["access2gz"] == sim["tags"][1], "the second old version must be gzipped"
    want = ["access.log.1"] + [f"access.log.{n}.gz" for n in range(2, 8)]
    assert sim["final"] == want, f"old versions after 12 days: {sim['final']}"
    assert sim["final_contents"][1] == ("plain", sim["tags"][12])
    for n in range(2, 8):
        assert sim["final_contents"][n] == ("gz", sim["tags"][13 - n]), f"access.log.{n}.gz has wrong content"


def test_create_and_notifempty(sim):
    assert sim["created"], "error.log was not recreated"
    for st in sim["created"]:
        assert stat.S_IMODE(st.st_mode) == 0o640
        assert pwd.getpwuid(st.st_uid).pw_name == "webapp" and grp.getgrgid(st.st_gid).gr_name == "adm"
    assert sim["day1"][ERROR + ".1"] is not None and sim["day1"][ERROR] == ""
    assert sim["day2"]["error_rotated"] is False, "an empty error.log was rotated"


def test_postrotate_once_per_run(sim):
    # runs that rotated something in the access/error block: day1, day2, days 3-12
    assert sim["reopen"][:3] == [1, 1, 2], f"reopen-logs calls after each run: {sim['reopen']}"
    assert sim["reopen"][-1] == 12, f"reopen-logs calls after each run: {sim['reopen']}"


def test_audit_size_copytruncate(sim):
    assert sim["day1"][AUDIT + ".1"] is None, "audit.log rotated although below 1 MiB"
    d2 = sim["day2"]
    assert d2["audit1_size"] == 1_500_000, "audit.log above 1 MiB was not rotated uncompressed"
    assert d2["audit_size"] == 0 and d2["audit_same_inode"], "audit.log must be truncated in place"


def test_audit_retention():
    reset_logs()
    tmp = tempfile.mkdtemp()
    try:
        state = os.path.join(tmp, "state.json")
        for i in range(33):
            write(AUDIT, f"{i}\n" + "x" * (1 << 20))
            rotate(state, f"2025-04-01T{i // 60:02d}:{i % 60:02d}")
        names = sorted(os.path.basename(p) for p in glob.glob(AUDIT + ".*"))
        assert names == sorted(f"audit.log.{n}" for n in range(1, 31)), f"kept: {names}"
        assert open(AUDIT + ".1").readline() == "32\n" and open(AUDIT + ".30").readline() == "3\n"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        reset_logs()
