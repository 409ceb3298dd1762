#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The wizard reads its answers from a terminal and only takes an answer typed after its question
# appears, so a small driver gives it a pseudo-terminal and answers each question when it shows
# up, the way a person at the keyboard would.
cat > /tmp/drive.py <<'PY'
import os, pty, select, sys, time

ANSWERS = [  # (question, answer); the wizard asks only the questions that apply
    ("Project name", "ledger-api"),
    ("HTTP port", "8443"),
    ("Backend", "2"),
    ("Database host", "db.internal"),
    ("Database port", "6432"),
    ("Database name", "ledger"),
    ("Database user", "ledger_app"),
    ("Database password", "Tr1cky-Pass"),
    ("Enable TLS?", "y"),
    ("Certificate file", "/app/certs/server.crt"),
    ("Private key file", "/app/certs/server.key"),
    ("Admin e-mail", "ops@ledger.example"),
    ("Admin password", "correct-horse-42"),
    ("Repeat admin password", "correct-horse-42"),
    ("Write configuration?", "y"),
]

pid, fd = pty.fork()
if pid == 0:
    os.execv("/app/setup-wizard", ["/app/setup-wizard"])
buf, asked = b"", {}
while True:
    if not select.select([fd], [], [], 60)[0]:
        sys.exit(f"the wizard went quiet: {buf[-200:]!r}")
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        chunk = b""
    if not chunk:
        break
    buf += chunk
    sys.stdout.write(chunk.decode(errors="replace"))
    sys.stdout.flush()
    if not buf.endswith(b": "):
        continue
    last = buf.decode(errors="replace").rsplit("\n", 1)[-1]
    answer = next((a for q, a in ANSWERS if last.startswith(q)), None)
    if answer is None:
        continue
    asked[last] = asked.get(last, 0) + 1
    if asked[last] > 2:
        sys.exit(f"the wizard did not take the answer to {last!r}")
    buf = b""
    os.write(fd, answer.encode() + b"\r")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
PY
python3 /tmp/drive.py
rm -f /tmp/drive.py
cat /app/config/app.json /app/config/app.json.sig
