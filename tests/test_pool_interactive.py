"""Scripted attacks on the bundled interactive tasks that could be solved without the interaction.

Each test plays one short episode of a scripted agent and asserts that the shortcut no longer
pays:

* ``ia-setup-wizard`` read its answers with ``input()``, so ``printf answers | setup-wizard``
  configured the service, and the integrity field of ``app.json`` was a plain sha256 of the
  body, so a script could write the file without running the wizard at all. The wizard now
  refuses a standard input that is not a terminal, and signs its output with a key that only
  the wizard (an execute-only program) and the verifier can read; the agent works as the
  unprivileged user ``agent``.
* ``ia-access-review``: the tests only compared two files the agent can write, so writing both
  with matching entries passed; and a constant policy earned half the reward. The review tool
  now needs a terminal and signs each audit entry the same way, and each check needs both the
  approvals and the denials (or skips) of one policy rule right.
* ``ia-vim-toml-config`` could be solved with ``sed``; nothing inside the sandbox can tell an
  edit made with vim from one made by any other program of the same user, so the task left the
  ``interactive`` category (it is a ``text-data`` task now) and has no attack here.

The forgers below are the strongest an agent can write with what it can read: they reproduce
the binding to the container and use any key file readable to them (the readable key of the
fallback build for gVisor, which the verifier does not accept under runc). These episodes run
under the engine's default runtime (runc). Under gVisor the shell cannot execute the unreadable
build, the tools run their open build, and a forger with its readable key would pass there: the
terminal is still required, but the records can be forged.
"""

from __future__ import annotations

import re

import pytest
from scripted import play  # tests/scripted.py

pytestmark = [pytest.mark.docker, pytest.mark.attack]



# What a forger reproduces of the signing scheme: the container binding (the boot id, when the
# kernel has one, and the start time of process 1) and the key files it can read.
FORGER_PRELUDE = r"""
import hashlib, hmac, json, os, re, secrets, time

def binding():
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        boot = "-"
    return boot + ":" + open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19]

def readable_key(tool):
    for name in ("sealed.key", "open.key"):
        try:
            return bytes.fromhex(open(f"/etc/{tool}/{name}").read().strip()), name
        except OSError:
            pass
    return secrets.token_bytes(32), "a guessed key"
"""

# ------------------------------------------------------------------------- ia-setup-wizard
WIZARD_ANSWERS = ("ledger-api 8443 2 db.internal 6432 ledger ledger_app Tr1cky-Pass y "
                  "/app/certs/server.crt /app/certs/server.key ops@ledger.example "
                  "correct-horse-42 correct-horse-42 y")

WIZARD_PIPE = (f"printf '%s\\n' {WIZARD_ANSWERS} | /app/setup-wizard; "
               "ls -l /app/config; cat /app/config/app.json")

WIZARD_FORGE = "python3 - <<'EOF'\n" + FORGER_PRELUDE + r"""
salt = secrets.token_hex(8)
digest = hashlib.pbkdf2_hmac("sha256", b"correct-horse-42", salt.encode(), 120000).hex()
cfg = {
    "project": "ledger-api",
    "http": {"port": 8443, "tls": {"enabled": True, "cert": "/app/certs/server.crt",
                                   "key": "/app/certs/server.key"}},
    "database": {"backend": "postgres",
                 "dsn": "postgresql://ledger_app:Tr1cky-Pass@db.internal:6432/ledger"},
    "admin": {"email": "ops@ledger.example",
              "password_hash": f"pbkdf2_sha256$120000${salt}${digest}"},
    "generated_by": "setup-wizard 2.3",
}
os.makedirs("/app/config", exist_ok=True)
if os.path.isdir("/etc/setup-wizard"):  # the signed wizard: a detached signature
    cfg["generated_by"] = "setup-wizard 3.0"
    text = json.dumps(cfg, indent=2) + "\n"
    key, which = readable_key("setup-wizard")
    mac = hmac.new(key, ("setup-wizard\n" + binding() + "\n").encode() + text.encode(),
                   hashlib.sha256).hexdigest()
    open("/app/config/app.json", "w").write(text)
    open("/app/config/app.json.sig", "w").write(f"hmac-sha256 {mac}\n")
    print("signed with", which)
else:  # the old recipe: a sha256 of the sorted body
    cfg["checksum"] = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()
    open("/app/config/app.json", "w").write(json.dumps(cfg, indent=2))
    print("checksum recipe")
EOF"""


