"""The other services of a multi-container task, started around the agent's container.

A task whose environment is a compose file (Harbor's ``environment/docker-compose.yaml``, a
Terminal-Bench 1.x task with more services than its ``client``) runs those services with the
compose tool itself: its own reading of the format (depends_on, healthchecks, volumes, aliases).
What this module adds is what every sandbox has: labels (so ``terminal-env gc`` finds
containers, networks and volumes of a process that died), the task's limits on every service,
networks made for the episode and removed with it, and no route off this machine. The agent's
container is still made by :class:`~terminal_env.sandbox.container.Sandbox` (one way to make it);
it joins the stack's networks under the service's name (``main``, ``client``).

No route outside: each network is ``internal`` (the engine forwards nothing off it) and its bridge
is named ``te-...``, which one host firewall rule (:data:`FIREWALL_RULE`) cuts off from the host
itself: without it a container on an internal network still reaches every service the host
listens on, through the bridge's own address. A task that asks for a network (``network: true``)
gets ordinary bridges (``tn-...``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import docker.errors
import yaml
from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, SandboxError
from .cleanup import LABEL_PREFIX
from .engine import get_client

#: overrides the compose command (e.g. ``docker compose`` or a path to ``docker-compose``)
COMPOSE_ENV = "TERMINAL_ENV_COMPOSE"
#: the label every container, network and volume of one stack carries (its project name)
LABEL_STACK = f"{LABEL_PREFIX}.stack"
#: the host firewall rule that keeps containers on the stacks' internal bridges off the host
FIREWALL_RULE = ["INPUT", "-i", "te-+", "-j", "DROP"]


class StackSpec(BaseModel):
    """A task's services, as the compose tool read them (its ``config`` output) with the agent's
    service taken out and every image built: made once per task (``terminal_env.tasks.compose``),
    run once per episode (:class:`ServiceStack`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the compose document: ``services`` (without the agent's), ``networks``, ``volumes``
    document: dict[str, Any]
    #: the agent's service's networks (keys of ``document["networks"]``) and aliases on each
    agent_networks: dict[str, list[str]] = Field(default_factory=lambda: {"default": ["main"]})
    #: the task's compose file, for messages
    source: str = ""
    #: how long services may take to start and become healthy, s
    start_timeout: float = Field(180.0, gt=0)

    @property
    def services(self) -> list[str]:
        return sorted(self.document.get("services") or {})


def compose_command() -> list[str]:
    """The compose tool: ``$TERMINAL_ENV_COMPOSE``, else Debian's ``docker-compose``, else the
    ``docker compose`` plugin. A :class:`ConfigError` says how to get one."""
    if os.environ.get(COMPOSE_ENV, "").strip():
        return shlex.split(os.environ[COMPOSE_ENV])
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60)
        if probe.returncode == 0:
            return ["docker", "compose"]
    raise ConfigError(
        "multi-container tasks need the compose tool, and neither `docker-compose` nor the "
        "`docker compose` plugin is here: run `bash scripts/install-engine.sh` (it installs "
        f"Debian's docker-compose), or set {COMPOSE_ENV} to the command"
    )


def run_compose(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 600,
                what: str = "compose") -> str:
    """Run the compose tool; its stdout, or a :class:`SandboxError` with the end of its output."""
    argv = [*compose_command(), *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SandboxError(f"{what}: `{shlex.join(argv)}` ran past {timeout:g} s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise SandboxError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def firewall_problem() -> str | None:
    """Why containers on internal bridges could reach this host (None: the rule is in place)."""
    iptables = shutil.which("iptables") or shutil.which("iptables", path="/usr/sbin:/sbin")
    if iptables is None:
        return "iptables is not here to keep the stack's networks off the host"
    check = subprocess.run([iptables, "-C", *FIREWALL_RULE], capture_output=True, timeout=30)
    if check.returncode == 0:
        return None
    if os.geteuid() == 0:  # put it in place ourselves (install-engine.sh does too)
        add = subprocess.run([iptables, "-I", *FIREWALL_RULE], capture_output=True, text=True, timeout=30)
        if add.returncode == 0:
            return None
        return f"`iptables -I {' '.join(FIREWALL_RULE)}` failed: {add.stderr.strip()}"
    return f"the host firewall rule `iptables -I {' '.join(FIREWALL_RULE)}` is missing"


def _escape(value: Any) -> Any:
    """Strings with ``$`` doubled: the compose tool reads the file again and interpolates."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: _escape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape(v) for v in value]
    return value


class ServiceStack:
    """One episode's services: :meth:`up` before the agent's container is made, :meth:`down`
    after it is removed. ``project`` names everything (the agent's container name is used)."""

    def __init__(self, spec: StackSpec, *, project: str, labels: dict[str, str], cpus: float,
                 memory_mb: int, pids_limit: int, network: bool = False, client: Any = None):
        self.spec = spec
        self.client = client
        self.project = project
        self.network = network
        self.labels = {**labels, LABEL_STACK: project}
        self.limits = {"cpus": cpus, "mem_limit": f"{memory_mb}m", "memswap_limit": f"{memory_mb}m",
                       "pids_limit": pids_limit}
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._file: Path | None = None
        self.started = False

    # ------------------------------------------------------------------ the episode's file
    def network_name(self, key: str) -> str:
        return f"{self.project}-{key}"

    def agent_networks(self) -> dict[str, list[str]]:
        """{engine network name: aliases} the agent's container joins."""
        return {self.network_name(k): list(v) for k, v in self.spec.agent_networks.items()}

    def document(self) -> dict[str, Any]:
        """The task's services made this episode's: names, labels, limits, networks."""
        doc = self.spec.document
        prefix = "tn-" if self.network else "te-"
        networks: dict[str, Any] = {}
        keys = set(doc.get("networks") or {}) | set(self.spec.agent_networks) | {"default"}
        for i, key in enumerate(sorted(keys)):
            bridge = f"{prefix}{self.project[-8:]}{i:x}"[:15]
            networks[key] = {
                "name": self.network_name(key), "driver": "bridge", "internal": not self.network,
                "driver_opts": {"com.docker.network.bridge.name": bridge},
                "labels": dict(self.labels),
            }
        volumes = {key: {**(spec or {}), "labels": dict(self.labels)}
                   for key, spec in (doc.get("volumes") or {}).items()}
        services = {}
        for name, svc in (doc.get("services") or {}).items():
            svc = dict(svc)
            svc["labels"] = {**(svc.get("labels") or {}), **self.labels,
                             f"{LABEL_PREFIX}.service": name}
            svc.update(self.limits)
            svc["security_opt"] = ["no-new-privileges"]
            svc.setdefault("networks", {"default": None})
            services[name] = svc
        return _escape({"services": services, "networks": networks, "volumes": volumes})

    def _args(self) -> list[str]:
        assert self._file is not None
        return ["-p", self.project, "-f", str(self._file)]

    # ------------------------------------------------------------------ lifecycle
    def up(self) -> "ServiceStack":
        if not self.network:
            problem = firewall_problem()
            if problem:
                raise ConfigError(
                    f"multi-container task ({self.spec.source}): {problem}; run "
                    "`bash scripts/install-engine.sh` as root once (it adds the rule)")
        self._dir = tempfile.TemporaryDirectory(prefix="terminal-env-stack-")
        self._file = Path(self._dir.name) / "compose.yaml"
        self._file.write_text(yaml.safe_dump(self.document(), sort_keys=True))
        self.started = True  # from here on, down() has something to remove
        t0 = time.monotonic()
        run_compose([*self._args(), "up", "-d", "--no-build", "--no-color"],
                    timeout=self.spec.start_timeout, what=f"starting the services of {self.spec.source}")
        self._wait_healthy(self.spec.start_timeout - (time.monotonic() - t0))
        return self

    def _wait_healthy(self, budget: float) -> None:
        """Every service running, and healthy where it has a healthcheck (the agent's container
        depends on all of them, as Harbor's ``main`` does)."""
        client = self.client or get_client()
        deadline = time.monotonic() + max(budget, 5.0)
        while True:
            pending = []
            for c in client.containers.list(all=True, filters={"label": f"{LABEL_STACK}={self.project}"}):
                state = c.attrs.get("State") or {}
                health = (state.get("Health") or {}).get("Status")
                name = (c.labels or {}).get(f"{LABEL_PREFIX}.service", c.name)
                if state.get("Status") in ("exited", "dead") and (c.attrs.get("HostConfig", {}).get(
                        "RestartPolicy") or {}).get("Name") in (None, "", "no"):
                    if state.get("ExitCode") == 0:
                        continue  # a one-shot service (a seeder) that did its job
                    raise SandboxError(
                        f"service {name!r} of {self.spec.source} exited with code "
                        f"{state.get('ExitCode')} before the episode began:\n{self._logs(c)}")
                if state.get("Status") != "running" or health not in (None, "healthy"):
                    pending.append(f"{name} ({health or state.get('Status')})")
            if not pending:
                return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"services of {self.spec.source} not ready after "
                    f"{self.spec.start_timeout:g} s: {', '.join(pending)}")
            time.sleep(0.25)

    @staticmethod
    def _logs(container: Any) -> str:
        try:
            text = container.logs(tail=15).decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - the logs only decorate the message
            return "(no logs)"
        return text.strip() or "(no output)"

    def down(self) -> None:
        """Remove the services, their networks and volumes (idempotent), by their label through
        the engine: it needs no compose file, and it is what ``terminal-env gc`` does too."""
        if not self.started:
            return
        self.started = False
        try:
            remove_by_label(LABEL_STACK, self.project, self.client)
        finally:
            if self._dir is not None:
                self._dir.cleanup()
                self._dir = None


def remove_by_label(key: str, value: str, client: Any = None) -> None:
    """Remove containers, then networks, then volumes carrying ``key=value``."""
    client = client or get_client()
    flt = {"label": f"{key}={value}"}
    for c in client.containers.list(all=True, filters=flt):
        try:
            c.remove(force=True, v=True)
        except docker.errors.APIError:  # gone already, or busy: gc removes what is left
            pass
    for n in client.networks.list(filters=flt):
        try:
            n.remove()
        except docker.errors.APIError:  # gone already, or busy: gc removes what is left
            pass
    for v in client.volumes.list(filters=flt):
        try:
            v.remove(force=True)
        except docker.errors.APIError:  # gone already, or busy: gc removes what is left
            pass
