# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Each root job: its files are root-owned and not group/other-writable up to /, the unprivileged
user really cannot change them (tried as that user), and the job still works when run."""

import os
import pwd
import re
import shlex
import stat
import subprocess
import tarfile

import pytest

CRONTAB = "/etc/cron.d/app-jobs"
ATTACKER = "intern"


def crontab():
    env, jobs = {}, []
    for line in open(CRONTAB):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$", line)
        if m:
            env[m.group(1)] = m.group(2).strip().strip('"')
            continue
        parts = line.split(None, 6)
        assert len(parts) == 7, f"malformed job line: {line}"
        jobs.append((parts[:5], parts[5], parts[6]))
    return env, jobs


def job(fragment):
    env, jobs = crontab()
    found = [j for j in jobs if fragment in j[2]]
    assert len(found) == 1, f"expected one job running {fragment!r}, found {found}"
    return env, found[0]


def chain(path):
    """path and all its parent directories."""
    out = []
    p = os.path.abspath(path)
    while True:
        out.append(p)
        if p == "/":
            return out
        p = os.path.dirname(p)


def assert_root_only(path):
    for p in chain(path):
        st = os.stat(p)
        assert st.st_uid == 0, f"{p} is owned by uid {st.st_uid}"
        assert not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH), f"{p} is writable by group/others ({oct(stat.S_IMODE(st.st_mode))})"


def as_user(name, cmd, env=None, cwd=None):
    pw = pwd.getpwnam(name)

    def drop():
        os.setgroups(os.getgrouplist(name, pw.pw_gid))
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)

    base = {"HOME": pw.pw_dir, "LOGNAME": name, "USER": name, "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}
    base.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, preexec_fn=drop,
                          cwd=cwd or pw.pw_dir, env=base)


ATTACK = r"""
import os, sys
hits = []
for t in sys.argv[1:]:
    try:
        if os.path.isdir(t):
            p = os.path.join(t, ".probe-%d" % os.getpid())
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
            os.close(fd); os.unlink(p)
        else:
            open(t, "a").close()
        hits.append(t)
    except OSError:
        pass
print("\n".join(hits))
"""


def assert_attacker_cannot_touch(*targets):
    out = as_user(ATTACKER, ["python3", "-c", ATTACK, *[p for t in targets for p in chain(t)]], cwd="/")
    hits = [l for l in out.stdout.splitlines() if l]
    assert not hits, f"{ATTACKER} can modify: {hits}"


def run_job(fragment):
    env, (_, user, cmd) = job(fragment)
    shell = env.get("SHELL", "/bin/sh")
    jenv = {k: v for k, v in env.items()}
    out = as_user(user, [shell, "-c", cmd], env=jenv)
    return user, out


def test_backup_job():
    assert_root_only("/opt/jobs/backup.sh")
    assert_attacker_cannot_touch("/opt/jobs/backup.sh")
    if os.path.exists("/var/backups/app-data.tar.gz"):
        os.unlink("/var/backups/app-data.tar.gz")
    user, out = run_job("backup.sh")
    assert user == "root" and out.returncode == 0, out.stderr
    with tarfile.open("/var/backups/app-data.tar.gz") as t:
        names = t.getnames()
    assert sum(n.endswith(".dat") for n in names) == len(os.listdir("/srv/data")), names


def test_rotate_job_and_its_library():
    for p in ("/opt/jobs/rotate-logs.sh", "/opt/jobs/lib/common.sh", "/opt/jobs/lib"):
        assert_root_only(p)
    assert_attacker_cannot_touch("/opt/jobs/rotate-logs.sh", "/opt/jobs/lib/common.sh")
    marker = f"rotate-check-{os.getpid()}"
    with open("/var/log/app/test.log", "w") as f:
        f.write(marker)
    user, out = run_job("rotate-logs.sh")
    assert user == "root" and out.returncode == 0, out.stderr
    assert open("/var/log/app/test.log.1").read() == marker
    assert open("/var/log/app/test.log").read() == ""


def test_report_job_and_working_directory():
    assert_root_only("/srv/report/build-report.sh")
    assert_attacker_cannot_touch("/srv/report/build-report.sh")
    if os.path.exists("/srv/report/out/report.txt"):
        os.unlink("/srv/report/out/report.txt")
    user, out = run_job("build-report.sh")
    assert user == "root" and out.returncode == 0, out.stderr
    assert open("/srv/report/out/report.txt").read().strip() == str(len(os.listdir("/srv/data")))


def test_cleanup_job_and_path():
    env, (_, user, cmd) = job("cleanup-tmp")
    assert user == "root"
    dirs = [d for d in env.get("PATH", "").split(":")]
    assert dirs and all(d.startswith("/") for d in dirs), f"PATH must list absolute directories: {dirs}"
    for d in dirs:
        if os.path.exists(d):
            assert_root_only(d)
    assert_attacker_cannot_touch(*[d for d in dirs if os.path.exists(d)])
    first = shlex.split(cmd)[0]
    if "/" in first:
        assert_root_only(first)
    for d in dirs:
        if os.path.isfile(os.path.join(d, "cleanup-tmp")):
            assert_root_only(os.path.join(d, "cleanup-tmp"))
    os.makedirs("/var/tmp/app-cache", exist_ok=True)
    for i in range(3):
        open(f"/var/tmp/app-cache/c{i}", "w").close()
    user, out = run_job("cleanup-tmp")
    assert out.returncode == 0, out.stderr
    assert os.listdir("/var/tmp/app-cache") == []


def test_crontab_file_and_user_job():
    assert_root_only(CRONTAB)
    assert_attacker_cannot_touch(CRONTAB)
    env, jobs = crontab()
    assert len(jobs) == 5, f"job lines were added or removed: {jobs}"
    user, out = run_job("sync.sh")
    assert user == ATTACKER, "the intern job must keep running as intern"
    assert out.returncode == 0, out.stderr
    assert os.path.exists(f"/home/{ATTACKER}/last-sync")
