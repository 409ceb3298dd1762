"""The command line: real subprocesses, clear errors, never a traceback for a user mistake."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def cli(*args: str, stdin: str = "", env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "terminal_env", *args],
        input=stdin, capture_output=True, text=True, timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_help_lists_the_commands():
    res = cli("--help")
    assert res.returncode == 0
    for cmd in ("doctor", "images", "gc", "demo", "shell"):
        assert cmd in res.stdout


def test_unknown_command_is_a_usage_error():
    res = cli("frobnicate")
    assert res.returncode == 2 and "invalid choice" in res.stderr and "Traceback" not in res.stderr


def test_unreachable_engine_is_one_clear_line():
    res = cli("gc", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "/nonexistent/docker.sock" in res.stderr and "doctor --fix" in res.stderr


@pytest.mark.docker
def test_doctor_reports_ok(base_image):
    res = cli("doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "docker engine" in res.stdout and "base image" in res.stdout
    # where the verifier's freeze runs: from the host when root with the local engine
    assert "verifier freeze" in res.stdout
    assert ("host" if os.geteuid() == 0 and not os.environ.get("DOCKER_HOST") else "inside") in res.stdout


WORD_STATS = os.path.join(os.path.dirname(__file__), "data", "protected", "word-stats")


@pytest.mark.docker
def test_demo_runs_a_task_end_to_end(base_image):
    res = cli("demo", "--task", WORD_STATS)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verification: passed" in res.stdout and "reward 1.00" in res.stdout
    res = cli("demo", "--task", WORD_STATS, "--policy", "nop", "--reward", "binary")
    assert res.returncode == 0 and "verification: failed" in res.stdout


@pytest.mark.docker
def test_shell_plays_an_episode_from_stdin(base_image):
    res = cli("shell", stdin="cd /tmp\npwd\necho $((6*7))\n#!submit\n")
    assert res.returncode == 0, res.stderr
    assert "/tmp" in res.stdout and "42" in res.stdout and "submitted" in res.stdout


@pytest.mark.docker
def test_shell_with_a_missing_image_names_it(base_image):
    res = cli("shell", "--image", "no-such/image:0")
    assert res.returncode == 2
    assert "no-such/image:0" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.docker
def test_gc_json(base_image):
    res = cli("gc", "--dry-run", "--json")
    assert res.returncode == 0
    assert isinstance(json.loads(res.stdout), list)


def test_tasks_validate_reports_every_problem_without_a_traceback():
    broken = os.path.join(os.path.dirname(__file__), "data", "tasks", "broken")
    res = cli("tasks", "validate", broken)
    assert res.returncode == 1
    out = res.stdout + res.stderr
    assert "Traceback" not in out
    for name in ("bad-toml", "missing-tests", "negative-timeout", "unknown-field"):
        assert name in out


def test_tasks_validate_accepts_good_tasks():
    good = os.path.join(os.path.dirname(__file__), "data", "tasks", "harbor-sum")
    res = cli("tasks", "validate", good)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.docker
def test_demo_default_runs_a_bundled_pool_task(base_image):
    res = cli("demo")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verification: passed" in res.stdout
