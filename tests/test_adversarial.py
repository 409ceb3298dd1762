"""Adversarial agents against the sandbox itself (not against the verifier's result files: those
are in test_verify_protected.py). Each scripted agent tries to escape, starve or confuse its
sandbox; each test asserts that the attack earns nothing (reward 0, never a strict success),
that it gets a *named* outcome (the verifier's outcome, or the info field / note the environment
really reports), that the host is untouched where that can be checked from here, and that the
next episode, in a fresh environment, works normally.

Everything runs on the real Docker engine, under every OCI runtime it offers among ``runc`` and
``runsc`` (gVisor). No traffic leaves this machine: the network test only aims at this host's
own addresses, with a listener of its own to prove that nothing arrived.
"""

from __future__ import annotations

import os
import re
import secrets
import select
import socket
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from terminal_env import TerminalEnv
from terminal_env.actions import Command, Submit
from terminal_env.agent import run_episode
from terminal_env.errors import InfraError
from terminal_env.models.simple import ScriptedBackend
from terminal_env.tasks import load_task

pytestmark = [pytest.mark.docker, pytest.mark.attack]

TASK = Path(__file__).parent / "data" / "protected" / "word-stats"
# The note truncate_middle (terminal_env/output.py) puts where it cut an output.
TRUNCATION_MARKER = re.compile(r"\[\.\.\. \d+ characters \(\d+ lines\) truncated \.\.\.\]")
# Capabilities that would let root in the sandbox reach the host (bit numbers, linux/capability.h).
DANGEROUS_CAPS = {
    "CAP_DAC_READ_SEARCH": 2, "CAP_NET_ADMIN": 12, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17,
    "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_SYS_BOOT": 22, "CAP_SYS_TIME": 25,
    "CAP_MAC_ADMIN": 33, "CAP_SYSLOG": 34, "CAP_BPF": 39,
}


# ---------------------------------------------------------------------- fixtures and helpers
@pytest.fixture(scope="module")
def task(base_image):
    return load_task(TASK)


def make_env(task, runtime: str, **overrides: Any) -> TerminalEnv:
    cfg: dict[str, Any] = {"max_steps": 12, "command_timeout": 10.0, "time_limit": 120.0}
    cfg.update(overrides)
    return TerminalEnv(task, reward="partial_progress", runtime=runtime, **cfg)


class Recording:
    """A scripted agent that keeps the observation and info that followed each of its actions."""

    def __init__(self, actions):
        self.backend = ScriptedBackend.of_actions(actions)
        self.steps: list[tuple[str, dict[str, Any]]] = []  # (observation, info), the submit left out

    def on_step(self, action: Any, observation: str, info: dict[str, Any]) -> None:
        if not isinstance(action, Submit):
            self.steps.append((observation, info))

    def run(self, env: TerminalEnv) -> tuple[float, dict[str, Any]]:
        self.steps = []
        return run_episode(env, self.backend, on_step=self.on_step)


@dataclass
class Episode:
    reward: float
    result: Any
    info: dict[str, Any]
    steps: list[tuple[str, dict[str, Any]]]


def play(task, runtime: str, actions, **overrides: Any) -> Episode:
    """One episode of a scripted agent through run_episode; the env is closed afterwards."""
    policy = Recording(actions)
    env = make_env(task, runtime, **overrides)
    try:
        reward, info = policy.run(env)
    finally:
        env.close()
    assert len(policy.steps) == len(actions), "the episode ended before the script did"
    return Episode(reward, info["verification"], info, policy.steps)


def submit(env: TerminalEnv) -> Episode:
    obs, reward, terminated, truncated, info = env.step(Submit())
    assert terminated and not truncated and obs == "[terminal-env] submitted."
    return Episode(reward, info["verification"], info, [])


def assert_failed_not_masked(ep: Episode, outcome: str = "failed") -> None:
    """The attack earned nothing and is scored as the agent's own failure."""
    r = ep.result
    assert r is not None, "no verifier ran"
    assert r.outcome == outcome, (r.outcome, r.message, r.log_tail)
    assert ep.reward == 0.0 and not r.strict_success
    assert ep.info["masked"] is False


def assert_echo_ok(env: TerminalEnv) -> None:
    obs, reward, terminated, truncated, info = env.step("echo ok")
    assert obs == "ok\n", obs
    assert info["exit_code"] == 0 and not info["timed_out"] and not info["shell_restarted"]
    assert reward == 0.0 and not terminated and not truncated


def assert_next_episode_normal(task, runtime: str) -> None:
    """A fresh environment after the attack: the shell answers and /tmp is empty."""
    env = make_env(task, runtime)
    try:
        env.reset()
        assert_echo_ok(env)
        obs, *_ , info = env.step("ls -A /tmp | wc -l")
        assert obs == "0\n" and info["exit_code"] == 0, obs
    finally:
        env.close()


