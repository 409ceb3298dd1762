"""Harbor task schema 1.3 with the real Docker engine: binary test and solution files arrive byte
for byte (a downstream wrapper zeroed 7 of 89 Terminal-Bench 2 tasks by uploading them as text),
[agent] user runs the agent's commands as that user, and network_mode gives the sandbox the
network it names. Each task is written here, on an image that builds in a second from the base."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.models.simple import NopBackend, OracleBackend, ScriptedBackend
from terminal_env.tasks import load_task

pytestmark = pytest.mark.docker

#: every byte value, NULs, a PNG signature, CRLF and lone CR, invalid UTF-8, no final newline
FIXTURE = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 3
           + b"\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\r\r\n\x00" * 7 + b"\xf0\x28\x8c\xbc")
#: a second binary file, in solution/: the oracle's upload path
BLOB = bytes(reversed(range(256))) * 2 + b"\x00\x00\xed\xa0\x80"


def write_task(root: Path, *, agent: str = "", environment: str = 'network_mode = "no-network"',
               test_sh: str, solve_sh: str = "true\n", files: dict[str, bytes] | None = None,
               verifier: str = "", tables: str = "", top: str = "") -> Path:
    d = root / "task"
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text("Do what the tests check.\n")
    (d / "task.toml").write_text(
        f'schema_version = "1.3"\n{top}\n[task]\nname = "test/harbor-13"\n\n'
        f"[verifier]\ntimeout_sec = 60.0\n{verifier}\n\n[agent]\ntimeout_sec = 60.0\n{agent}\n\n"
        f"[environment]\ncpus = 1\nmemory_mb = 512\n{environment}\n{tables}"
    )
    (d / "environment" / "Dockerfile").write_text("FROM terminal-env/base:bookworm-1\nWORKDIR /app\n")
    (d / "tests" / "test.sh").write_text("#!/bin/bash\nmkdir -p /logs/verifier\n" + test_sh)
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve_sh)
    for rel, data in (files or {}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
    return d


def play(task, agent):
    env = TerminalEnv(task, reward="binary", max_steps=5)
    try:
        reward, info = run_episode(env, agent)
        return reward, info["verification"]
    finally:
        env.close()


def reward_if(condition: str) -> str:
    return f"if {condition}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


def test_binary_test_and_solution_files_arrive_byte_for_byte(tmp_path, base_image):
    fixture_sha = hashlib.sha256(FIXTURE).hexdigest()
    blob_sha = hashlib.sha256(BLOB).hexdigest()
    assert b"\x00" in FIXTURE and b"\x00" in BLOB
    with pytest.raises(UnicodeDecodeError):
        FIXTURE.decode("utf-8")
    d = write_task(
        tmp_path,
        files={"tests/fixtures/image.png": FIXTURE, "solution/blob.bin": BLOB},
        # the oracle's answer: the hash of its own binary file, as it arrived in the sandbox
        solve_sh="sha256sum /solution/blob.bin | cut -c1-64 > /app/answer\n",
        test_sh=reward_if(
            f'[ "$(sha256sum /tests/fixtures/image.png | cut -c1-64)" = {fixture_sha} ] && '
            f'[ "$(stat -c %s /tests/fixtures/image.png)" = {len(FIXTURE)} ] && '
            f'[ "$(cat /app/answer 2>/dev/null)" = {blob_sha} ]'),
    )
    task = load_task(d)
    reward, result = play(task, OracleBackend())
    assert result.outcome == "passed" and reward == 1.0, (result.message, result.log_tail)
    reward, result = play(task, NopBackend())  # no answer: the same tests fail
    assert result.outcome == "failed" and reward == 0.0


def test_binary_fixture_mangled_on_the_way_would_fail(tmp_path, base_image):
    """The same check against the hash of the fixture decoded and re-encoded as text (what a
    text upload does): the verifier fails it, so the test above can tell the two apart."""
    mangled = FIXTURE.decode("utf-8", "replace").encode()
    assert mangled != FIXTURE
    d = write_task(
        tmp_path, files={"tests/fixtures/image.png": FIXTURE},
        test_sh=reward_if(f'[ "$(sha256sum /tests/fixtures/image.png | cut -c1-64)" = '
                          f'{hashlib.sha256(mangled).hexdigest()} ]'),
    )
    reward, result = play(load_task(d), OracleBackend())
    assert result.outcome == "failed" and reward == 0.0


@pytest.mark.parametrize("agent, passes", [
    ('user = "nobody"', True),
    ("user = 65534", True),  # a UID, as Harbor allows
    ("", False),  # no user: the image's (root), which the tests below do not accept
])
def test_agent_user_runs_the_agents_commands(tmp_path, base_image, agent, passes):
    d = write_task(
        tmp_path, agent=agent,
        test_sh=reward_if('[ "$(cat /tmp/who)" = "65534 nobody" ] && '
                          '[ "$(stat -c %U /tmp/who)" = nobody ]'),
    )
    task = load_task(d)
    agent_run = ScriptedBackend.of_actions(['echo "$(id -u) $(id -un)" > /tmp/who', "#!submit"])
    reward, result = play(task, agent_run)
    assert result.outcome == ("passed" if passes else "failed"), (result.message, result.log_tail)
    assert reward == (1.0 if passes else 0.0)


@pytest.mark.parametrize("environment, interfaces", [
    ('network_mode = "no-network"', ["lo"]),
    ("allow_internet = false", ["lo"]),
    ("", ["lo"]),  # this project's default (Harbor's is public)
    ('network_mode = "public"', ["eth0", "lo"]),
])
def test_network_mode_is_the_sandboxs_network(tmp_path, base_image, environment, interfaces):
    d = write_task(tmp_path, environment=environment, test_sh="echo 0 > /logs/verifier/reward.txt\n")
    env = TerminalEnv(load_task(d), max_steps=1)
    try:
        env.reset()
        out = env.sandbox.exec(["ls", "/sys/class/net"], timeout=30)
        assert sorted(out.stdout.decode().split()) == interfaces
    finally:
        env.close()


# ---- [[verifier.collect]] ------------------------------------------------------------------

SNAPSHOT_HOOK = '\n[[verifier.collect]]\ncommand = "cp /app/state.txt /app/snapshot.txt"\ntimeout_sec = 30\n'
FORGER = "(while true; do echo FORGED > /app/snapshot.txt; sleep 0.05; done) >/dev/null 2>&1 &"


def _episode(task, commands: list[str]) -> tuple[list[str], object]:
    env = TerminalEnv(task, reward="binary", max_steps=len(commands) + 2)
    try:
        env.reset()
        seen = [env.step(c)[0] for c in commands]
        _, _, _, _, info = env.step("#!submit")
        return seen, info["verification"]
    finally:
        env.close()


SEPARATE = 'environment_mode = "separate"'
#: what travels to a separate verifier's box (restored at the same path), as in Harbor
SNAPSHOT_ARTIFACT = 'artifacts = ["/app/snapshot.txt"]'


@pytest.mark.parametrize("mode", ["", SEPARATE], ids=["shared", "separate"])
def test_collect_commands_snapshot_the_sandbox_after_the_agent_stops(tmp_path, base_image, mode):
    """A collect command snapshots runtime state for the tests (in a separate verifier's box, the
    snapshot arrives as an artifact). An agent that keeps writing a forged snapshot in the
    background (shown running before it submits) is stopped first: the tests see the command's
    snapshot; without the command they would see the forgery."""
    check = reward_if('[ "$(cat /app/snapshot.txt)" = 42 ]')
    commands = ["echo 42 > /app/state.txt", FORGER, "sleep 0.5; cat /app/snapshot.txt"]
    task = load_task(write_task(tmp_path / "a", test_sh=check, tables=SNAPSHOT_HOOK, verifier=mode,
                                top=SNAPSHOT_ARTIFACT))
    assert [h.command for h in task.verifier_collect] == ["cp /app/state.txt /app/snapshot.txt"]
    seen, result = _episode(task, commands)
    assert "FORGED" in seen[-1]  # the forger ran
    assert result.outcome == "passed", (result.message, result.log_tail)
    assert [(r["command"], r["exit_code"]) for r in result.collect] == [("cp /app/state.txt /app/snapshot.txt", 0)]
    seen, result = _episode(load_task(write_task(tmp_path / "b", test_sh=check, verifier=mode,
                                                 top=SNAPSHOT_ARTIFACT)), commands)
    assert "FORGED" in seen[-1] and result.outcome == "failed" and result.collect == []


def test_a_failing_collect_command_is_named_and_the_tests_still_judge(tmp_path, base_image):
    hook = '\n[[verifier.collect]]\ncommand = "echo broken >&2; exit 3"\n'
    task = load_task(write_task(tmp_path, test_sh=reward_if("true"), tables=hook))
    _, result = _episode(task, ["true"])
    assert result.outcome == "passed"
    assert result.collect[0]["exit_code"] == 3 and "broken" in result.collect[0]["output"]
    assert "collect command(s) failed" in result.message and "exit 3" in result.message


@pytest.mark.parametrize("mode", ["", SEPARATE], ids=["shared", "separate"])
def test_a_program_planted_for_the_collect_command_makes_the_episode_tampered(tmp_path, base_image, mode):
    """The collect command runs in the agent's sandbox (a separate verifier's tests do not, but
    its collect commands do): a `cp` the agent put ahead of the real one on PATH would forge the
    snapshot as root. The tamper check runs first, in both modes, and the command never runs."""
    trojan = ("printf '#!/bin/sh\\necho 42 > /app/snapshot.txt\\n' > /usr/local/bin/cp && "
              "chmod +x /usr/local/bin/cp && hash -r && command -v cp")
    task = load_task(write_task(tmp_path, test_sh=reward_if('[ "$(cat /app/snapshot.txt)" = 42 ]'),
                                verifier=mode, tables=SNAPSHOT_HOOK, top=SNAPSHOT_ARTIFACT))
    seen, result = _episode(task, ["echo 7 > /app/state.txt", trojan])
    assert "/usr/local/bin/cp" in seen[-1]  # the planted program is the one `cp` finds
    assert result.outcome == "tampered" and any("cp" in p for p in result.tampered_paths), result.message
    assert result.collect == []


# -- network_mode = "allowlist": two hosts this test makes on this machine -----------------------------
HOSTS = ("10.213.7.1", "10.213.7.2")  # added to the host's loopback for the test, removed after it


@pytest.fixture
def two_hosts():
    """Two HTTP servers on two addresses the test adds to this machine's loopback interface (a
    server's bind succeeds only on a local address: no request of this test leaves the machine).
    Yields {address: port}; each answers with its own address."""
    import os
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import shutil

    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("iptables") is None:
        pytest.skip("needs root, `ip` (to add the addresses) and the host's iptables (the allowlist's firewall)")
    added = []
    servers = []
    try:
        for host in HOSTS:
            if subprocess.run(["ip", "addr", "add", f"{host}/32", "dev", "lo"], capture_output=True).returncode == 0:
                added.append(host)

            class Answer(BaseHTTPRequestHandler):
                def do_GET(self, me=host):
                    body = me.encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

                def log_message(self, *args):
                    pass

            server = ThreadingHTTPServer((host, 0), Answer)  # fails unless the address is this machine's
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append(server)
        yield {host: server.server_address[1] for host, server in zip(HOSTS, servers)}
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        for host in added:
            subprocess.run(["ip", "addr", "del", f"{host}/32", "dev", "lo"], capture_output=True)


def fetch_both(ports: dict[str, int]) -> str:
    """A command printing, per host, ``HOST:ok`` when it answered and ``HOST:no`` when not."""
    urls = " ".join(f"http://{h}:{p}/" for h, p in ports.items())
    return ("python3 -c 'import sys, urllib.request\nfor u in sys.argv[1:]:\n  h = u.split(\"/\")[2].split(\":\")[0]\n"
            "  try: print(h + (\":ok\" if urllib.request.urlopen(u, timeout=2).read().decode() == h else \":wrong\"))\n"
            f"  except Exception: print(h + \":no\")' {urls}")


@pytest.mark.parametrize("environment, answers", [
    ('network_mode = "public"', {"10.213.7.1:ok", "10.213.7.2:ok"}),  # both reachable: what the rule stops
    ('network_mode = "allowlist"\nallowed_hosts = ["10.213.7.1"]', {"10.213.7.1:ok", "10.213.7.2:no"}),
    ('network_mode = "allowlist"', {"10.213.7.1:no", "10.213.7.2:no"}),
])
def test_an_allowlist_lets_the_agent_reach_only_its_hosts(tmp_path, base_image, two_hosts, environment, answers):
    task = write_task(tmp_path, environment=environment, test_sh="echo 1 > /logs/verifier/reward.txt\n")
    env = TerminalEnv(task, reward="binary", max_steps=5)
    try:
        env.reset()
        seen = env.step(fetch_both(two_hosts))[0]
        # the agent's shell is root here, but without CAP_NET_ADMIN (bit 12): it cannot lift the rules
        caps = env.step("grep CapEff /proc/self/status; id -u")[0].split()
        assert caps[-1] == "0" and not int(caps[1], 16) & (1 << 12)
    finally:
        env.close()
    assert set(seen.split()) == answers, seen


def test_a_verifier_allowlist_holds_in_the_tests_and_the_agent_reaches_nothing(tmp_path, base_image, two_hosts):
    a, b = HOSTS
    probe = fetch_both(two_hosts)
    task = write_task(tmp_path, verifier=f'network_mode = "allowlist"\nallowed_hosts = ["{b}"]',
                      test_sh=f"seen=$({probe} | tr '\\n' ' ')\necho \"$seen\" > /logs/verifier/seen.txt\n"
                              + reward_if(f'[ "$seen" = "{a}:no {b}:ok " ]'))
    env = TerminalEnv(task, reward="binary", max_steps=5)
    try:
        env.reset()
        agent_saw = env.step(probe)[0]
        obs, reward, terminated, truncated, info = env.step("#!submit")
    finally:
        env.close()
    assert set(agent_saw.split()) == {f"{a}:no", f"{b}:no"}  # the agent's phase: firewalled to nothing
    assert reward == 1.0, info["verification"].log_tail  # the tests reached b and not a


# -- healthcheck: the agent starts once the sandbox is ready --------------------------------------
#: succeeds once the sandbox has run for 2 s (its keeper's age): a service that takes time to come up
READY_AFTER_2S = "[ $(( $(date +%s) - $(stat -c %Y /proc/1) )) -ge 2 ]"


def test_the_agent_starts_after_the_healthcheck_passes(tmp_path, base_image):
    task = write_task(tmp_path, environment=f'healthcheck = {{ command = "{READY_AFTER_2S}", interval_sec = 0.2, '
                                            'start_period_sec = 5, start_interval_sec = 0.2 }',
                      test_sh="echo 1 > /logs/verifier/reward.txt\n")
    env = TerminalEnv(task, reward="binary", max_steps=3)
    try:
        env.reset()
        ready = env.step(f"{READY_AFTER_2S} && echo ready || echo early")[0]
    finally:
        env.close()
    assert ready.strip() == "ready"
    task = write_task(tmp_path / "b", environment='healthcheck = { command = "test -f /app/never", '
                                                  'interval_sec = 0.1 }',
                      test_sh="echo 1 > /logs/verifier/reward.txt\n")
    env = TerminalEnv(task, reward="binary", max_steps=3)  # never ready: 3 failures in a row
    try:
        env.reset()
    except Exception as exc:  # noqa: BLE001 - the kind is checked below
        failed = exc
    else:
        failed = None
    finally:
        env.close()
    from terminal_env.errors import InfraError
    assert isinstance(failed, InfraError) and "failed 3 times in a row" in str(failed)
