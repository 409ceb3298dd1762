# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Starts real login / interactive shells as each user (clean environment) and inspects them."""
import os
import pwd
import subprocess
import uuid

import pytest


def shell(user, flags, script, sh="bash"):
    pw = pwd.getpwnam(user)
    env = {"HOME": pw.pw_dir, "USER": user, "LOGNAME": user, "SHELL": pw.pw_shell, "TERM": "dumb",
           "PATH": "/usr/local/bin:/usr/bin:/bin"}
    r = subprocess.run([sh, *flags, "-c", script], user=pw.pw_uid, group=pw.pw_gid, extra_groups=[],
                       env=env, cwd=pw.pw_dir, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=20)
    return r.stdout.strip()


def login_var(user, name, sh="bash"):
    return shell(user, ["-l"], f'printf "%s" "${{{name}-<unset>}}"', sh)


@pytest.fixture(scope="module")
def new_user():
    name = "u" + uuid.uuid4().hex[:8]
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, timeout=20)
    yield name
    subprocess.run(["userdel", "-r", name], timeout=20, capture_output=True)


def test_company_env_everyone(new_user):
    for user in ("dana", "eric", new_user):
        for sh in ("bash", "sh"):
            assert login_var(user, "COMPANY_ENV", sh) == "staging", f"{sh} -l of {user}"
    assert shell("eric", ["-l"], "env | grep '^COMPANY_ENV='") == "COMPANY_ENV=staging", "not exported"


def test_dana_java_and_path():
    assert login_var("dana", "JAVA_HOME") == "/opt/jdk-21"
    assert shell("dana", ["-l"], "env | grep '^JAVA_HOME='") == "JAVA_HOME=/opt/jdk-21", "JAVA_HOME not exported"
    path = login_var("dana", "PATH").split(":")
    assert path[:2] == ["/home/dana/bin", "/opt/jdk-21/bin"], f"PATH starts {path[:3]}"
    assert "/usr/bin" in path and "/bin" in path
    assert shell("dana", ["-l"], "command -v java") == "/opt/jdk-21/bin/java"
    assert shell("dana", ["-l", "-i"], "command -v java").splitlines()[-1] == "/opt/jdk-21/bin/java"
    owner = pwd.getpwuid(os.stat("/home/dana/bin").st_uid).pw_name
    assert owner == "dana", "/home/dana/bin must belong to dana"


def test_dana_login_settings():
    assert shell("dana", ["-l"], "umask") == "0027"
    assert shell("dana", ["-l"], "env | grep '^EDITOR='") == "EDITOR=vim"
    assert shell("dana", ["-l", "-i"], "umask").splitlines()[-1] == "0027"


def test_dana_interactive():
    for flags in (["-i"], ["-l", "-i"]):
        out = shell("dana", flags, "alias ll; echo HIST=$HISTSIZE").splitlines()
        assert "alias ll='ls -alF'" in out, f"bash {' '.join(flags)}: {out}"
        assert "HIST=5000" in out, f"bash {' '.join(flags)}: {out}"


def test_other_users_unaffected(new_user):
    assert login_var("dana", "JAVA_HOME") == "/opt/jdk-21", "dana's environment is not set up yet"
    for user in ("eric", new_user):
        assert login_var(user, "JAVA_HOME") == "<unset>", f"{user} got JAVA_HOME"
        assert shell(user, ["-l"], "umask") == "0022", f"{user}'s umask changed"
        assert "/opt/jdk-21/bin" not in login_var(user, "PATH")
        assert "alias ll='ls -alF'" not in shell(user, ["-i"], "alias ll 2>/dev/null; true").splitlines()
