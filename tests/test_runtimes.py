"""The OCI runtimes' differences (terminal_env/sandbox/runtimes.py): what gVisor breaks without
them, proven first, and that each fix holds in a real runsc sandbox. The whole adversarial and
protected-verifier suites run under runc and runsc too (the ``runtime`` fixture of conftest)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.actions import Command, Submit
from terminal_env.errors import ConfigError, SandboxGoneError
from terminal_env.sandbox import Sandbox, SandboxConfig
from terminal_env.sandbox.runtimes import (
    PRELOAD_LIST,
    RUNC,
    RUNSC,
    RUNSC_ARGS,
    STATX_FIX_IN_SANDBOX,
    runtime_of,
)
from terminal_env.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
TASK = Path(__file__).parent / "data" / "protected" / "word-stats"


class _Info:
    """An engine's answer to ``info`` (only what runtime_of reads)."""

    def __init__(self, runtimes: dict, default: str = "runc"):
        self.answer = {"Runtimes": runtimes, "DefaultRuntime": default}

    def info(self) -> dict:
        return self.answer


def test_setup_registers_runsc_with_the_arguments_the_sandbox_needs():
    script = (ROOT / "scripts" / "install-engine.sh").read_text()
    m = re.search(r"^RUNSC_ARGS=\((.*)\)$", script, re.M)
    assert m is not None
    assert tuple(m.group(1).split()) == RUNSC_ARGS


