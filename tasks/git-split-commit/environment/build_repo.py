"""Builds /app/gateway deterministically (fixed identities and dates)."""
import os
import subprocess
from pathlib import Path

REPO = Path("/app/gateway")
T0 = 1717232400  # 2024-06-01 09:00:00 UTC
STEP = [0]
LENA = ("Lena Marquardt", "lena@gateway.test")
OSKAR = ("Oskar Nyberg", "oskar@gateway.test")


def git(*args, who=LENA):
    STEP[0] += 1
    when = f"{T0 + STEP[0] * 2700} +0000"
    env = dict(os.environ, GIT_AUTHOR_NAME=who[0], GIT_AUTHOR_EMAIL=who[1], GIT_AUTHOR_DATE=when,
               GIT_COMMITTER_NAME=who[0], GIT_COMMITTER_EMAIL=who[1], GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", *args], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True).stdout


def write(rel, text):
    p = REPO / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def commit(msg, who=LENA):
    git("add", "-A", who=who)
    git("commit", "-q", "-m", msg, who=who)


REPO.mkdir(parents=True)
git("init", "-q", "-b", "main")
git("config", "user.name", LENA[0])
git("config", "user.email", LENA[1])

write("README.md", """# gateway

A tiny HTTP gateway that forwards requests to backends.

It is configured in `gateway.ini`; see `docs/usage.md` for the availible options.
Requests are loged to standard error.
""")
write("docs/usage.md", """# Usage

    python3 app.py gateway.ini

## Options

- `listen`: the adress and port to listen on
- `backend`: where requests are forwarded
- `timeout`: seconds to wait for a backend befor giving up
""")
write("gateway.ini", "[gateway]\nlisten = 127.0.0.1:8080\nbackend = 127.0.0.1:9000\ntimeout = 5\n")
write("app.py", '''"""Entry point of the gateway."""
import configparser
import sys


def load(path):
    cfg = configparser.ConfigParser()
    cfg.read(path)
    return cfg["gateway"]


def handle(request, cfg):
    return {"forward_to": cfg["backend"], "path": request["path"]}


if __name__ == "__main__":
    print(load(sys.argv[1]))
''')
commit("Gateway skeleton with config loading")
write("tests/test_app.py", '''from app import handle


def test_forward():
    assert handle({"path": "/x"}, {"backend": "b:1"}) == {"forward_to": "b:1", "path": "/x"}
''')
commit("Test request forwarding")
write("CONTRIBUTING.md", "Run `python3 -m pytest tests` before sending changes.\n")
commit("Contributing notes")

# The mixed commit that has to be split.
write("README.md", """# gateway

A tiny HTTP gateway that forwards requests to backends.

It is configured in `gateway.ini`; see `docs/usage.md` for the available options.
Requests are logged to standard error.
""")
write("docs/usage.md", """# Usage

    python3 app.py gateway.ini

## Options

- `listen`: the address and port to listen on
- `backend`: where requests are forwarded
- `timeout`: seconds to wait for a backend before giving up
""")
write("ratelimit.py", '''"""Token bucket: `rate` tokens per second, at most `burst` stored."""


class TokenBucket:
    def __init__(self, rate, burst, now=0.0):
        self.rate, self.burst = rate, burst
        self.tokens, self.stamp = float(burst), now

    def allow(self, now):
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False
''')
write("app.py", '''"""Entry point of the gateway."""
import configparser
import sys

from ratelimit import TokenBucket


def load(path):
    cfg = configparser.ConfigParser()
    cfg.read(path)
    return cfg["gateway"]


def handle(request, cfg, bucket=None, now=0.0):
    if bucket is not None and not bucket.allow(now):
        return {"status": 429}
    return {"forward_to": cfg["backend"], "path": request["path"]}


if __name__ == "__main__":
    print(load(sys.argv[1]))
''')
write("tests/test_ratelimit.py", '''from ratelimit import TokenBucket


def test_burst_then_refill():
    b = TokenBucket(rate=2, burst=3)
    assert [b.allow(0) for _ in range(4)] == [True, True, True, False]
    assert b.allow(0.5)
''')
commit("Add token-bucket rate limiter and fix typos in docs", who=OSKAR)
