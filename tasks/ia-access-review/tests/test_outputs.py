# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""The expected decision of each request is derived here from the request data and the policy."""

import datetime
import json
import os

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


@pytest.fixture(scope="module")
def state():
    data = json.load(open(REQUESTS))
    review = datetime.date.fromisoformat(data["review_date"])
    expected = {r["id"]: policy(r, review) for r in data["requests"]}
    assert os.path.isfile(DECISIONS), "no decision was recorded"
    got = {k: v.get("decision") for k, v in json.load(open(DECISIONS)).items()}
    assert got, "no decision was recorded"
    return data, expected, got, json.load(open(DECISIONS))


def test_approvals(state):
    _, expected, got, _ = state
    for rid, exp in expected.items():
        if exp == "approved":
            assert got.get(rid) == "approved", f"{rid}: {got.get(rid)}"


def test_missing_manager_approval_denied(state):
    data, _, got, _ = state
    for r in data["requests"]:
        if not r["manager_approved"]:
            assert got.get(r["id"]) == "denied", f"{r['id']}: {got.get(r['id'])}"


def test_privileged_roles_denied(state):
    data, expected, got, _ = state
    for r in data["requests"]:
        if r["manager_approved"] and expected[r["id"]] == "denied":
            assert got.get(r["id"]) == "denied", f"{r['id']}: {got.get(r['id'])}"


def test_expired_training_left_pending(state):
    _, expected, got, _ = state
    for rid, exp in expected.items():
        if exp is None:
            assert rid not in got, f"{rid} should have stayed pending, got {got[rid]}"
    assert set(got) <= set(expected), f"unknown ids: {set(got) - set(expected)}"


def test_decisions_recorded_by_the_tool(state):
    _, expected, got, raw = state
    audit = open(AUDIT).read().split("\n") if os.path.exists(AUDIT) else []
    entries = {}
    for line in audit:
        parts = line.split()
        if len(parts) == 4:
            entries[parts[1]] = (parts[2], parts[3])
    decided = {rid for rid, exp in expected.items() if exp}
    assert set(got) >= decided, f"undecided: {sorted(decided - set(got))}"
    for rid, d in raw.items():
        assert entries.get(rid) == (d["decision"], f"code={d['code']}"), f"{rid} has no matching audit entry"