def test_a_runsc_registered_without_the_needed_arguments_is_refused_naming_the_fix():
    old = _Info({"runc": {"path": "runc"}, "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}})
    with pytest.raises(ConfigError, match=r"without --file-access=shared.*install-engine\.sh.*daemon\.json"):
        runtime_of("runsc", old)
    good = _Info({"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": list(RUNSC_ARGS)}}, default="runsc")
    assert runtime_of(None, good) is RUNSC  # the engine's default, asked
    assert runtime_of(None, _Info({"runc": {}})) is RUNC
    crun = runtime_of("crun", _Info({"crun": {}}))
    assert crun.host_processes and not crun.mounts()


def test_only_a_runtime_with_a_kernel_of_its_own_limits_the_shells_memory_and_processes():
    assert RUNC.shell_limits(512, 1024) == ""
    assert RUNSC.shell_limits(512, 1024) == "ulimit -v 524288 2>/dev/null; ulimit -u 128 2>/dev/null; "


# ---------------------------------------------------------------------- in a real runsc sandbox
@pytest.mark.docker
def test_statx_is_broken_under_runsc_and_the_fix_repairs_it(client, base_image, runsc):
    script = "ls -d /etc; ls /no-such-dir; stat -c %F /etc/passwd"
    # First the breakage itself, in a bare runsc container of the same image.
    bare = client.containers.run(base_image, ["sh", "-c", script + " 2>&1"], runtime="runsc", detach=True,
                                 network_mode="none", labels={"terminal-env.managed": "1"})
    try:
        bare.wait(timeout=60)
        out = bare.logs().decode()
    finally:
        bare.remove(force=True)
    assert out.count("Invalid argument") == 3, out
    with Sandbox(SandboxConfig(image=base_image, runtime="runsc", task="pytest"), client=client) as sb:
        res = sb.exec(["sh", "-c", script])
        assert res.stdout.decode() == "/etc\nregular file\n", res.output
        assert "ls: cannot access '/no-such-dir': No such file or directory" in res.stderr.decode()
        # Whatever the environment: a cron job or `env -i` gets the fix too.
        res = sb.exec(["env", "-i", "/bin/ls", "-d", "/etc"])
        assert res.exit_code == 0 and res.stdout == b"/etc\n", res.output
        # The fix is two read-only files the agent cannot change.
        for path in (STATX_FIX_IN_SANDBOX, PRELOAD_LIST):
            res = sb.exec(["sh", "-c", f"echo x > {path}; rm -f {path}"])
            assert res.exit_code != 0 and "Read-only file system" in res.output, res.output


@pytest.mark.docker
def test_long_and_multiline_commands_are_delivered_under_runsc(base_image, runsc):
    env = TerminalEnv(load_task(TASK), runtime="runsc", max_steps=6)
    try:
        env.reset()
        # Before: a file put into /tmp through the engine is not seen inside (gVisor's own /tmp).
        env.sandbox.write_files({"/tmp/put-by-engine": b"x"})
        obs, *_ = env.step("cat /tmp/put-by-engine")
        assert "No such file or directory" in obs, obs
        long = "echo " + "a" * 6000 + " | wc -c"
        obs, *_, info = env.step(long)
        assert obs == "6001\n" and info["exit_code"] == 0, obs[:200]
        obs, *_, info = env.step("x=1\nif [ $x = 1 ]; then\n  echo multi\nfi")
        assert obs == "multi\n" and info["exit_code"] == 0, obs
    finally:
        env.close()


@pytest.mark.docker
def test_one_memory_hog_fails_alone_and_the_sandbox_lives_on_under_runsc(client, base_image, runsc):
    # First the attack without the fix: one process over the limit stops the whole sandbox.
    bare = client.containers.run(
        base_image, ["python3", "-c", "a = bytearray(200 << 20); a[::4096] = bytes(len(a[::4096]))"],
        runtime="runsc", network_mode="none", mem_limit="128m", memswap_limit="128m", detach=True,
        labels={"terminal-env.managed": "1"},
    )
    try:
        assert bare.wait(timeout=60)["StatusCode"] == 137
        bare.reload()
        state = bare.attrs["State"]
        deadline = time.monotonic() + 3  # the engine may set the mark a moment after the exit
        while not state["OOMKilled"] and time.monotonic() < deadline:
            time.sleep(0.1)
            bare.reload()
            state = bare.attrs["State"]
        assert state["OOMKilled"] is True, state
    finally:
        bare.remove(force=True)
    task = load_task(TASK)
    env = TerminalEnv(task, runtime="runsc", max_steps=6)
    try:
        env.reset()
        hog = "python3 -c 'a = bytearray(%d << 20); a[::4096] = bytes(len(a[::4096]))'" % (task.memory_mb + 64)
        obs, *_, info = env.step(Command(command=hog, timeout=60))
        assert info["exit_code"] == 1 and "MemoryError" in obs, (obs, info)
        obs, *_, info = env.step("echo alive")
        assert obs == "alive\n" and not info["shell_restarted"]
        assert env.sandbox.status() == "running"
    finally:
        env.close()


@pytest.mark.docker
def test_killing_pid_1_under_runsc_is_the_agents_failure_and_an_outside_kill_is_masked(base_image, runsc):
    task = load_task(TASK)
    # The attack: under gVisor root in the sandbox can kill the keeper, which stops the container
    # (under runc the kernel refuses; test_adversarial's kill tests cover that).
    env = TerminalEnv(task, runtime="runsc", max_steps=6)
    try:
        env.reset()
        obs, reward, terminated, truncated, info = env.step("kill -9 1")
        deadline = time.monotonic() + 10
        while env.sandbox.status() != "exited" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert env.sandbox.status() == "exited", "the attack did not stop the sandbox"
        if not (terminated or truncated):  # the step ended before the container did
            obs, reward, terminated, truncated, info = env.step(Submit())
        result = info["verification"]
        assert result.outcome == "failed" and reward == 0.0 and not info["masked"], (result.outcome, result.message)
        assert "killed from inside the sandbox" in result.message, result.message
    finally:
        env.close()
    # The control: the same stop from outside (an operator's `docker kill`) stays the
    # infrastructure's: the step raises the error a runner masks and retries.
    env = TerminalEnv(task, runtime="runsc", max_steps=6)
    try:
        env.reset()
        env.sandbox.container.kill()
        with pytest.raises(SandboxGoneError, match="stopped or removed from outside the episode"):
            env.step("echo hi")
    finally:
        env.close()


def test_an_exec_whose_container_dies_under_it_returns(runsc, client):
    """Under gVisor root can kill PID 1, and the engine then may leave a running exec's stream
    open: reading it waited forever (a verifier's sweep hung a whole test run). The exec now looks
    whether its command still runs when no output comes for a while."""
    import threading

    from terminal_env.errors import SandboxGoneError
    from terminal_env.sandbox import Sandbox, SandboxConfig

    box = Sandbox(SandboxConfig(image="terminal-env/base:bookworm-1", task="exec-dies", runtime="runsc",
                                first_shell="exec"), client=client).start()
    outcome: dict = {}

    def long_exec():
        try:
            outcome["result"] = box.exec(["/bin/sh", "-c", "sleep 120"], timeout=None).exit_code
        except SandboxGoneError as exc:
            outcome["gone"] = str(exc)

    try:
        thread = threading.Thread(target=long_exec, daemon=True)
        thread.start()
        time.sleep(2)
        try:
            box.exec("kill -9 1", user="root", timeout=10)
        except SandboxGoneError:
            pass
        thread.join(60)
        # The engine may close the exec's stream a moment before it marks the container exited.
        deadline = time.monotonic() + 10
        while box.status() == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert box.status() in ("exited", "dead"), "the fault did not happen: the container still runs"
        assert not thread.is_alive(), "the exec still waits on a dead container's stream"
        assert outcome, outcome
    finally:
        box.remove()
