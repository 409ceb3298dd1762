"""Multi-container tasks: the services of a task's compose file run around the agent's container.

The task ``tests/data/tasks/harbor-compose`` is Harbor's format: ``main`` (the agent) and ``api``, a
registration service built from the task, with a named volume and a healthcheck. Its tests ask the
service whether the agent's ticket is one it issued, so they need the service up during
verification, and the agent's files alone cannot pass them.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.errors import ConfigError
from terminal_env.models.simple import NopBackend, OracleBackend
from terminal_env.prepare import prepare_task
from terminal_env.sandbox import Sandbox
from terminal_env.sandbox.cleanup import LABEL_MANAGED, gc
from terminal_env.sandbox.stack import FIREWALL_RULE, LABEL_STACK, ServiceStack, StackSpec
from terminal_env.scale.warm import WarmPool
from terminal_env.tasks import load_task
from terminal_env.tasks.compose import check_compose

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests/data/tasks/harbor-compose"

pytestmark = pytest.mark.docker


def left_of(client, key: str, value: str) -> dict[str, list[str]]:
    flt = {"label": f"{key}={value}"}
    return {
        "containers": [c.name for c in client.containers.list(all=True, filters=flt)],
        "networks": [n.name for n in client.networks.list(filters=flt)],
        "volumes": [v.name for v in client.volumes.list(filters=flt)],
    }


NOTHING = {"containers": [], "networks": [], "volumes": []}


@pytest.fixture(scope="module")
def prepared(client, base_image, compose_tool):
    return prepare_task(TASK, client=client)


def test_oracle_passes_nop_fails_and_the_services_go_with_the_episode(client, prepared):
    stacks = []
    for backend, expected in ((OracleBackend(), 1.0), (NopBackend(), 0.0)):
        env = TerminalEnv(prepared, client=client, run_id="compose-e2e")
        try:
            env.reset()
            stack = env.sandbox.stack
            assert stack is not None and stack.started
            stacks.append(stack.project)
            up = left_of(client, LABEL_STACK, stack.project)
            assert len(up["containers"]) == 1 and up["networks"] and up["volumes"] == [
                f"{stack.project}_tickets"]
            reward, info = run_episode(env, backend)
        finally:
            env.close()
        result = info["verification"]
        assert reward == expected, result.message
        if expected:  # the tests asked the service, which was still up during verification
            assert [c.passed for c in result.checks] == [True] * 4
    for project in stacks:
        assert left_of(client, LABEL_STACK, project) == NOTHING
    assert client.containers.list(all=True, filters={"label": "terminal-env.run=compose-e2e"}) == []


class _HostServer:
    """An HTTP server on every address of this host: what the agent must not reach."""

    def __init__(self):
        self.server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.SimpleHTTPRequestHandler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def reach(box, host: str, port: int) -> bool:
    res = box.exec(f"timeout 3 bash -c 'exec 3<>/dev/tcp/{host}/{port}' && echo REACHED", timeout=20)
    return "REACHED" in res.output


def test_the_agent_reaches_its_services_and_nothing_else(client, base_image, prepared):
    host = _HostServer()
    other = client.containers.run(base_image, ["python3", "-m", "http.server", "8000"], detach=True,
                                  labels={LABEL_MANAGED: "1", "terminal-env.task": "compose-bystander"})
    try:
        other.reload()
        bystander = other.attrs["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]
        docker0 = other.attrs["NetworkSettings"]["Networks"]["bridge"]["Gateway"]
        with Sandbox(prepared.spec.sandbox_config(run_id="compose-reach")) as a, \
                Sandbox(prepared.spec.sandbox_config(run_id="compose-reach")) as b:
            net_a = next(iter(a.stack.agent_networks()))
            info = client.api.inspect_network(net_a)
            assert info["Internal"] is True and info["Options"]["com.docker.network.bridge.name"].startswith("te-")
            gateway = info["IPAM"]["Config"][0]["Gateway"]
            b_api = b.exec("getent hosts api | cut -d' ' -f1").output.strip()
            assert re.fullmatch(r"[0-9.]+", b_api)
            # The attack, first shown possible: a container on an internal network of the engine
            # (without the stack's bridge name) reaches the host through its gateway address.
            client.networks.create("te-probe-internal", driver="bridge", internal=True,
                                   labels={LABEL_MANAGED: "1"})
            try:
                probe = client.containers.run(
                    base_image, ["bash", "-c", f"timeout 3 bash -c 'exec 3<>/dev/tcp/{docker0}/{host.port}' "
                                 "&& echo REACHED"], network="te-probe-internal", remove=True)
            finally:
                client.networks.get("te-probe-internal").remove()
            assert b"REACHED" in probe
            # Its own service, by name and at its address, and the alias of the agent's container.
            assert reach(a, "api", 8000)
            own_api = a.exec("getent hosts api | cut -d' ' -f1").output.strip()
            assert reach(a, own_api, 8000) and own_api != b_api
            assert a.exec("getent hosts main").exit_code == 0
            # Nothing else: the host (through the gateway and docker0), a container on the engine's
            # default bridge, and the other episode's service.
            for target, port in ((gateway, host.port), (docker0, host.port), (bystander, 8000), (b_api, 8000)):
                assert not reach(a, target, port), f"the agent reached {target}:{port}"
            # The compose file's published port is not on the host.
            assert not any(p for c in client.containers.list(filters={"label": f"{LABEL_STACK}={a.stack.project}"})
                           for p in (c.attrs["NetworkSettings"]["Ports"] or {}).values() if p)
            # The task's limits hold on the service too.
            (svc,) = client.containers.list(filters={"label": f"{LABEL_STACK}={a.stack.project}"})
            hc = svc.attrs["HostConfig"]
            assert hc["Memory"] == prepared.spec.memory_mb * 2**20 and hc["NanoCpus"] == int(prepared.spec.cpus * 1e9)
            assert hc["PidsLimit"] == prepared.spec.pids_limit and "no-new-privileges" in hc["SecurityOpt"]
            projects = [a.stack.project, b.stack.project]
        for project in projects:
            assert left_of(client, LABEL_STACK, project) == NOTHING
    finally:
        host.close()
        other.remove(force=True)


def test_warm_pool_hands_out_sandboxes_with_their_services(client, prepared):
    with WarmPool(size=1) as pool:
        env = TerminalEnv(prepared, pool=pool, client=client, run_id="compose-warm")
        try:
            assert pool.prefill(env._recipe_key(), env._make_ready, n=1) == 1
            _, info = env.reset()
            assert info["warm"] is True and env.sandbox.stack is not None and env.sandbox.stack.started
            first = env.sandbox.stack.project
            reward, _ = run_episode(env, OracleBackend())
            assert reward == 1.0
        finally:
            env.close()
    assert left_of(client, LABEL_STACK, first) == NOTHING
    assert left_of(client, "terminal-env.run", "compose-warm") == NOTHING


def test_gc_removes_the_services_networks_and_volumes_of_a_dead_owner(client, prepared):
    dead = subprocess.Popen(["true"])
    dead.wait()
    labels = {LABEL_MANAGED: "1", "terminal-env.run": "compose-gc", "terminal-env.task": "compose-gc",
              "terminal-env.owner-host": socket.gethostname(), "terminal-env.owner-pid": str(dead.pid),
              "terminal-env.owner-start": "1",
              "terminal-env.owner-boot": Path("/proc/sys/kernel/random/boot_id").read_text().strip()}
    stack = ServiceStack(prepared.spec.services, project="te-gc-test-0001", labels=labels, cpus=1,
                         memory_mb=256, pids_limit=256, client=client)
    stack.up()  # and then its owner "dies" without taking it down
    left = left_of(client, LABEL_STACK, "te-gc-test-0001")
    assert left["containers"] and left["networks"] and left["volumes"]
    records = gc(client)
    mine = {(r["kind"], r["name"]): r["action"] for r in records if r["task"] == "compose-gc"}
    assert set(k for k, _ in mine) == {"container", "network", "volume"}
    assert set(mine.values()) == {"removed"}
    assert left_of(client, LABEL_STACK, "te-gc-test-0001") == NOTHING


def test_services_under_runsc_are_refused_before_anything_starts(client, prepared, runsc):
    config = prepared.spec.sandbox_config(run_id="compose-runsc", runtime="runsc")
    box = Sandbox(config, client=client)
    with pytest.raises(ConfigError, match="loopback only"):
        box.start()
    assert left_of(client, "terminal-env.run", "compose-runsc") == NOTHING


def test_a_tb1_task_runs_its_services_around_client(client, base_image, compose_tool, tmp_path):
    """Terminal-Bench 1.x: the compose file names `client` (the agent) and the services."""
    d = tmp_path / "tb1-compose"
    shutil.copytree(TASK / "environment" / "api", d / "api")
    (d / "Dockerfile").write_text("FROM terminal-env/base:bookworm-1\nWORKDIR /app\n")
    (d / "task.yaml").write_text((
        "instruction: |\n  POST name=agent to http://api:8000/register and write the ticket it\n"
        "  answers to /app/ticket.txt.\ndifficulty: easy\ncategory: networking\n"))
    (d / "docker-compose.yaml").write_text(
        "services:\n  client:\n    build:\n      dockerfile: Dockerfile\n"
        "    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}\n"
        "    container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}\n"
        "    command: [\"sh\", \"-c\", \"sleep infinity\"]\n"
        "    environment:\n      - TEST_DIR=${T_BENCH_TEST_DIR}\n"
        "    volumes:\n      - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}\n"
        "  api:\n    build: ./api\n    volumes:\n      - tickets:/srv/tickets\n"
        "volumes:\n  tickets: {}\n")
    (d / "run-tests.sh").write_text(
        "#!/bin/bash\ncd $TEST_DIR && python3 -m pytest -rA -p no:cacheprovider test_outputs.py\n")
    (d / "tests").mkdir()
    (d / "tests" / "test_outputs.py").write_text(
        "import urllib.request\nfrom pathlib import Path\n\n\ndef test_ticket():\n"
        "    t = Path('/app/ticket.txt').read_text().strip()\n"
        "    assert urllib.request.urlopen(f'http://api:8000/check?ticket={t}').read() == b'agent'\n")
    (d / "solution.sh").write_text("#!/bin/bash\ncurl -s -X POST -d name=agent http://api:8000/register"
                                   " > /app/ticket.txt\n")
    task = load_task(d)
    assert task.compose_file == d / "docker-compose.yaml"
    rewards = {}
    for name, backend in (("oracle", OracleBackend()), ("nop", NopBackend())):
        env = TerminalEnv(task, client=client, run_id="compose-tb1")
        try:
            rewards[name], _ = run_episode(env, backend)
        finally:
            env.close()
    assert rewards == {"oracle": 1.0, "nop": 0.0}
    assert left_of(client, "terminal-env.run", "compose-tb1") == NOTHING


# ---- what a service may not have (the compose tool's reading, checked) -------------------------


def doc(**api) -> dict:
    return {"services": {"main": {"image": "x"}, "api": {"image": "terminal-env/base:bookworm-1", **api}},
            "volumes": {"data": {}}}


@pytest.mark.parametrize("key,value,words", [
    ("privileged", True, "privileged: refused"),
    ("cap_add", ["SYS_ADMIN"], "cap_add: refused"),
    ("network_mode", "host", "network_mode: refused"),
    ("pid", "host", "pid: refused"),
    ("devices", ["/dev/sda:/dev/sda"], "devices: refused"),
    ("security_opt", ["seccomp:unconfined"], "security_opt: refused"),
    ("volumes", ["/:/host:rw"], "outside the task's directory"),
    ("volumes", ["/etc/shadow:/x:ro"], "outside the task's directory"),
    ("build", {"context": "/"}, "build.context: / is outside"),
    ("build", {"context": "/t/api", "args": {"A": "1"}}, "only context and dockerfile"),
    ("volumes", ["nosuch:/x:rw"], "unknown volume 'nosuch'"),
    ("frobnicate", 1, "frobnicate: not supported"),
])
def test_a_service_that_reaches_into_the_host_is_refused(key, value, words):
    with pytest.raises(ConfigError) as err:
        check_compose(doc(**{key: value}), source=Path("/t/environment/docker-compose.yaml"),
                      agent="main", task_dir=Path("/t"))
    assert words in str(err.value) and "docker-compose.yaml" in str(err.value)


def test_external_networks_and_disguised_volumes_are_refused():
    d = doc()
    d["networks"] = {"outside": {"external": True}}
    d["volumes"] = {"data": {"driver_opts": {"type": "none", "o": "bind", "device": "/"}}}
    with pytest.raises(ConfigError) as err:
        check_compose(d, source=Path("/t/docker-compose.yaml"), agent="main", task_dir=Path("/t"))
    assert "networks.outside: external" in str(err.value) and "volumes.data: external" in str(err.value)


def test_the_agent_service_keeps_its_settings_and_gives_up_the_rest():
    d = doc(ports=[{"published": 8000, "target": 8000}], container_name="db1", depends_on={"main": {}},
            volumes=["/t/environment/conf:/etc/conf:ro", "data:/data:rw"])
    d["services"]["main"].update(environment={"A": "1"}, working_dir="/srv", depends_on={"api": {}},
                                 command=["x"])
    checked = check_compose(d, source=Path("/t/environment/docker-compose.yaml"), agent="main",
                            task_dir=Path("/t"))
    api = checked.services["api"]
    assert "ports" not in api and "container_name" not in api and api["depends_on"] == {}
    assert api["networks"] == {"default": {"aliases": ["db1"]}}
    assert set(checked.services) == {"api"}
    assert checked.agent_env == {"A": "1"} and checked.agent_workdir == "/srv"
    assert checked.agent_networks == {"default": ["main"]}
    assert any("ports" in n for n in checked.notes) and any("command" in n for n in checked.notes)
    d["services"]["main"]["volumes"] = ["/t/data:/data"]
    with pytest.raises(ConfigError, match="takes its files from its image"):
        check_compose(d, source=Path("/t/x.yaml"), agent="main", task_dir=Path("/t"))


def test_a_broken_compose_file_is_a_config_error_naming_it(client, base_image, compose_tool, tmp_path):
    d = tmp_path / "broken-compose"
    shutil.copytree(TASK, d)
    (d / "environment" / "docker-compose.yaml").write_text("services:\n  api:\n    build: ./api\n    ports: [8000\n")
    with pytest.raises(ConfigError, match="docker-compose.yaml"):
        prepare_task(d, client=client)
    (d / "environment" / "docker-compose.yaml").write_text("services:\n  api:\n    image: postgres:16\n")
    with pytest.raises(Exception, match="postgres:16.*nothing is pulled.*--base-map"):
        prepare_task(d, client=client)


def test_the_firewall_rule_is_the_one_install_engine_adds():
    text = (ROOT / "scripts/install-engine.sh").read_text()
    assert f"FIREWALL_RULE=({' '.join(FIREWALL_RULE)})" in text
    if os.geteuid() == 0 and shutil.which("iptables"):
        assert subprocess.run(["iptables", "-C", *FIREWALL_RULE], capture_output=True).returncode == 0


def test_stack_spec_is_plain_data():
    spec = StackSpec(document={"services": {}}, source="x")
    assert StackSpec.model_validate_json(spec.model_dump_json()) == spec
    with pytest.raises(Exception, match="bogus"):
        StackSpec(document={}, bogus=1)


def test_tasks_build_builds_the_services_too(client, base_image, compose_tool, capsys):
    from terminal_env.cli import main

    assert main(["tasks", "build", str(TASK)]) == 0
    assert "(+ api)" in capsys.readouterr().out
