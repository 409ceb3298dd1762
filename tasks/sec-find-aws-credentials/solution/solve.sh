#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
python3 - <<'PY'
import os, re
KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])")
ASSIGN = re.compile(r"([A-Za-z0-9_-]+)['\"]?\s*[=:]\s*(['\"]?)([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])\2")
lines = []
for d, _, files in os.walk("/app/configs"):
    for f in sorted(files):
        p = os.path.join(d, f)
        data = open(p, "rb").read()
        t = data.decode("utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else data.decode("utf-8", "replace")
        ids = sorted({k for k in KEY_ID.findall(t) if not k.endswith("EXAMPLE")})
        secrets = [m for m in ASSIGN.finditer(t)
                   if re.sub(r"[_-]", "", m.group(1)).lower() in ("awssecretaccesskey", "secretaccesskey")
                   and "EXAMPLEKEY" not in m.group(3)]
        if ids and secrets:
            lines += [f"{p} {k}" for k in ids]
open("/app/findings.txt", "w").write("".join(l + "\n" for l in lines))
PY
cat /app/findings.txt
