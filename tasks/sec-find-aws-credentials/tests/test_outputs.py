# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""The instance is fixed (environment/gen.py has a fixed seed), so its answer is kept here: the
files holding live credentials and their key IDs were found once with the stated rules. A
well-formed report is required by every check (no credit for the format alone), a blanket list
of files earns no credit for having found the live ones among it, and a report of one sure file
no credit for having no false positive."""

import os
import re

ROOT = "/app/configs"
FINDINGS = "/app/findings.txt"
KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z2-7]{16}(?![A-Za-z0-9])")
LIVE = {
    ("/app/configs/data-lake/conf/app1.yaml", "ASIAE4NIENHKRJY5VZV4"),
    ("/app/configs/data-lake/conf/app1.yaml", "AKIACUMBIWDDTDC73KHC"),
    ("/app/configs/data-lake/tmp/cache/dump0.json", "ASIA4WLWTXZHANDCKZN3"),
    ("/app/configs/infra/conf/app2.yaml", "AKIAOFAOIELBDVQNFG4G"),
    ("/app/configs/infra/conf/app2.yaml", "AKIAWXNCUPVWAVAHBMCO"),
    ("/app/configs/mobile/conf/app3.yaml", "ASIAHRUT7KRR4WUJW3LE"),
    ("/app/configs/mobile/conf/app3.yaml", "AKIAEPUFKSH2IRSCEQSZ"),
}
LIVE_FILES = {p for p, _ in LIVE}


def findings():
    assert os.path.isfile(FINDINGS), f"{FINDINGS} is missing"
    pairs = set()
    for line in open(FINDINGS, encoding="utf-8"):
        if not line.strip():
            continue
        parts = line.split()
        assert len(parts) == 2, f"line is not 'PATH KEY_ID': {line!r}"
        path, key = os.path.normpath(parts[0]), parts[1]
        assert path.startswith(ROOT + "/"), f"not a path under {ROOT}: {parts[0]}"
        assert KEY_ID.fullmatch(key), f"not an access key ID: {key}"
        pairs.add((path, key))
    assert pairs, "no findings"
    return pairs


def test_all_live_files_found():
    got = {p for p, _ in findings()}
    assert len(got) <= 2 * len(LIVE_FILES), \
        f"{len(got)} files reported: that is not a finding, it is a list"
    missing = LIVE_FILES - got
    assert not missing, f"{len(missing)} file(s) with live credentials not reported"


def test_no_false_positive_files():
    got = {p for p, _ in findings()}
    extra = got - LIVE_FILES
    assert not extra, f"reported files without live credentials: {sorted(extra)}"
    # precision alone is cheap (one sure file): it counts once at least half the live files are in
    assert 2 * len(got) >= len(LIVE_FILES), \
        "fewer than half of the files with live credentials reported"


def test_exact_key_ids():
    got = findings()
    assert got == LIVE, \
        f"{len(got - LIVE)} wrong and {len(LIVE - got)} missing (file, key ID) pairs"