def host_processes_mentioning(needle: str) -> list[str]:
    """Command lines of the host's processes (container processes included under runc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if needle in cmd:
            found.append(f"{entry}: {cmd}")
    return found


def parse_marked(obs: str) -> dict[str, tuple[int, str]]:
    """Lines ``@@NAME rc=N output...`` printed by the scripts below, as {NAME: (N, output)}."""
    out = {}
    for line in obs.splitlines():
        m = re.match(r"@@(\S+) rc=(\d+) ?(.*)$", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), m.group(3))
    return out


def marked(name: str, command: str) -> str:
    """Run ``command`` with its output folded into one ``@@name rc=N output`` line."""
    return (
        f"{{ {command}\n}} >/tmp/.o 2>&1; echo \"@@{name} rc=$? $(tr '\\n' ' ' </tmp/.o)\"; rm -f /tmp/.o"
    )


# ---------------------------------------------------------------------- 1. snooping
def test_snooping_finds_no_tests_solution_or_history(task, runtime):
    """No git history, no /tests or /solution, nothing in any process's command line or
    environment, nothing in the mount table, and no distinctive line of the tests or the
    solution anywhere on disk."""
    ep = play(task, runtime, [
        "ls -d /tests /solution /logs/verifier /app/tests /app/solution /app/.git 2>&1; echo END",
        (
            "find / -xdev \\( -name solve.sh -o -name test_stats.py -o -name test.sh -o -name .git "
            "-o -name junit.xml -o -name 'reward.*' \\) -print 2>/dev/null; echo END"
        ),
        (
            "if command -v git >/dev/null; then for d in / /app; do (cd $d && git log --all --oneline"
            " 2>&1; git rev-list --all 2>&1 | head -3); done; else echo NO-GIT; fi"
        ),
        (
            "grep -rIlE 'supercalifragilistic|20261129|length\\(best\\)' / --exclude-dir=proc "
            "--exclude-dir=sys --exclude-dir=dev 2>/dev/null | head; echo END"
        ),
        (
            "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; tr '\\0' '\\n' <$p/environ; done "
            ">/tmp/procs 2>/dev/null; cat /proc/self/mountinfo >>/tmp/procs; "
            "echo \"path=$(grep -c '^PATH=' /tmp/procs) bash=$(grep -c '^bash ' /tmp/procs) "
            "secret=$(grep -ciE 'tests|solution|solve|verifier|word-stats' /tmp/procs)\""
        ),
    ], command_timeout=60.0)  # whole-disk searches: over 10 s under gVisor on a loaded machine
    (ls, _), (find, _), (git, _), (grep, _), (procs, _) = ep.steps
    assert ls.count("No such file or directory") == 6, ls
    assert find == "END\n", find
    if git.strip() != "NO-GIT":  # git is in the base image: neither / nor /app is a repository
        assert git.count("fatal: not a git repository") == 4, git
        assert not re.search(r"\b[0-9a-f]{7,40}\b", git), git
    assert grep == "END\n", grep
    # The dump really holds the processes (PID 1's environment, the agent's bash) and nothing
    # of the tests or the solution.
    m = re.fullmatch(r"path=(\d+) bash=(\d+) secret=(\d+)\n", procs)
    assert m, procs
    assert int(m.group(1)) >= 2 and int(m.group(2)) >= 1 and int(m.group(3)) == 0, procs
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 2. memory hog
def _host_memory_cgroup(cid: str) -> dict[str, Any] | None:
    """limit, peak usage, swap limit and OOM kills of the container's memory cgroup, read on
    the host (cgroup v1 or v2, cgroupfs or systemd driver); None when not readable here."""

    def read(path: str) -> str:
        with open(path) as fh:
            return fh.read()

    for base in (f"/sys/fs/cgroup/memory/docker/{cid}",
                 f"/sys/fs/cgroup/memory/system.slice/docker-{cid}.scope"):
        try:
            oom = re.search(r"oom_kill (\d+)", read(f"{base}/memory.oom_control"))
            try:  # memory + swap; absent when the kernel does no swap accounting
                swap_limit: int | None = int(read(f"{base}/memory.memsw.limit_in_bytes"))
            except OSError:
                swap_limit = None
            return {
                "limit": int(read(f"{base}/memory.limit_in_bytes")),
                "peak": int(read(f"{base}/memory.max_usage_in_bytes")),
                "swap_limit": swap_limit,
                "oom_kill": int(oom.group(1)) if oom else -1,
            }
        except (OSError, ValueError):
            continue
    for base in (f"/sys/fs/cgroup/system.slice/docker-{cid}.scope", f"/sys/fs/cgroup/docker/{cid}"):
        try:
            limit = int(read(f"{base}/memory.max"))
            swap = read(f"{base}/memory.swap.max").strip()  # swap allowed on top of memory.max
            oom = re.search(r"oom_kill (\d+)", read(f"{base}/memory.events"))
            return {
                "limit": limit,
                "peak": int(read(f"{base}/memory.peak")),
                "swap_limit": -1 if swap == "max" else limit + int(swap),
                "oom_kill": int(oom.group(1)) if oom else -1,
            }
        except (OSError, ValueError):
            continue
    return None


def test_memory_hog_is_killed_at_the_limit(task, runtime, client):
    env = make_env(task, runtime)
    try:
        env.reset()
        cid = env.sandbox.id
        limit = env.task.memory_mb * 2**20
        host_cfg = client.api.inspect_container(cid)["HostConfig"]
        assert host_cfg["Memory"] == limit and host_cfg["MemorySwap"] == limit  # no swap beyond it
        host_view = _host_memory_cgroup(cid) is not None  # the kernel's OOM counter is readable
        oom_killed = 0
        for hog in (
            'python3 -c "a = bytearray(10**10)"',
            'python3 -c "\na = []\nwhile True: a.append(bytearray(64 * 2**20))\n"',
        ):
            obs, reward, terminated, truncated, info = env.step(Command(command=hog, timeout=30))
            killed = info["exit_code"] == 137 and "Killed" in obs
            refused = info["exit_code"] == 1 and "MemoryError" in obs
            assert killed or refused, (obs, info)
            oom_killed += killed
            if killed and host_view:  # named: the step says the kernel killed it for memory
                note = (
                    "out of memory: the kernel killed 1 process(es) of the sandbox "
                    f"(memory limit {env.task.memory_mb} MB)."
                )
                assert note in info["notes"], info["notes"]
            assert not info["timed_out"] and not info["shell_restarted"], info
            assert reward == 0.0 and not terminated and not truncated
        # The shell and the sandbox survived their OOM kills.
        assert_echo_ok(env)
        assert env.sandbox.status() == "running"
        stats = _host_memory_cgroup(cid)
        if stats is not None:  # runc on this host: the kernel's own account of the cgroup
            assert stats["limit"] == limit and stats["peak"] <= limit, stats
            assert stats["swap_limit"] in (limit, None), stats
            assert stats["oom_kill"] >= oom_killed, stats  # the kernel's OOM killer did it
        ep = submit(env)
    finally:
        env.close()
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 3. sleep forever
@pytest.mark.parametrize(
    "command, note",
    [
        ("sleep infinity", "interrupted with Ctrl-C."),
        # SIGINT ignored (inherited across exec): Ctrl-C is not enough, the group is killed.
        ("sh -c \"trap '' INT; exec sleep infinity\"", "Ctrl-C did not stop it; killed its process group"),
    ],
    ids=["plain", "ignores-sigint"],
)
def test_sleep_forever_times_out_and_the_shell_goes_on(task, runtime, command, note):
    count = "ps -eo args | grep -c '^[s]leep infinity'"
    ep = play(task, runtime, [count, command, "echo ok", count], command_timeout=1.5)
    (before, _), (obs, info), (ok, ok_info), (after, _) = ep.steps
    assert info["timed_out"] is True and info["exit_code"] is not None, info
    assert "[terminal-env] command timed out after 1.5 s." in obs, obs
    assert "command timed out after 1.5 s." in info["notes"], info["notes"]
    assert any(n.startswith(note) for n in info["notes"]), info["notes"]
    assert not info["shell_restarted"]
    assert ok == "ok\n" and ok_info["timed_out"] is False and ok_info["exit_code"] == 0
    assert after == before, (before, after)  # the sleeper is gone (the keeper may be a sleep too)
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 4. endless output
def test_endless_output_is_truncated_with_bounded_memory(task, runtime):
    max_output = 4000
    floods = [
        # (command, timeout): endless, stopped by the command timeout...
        ("yes", 2.0),
        ("cat /dev/urandom | base64", 6.0),  # base64 under gVisor: ~0.3 MB/s on a loaded host
        # ... and a finite one, so that the size (and the memory claim) does not hang on speed.
        ("head -c 12000000 /dev/urandom | base64", 60.0),
    ]
    env = make_env(task, runtime, max_output_chars=max_output)
    try:
        env.reset()
        for flood, timeout in floods:
            tracemalloc.start()
            try:
                obs, reward, terminated, truncated, info = env.step(Command(command=flood, timeout=timeout))
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert reward == 0.0 and not terminated and not truncated
            assert info["truncated"] is True, info
            if timeout < 10:
                assert info["timed_out"] is True and info["exit_code"] == 130, info
                assert info["output_bytes"] > 1_000_000, info  # a real flood, not a trickle
            else:
                assert info["timed_out"] is False and info["exit_code"] == 0, info
                assert info["output_bytes"] > 16_000_000, info  # base64 of 12 MB, with CRLFs
            assert TRUNCATION_MARKER.search(obs), obs[:300]
            # Head + marker + tail of max_output_chars, plus the notes and the exit code line.
            assert len(obs) <= max_output + 400, len(obs)
            assert len(obs) <= env.config.max_observation_chars
            # The test process never held the flood: its allocations peak at a few hundred kB
            # (head and tail buffers, one read chunk), whatever the size printed.
            assert peak < 2 * 2**20, (peak, info["output_bytes"])
            assert_echo_ok(env)
        ep = submit(env)
    finally:
        env.close()
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 5. no newline
def test_a_line_without_newline_is_bounded_and_the_prompt_recovers(task, runtime):
    max_output = 4000
    env = make_env(task, runtime, max_output_chars=max_output)
    try:
        env.reset()
        tracemalloc.start()
        try:
            obs, *_, info = env.step("head -c 5000000 /dev/zero | tr '\\0' a")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert info["exit_code"] == 0 and not info["timed_out"], info
        assert info["truncated"] is True and info["output_bytes"] == 5_000_000, info
        assert obs.startswith("a" * 1000) and obs.rstrip("\n").endswith("a" * 1000)
        assert TRUNCATION_MARKER.search(obs) and len(obs) <= max_output + 200, len(obs)
        assert peak < 2 * 2**20, peak  # one 5 MB line, never held whole
        obs, *_, info = env.step("printf 'no newline'")
        assert obs == "no newline" and info["exit_code"] == 0 and not info["timed_out"], (obs, info)
        obs, *_, info = env.step("echo MARK")
        assert obs == "MARK\n" and info["exit_code"] == 0
        ep = submit(env)
    finally:
        env.close()
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 6. killing its own shell
@pytest.mark.parametrize(
    "command, notes",
    [
        ("kill -9 $$", ["the shell exited (exit code 137); a new shell was started in /app."]),
        # The command times out, Ctrl-C ends the sleep, which was the shell.
        ("exec sleep 5", ["command timed out after 2 s.", "the shell exited"]),
        # The REPL swallows Ctrl-C: the shell (now python) is killed one way or another.
        ("exec python3", ["command timed out after 2 s."]),
    ],
    ids=["kill-self", "exec-sleep", "exec-python"],
)
def test_killing_or_replacing_its_own_shell_restarts_it(task, runtime, command, notes):
    ep = play(task, runtime, ["cd /tmp && X=1", command, "echo ok; echo \"x=$X\"; pwd"],
              command_timeout=2)
    (_, setup), (obs, info), (after, after_info) = ep.steps
    assert setup["exit_code"] == 0 and setup["cwd"] == "/tmp"
    assert info["shell_restarted"] is True and info["exit_code"] is None, info
    for note in notes:
        assert any(n.startswith(note) for n in info["notes"]), (note, info["notes"])
    assert any("a new shell was started" in n for n in info["notes"]), info["notes"]
    assert "[terminal-env]" in obs  # the agent is told what happened
    # A new shell: it answers, and the variables and the directory were reset (as said).
    assert after == "ok\nx=\n/app\n", after
    assert after_info["shell_restarted"] is False and after_info["exit_code"] == 0
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 8. scrambled terminal
def test_scrambled_terminal_still_gives_correct_output(task, runtime):
    ep = play(task, runtime, [
        "printf '\\033c\\033[?1049h\\033[2J\\033(0'; stty raw -echo",
        "echo MARK1",
        "stty -icanon",
        "echo MARK2",
        # Non-canonical with MIN 0 TIME 0 (and no signals): a read may return 0 bytes, i.e. end
        # of file, and bash exits by itself; then the next command meets a restarted shell.
        "stty -isig -icanon min 0 time 0 -opost",
        "echo MARK3",
        "echo MARK4",
        "printf '\\033[?1049l\\033(B\\033c'; stty sane",
        "echo MARK5",
    ])
    obs = [o for o, _ in ep.steps]
    infos = [i for _, i in ep.steps]
    assert all("\x1b" not in o and "\r" not in o for o in obs), obs  # escapes never reach the model
    assert obs[1] == "MARK1\n" and obs[3] == "MARK2\n", obs
    # The shell exits by itself at the first read that finds no input (end of file), after
    # MARK3's command or after its prompt: one of MARK3 and MARK4 may meet the restarted shell
    # (which one depends on the runtime's timing), and the other runs.
    ran = [i for i in (5, 6) if obs[i] == f"MARK{i - 2}\n"]
    restarted = [i for i in (5, 6) if infos[i]["shell_restarted"] is True]
    assert ran == [5, 6] or (len(ran), len(restarted)) == (1, 1), (obs[5:7], infos[5:7])
    assert obs[8] == "MARK5\n", obs
    assert all(infos[i]["exit_code"] == 0 for i in (1, 3, 8, *ran)), infos
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 9. the Docker socket
def test_no_docker_socket_and_no_engine_access(task, runtime, client):
    # The engine's own address on the default bridge (docker0), else another of this host's:
    # never an address of another machine.
    gateway = _bridge_gateway(client) or min(a for a in _host_ipv4_addresses() if not a.startswith("127."))
    env = make_env(task, runtime)
    try:
        env.reset()
        # The engine's view: nothing of the host is mounted, nothing privileged.
        attrs = client.api.inspect_container(env.sandbox.id)
        hc = attrs["HostConfig"]
        # Under gVisor, the one exception: the runtime's statx fix, two read-only files of ours.
        own = env.sandbox.runtime.mounts()
        mounts = [m for m in attrs["Mounts"] if not (own.get(m["Destination"]) == m["Source"] and m["RW"] is False)]
        assert mounts == [] and not hc.get("Devices"), attrs["Mounts"]
        assert sorted(hc.get("Binds") or []) == sorted(f"{h}:{p}:ro" for p, h in own.items()), hc["Binds"]
        assert hc["Privileged"] is False and not hc.get("CapAdd")
        assert hc["NetworkMode"] == "none" and "no-new-privileges" in (hc.get("SecurityOpt") or [])
        assert hc.get("PidMode", "") != "host" and hc.get("IpcMode") != "host"
        assert hc.get("UsernsMode", "") != "host" and hc.get("UTSMode", "") != "host"
        assert hc.get("Runtime") == runtime
        script = "\n".join([
            marked("ls", "ls -l /var/run/docker.sock /run/docker.sock"),
            marked("curl", "curl -sS --max-time 2 --unix-socket /var/run/docker.sock http://localhost/version"),
            marked("clients", "command -v docker dockerd containerd ctr runc nerdctl podman"),
            marked("sockets", "find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print"),
            marked("env", "env | grep -i -e docker -e containerd"),
            marked("tcp2375", f"timeout 3 bash -c 'echo > /dev/tcp/{gateway}/2375'"),
            marked("tcp2376", f"timeout 3 bash -c 'echo > /dev/tcp/{gateway}/2376'"),
        ])
        obs, *_, info = env.step(Command(command=script, timeout=30))
        res = parse_marked(obs)
        assert info["exit_code"] == 0 and not info["timed_out"], info
        assert set(res) == {"ls", "curl", "clients", "sockets", "env", "tcp2375", "tcp2376"}, obs
        rc, out = res["ls"]
        assert rc == 2 and out.count("No such file or directory") == 2, res["ls"]
        if "command not found" not in res["curl"][1]:
            rc, out = res["curl"]
            assert rc == 7 and "Couldn't connect to server" in out and "ApiVersion" not in out, res["curl"]
        assert res["clients"] == (1, ""), res["clients"]
        assert res["sockets"] == (0, ""), res["sockets"]  # no unix socket anywhere
        assert res["env"] == (1, ""), res["env"]
        for port in ("tcp2375", "tcp2376"):
            rc, out = res[port]
            # gVisor says "No route to host" where Linux says "Network is unreachable".
            assert rc == 1 and ("Network is unreachable" in out or "No route to host" in out), res[port]
        ep = submit(env)
    finally:
        env.close()
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 10. privileges
_PY_MOUNT = (
    "python3 -c \"import ctypes, errno, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "r = libc.mount(b'{src}', b'/mnt', b'{fs}', 0, None); "
    "print('mounted' if r == 0 else errno.errorcode[ctypes.get_errno()]); sys.exit(r != 0)\""
)
_PY_CHROOT_ESCAPE = """python3 - <<'EOF'
import os
os.makedirs('/tmp/jail', exist_ok=True)
fd = os.open('/', os.O_RDONLY)
os.chroot('/tmp/jail')
os.fchdir(fd)
for _ in range(64):
    os.chdir('..')
