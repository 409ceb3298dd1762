# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Starts the service with its own start script and queries it on 127.0.0.1."""
import os
import pwd
import re
import stat
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

PORT = 8137
BASE = f"http://127.0.0.1:{PORT}"
KEY_FILE = "/etc/kvserve/api.key"
HIDDEN_NAME = f"added-later-{uuid.uuid4().hex[:8]}.txt"
HIDDEN_BODY = f"hidden payload {uuid.uuid4().hex}\n"


def get(path, key=None):
    req = urllib.request.Request(BASE + path, headers={"X-Api-Key": key} if key is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def key():
    with open(KEY_FILE) as f:
        return f.read().strip()


@pytest.fixture(scope="module")
def service():
    os.makedirs("/srv/site/docs", exist_ok=True)
    with open(f"/srv/site/docs/{HIDDEN_NAME}", "w") as f:
        f.write(HIDDEN_BODY)
    os.chmod(f"/srv/site/docs/{HIDDEN_NAME}", 0o644)
    subprocess.run(["/opt/kvserve/start.sh"], timeout=20)
    up = False
    for _ in range(50):
        try:
            up = get("/health")[0] == 200
        except OSError:
            up = False
        if up or not os.path.exists(f"/proc/{open('/run/kvserve.pid').read().strip()}"):
            break
        time.sleep(0.2)
    yield up
    try:
        pid = int(open("/run/kvserve.pid").read())
        os.kill(pid, 15)
    except (OSError, ValueError):
        pass


def require(up):
    err = open("/run/kvserve.err").read()[-500:] if os.path.exists("/run/kvserve.err") else ""
    assert up, f"kvserve is not answering on {BASE}: {err}"


def test_health(service):
    require(service)
    assert get("/health") == (200, "ok\n")


def listeners():
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":  # LISTEN
                addr, port = f[1].rsplit(":", 1)
                if int(port, 16) == PORT:
                    out.append(addr)
    return out


def test_loopback_only(service):
    require(service)
    assert listeners() == ["0100007F"], f"listening sockets on port {PORT}: {listeners()}"


def test_runs_as_service_user(service):
    require(service)
    pid = int(open("/run/kvserve.pid").read())
    uid = int(re.search(r"^Uid:\s+(\d+)", open(f"/proc/{pid}/status").read(), re.M).group(1))
    assert pwd.getpwuid(uid).pw_name == "kvserve"


def test_motd(service):
    require(service)
    assert get("/motd") == (200, "Maintenance window: Sundays 02:00-04:00 UTC\n")


def test_files_with_key(service):
    require(service)
    assert get(f"/files/docs/{HIDDEN_NAME}", key()) == (200, HIDDEN_BODY)
    assert get("/files/index.html", key()) == (200, open("/srv/site/index.html").read())


def test_files_need_key(service):
    require(service)
    assert get(f"/files/docs/{HIDDEN_NAME}")[0] == 401
    assert get(f"/files/docs/{HIDDEN_NAME}", "0" * 32)[0] == 401
    assert get("/health")[0] == 200


def test_key_file_private(service):
    st = os.stat(KEY_FILE)
    assert pwd.getpwuid(st.st_uid).pw_name == "kvserve", "the key file must belong to kvserve"
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0, "group/others must have no access to the key"
    assert re.fullmatch(r"[0-9a-f]{32}", key()), "the key must be 32 lowercase hex digits"


def test_request_log(service):
    require(service)
    get(f"/files/docs/{HIDDEN_NAME}", key())
    time.sleep(0.2)
    log = open("/var/log/kvserve/kvserve.log").read()
    assert HIDDEN_NAME in log, "requests are not logged"
