#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The order and the confirmation codes change on every run, so the answers cannot be prepared in
# advance: a small driver reads each request block as the tool prints it and answers its prompts,
# the way a person at the keyboard would.
cat > /tmp/drive.py <<'PY'
import datetime, json, os, re, subprocess

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

p = subprocess.Popen(["/app/review-access"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
buf = b""
def read_until(*ends):
    global buf
    while not any(buf.endswith(e) for e in ends):
        c = p.stdout.read(1)
        if not c:
            return None
        buf += c
    out, buf = buf.decode(), b""
    print(out, end="", flush=True)
    return out

def send(s):
    print(s)
    p.stdin.write((s + "\n").encode()); p.stdin.flush()

while True:
    out = read_until(b"[s]kip: ", b"skipped.\n")
    if out is None or "Review finished" in out:
        break
    rid = re.findall(r"Request (REQ-\d+)", out)[-1]
    code = re.findall(r"confirmation code:\s+([A-Z]{4})", out)[-1]
    d = decide(by_id[rid])
    send(d)
    if d != "s":
        read_until(b"): ")
        send(code)
p.wait()
PY
python3 /tmp/drive.py
rm -f /tmp/drive.py
cat /app/data/audit.log
