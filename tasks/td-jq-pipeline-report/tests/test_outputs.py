# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs /app/report.sh on hidden exports generated here (never present in the image)."""

import json
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, "/tests")
from cigen import expected, make  # noqa: E402

PROJECTS = [("payments", "fintech"), ("search", "discovery"), ("legacy-batch", None),
            ("mobile", "apps"), ("Infra", "platform"), ("ml-serving", None)]
CASES = [(71, 40), (72, 150), (73, 7)]


def run(data):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, dir="/tmp") as f:
        json.dump(data, f)
    out = subprocess.run(["/app/report.sh", f.name], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-500:]}"
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError as exc:
        pytest.fail(f"output is not one JSON document: {exc}: {out.stdout[:300]!r}")


@pytest.fixture(scope="module")
def results():
    out = []
    for seed, n in CASES:
        data = make(seed, PROJECTS, n)
        out.append((run(data), expected(data)))
    return out


def test_counts(results):
    for got, exp in results:
        assert got.get("pipelines") == exp["pipelines"]
        assert got.get("by_status") == exp["by_status"]


def test_projects(results):
    for got, exp in results:
        projects = got.get("projects")
        assert isinstance(projects, list)
        assert [p.get("name") for p in projects] == [p["name"] for p in exp["projects"]]
        for g, e in zip(projects, exp["projects"]):
            assert (g.get("team"), g.get("runs"), g.get("failed_runs")) == (e["team"], e["runs"], e["failed_runs"]), (g, e)
            assert abs(float(g.get("job_seconds")) - e["job_seconds"]) < 0.01, (g, e)


def test_slowest_jobs(results):
    for got, exp in results:
        jobs = got.get("slowest_jobs")
        assert isinstance(jobs, list) and len(jobs) == len(exp["slowest_jobs"])
        for g, e in zip(jobs, exp["slowest_jobs"]):
            assert set(g) == set(e), g
            assert (g["pipeline"], g["stage"], g["job"]) == (e["pipeline"], e["stage"], e["job"])
            assert abs(g["duration_s"] - e["duration_s"]) < 1e-6


def test_flaky_jobs(results):
    for got, exp in results:
        assert got.get("flaky_jobs") == exp["flaky_jobs"]