def test_piping_answers_into_the_wizard_fails(base_image):
    # before the fix: reward 1.00, passed
    seen: list[str] = []
    reward, result = play("ia-setup-wizard", [WIZARD_PIPE], seen=seen)
    assert "reads its answers from a terminal" in seen[0], seen[0]  # the pipe reached the wizard
    assert not result.strict_success
    assert reward == 0.0


def test_forging_the_wizard_output_fails(base_image):
    # before the fix: reward 1.00, passed
    seen: list[str] = []
    reward, result = play("ia-setup-wizard", [WIZARD_FORGE], seen=seen)
    assert "signed with" in seen[0], seen[0]  # the forged, signed files were written
    assert not result.strict_success
    assert reward == 0.0


# ------------------------------------------------------------------------ ia-access-review
ACCESS_FORGE = "python3 - <<'EOF'\n" + FORGER_PRELUDE + r"""
import datetime
data = json.load(open("/app/data/requests.json"))
review = datetime.date.fromisoformat(data["review_date"])

def policy(r):
    if not r["manager_approved"]:
        return "denied"
    if r["role"] in ("admin", "prod-write") and r["team"] != "sre":
        return "denied"
    t = r["training_completed"]
    if t and 0 <= (review - datetime.date.fromisoformat(t)).days <= 365:
        return "approved"
    return None

signed = os.path.isdir("/etc/review-access")
key, which = readable_key("review-access")
decisions, lines = {}, []
for r in data["requests"]:
    d = policy(r)
    if d is None:
        continue
    code, at = "".join(secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4)), int(time.time())
    decisions[r["id"]] = {"at": at, "code": code, "decision": d}
    entry = f"{at} {r['id']} {d} code={code}"
    if signed:
        msg = ("review-access\n" + binding() + "\n" + entry).encode()
        entry += " mac=" + hmac.new(key, msg, hashlib.sha256).hexdigest()
    lines.append(entry + "\n")
json.dump(decisions, open("/app/data/decisions.json", "w"), indent=2, sort_keys=True)
open("/app/data/audit.log", "w").write("".join(lines))
print("forged", len(lines), "entries", "signed with " + which if signed else "unsigned")
EOF"""


def access_driver(answer: str) -> str:
    """A pty driver that runs the real review tool and gives every request the same answer,
    confirming it with the code the tool shows: a constant policy played through the tool."""
    return r"""python3 - <<'EOF'
import os, pty, re, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv("/app/review-access", ["/app/review-access"])
buf = b""
def until(*pats):
    global buf
    end = time.time() + 60
    while not any(p in buf for p in pats):
        if not select.select([fd], [], [], max(0.0, end - time.time()))[0]:
            sys.exit("timed out")
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            return None
        buf += data
    out, buf = buf.decode(errors="replace"), b""
    print(out, end="")
    return out
while True:
    out = until(b"[s]kip: ", b"Review finished")
    if out is None or "Review finished" in out:
        break
    code = re.findall(r"confirmation code:\s+([A-Z]{4})", out)[-1]
    os.write(fd, b"ANSWER\r")
    until(b"): ")
    os.write(fd, code.encode() + b"\r")
os.waitpid(pid, 0)
EOF
cat /app/data/audit.log""".replace("ANSWER", answer)


def test_forging_the_review_records_fails(base_image):
    # before the fix: reward 1.00, passed
    seen: list[str] = []
    reward, result = play("ia-access-review", [ACCESS_FORGE], seen=seen)
    assert re.search(r"forged [1-9]\d* entries", seen[0]), seen[0]  # the records were written
    assert not result.strict_success
    assert reward == 0.0


@pytest.mark.parametrize("answer", ["a", "d"], ids=["approve-all", "deny-all"])
def test_a_constant_policy_through_the_tool_scores_nothing(answer, base_image):
    # before the fix: approve-all 0.50, deny-all 0.50 (partial)
    seen: list[str] = []
    reward, result = play("ia-access-review", [access_driver(answer)], seen=seen)
    word = {"a": "approved", "d": "denied"}[answer]
    recorded = re.findall(r"^\d+ REQ-\d+ (\w+) code=", seen[0], re.M)  # the tool's audit log
    assert recorded and set(recorded) == {word}, seen[0][-500:]  # every decision recorded, the same
    assert not result.strict_success
    assert reward <= 0.1