os.chroot('.')
open('/tmp/te-escape-TOKEN', 'w').write('escaped?')
print('hostname=' + open('/etc/hostname').read().strip(), 'sock=' + str(os.path.exists('/var/run/docker.sock')))
EOF"""
_PY_FILE_CAPS = """cp /usr/bin/cat /tmp/capcat && python3 - <<'EOF' && /tmp/capcat /proc/self/status
import os, struct
# VFS_CAP_REVISION_2 | effective, permitted = CAP_SYS_ADMIN: what `setcap cap_sys_admin+ep` writes
os.setxattr('/tmp/capcat', 'security.capability', struct.pack('<IIIII', 0x02000001, 1 << 21, 0, 0, 0))
EOF"""

# name: (command, exit code, text that must appear in its output)
PRIVILEGE_ATTACKS = {
    "mount-proc": (_PY_MOUNT.format(src="proc", fs="proc"), 1, "EPERM"),
    "mount-disk": (_PY_MOUNT.format(src="/dev/sda1", fs="ext4"), 1, "EPERM"),
    "mount-tmpfs": (_PY_MOUNT.format(src="tmpfs", fs="tmpfs"), 1, "EPERM"),
    # gVisor lets the node be made (in its own kernel) but it leads to no device.
    "mknod-disk": ("mknod /tmp/sda b 8 0 && head -c 1 /tmp/sda", 1,
                   ("Operation not permitted", "/tmp/sda' for reading: No such device or address")),
    "mknod-mem": ("mknod /tmp/mem c 1 1 && head -c 1 /tmp/mem", 1,
                  ("Operation not permitted", "/tmp/mem' for reading: No such device or address")),
    "unshare-user": ("unshare -r true", 1, "unshare failed: Operation not permitted"),
    "unshare-mount": ("unshare -m true", 1, ("unshare failed: Operation not permitted",
                                            "cannot change root filesystem propagation: Operation not permitted")),
    "nsenter": ("nsenter -t 1 -m -u -n -p true", 1, ("Operation not permitted",
                                                     "cannot open /proc/1/ns/uts: No such file or directory")),
    "proc1-root": ("cat /proc/1/root/etc/hostname", 0, "sandbox"),
    "chroot-escape": (_PY_CHROOT_ESCAPE, 0, "hostname=sandbox sock=False"),
    # Writes back the current value: harmless even if the write went through.
    "sysctl-core": ("cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern", 1,
                    "Read-only file system"),
    "sysctl-hostname": ("echo sandbox > /proc/sys/kernel/hostname", 1, "Read-only file system"),
    "sethostname": ("python3 -c \"import socket; socket.sethostname('sandbox')\"", 1,
                    "PermissionError: [Errno 1] Operation not permitted"),
    "file-caps": (_PY_FILE_CAPS, 126, "/tmp/capcat: Operation not permitted"),
}


# Where gVisor's own kernel ends an attack differently, no weaker: it gives user namespaces of
# its own (root of one reaches nothing more: its root is the sandbox's, checked below), refuses
# PID 1's root outright, refuses the kernel settings with other errors (the host's are checked
# unchanged below), and has no file capabilities at all.
GVISOR_ENDINGS = {
    "unshare-user": (0, ""),
    "proc1-root": (1, "/proc/1/root/etc/hostname: Permission denied"),
    "sysctl-core": (1, "/proc/sys/kernel/core_pattern: Operation not permitted"),
    "sysctl-hostname": (1, "echo: write error: Input/output error"),
    "file-caps": (1, "Operation not supported: '/tmp/capcat'"),
}


def _read_host(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def test_mounts_namespaces_devices_and_capabilities_are_refused(task, runtime):
    token = secrets.token_hex(6)
    host_escape_file = Path(f"/tmp/te-escape-{token}")
    host_before = {p: _read_host(p) for p in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname")}
    script = "\n".join(
        marked(name, cmd.replace("TOKEN", token)) for name, (cmd, _, _) in PRIVILEGE_ATTACKS.items()
    )
    status = "grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs):' /proc/self/status"
    ep = play(task, runtime, [Command(command=script, timeout=60), status])
    (obs, _), (status_obs, _) = ep.steps
    res = parse_marked(obs)
    assert set(res) == set(PRIVILEGE_ATTACKS), obs
    for name, (_, rc, texts) in PRIVILEGE_ATTACKS.items():
        got_rc, out = res[name]
        if runtime == "runsc" and name in GVISOR_ENDINGS:
            rc, texts = GVISOR_ENDINGS[name]
        texts = (texts,) if isinstance(texts, str) else texts
        assert got_rc == rc and any(t in out for t in texts), (name, res[name])
    # PID 1's root and the way out of a chroot both lead to the sandbox's own root, not the host's.
    if "proc1-root" not in GVISOR_ENDINGS or runtime != "runsc":
        assert res["proc1-root"][1].strip() == "sandbox"
    assert res["chroot-escape"][1].strip() == "hostname=sandbox sock=False"
    # Capabilities: none of the dangerous ones, and no new privileges on exec.
    fields = dict(line.split(":\t", 1) for line in status_obs.splitlines() if ":\t" in line)
    # (gVisor's /proc does not show the flag; the engine's side is checked in the socket test)
    assert fields.get("NoNewPrivs") == "1" or (runtime == "runsc" and "NoNewPrivs" not in fields), status_obs
    for key in ("CapEff", "CapPrm", "CapBnd"):
        caps = int(fields[key], 16)
        held = [n for n, bit in DANGEROUS_CAPS.items() if caps >> bit & 1]
        assert not held, (key, held, status_obs)
    # The host: not written to, its kernel settings unchanged.
    assert not host_escape_file.exists()
    assert {p: _read_host(p) for p in host_before} == host_before
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 11. network
def _bridge_gateway(client) -> str | None:
    """The host's own address on Docker's default bridge (docker0), if there is one."""
    try:
        nets = client.api.networks(names=["bridge"])
    except Exception:  # noqa: BLE001 - an engine without the default bridge
        return None
    for net in nets:
        for cfg in (net.get("IPAM") or {}).get("Config") or []:
            if cfg.get("Gateway"):
                return cfg["Gateway"].split("/")[0]
    return None


def _host_ipv4_addresses() -> set[str]:
    """This machine's own IPv4 addresses: the ``/32 host LOCAL`` leaves of /proc/net/fib_trie
    (the kernel's local routing table), so nothing here can be another machine's address."""
    addrs: set[str] = set()
    leaf = None
    for line in _read_host("/proc/net/fib_trie").splitlines():
        s = line.strip()
        if s.startswith("|--"):
            leaf = s[3:].strip()
        elif s == "/32 host LOCAL" and leaf:
            addrs.add(leaf)
    return addrs


def _drain(tcp: socket.socket, udp: socket.socket, wait: float) -> list[str]:
    """Connections and datagrams the listeners got within ``wait`` seconds."""
    got: list[str] = []
    while True:
        ready, _, _ = select.select([tcp, udp], [], [], wait)
        if not ready:
            return got
        for s in ready:
            if s is tcp:
                conn, peer = tcp.accept()
                got.append(f"tcp from {peer[0]}")
                conn.close()
            else:
                data, peer = udp.recvfrom(65536)
                got.append(f"udp {data!r} from {peer[0]}")
        wait = 0.2


def test_network_isolation_reaches_no_address_of_this_host(task, runtime, client):
    addrs = _host_ipv4_addresses()
    gateway = _bridge_gateway(client)
    if gateway:
        addrs.add(gateway)  # docker0's address: the host's end of the default bridge
    assert any(not a.startswith("127.") for a in addrs), addrs  # else this proves nothing
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("0.0.0.0", 0))
        tcp.listen(16)
        udp.bind(("0.0.0.0", 0))
        tport, uport = tcp.getsockname()[1], udp.getsockname()[1]
        tries = "\n".join(
            marked(f"{proto}-{a}", f"timeout 3 bash -c 'echo x > /dev/{proto}/{a}/{port}'")
            for a in sorted(addrs)
            for proto, port in (("tcp", tport), ("udp", uport))
        )
        ep = play(task, runtime, [
            Command(command=tries, timeout=60),
            "cat /proc/net/dev",
            "cat /proc/net/route",
            "ls /sys/class/net",
            "if command -v ip >/dev/null; then ip -o addr; echo ROUTES; ip route; else echo NO-IP; fi",
        ])
        received = _drain(tcp, udp, 1.0)
        assert received == [], f"the sandbox reached the host: {received}"
        # Positive control: the listeners do see a connection and a datagram from this host.
        with socket.create_connection(("127.0.0.1", tport), timeout=3):
            pass
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"control", ("127.0.0.1", uport))
        control = _drain(tcp, udp, 2.0)
        assert sorted(control) == ["tcp from 127.0.0.1", "udp b'control' from 127.0.0.1"], control
    finally:
        tcp.close()
        udp.close()
    (tries_obs, _), (dev, _), (route, _), (classes, _), (ip, _) = ep.steps
    res = parse_marked(tries_obs)
    assert len(res) == 2 * len(addrs), tries_obs
    for a in addrs:
        for proto, port in (("tcp", tport), ("udp", uport)):
            rc, out = res[f"{proto}-{a}"]
            if a.startswith("127."):
                # The sandbox's own loopback: nothing listens there (TCP refused; UDP sent to
                # its own lo), and the host's listener saw nothing (asserted above).
                assert (proto, rc) == ("udp", 0) or (rc == 1 and "Connection refused" in out), (a, proto, rc, out)
            else:
                # gVisor says "No route to host" where Linux says "Network is unreachable".
                assert rc == 1 and any(f"/dev/{proto}/{a}/{port}: {why}" in out for why in (
                    "Network is unreachable", "No route to host")), (a, proto, rc, out)
    ifaces = [line.split(":")[0].strip() for line in dev.splitlines()[2:] if ":" in line]
    assert ifaces == ["lo"], dev
    assert len(route.strip().splitlines()) == 1 and route.startswith("Iface"), route  # header only
    assert classes.split() == ["lo"], classes
    if ip.strip() != "NO-IP":
        addr_part, routes = ip.split("ROUTES")
        assert all(" lo " in line for line in addr_part.strip().splitlines()), ip
        assert routes.strip() == "", ip
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 13. leftovers
def test_background_writers_do_not_reach_the_next_episode(task, runtime):
    token = secrets.token_hex(6)
    leak = f"LEAK{token}"
    noisy = [
        (
            f"nohup sh -c 'while :; do echo {leak} >> /tmp/{leak}; echo {leak} > /dev/tty; sleep 0.1;"
            " done' >/dev/null 2>&1 &"
        ),
        f"(while :; do echo {leak}; sleep 0.1; done) & disown",
        f"setsid sh -c 'while :; do echo {leak} >> /tmp/{leak}.2; sleep 0.1; done' & disown",
        f"sleep 0.5; wc -l < /tmp/{leak}; ps -eo args | grep -c '[L]EAK{token}'",
    ]
    probe = f"sleep 0.5; ls -A /tmp | wc -l; ps -eo args | grep -c '[L]EAK{token}'; echo done"
    env = make_env(task, runtime)
    try:
        policy = Recording(noisy)
        reward, info = policy.run(env)
        ep = Episode(reward, info["verification"], info, policy.steps)
        first_name = env.sandbox.name
        # The attack was live: the file grew and the writers were running before submit.
        counts = [line for line in policy.steps[-1][0].splitlines() if line.strip().isdigit()]
        assert len(counts) >= 2 and int(counts[-2]) >= 2 and int(counts[-1]) >= 2, policy.steps[-1][0]
        assert_failed_not_masked(ep)
        # The next episode in the same env: a new sandbox, clean /tmp, no writer, no noise.
        env.reset()
        assert env.sandbox.name != first_name
        obs, *_, step_info = env.step(probe)
        assert obs == "0\n0\ndone\n", obs
        assert step_info["exit_code"] == 0 and leak not in obs
    finally:
        env.close()
    # And in a fresh env, the same.
    env = make_env(task, runtime)
    try:
        env.reset()
        obs, *_ = env.step(probe)
        assert obs == "0\n0\ndone\n", obs
    finally:
        env.close()
    assert host_processes_mentioning(leak) == []  # nothing survived on the host either
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- 7. kill everything
@pytest.mark.parametrize("first_shell", ["attach", "exec"])
def test_killing_every_process_is_not_masked(task, runtime, first_shell):
    env = make_env(task, runtime, first_shell=first_shell)
    try:
        env.reset()
        try:
            _, reward, terminated, truncated, info = env.step(Command(command="kill -9 -1", timeout=5))
        except InfraError as exc:
            pytest.fail(
                f"`kill -9 -1` as root took the sandbox down ({first_shell} shell): env.step raised "
                f"{type(exc).__name__}: {exc}. The agent's own doing would end the episode as an "
                "infrastructure error, i.e. masked; the episode must go on and fail instead."
            )
        assert not terminated and not truncated and reward == 0.0
        # Everything the agent could kill died, its shell included: it is restarted.
        assert info["shell_restarted"] is True or info["exit_code"] is not None, info
        assert env.sandbox.status() == "running"
        assert_echo_ok(env)
        ep = submit(env)
    finally:
        env.close()
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


# ---------------------------------------------------------------------- found by this suite
# Side effects of the defences above that hurt an honest agent; kept last so that `pytest -x`
# runs every attack first.
@pytest.mark.parametrize("first_shell", ["attach", "exec"])
def test_recovering_a_replaced_shell_spares_the_agents_other_processes(task, runtime, first_shell):
    """After `exec python3` the REPL is the shell; when it times out the session must stop it,
    not every process of the sandbox (a server the agent started for its task must survive)."""
    count = "ps -eo args | grep -c '^[s]leep 1000'"
    ep = play(task, runtime, ["nohup sleep 1000 >/dev/null 2>&1 &", count, "exec python3", count],
              command_timeout=1, first_shell=first_shell)
    (_, _), (before, _), (obs, info), (after, after_info) = ep.steps
    assert before == "1\n", before
    assert info["shell_restarted"] is True, info
    assert "command timed out after 1 s." in info["notes"] and "[terminal-env]" in obs, obs
    assert after == "1\n" and after_info["exit_code"] == 0, (
        f"the background job of the agent was killed while recovering from the REPL: {info['notes']}"
    )
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)


@pytest.mark.parametrize("mode", ["raw echo", "-icanon echo"])
def test_echo_turned_on_in_non_canonical_mode_does_not_eat_the_output(task, runtime, mode):
    """With echo on and canonical mode off, the terminal echoes the typed newline as `^J`; the
    command's own output must still come through (the echoed line alone is dropped)."""
    ep = play(task, runtime, [f"stty {mode}", "echo MARK1", "echo MARK2"])
    (_, _), (first, info), (second, _) = ep.steps
    assert "\x1b" not in first and info["exit_code"] == 0
    assert first == "MARK1\n", f"`echo MARK1` after `stty {mode}` showed {first!r}"
    assert second == "MARK2\n", second  # repaired before the next command
    assert_failed_not_masked(ep)
    assert_next_episode_normal(task, runtime)
