# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""kvsvc bring-up: the grader starts and stops the service through the agent's scripts."""

import hashlib
import hmac
import json
import os
import re
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request

import pytest

BASE = "http://127.0.0.1:8765"
PIDFILE = "/run/kvsvc.pid"
USERS = {"ada": "admin", "grace": "admin", "linus": "dev"}


def config():
    with open("/etc/kvsvc/config.json") as fh:
        return json.load(fh)


def token():
    with open(config()["token_file"]) as fh:
        return fh.read().strip()


def call(path, auth=True, method="GET", body=None):
    req = urllib.request.Request(BASE + path, method=method, data=None if body is None else json.dumps(body).encode())
    if auth:
        req.add_header("Authorization", f"Bearer {token()}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def script(name, timeout=30):
    proc = subprocess.run([name], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=timeout)
    return proc.returncode


def read_pid():
    with open(PIDFILE) as fh:
        return int(fh.read().strip())


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def port_open():
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", 8765)) == 0


def ensure_started():
    assert script("/app/start.sh") == 0, "/app/start.sh failed"
    assert call("/health", auth=False) == (200, {"status": "ok"})


@pytest.fixture(scope="module", autouse=True)
def cleanup():
    yield
    if os.access("/app/stop.sh", os.X_OK):
        try:
            script("/app/stop.sh")
        except Exception:
            pass
    try:
        os.kill(read_pid(), 9)
    except Exception:
        pass


def test_1_config():
    cfg = config()
    assert (cfg.get("host"), cfg.get("port")) == ("127.0.0.1", 8765), cfg
    assert cfg.get("data_dir") == "/var/lib/kvsvc" and os.path.isdir("/var/lib/kvsvc")
    assert cfg.get("token_file") == "/etc/kvsvc/token" and cfg.get("log_file") == "/var/log/kvsvc/access.log"
    mode = stat.S_IMODE(os.stat("/etc/kvsvc/token").st_mode)
    assert mode & 0o077 == 0, f"token file mode {oct(mode)}"
    assert re.fullmatch(r"[0-9a-f]{32,}", token()), "token must be >= 32 lowercase hex digits"
    proc = subprocess.run(["python3", "/app/service/kvsvc.py", "--check-config"], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr


def test_2_start_script():
    ensure_started()
    pid = read_pid()
    assert alive(pid), "the PID in /run/kvsvc.pid is not running"
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        assert b"kvsvc.py" in fh.read(), "the PID file does not name the kvsvc process"
    assert script("/app/start.sh") == 0, "a second start.sh must succeed"
    assert read_pid() == pid and alive(pid), "a second start.sh must not start another instance"
    assert call("/health", auth=False)[0] == 200


def test_3_users_created():
    ensure_started()
    tok = token()
    for name, role in USERS.items():
        code, rec = call(f"/users/{name}")
        assert code == 200, f"user {name}: HTTP {code}"
        assert rec.get("role") == role, f"user {name}: {rec}"
        want = hmac.new(tok.encode(), name.encode(), hashlib.sha256).hexdigest()[:16]
        assert rec.get("api_key") == want, f"user {name} was not created through the API with the current token"


def test_4_answer():
    ensure_started()
    with open("/app/answer.json") as fh:
        answer = json.load(fh)
    code, listing = call("/users?role=admin")
    assert code == 200
    admins = sorted(u["name"] for u in listing["users"])
    assert {"ada", "grace"} <= set(admins)
    assert answer.get("admins") == admins, f"admins {answer.get('admins')}, expected {admins}"
    code, stats = call("/stats")
    _, everyone = call("/users")
    names = sorted(u["name"] for u in everyone["users"])
    fp = hashlib.sha256((token() + ":" + ",".join(names)).encode()).hexdigest()[:24]
    assert stats["fingerprint"] == fp
    assert answer.get("fingerprint") == fp, "fingerprint does not match GET /stats"


def test_5_stop_and_restart():
    ensure_started()
    pid = read_pid()
    assert script("/app/stop.sh") == 0, "/app/stop.sh failed"
    for _ in range(50):
        if not alive(pid):
            break
        time.sleep(0.1)
    assert not alive(pid), "the service is still running after stop.sh"
    assert not port_open(), "port 8765 still accepts connections"
    assert not os.path.exists(PIDFILE), "stop.sh must remove the PID file"
    assert script("/app/stop.sh") == 0, "stop.sh must succeed when the service is not running"
    ensure_started()
    assert read_pid() != pid
    for name, role in USERS.items():
        code, rec = call(f"/users/{name}")
        assert code == 200 and rec["role"] == role, f"{name} lost after restart"
    assert script("/app/stop.sh") == 0 and not port_open()
