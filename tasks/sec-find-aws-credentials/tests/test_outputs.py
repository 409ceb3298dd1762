# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""The truth is derived here by scanning /app/configs (a protected path) with the stated rules."""

import os
import re

ROOT = "/app/configs"
FINDINGS = "/app/findings.txt"
KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])")
ASSIGN = re.compile(r"([A-Za-z0-9_-]+)['\"]?\s*[=:]\s*(['\"]?)([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])\2")
NAMES = {"awssecretaccesskey", "secretaccesskey"}


def text_of(path):
    data = open(path, "rb").read()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return data.decode("utf-16")
    return data.decode("utf-8", "replace")


def truth():
    out = set()
    for d, _, files in os.walk(ROOT):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            t = text_of(p)
            ids = {k for k in KEY_ID.findall(t) if not k.endswith("EXAMPLE")}
            secrets = [m.group(3) for m in ASSIGN.finditer(t)
                       if re.sub(r"[_-]", "", m.group(1)).lower() in NAMES and "EXAMPLEKEY" not in m.group(3)]
            if ids and secrets:
                out |= {(p, k) for k in ids}
    assert out, "the environment has no live credential: the task is broken"
    return out


def findings():
    assert os.path.isfile(FINDINGS), f"{FINDINGS} is missing"
    pairs = set()
    for line in open(FINDINGS, encoding="utf-8"):
        if not line.strip():
            continue
        parts = line.split()
        assert len(parts) == 2, f"line is not 'PATH KEY_ID': {line!r}"
        pairs.add((os.path.normpath(parts[0]), parts[1]))
    assert pairs, "no findings"
    return pairs


def test_format():
    for p, k in findings():
        assert p.startswith(ROOT + "/") and os.path.isfile(p), f"not a file under {ROOT}: {p}"
        assert KEY_ID.fullmatch(k), f"not an access key ID: {k}"


def test_all_live_files_found():
    got = {p for p, _ in findings()}
    missing = {p for p, _ in truth()} - got
    assert not missing, f"{len(missing)} file(s) with live credentials not reported"


def test_no_false_positive_files():
    extra = {p for p, _ in findings()} - {p for p, _ in truth()}
    assert not extra, f"reported files without live credentials: {sorted(extra)}"


def test_exact_key_ids():
    assert findings() == truth()
