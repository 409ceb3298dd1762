"""The sandbox layer against the real engine: limits, labels, isolation, exec, files, cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from terminal_env import Sandbox, SandboxConfig
from terminal_env.errors import ConfigError, ImageNotFoundError, SandboxError, SandboxGoneError
from terminal_env.sandbox.cleanup import gc

pytestmark = pytest.mark.docker


def test_container_has_labels_and_limits(sandbox, client):
    attrs = client.api.inspect_container(sandbox.id)
    labels = attrs["Config"]["Labels"]
    assert labels["terminal-env.managed"] == "1"
    assert labels["terminal-env.task"] == "pytest"
    assert labels["terminal-env.owner-pid"] == str(os.getpid())
    host = attrs["HostConfig"]
    assert host["NanoCpus"] == 1_000_000_000
    assert host["Memory"] == 2048 * 1024 * 1024
    assert host["MemorySwap"] == host["Memory"]  # no swap beyond the limit
    assert host["PidsLimit"] == 1024
    assert host["NetworkMode"] == "none"
    assert not host.get("Init")  # PID 1 is the keeper itself: the kernel protects it
    assert set(host["CapDrop"]) == {"MKNOD", "NET_RAW"} and not host.get("CapAdd")
    assert attrs["Config"]["Entrypoint"][:2] == ["bash", "-c"]


@pytest.mark.parametrize("first_shell", ["exec", "attach"])
def test_root_cannot_kill_the_keeper(client, base_image, first_shell):
    """PID 1 survives every signal a root agent can send from inside; orphans are reaped; and
    after the agent killed everything, the keeper still runs no program the agent wrote."""
    cfg = SandboxConfig(image=base_image, first_shell=first_shell)
    with Sandbox(cfg, client=client) as sb:
        sb.exec(
            "printf '#!/bin/sh\\ntouch /tmp/trojan-ran\\n' > /usr/local/bin/sleep; chmod +x /usr/local/bin/sleep;"
            "cp /usr/local/bin/sleep /usr/local/bin/true"
        )
        res = sb.exec(
            "for s in $(seq 1 31) 34; do kill -$s 1; done 2>/dev/null; kill -9 -1; kill -STOP 1; kill -KILL 1; "
            "echo sent", user="root"
        )
        assert res.exit_code in (0, 137), res.output  # kill -9 -1 may take this shell too
        for _ in range(3):  # orphans of a shell that exited: reparented to PID 1
            sb.exec("(/bin/sleep 0.1 &) ; (/bin/sleep 0.1 &)")
        time.sleep(1.5)
        assert sb.status() == "running"
        ps = sb.exec("ps -eo pid=,stat=,comm=").stdout.decode()
        rows = [r.split() for r in ps.splitlines()]
        assert rows[0][0] == "1" and rows[0][2] == "bash" and rows[0][1][0] == "S", ps
        assert not [r for r in rows if r[1].startswith("Z")], ps  # nothing left unreaped
        assert sb.exec("test -e /tmp/trojan-ran").exit_code == 1


def test_no_network_only_loopback(sandbox):
    # Isolation proved by inspection, sending nothing anywhere: only `lo`, and no routes at all.
    ifaces = sandbox.exec("ls /sys/class/net").stdout.decode().split()
    assert ifaces == ["lo"]
    routes = sandbox.exec("tail -n +2 /proc/net/route").stdout.decode().strip()
    assert routes == ""


def test_network_when_asked(client, base_image):
    with Sandbox(SandboxConfig(image=base_image, network=True), client=client) as sb:
        ifaces = sb.exec("ls /sys/class/net").stdout.decode().split()
        assert "eth0" in ifaces


def test_exec_reports_exit_code_and_streams(sandbox):
    res = sandbox.exec("echo out; echo err >&2; exit 3")
    assert res.exit_code == 3
    assert res.stdout == b"out\n" and res.stderr == b"err\n"
    assert not res.timed_out


def test_exec_timeout_is_enforced_inside_the_container(sandbox):
    res = sandbox.exec("sleep 300", timeout=1)
    assert res.timed_out and res.exit_code == 124
    # The process is gone from the container, not just abandoned by the client.
    assert b"sleep 300" not in sandbox.exec("ps -eo args").stdout


def test_exec_output_is_bounded(sandbox):
    res = sandbox.exec("head -c 20000000 /dev/zero", output_limit=1000)
    assert res.stdout_total == 20_000_000
    assert len(res.stdout) < 1200


def test_files_round_trip(sandbox, tmp_path):
    sandbox.write_files({"/data/a.txt": "alpha", "/data/sub/b.bin": b"\x00\x01"}, mode=0o600)
    assert sandbox.read_file("/data/a.txt") == b"alpha"
    assert sandbox.exec("stat -c %a /data/a.txt").stdout.strip() == b"600"
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f.txt").write_text("copied")
    sandbox.copy_in(src, "/in")
    assert sandbox.read_file("/in/d/f.txt") == b"copied"
    sandbox.copy_out("/data", tmp_path / "out")
    assert (tmp_path / "out" / "data" / "sub" / "b.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(FileNotFoundError, match="/nope"):
        sandbox.read_file("/nope")


def test_missing_image_is_a_clear_error(client):
    with pytest.raises(ImageNotFoundError, match="no-such-image:1.*nothing is pulled"):
        Sandbox(SandboxConfig(image="no-such-image:1"), client=client).start()


def test_missing_workdir_is_made_by_the_engine_root_owned(client, base_image):
    # Sandbox.start runs no `mkdir -p`: the engine makes a missing working directory (as root,
    # 0755, like the mkdir did), also when the agent's user is not root.
    cfg = SandboxConfig(image=base_image, workdir="/srv/not/in/image", user="nobody")
    with Sandbox(cfg, client=client) as sb:
        res = sb.exec("pwd; id -un; stat -c '%U %a' /srv/not /srv/not/in/image")
        assert res.exit_code == 0, res.output
        assert res.output == "/srv/not/in/image\nnobody\nroot 755\nroot 755\n"
        assert sb.status() == "running" and sb.container.name == sb.name


def test_workdir_that_is_a_file_is_a_clear_error(client, base_image):
    with pytest.raises(SandboxError, match="/etc/passwd is not a directory"):
        Sandbox(SandboxConfig(image=base_image, workdir="/etc/passwd"), client=client).start()


def test_missing_runtime_is_a_clear_error(client, base_image):
    # A configuration mistake (not an infrastructure error to retry): names the runtime, the
    # ones the engine has, and how to add gVisor.
    if "runsc" not in _runtimes(client):
        with pytest.raises(ConfigError, match=r"no OCI runtime 'runsc' \(it has: .*runc.*\).*daemon.json"):
            Sandbox(SandboxConfig(image=base_image, runtime="runsc"), client=client).start()
    with pytest.raises(ConfigError, match="no OCI runtime 'no-such-runtime'"):
        Sandbox(SandboxConfig(image=base_image, runtime="no-such-runtime"), client=client).start()


def _runtimes(client):
    return set(client.info().get("Runtimes") or {})


def test_runc_by_name(client, base_image):
    with Sandbox(SandboxConfig(image=base_image, runtime="runc"), client=client) as sb:
        assert client.api.inspect_container(sb.id)["HostConfig"]["Runtime"] == "runc"
        assert sb.exec("echo ok").stdout == b"ok\n"


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="workdir must be absolute"):
        SandboxConfig(image="x", workdir="relative/dir")
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxConfig(image="x", memory_mb=1)
    with pytest.raises(ValueError, match="extra"):
        SandboxConfig(image="x", colour="red")


def test_killed_from_outside_is_named(sandbox, client):
    client.api.kill(sandbox.id)
    with pytest.raises(SandboxGoneError, match="stopped or removed from outside"):
        sandbox.exec("true")
    sandbox.remove()
    sandbox.remove()  # idempotent


def test_memory_limit_kills_a_hog_not_the_sandbox(client, base_image):
    with Sandbox(SandboxConfig(image=base_image, memory_mb=64), client=client) as sb:
        res = sb.exec("python3 -c 'x = bytearray(512 * 2**20)'", timeout=60)
        assert res.exit_code == 137  # OOM kill
        assert sb.status() == "running"


def test_pids_limit_stops_a_fork_bomb(client, base_image):
    with Sandbox(SandboxConfig(image=base_image, pids_limit=64), client=client) as sb:
        res = sb.exec("for i in $(seq 200); do sleep 30 & done; wait", timeout=10)
        assert b"fork" in res.stderr.lower() or b"resource" in res.stderr.lower()
        assert sb.status() == "running"


def _child(code: str) -> subprocess.Popen:
    script = textwrap.dedent(
        f"""
        import os, sys, time
        from terminal_env import Sandbox, SandboxConfig
        sb = Sandbox(SandboxConfig(image="terminal-env/base:bookworm-1", task="orphan")).start()
        print(sb.name, flush=True)
        {code}
        """
    )
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def _exists(client, name: str) -> bool:
    return bool(client.containers.list(all=True, filters={"name": f"^/{name}$"}))


def test_normal_exit_without_close_removes_the_container(client, base_image):
    proc = _child("sys.exit(0)")
    name = proc.stdout.readline().strip()
    assert proc.wait(60) == 0
    assert not _exists(client, name)


def test_sigterm_removes_the_container(client, base_image):
    proc = _child("time.sleep(120)")
    name = proc.stdout.readline().strip()
    assert _exists(client, name)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == -signal.SIGTERM  # the exit status still says which signal
    assert not _exists(client, name)


def test_sigterm_removes_containers_started_in_worker_threads(client, base_image):
    """A thread pool's sandboxes (tasks check, a runner): the handler is set from the main
    thread first, as the CLI does; before, it was never set and SIGTERM left the containers."""
    script = textwrap.dedent(
        """
        import threading, time
        from terminal_env import Sandbox, SandboxConfig
        from terminal_env.sandbox.cleanup import install_signal_handlers
        install_signal_handlers()
        def work():
            sb = Sandbox(SandboxConfig(image="terminal-env/base:bookworm-1", task="orphan-thread")).start()
            print(sb.name, flush=True)
            time.sleep(120)
        threading.Thread(target=work, daemon=True).start()
        time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    name = proc.stdout.readline().strip()
    assert _exists(client, name)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == -signal.SIGTERM
    assert not _exists(client, name)


def test_gc_removes_containers_of_dead_owners_only(client, base_image, sandbox):
    proc = _child("os.kill(os.getpid(), 9)")  # SIGKILL: no handler can run
    name = proc.stdout.readline().strip()
    proc.wait(60)
    assert _exists(client, name)
    dry = {r["name"]: r["action"] for r in gc(client, dry_run=True)}
    assert dry[name] == "would remove"
    assert dry[sandbox.name] == "kept (owner alive)"
    records = {r["name"]: r["action"] for r in gc(client)}
    assert records[name] == "removed"
    assert not _exists(client, name)
    assert _exists(client, sandbox.name)


def test_an_image_without_bash_is_a_clear_error(client, base_image, tmp_path):
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN rm -f /usr/bin/bash /bin/bash\n")
    tag = "terminal-env/test-no-bash:1"
    client.images.build(path=str(tmp_path), tag=tag, rm=True)
    try:
        with pytest.raises(ConfigError, match="has no `bash` on its PATH"):
            Sandbox(SandboxConfig(image=tag), client=client).start()
    finally:
        client.images.remove(tag, force=True)
