# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""The expected decision of each request is derived here from the request data and the policy.

Only decisions the review tool recorded count: audit lines whose MAC verifies under the tool's
key, out of the agent's reach (except under gVisor, where the tool runs its open build). Each
check needs one policy rule right in both directions (what it decides, and what it lets
through), so a constant answer (approve all, deny all, skip all) earns nothing.
"""

import datetime
import hashlib
import hmac
import json
import os
import subprocess

import pytest

REQUESTS = "/app/data/requests.json"
DECISIONS = "/app/data/decisions.json"
AUDIT = "/app/data/audit.log"


def policy(r, review_date):
    if not r["manager_approved"]:
        return "denied"
    if r["role"] in ("admin", "prod-write") and r["team"] != "sre":
        return "denied"
    if r["training_completed"]:
        days = (review_date - datetime.date.fromisoformat(r["training_completed"])).days
        if 0 <= days <= 365:
            return "approved"
    return None


def episode_id():
    try:
        bid = open("/proc/sys/kernel/random/boot_id").read().strip() or "-"
    except OSError:
        bid = "-"
    return bid + ":" + open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19]


def tool_keys():
    which = ["sealed"]
    if subprocess.run(["dmesg"], capture_output=True, text=True).stdout.startswith("[    0.000000] Starting gVisor"):
        which.append("open")
    return [bytes.fromhex(open(f"/etc/review-access/{w}.key").read().strip()) for w in which]


def signed_decisions(known):
    """{request id: decision} from the audit lines the tool signed; a request with two
    different signed decisions is "conflicting"."""
    accepted, prefix = tool_keys(), f"review-access\n{episode_id()}\n".encode()
    found = {}
    lines = open(AUDIT).read().splitlines() if os.path.isfile(AUDIT) else []
    for line in lines:
        entry, sep, mac = line.rpartition(" mac=")
        parts = entry.split()
        if not sep or len(parts) != 4 or parts[1] not in known:
            continue
        if not any(hmac.compare_digest(hmac.new(k, prefix + entry.encode(), hashlib.sha256).hexdigest(), mac)
                   for k in accepted):
            continue
        rid, decision = parts[1], parts[2]
        if found.get(rid, decision) != decision:
            decision = "conflicting"
        found[rid] = decision
    return found


@pytest.fixture(scope="module")
def state():
    data = json.load(open(REQUESTS))
    review = datetime.date.fromisoformat(data["review_date"])
    expected = {r["id"]: policy(r, review) for r in data["requests"]}
    got = signed_decisions(expected)
    assert got, "no decision was recorded by the review tool (no signed audit entry)"
    assert os.path.isfile(DECISIONS), f"{DECISIONS} is missing"
    # the tool writes decisions.json from the signed entries; any other content was written by hand
    listed = {k: v.get("decision") for k, v in json.load(open(DECISIONS)).items()
              if got.get(k) != "conflicting"}
    clean = {k: v for k, v in got.items() if v != "conflicting"}
    assert listed == clean, f"{DECISIONS} does not match the signed audit log: {listed} vs {clean}"
    return data["requests"], expected, got


def wrong(requests, expected, got, which):
    return {r["id"]: (got.get(r["id"], "pending"), expected[r["id"]] or "pending")
            for r in requests if which(r) and got.get(r["id"]) != expected[r["id"]]}


def test_manager_approval_rule(state):
    """Rule 1 both ways: requests without the manager's approval are denied, and every request
    with it that no later rule denies is not denied."""
    requests, expected, got = state
    bad = wrong(requests, expected, got, lambda r: not r["manager_approved"])
    bad.update({r["id"]: ("denied", expected[r["id"]] or "pending") for r in requests
                if r["manager_approved"] and expected[r["id"]] != "denied" and got.get(r["id"]) == "denied"})
    assert not bad, f"(recorded, expected): {bad}"


def test_privileged_role_rule(state):
    """Rule 2 both ways: admin/prod-write for a team other than sre is denied; the same roles for
    sre (with the manager's approval) go on to the training rule."""
    requests, expected, got = state
    bad = wrong(requests, expected, got,
                lambda r: r["manager_approved"] and r["role"] in ("admin", "prod-write"))
    assert not bad, f"(recorded, expected): {bad}"


def test_training_rule(state):
    """Rule 3 both ways: of the requests that reach it, training within 365 days is approved and
    anything older (or none) stays pending."""
    requests, expected, got = state
    reach = lambda r: r["manager_approved"] and not (r["role"] in ("admin", "prod-write") and r["team"] != "sre")
    bad = wrong(requests, expected, got, reach)
    assert not bad, f"(recorded, expected): {bad}"


def test_every_request_as_the_policy_says(state):
    requests, expected, got = state
    bad = wrong(requests, expected, got, lambda r: True)
    assert not bad, f"(recorded, expected): {bad}"
