"""The disk budget (storage_mb): enforced by a watcher, since the engine has no quota here."""

from __future__ import annotations

import shutil

import pytest

from terminal_env.env import TerminalEnv
from terminal_env.sandbox import cleanup
from terminal_env.sandbox.disk import MB, DiskGuard, scan_usage
from terminal_env.task import TaskSpec

BUDGET = 64


@pytest.fixture(autouse=True)
def _enough_host_disk():
    free = shutil.disk_usage("/var/lib/docker" if __import__("os").path.isdir("/var/lib/docker") else "/").free
    if free < 10 * 1024**3:
        pytest.fail(f"only {free / 1024**3:.1f} GB free for Docker; these tests need 10 GB")


def _spec(**kw) -> TaskSpec:
    return TaskSpec(name="disk-budget", instruction="fill the disk", storage_mb=BUDGET, **kw)


def _layer_mb(env: TerminalEnv) -> float:
    guard = env.sandbox.disk
    assert guard is not None and guard.method == "upperdir"
    used, _, complete = scan_usage(guard._upper)
    assert complete
    return used / MB


def test_scan_usage_counts_allocation_and_hard_links_once(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"x" * 100_000)
    (tmp_path / "b").hardlink_to(tmp_path / "d" / "a")
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(1 << 30)  # 1 GiB apparent, nothing allocated
    used, entries, complete = scan_usage(str(tmp_path))
    assert complete and entries == 4
    assert 100_000 <= used < 200_000


def test_budget_is_passed_from_task_to_sandbox():
    assert _spec().sandbox_config().storage_mb == BUDGET
    assert TaskSpec(name="t", instruction="i").sandbox_config().storage_mb is None


@pytest.mark.docker
def test_writing_within_the_budget_is_fine(client, base_image):
    env = TerminalEnv(_spec(image=base_image), client=client)
    try:
        env.reset()
        obs, reward, terminated, truncated, info = env.step(
            "head -c 33554432 /dev/zero > /app/ok && sync && echo wrote-ok"
        )
        assert "wrote-ok" in obs and not (terminated or truncated)
        assert "disk_exceeded" not in info and not env.sandbox.disk_exceeded
        assert env.sandbox.disk.check(force=True) is False
        assert 30 < env.sandbox.disk.used / MB < BUDGET
    finally:
        env.close()


@pytest.mark.docker
def test_one_big_write_is_stopped_while_it_runs(client, base_image):
    env = TerminalEnv(_spec(image=base_image), client=client)
    try:
        env.reset()
        sandbox = env.sandbox
        obs, reward, terminated, truncated, info = env.step(
            "dd if=/dev/zero of=/app/big bs=1M count=500 && echo DD-FINISHED"
        )
        assert "DD-FINISHED" not in obs  # killed before it could complete
        assert truncated and not terminated and info["disk_exceeded"]
        assert f"disk budget of {BUDGET} MB exceeded" in obs
        assert info["masked"] is False and reward == 0.0
        assert sandbox.disk_exceeded
        # a page-cache writer does ~1.5 GB/s: up to ~80 MB get out between two checks
        assert _layer_mb(env) < 3 * BUDGET, f"{_layer_mb(env):.0f} MB written"
        with pytest.raises(Exception, match="episode is over"):
            env.step("echo more")
    finally:
        env.close()
    assert sandbox.disk._thread is None  # the watcher stops with the sandbox


@pytest.mark.docker
def test_background_writer_is_stopped(client, base_image):
    env = TerminalEnv(_spec(image=base_image), client=client)
    try:
        env.reset()
        obs, _, _, truncated, info = env.step(
            "(while true; do head -c 1048576 /dev/zero >> /app/f; done) > /dev/null 2>&1 &"
        )
        if not truncated:  # the writer was not caught yet within the first step
            obs, _, _, truncated, info = env.step("sleep 10; echo SLEPT")
            assert "SLEPT" not in obs  # the watcher killed the shell too, mid-sleep
        assert truncated and info["disk_exceeded"] and info["masked"] is False
        assert f"disk budget of {BUDGET} MB exceeded" in obs
        # Nothing keeps writing after the kill.
        before = _layer_mb(env)
        assert before < 2 * BUDGET
        import time

        time.sleep(1.0)
        assert _layer_mb(env) - before < 1.0
    finally:
        env.close()


@pytest.mark.docker
def test_protected_verifier_reports_the_agents_failure(client, base_image):
    """Called directly (as runners do), the verifier says `failed`, never infra_error."""
    from terminal_env import Sandbox
    from terminal_env.verify.runner import ProtectedVerifier

    class _Task:
        tests_digest = "digest"
        verifier_timeout = 60

    with Sandbox(_spec(image=base_image).sandbox_config(run_id="pytest"), client=client) as sb:
        assert isinstance(sb.disk, DiskGuard)
        sb.exec("head -c 80000000 /dev/zero > /app/x", timeout=60)
        result = ProtectedVerifier(_Task())(sb)
        assert result.outcome == "failed" and not result.masked
        assert f"disk budget of {BUDGET} MB exceeded" in result.message
        assert result.tests_digest == "digest"


@pytest.mark.docker
def test_no_container_left(client):
    assert cleanup.live_count() == 0
    mine = client.containers.list(all=True, filters={"label": "terminal-env.task=disk-budget"})
    assert [c for c in mine if c.labels.get("terminal-env.owner-pid") == str(__import__("os").getpid())] == []
