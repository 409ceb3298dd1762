#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The tool reads its answers from a terminal, and the order and the confirmation codes change on
# every run, so the answers cannot be prepared in advance: a small driver gives the tool a
# pseudo-terminal, reads each request block as the tool prints it and answers its prompts after
# they appear, the way a person at the keyboard would.
cat > /tmp/drive.py <<'PY'
import datetime, json, os, pty, re, select, sys, time

data = json.load(open("/app/data/requests.json"))
review = datetime.date.fromisoformat(data["review_date"])
by_id = {r["id"]: r for r in data["requests"]}

def decide(r):
    if not r["manager_approved"]:
        return "d"
    if r["role"] in ("admin", "prod-write") and r["team"] != "sre":
        return "d"
    if r["training_completed"] and 0 <= (review - datetime.date.fromisoformat(r["training_completed"])).days <= 365:
        return "a"
    return "s"

pid, fd = pty.fork()
if pid == 0:
    os.execv("/app/review-access", ["/app/review-access"])
buf = b""

def read_until(*ends):
    global buf
    deadline = time.time() + 60
    while not any(e in buf for e in ends):
        if not select.select([fd], [], [], max(0.0, deadline - time.time()))[0]:
            sys.exit(f"no prompt from the tool: {buf[-200:]!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        buf += chunk
    out, buf = buf.decode(errors="replace"), b""
    print(out, end="", flush=True)
    return out

def send(s):
    os.write(fd, s.encode() + b"\r")

while True:
    out = read_until(b"[s]kip: ", b"Review finished")
    if out is None or "Review finished" in out:
        break
    rid = re.findall(r"Request (REQ-\d+)", out)[-1]
    code = re.findall(r"confirmation code:\s+([A-Z]{4})", out)[-1]
    d = decide(by_id[rid])
    send(d)
    if d != "s":
        read_until(b"): ")
        send(code)
os.waitpid(pid, 0)
PY
python3 /tmp/drive.py
rm -f /tmp/drive.py
cat /app/data/audit.log
