"""One Docker container per episode: limits, labels, no network by default, exec, files, cleanup.

The sandbox layer knows nothing about terminals or tasks. It starts a container whose PID 1 is a
small bash keeper that idles, reaps orphans and cannot be killed from inside (see ``KEEPER``), runs stateless commands in it with the timeout
enforced *inside* the container, copies files in and out, and removes the container however the
owning process ends (context manager, ``atexit``, SIGTERM/SIGHUP, and ``terminal-env gc`` for the
cases no handler survives, such as SIGKILL).
"""

from __future__ import annotations

import io
import os
import re
import secrets
import select
import shlex
import stat
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal, Mapping

import docker
import docker.errors
import requests
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import (
    ConfigError,
    EngineUnavailableError,
    ImageNotFoundError,
    SandboxError,
    SandboxGoneError,
)
from ..output import OutputBuffer, Sentinel
from . import cleanup, egress
from .cgroups import cgroup_files
from .cleanup import LABEL_MANAGED, LABEL_PREFIX
from .disk import DiskGuard
from .dockerio import AttachSocket, ExecSocket
from .engine import get_client, require_runtimes
from .hostview import HostView
from .runtimes import Runtime, runtime_of
from .stack import ServiceStack, StackSpec

#: what follows the first shell's death marker prefix (its token): the shell's exit status
_DEATH_TAIL = re.compile(rb"(\d+)\x1f")

#: environment variable that sets the default of ``first_shell`` (``auto``, ``exec``, ``attach``)
FIRST_SHELL_ENV = "TERMINAL_ENV_FIRST_SHELL"
FirstShellMode = Literal["auto", "exec", "attach"]

# PID 1 of every sandbox is a keeper written in bash (the session needs bash anyway), run
# directly (no init process in between). As the init of the container's pid namespace the kernel
# drops every signal sent to it from inside that it has no handler for, SIGKILL and SIGSTOP
# included, so not even a root agent can kill it and stop the container (`kill -9 -1` spares it).
# Every catchable signal gets the harmless handler `:` (bash would otherwise die of some of
# them; a handler, unlike an ignore, is reset by `exec`, so the shells it starts get the default
# dispositions). It idles on a pipe it holds both ends of (`read -t` never sees data or EOF) and
# wakes every second to reap orphans that were reparented to it (`wait`). After it started it
# never forks or runs a program again, so replacing /usr/bin/sleep or any other tool cannot put
# the agent's code into the process the verifier spares.
_KEEPER_SIGNALS = (
    "HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM TERM STKFLT TSTP TTIN TTOU "
    "XCPU XFSZ VTALRM PROF WINCH IO PWR SYS"
)
_KEEPER_PIPE = "exec 9<> <(:)"  # made at start, before the agent could exhaust the pids
_KEEPER_IDLE = "while :; do read -r -t 1 -u 9 _; wait; done"
KEEPER = f"trap : {_KEEPER_SIGNALS}; {_KEEPER_PIPE}; {_KEEPER_IDLE}"

# In ``attach`` mode the keeper first runs the agent's first shell in the foreground on the
# container's TTY; when that shell exits it prints a marker (token, exit code) that the session
# reads as "the shell died", then idles like any keeper. Waiting for its foreground child, bash
# reaps every child, adopted orphans included.
_FIRST_SHELL_WRAPPER = (
    f"trap : {_KEEPER_SIGNALS}; {_KEEPER_PIPE}; "
    "TERM=xterm-256color PAGER=cat GIT_PAGER=cat LANG=C.UTF-8 bash --noprofile --norc --noediting -i 9<&-; "
    "printf '\\036TX%s:%d\\037\\n' {token} $?; "
    f"{_KEEPER_IDLE}"
)


def default_first_shell() -> FirstShellMode:
    """``$TERMINAL_ENV_FIRST_SHELL`` if set (``auto``, ``exec`` or ``attach``), else ``auto``."""
    value = os.environ.get(FIRST_SHELL_ENV, "").strip().lower() or "auto"
    if value not in ("auto", "exec", "attach"):
        raise ConfigError(f"{FIRST_SHELL_ENV} must be 'auto', 'exec' or 'attach', got {value!r}")
    return value  # type: ignore[return-value]


def _runs_as_root(user: str | None) -> bool:
    return (user or "root").split(":")[0] in ("root", "0")


def use_attach(mode: str, user: str | None) -> bool:
    """Whether the first shell is the container's main process. ``auto`` picks it for root
    sandboxes only: a user made by a setup command would not exist yet when the engine starts
    the container, and the keeper would run as that user. Those keep the ``exec`` shell.

    >>> use_attach("auto", None), use_attach("auto", "nobody"), use_attach("attach", "nobody")
    (True, False, True)
    """
    return mode == "attach" or (mode == "auto" and _runs_as_root(user))


@dataclass
class FirstShell:
    """The shell a container in ``attach`` mode starts with, and the connection to its TTY.

    A session claims it once (:meth:`Sandbox.take_first_shell`); later shells are exec'd.
    """

    sock: AttachSocket
    #: the marker the container's main process prints when the first shell exits
    death: Sentinel
    shell: str = "bash"


class SandboxLimits(BaseModel):
    """The limits of a sandbox, declared once: a task (:class:`~terminal_env.task.TaskSpec`) and a
    container (:class:`SandboxConfig`) both have exactly these, with the same bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float = Field(1.0, gt=0, le=256, description="CPU share (docker --cpus).")
    memory_mb: int = Field(2048, ge=16, description="Memory limit; no swap beyond it (OOM kill).")
    pids_limit: int = Field(1024, ge=16, description="Maximum number of processes.")
    storage_mb: int | None = Field(
        None,
        ge=1,
        description=(
            "Disk budget of the container's writable layer, MB (None: unlimited). Enforced by a "
            "watcher (terminal_env.sandbox.disk), not an engine quota: over it, the sandbox's processes "
            "are killed and the episode ends as the agent's failure."
        ),
    )
    network: bool = Field(False, description="Give the container a network (default: only lo).")
    allowed_hosts: list[str] | None = Field(
        None, description=(
            "With network: the only hosts it may reach (names, IP addresses, CIDR ranges; Harbor's "
            "network_mode = \"allowlist\"), enforced by a firewall in its namespace (sandbox/egress.py)."))
    runtime: str | None = Field(None, description="OCI runtime, e.g. 'runsc' for gVisor; None: the engine's default.")

    @model_validator(mode="after")
    def _allowlist_needs_a_network(self) -> "SandboxLimits":
        if self.allowed_hosts is not None and not self.network:
            raise ValueError("allowed_hosts needs network=True (the hosts are reached over the network)")
        return self

    def limits(self) -> dict[str, Any]:
        """Just the limits (to hand from a task to its container)."""
        return {name: getattr(self, name) for name in SandboxLimits.model_fields}


class SandboxConfig(SandboxLimits):
    """What a sandbox container looks like. Validated once, before anything starts."""

    image: str = Field(description="Image reference; must exist locally (nothing is pulled).")
    workdir: str | None = Field(None, description="Working directory; default: the image's.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    user: str | None = Field(None, description="User the agent's shell runs as; default: image's.")
    hostname: str = "sandbox"
    run_id: str = Field("adhoc", description="Run identifier, recorded as a label.")
    task: str = Field("adhoc", description="Task name, recorded as a label.")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels.")
    first_shell: FirstShellMode = Field(
        default_factory=default_first_shell,
        description=(
            "How the agent's first shell starts. 'exec': the container idles (`sleep infinity`) "
            "and the session starts bash with `docker exec`. 'attach': the container's main "
            "process runs bash on the container's TTY and the session attaches to it, which "
            "saves the exec on the cold path (later shells are exec'd). 'auto': attach when the "
            f"sandbox runs as root, else exec. Default: ${FIRST_SHELL_ENV} or 'auto'."
        ),
    )

    services: StackSpec | None = Field(
        None,
        description=(
            "The task's other services (a multi-container task): started by the compose tool on "
            "networks of the episode's own before this container, which joins them; removed with it."
        ),
    )
    networks: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Existing engine networks to join, {name: aliases} (e.g. another sandbox's services).",
    )

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"workdir must be absolute, got {v!r}")
        return v


@dataclass
class ExecResult:
    """Result of a stateless command run in the sandbox."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration: float
    stdout_total: int = 0
    stderr_total: int = 0

    @property
    def output(self) -> str:
        return (self.stdout + self.stderr).decode("utf-8", errors="replace")


@dataclass
class _Timing:
    create: float = 0.0
    start: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


def _container_name(task: str) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_.-]+", "-", task).strip("-.")[:40] or "task"
    return f"te-{slug}-{secrets.token_hex(4)}"


class Sandbox:
    """A running container for one episode.

    Use it as a context manager (``with Sandbox(cfg) as sb: sb.exec("echo hi")``) or call
    ``start()`` and ``remove()``.
    """

    #: exit code of coreutils ``timeout`` when the limit was hit
    TIMEOUT_EXIT = 124

    def __init__(self, config: SandboxConfig, client: docker.DockerClient | None = None):
        self.config = config
        self.client = client or get_client()
        self.container: Any = None
        self.name = _container_name(config.task)
        self.timing = _Timing()
        self._removed = False
        self._first_shell: FirstShell | None = None
        #: the disk budget's watcher (terminal_env.sandbox.disk.DiskGuard), when storage_mb is set
        self.disk: DiskGuard | None = None
        self._oom_file: str | None = None  # the memory cgroup file with its oom_kill count
        self._runtime: Runtime | None = None
        self._started_wall: float | None = None  # time.time() when the container was started
        #: the task's other services (None for a single-container task)
        self.stack: ServiceStack | None = None

    @property
    def runtime(self) -> Runtime:
        """The facts about the OCI runtime this sandbox runs under (:mod:`.runtimes`): the
        configured one, else the engine's default."""
        if self._runtime is None:
            self._runtime = runtime_of(self.config.runtime, self.client)
        return self._runtime

    # ------------------------------------------------------------------ lifecycle
    def _create(self, api: Any, host: dict[str, Any], create: dict[str, Any], runtime_hint: str) -> str:
        """Create the container in the engine and register it (see :func:`cleanup.creating`)."""
        cfg = self.config
        try:
            cid = api.create_container(host_config=api.create_host_config(**host), **create)["Id"]
        except docker.errors.ImageNotFound:
            self._stop_stack()
            raise ImageNotFoundError(
                f"image {cfg.image!r} is not in the local Docker engine and nothing is pulled. "
                "Build it (`docker build -t ...`) or, for the project's base image, run "
                "`terminal-env images bootstrap`."
            ) from None
        except docker.errors.APIError as exc:
            self._stop_stack()
            text = str(exc.explanation or exc)
            if cfg.runtime and "runtime" in text.lower():
                require_runtimes(self.client, [cfg.runtime])  # a ConfigError naming what to do
            hint = f".{runtime_hint}" if runtime_hint and "runtime" in text.lower() else ""
            raise SandboxError(
                f"could not create a container from {cfg.image!r}: {text}{hint}"
            ) from None
        # A model without the inspect docker-py would do: reload() fills attrs when needed.
        self.container = self.client.containers.prepare_model({"Id": cid, "Name": f"/{self.name}"})
        # Registered before start: if start fails or we are killed now, cleanup still finds it.
        cleanup.register(self)
        return cid

    def start(self) -> "Sandbox":
        """Create and start the container: two engine calls, nothing else.

        On the cold path every round trip counts (a reset should cost little more than the
        engine's own create + start), so there is no image inspect first (create answers 404
        "No such image" by itself), no inspect after create (docker-py's high-level
        ``containers.create`` does one), and no ``mkdir`` exec for the working directory (the
        engine creates a missing ``WorkingDir`` itself, owned by root with mode 0755, exactly as
        ``mkdir -p`` as root did; a path that exists and is not a directory fails the create).
        """
        cfg = self.config
        api = self.client.api
        labels = {
            LABEL_MANAGED: "1",
            f"{LABEL_PREFIX}.run": cfg.run_id,
            f"{LABEL_PREFIX}.task": cfg.task,
            **cleanup.owner_labels(),
            **cfg.labels,
        }
        host: dict[str, Any] = dict(
            nano_cpus=int(cfg.cpus * 1e9),
            mem_limit=f"{cfg.memory_mb}m",
            memswap_limit=f"{cfg.memory_mb}m",
            pids_limit=self.runtime.process_limits(cfg.pids_limit)[0],
            security_opt=["no-new-privileges"],
            # Of the engine's default capabilities, these two serve no terminal task (device
            # nodes are refused by the device cgroup anyway; raw sockets need a network).
            cap_drop=["MKNOD", "NET_RAW"],
        )
        networks = dict(cfg.networks)
        if cfg.services is not None:
            networks.update(self._start_stack(labels))
        if networks:
            first = next(iter(networks))
            host["network_mode"] = first
        elif not cfg.network:
            host["network_mode"] = "none"
        if cfg.runtime:
            host["runtime"] = cfg.runtime
        host.update(self.runtime.container_options())
        create: dict[str, Any] = dict(
            image=cfg.image,
            entrypoint=["bash", "-c", KEEPER],
            command=[],
            name=self.name,
            hostname=cfg.hostname,
            labels=labels,
            detach=True,
            environment=dict(cfg.env),
            stop_signal="SIGKILL",
        )
        if cfg.workdir:
            create["working_dir"] = cfg.workdir
        attach = use_attach(cfg.first_shell, cfg.user)
        token = secrets.token_hex(8)
        if attach:
            # The main process is the first shell's wrapper, with a TTY and open stdin. It runs
            # as the agent's user (as the exec'd shell would). The log driver keeps nothing: the
            # terminal's output is read through the attach stream only.
            create.update(
                entrypoint=["bash", "-c", _FIRST_SHELL_WRAPPER.replace("{token}", token)],
                tty=True,
                stdin_open=True,
            )
            if cfg.user:
                create["user"] = cfg.user
            host["log_config"] = {"type": "none"}
        runtime_hint = ""
        if cfg.runtime:
            runtime_hint = (
                f" Is the runtime {cfg.runtime!r} registered in the engine's daemon.json?"
            )
        if networks:
            create["networking_config"] = api.create_networking_config(
                {first: api.create_endpoint_config(aliases=networks[first] or None)})
        t0 = time.perf_counter()
        with cleanup.creating():  # a signal now waits for this container to be registered
            cid = self._create(api, host, create, runtime_hint)
        for name, aliases in list(networks.items())[1:]:
            try:
                api.connect_container_to_network(cid, name, aliases=aliases or None)
            except docker.errors.APIError as exc:
                self.remove()
                raise SandboxError(f"could not join network {name!r}: {exc.explanation or exc}") from None
        if attach:
            # Attached before start (like `docker start -a`): no output of the shell is missed,
            # including the marker of a shell that could not even start.
            try:
                sock = AttachSocket(api, cid)
            except (docker.errors.APIError, requests.RequestException, OSError) as exc:
                self.remove()
                raise SandboxError(f"could not attach to a container from {cfg.image!r}: {exc}") from None
            self._first_shell = FirstShell(
                sock, Sentinel(b"\x1eTX" + token.encode() + b":", _DEATH_TAIL)
            )
        t1 = time.perf_counter()
        self._started_wall = time.time()
        try:
            api.start(cid)
        except docker.errors.APIError as exc:
            self.remove()
            text = str(exc.explanation or exc)
            if "bash" in text and ("not found" in text or "no such file" in text.lower()):
                # The image's mistake, not the infrastructure's: retrying cannot help.
                raise ConfigError(
                    f"the image {cfg.image!r} has no `bash` on its PATH, which every sandbox needs "
                    "(the keeper and the agent's shell are bash). Install it in the image, e.g. "
                    "`RUN apt-get install -y bash` or `RUN apk add bash`."
                ) from None
            raise SandboxError(
                f"could not start a container from {cfg.image!r}: {text}.{runtime_hint}"
            ) from None
        self.timing.create = t1 - t0
        self.timing.start = time.perf_counter() - t1
        if cfg.allowed_hosts is not None:
            try:
                egress.restrict(self, list(cfg.allowed_hosts))
            except BaseException:
                self.remove()
                raise
        if cfg.storage_mb:
            self.disk = DiskGuard(self, cfg.storage_mb).start()
        return self

    def _start_stack(self, labels: dict[str, str]) -> dict[str, list[str]]:
        """Start the task's other services; {network: aliases} for this container to join."""
        cfg = self.config
        assert cfg.services is not None
        if not self.runtime.bridge_networks:
            raise ConfigError(
                f"task {cfg.task!r} has services ({cfg.services.source}), which talk over a network, "
                f"and sandboxes under {self.runtime.name} have loopback only here (it is registered "
                "with --network=none); run this task under runc (no --runtime)")
        project = re.sub(r"[^a-z0-9_-]", "-", self.name.lower())
        self.stack = ServiceStack(
            cfg.services, project=project, labels=labels, cpus=cfg.cpus, memory_mb=cfg.memory_mb,
            pids_limit=cfg.pids_limit, network=cfg.network, client=self.client)
        cleanup.register(self)  # the services are removed however this process ends
        try:
            self.stack.up()
        except BaseException:
            self._stop_stack()
            raise
        return self.stack.agent_networks()

    def _stop_stack(self) -> None:
        if self.stack is not None:
            self.stack.down()
        if self.container is None:
            cleanup.unregister(self)

    @property
    def disk_exceeded(self) -> bool:
        """The agent's writes went over ``storage_mb`` (its processes were killed then)."""
        return self.disk is not None and self.disk.tripped

    def died_of_memory(self) -> bool:
        """The container has stopped and the kernel's out-of-memory killer had a hand in it (the
        agent can raise the keeper's ``oom_score_adj`` and then exhaust the memory limit)."""
        if self.container is None or self._removed:
            return False
        deadline = time.monotonic() + 3.0
        while True:
            try:
                self.container.reload()
            except docker.errors.APIError:
                return False
            state = self.container.attrs.get("State") or {}
            if state.get("Running"):
                return False
            if state.get("OOMKilled"):
                return True
            # A SIGKILL's status: the engine can record the OOM mark a moment after the exit
            # (seen under gVisor), so look again for a little while.
            if state.get("ExitCode") != 137 or time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def stopped_by_agent(self) -> str | None:
        """Why this stopped container is the agent's doing (a message), or None (then it is the
        infrastructure's and the episode is masked): the out-of-memory killer took its main
        process, or, under a runtime that lets root inside signal PID 1 (gVisor), the main
        process died without the engine having killed it."""
        if self.died_of_memory():
            return (
                f"the sandbox ran out of memory (limit {self.config.memory_mb} MB) and the kernel "
                "killed its main process, which stopped it"
            )
        if self.runtime.init_killable_from_inside and self._died_without_engine_kill():
            return (
                "the sandbox's main process was killed from inside the sandbox (under "
                f"{self.runtime.name} root can signal it), which stopped it"
            )
        return None

    def _died_without_engine_kill(self, wait: float = 2.0) -> bool:
        """The engine's events show the container dying, and no kill, stop or restart of it by
        the engine (an operator's `docker kill`, our own removal; a restarted engine forgets its
        events, so no death is seen and the stop stays the infrastructure's)."""
        if self.container is None or self._removed or self._started_wall is None:
            return False
        deadline = time.monotonic() + wait
        while True:
            try:
                events = list(self.client.api.events(
                    since=int(self._started_wall) - 1, until=int(time.time()) + 1,
                    filters={"container": self.container.id, "type": "container"}, decode=True,
                ))
            except (docker.errors.APIError, requests.RequestException):
                return False
            actions = {str(e.get("Action") or e.get("status") or "").split(":")[0] for e in events}
            if "die" in actions:
                return not actions & {"kill", "stop", "restart", "destroy"}
            if time.monotonic() > deadline:  # the die event may lag a moment behind the exit
                return False
            time.sleep(0.1)

    def take_first_shell(self) -> FirstShell | None:
        """The container's own first shell (``attach`` mode), once; None if there is none left."""
        first, self._first_shell = self._first_shell, None
        return first

    @property
    def id(self) -> str:
        if self.container is None:
            raise SandboxError("the sandbox is not started; call start() or use it as a context")
        return self.container.id

    def oom_kills(self) -> int | None:
        """How many processes the kernel killed in this container for want of memory (read
        from its memory cgroup on the host; None where that is not readable here)."""
        if self.container is None:
            return None
        known = self._oom_file  # found once, then read on every command
        for path in (known,) if known else cgroup_files(
            self.container.id, "memory", "memory.oom_control", "memory.events"
        ):
            try:  # read on every action: os-level, without a Python file object
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    text = os.read(fd, 8192)
                finally:
                    os.close(fd)
                for line in text.splitlines():
                    name, _, value = line.partition(b" ")
                    if name == b"oom_kill":
                        self._oom_file = path
                        return int(value)
            except (OSError, ValueError):
                continue
        return None

    def status(self) -> str:
        """The engine's state of the container ('running', 'exited', ... or 'removed')."""
        if self.container is None:
            return "created"
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return "removed"
        return self.container.status

    def watch_disk(self) -> None:
        """Watch the disk budget again (after a verification stopped the watcher: the next step
        of a multi-step task writes as the agent again); what was written before still counts."""
        if self.disk is not None:
            self.disk.stop()
            self.disk = DiskGuard(self, self.disk.limit_mb).start()

    def check_alive(self) -> None:
        """Raise :class:`SandboxGoneError` naming the cause if the container is not running."""
        state = self.status()
        if state == "running":
            return
        detail = ""
        if state != "removed":
            st = self.container.attrs.get("State", {})
            detail = f" (exit code {st.get('ExitCode')}, OOM killed: {st.get('OOMKilled')})"
        raise SandboxGoneError(
            f"sandbox container {self.name} is {state}{detail}: it was stopped or removed from "
            "outside the episode. Reset the environment to start a new sandbox."
        )

    def stop(self) -> None:
        if self.container is not None and not self._removed:
            try:
                self.container.kill()
            except docker.errors.APIError:
                pass

    def remove(self) -> None:
        """Remove the container and the task's services (idempotent, never raises for a
        container already gone)."""
        if self.container is None or self._removed:
            self._stop_stack()
            return
        self._removed = True
        if self.disk is not None:
            self.disk.stop()
        cleanup.unregister(self)
        first = self.take_first_shell()
        if first is not None:
            first.sock.close()
        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                raise SandboxError(f"could not remove container {self.name}: {exc}") from None
        except (requests.RequestException, OSError) as exc:
            # The engine is unreachable (stopped, restarting): keep the container on the books so
            # that the exit handler retries, and say how to remove it later.
            self._removed = False
            cleanup.register(self)
            raise EngineUnavailableError(
                f"could not remove container {self.name}: the Docker engine is unreachable "
                f"({type(exc).__name__}). It is retried when this process exits; once the engine "
                "answers again, `terminal-env gc` removes it too."
            ) from None
        self._stop_stack()

    close = remove

    def __enter__(self) -> "Sandbox":
        if self.container is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    # ------------------------------------------------------------------ commands
    def exec(
        self,
        cmd: str | list[str],
        *,
        timeout: float | None = 600,
        user: str | None = None,
        workdir: str | None = None,
        env: Mapping[str, str] | None = None,
        output_limit: int = 1024 * 1024,
    ) -> ExecResult:
        """Run a command to completion, statelessly (a string runs under ``bash -c``).

        The timeout is enforced inside the container with coreutils ``timeout`` (TERM, then KILL
        5 s later), so the process cannot outlive it even if this client goes away. A timed-out
        command returns ``timed_out=True`` and exit code 124. Output keeps head and tail up to
        ``output_limit`` bytes per stream.
        """
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if timeout is not None:
            argv = ["timeout", "-k", "5", f"{max(timeout, 0.01):.3f}", *argv]
        api = self.client.api
        t0 = time.perf_counter()
        try:
            exec_id = api.exec_create(
                self.id,
                argv,
                stdout=True,
                stderr=True,
                user=user if user is not None else (self.config.user or ""),
                workdir=workdir,
                environment=dict(env) if env else None,
            )["Id"]
            out = OutputBuffer(output_limit // 2, output_limit // 2)
            err = OutputBuffer(output_limit // 2, output_limit // 2)
            with ExecSocket(api, exec_id, tty=False) as conn:
                frames = conn.frames()
                while self._exec_readable(conn, exec_id):
                    frame = next(frames, None)
                    if frame is None:
                        break
                    (err if frame[0] == 2 else out).feed(frame[1])
            code = api.exec_inspect(exec_id).get("ExitCode")
        except docker.errors.NotFound:
            self.check_alive()
            raise
        except docker.errors.APIError as exc:
            self.check_alive()
            raise SandboxError(f"exec in {self.name} failed: {exc.explanation or exc}") from None
        code = -1 if code is None else int(code)
        duration = time.perf_counter() - t0
        return ExecResult(
            exit_code=code,
            stdout=out.getvalue(),
            stderr=err.getvalue(),
            # 124: TERM at the limit worked; 137: KILL was needed. A command that exits 124/137
            # on its own before the limit is not a timeout.
            timed_out=timeout is not None and code in (124, 137) and duration >= timeout * 0.98,
            duration=duration,
            stdout_total=out.total,
            stderr_total=err.total,
        )

    #: seconds without output after which exec looks whether its command is still running
    EXEC_IDLE_CHECK = 10.0

    def _exec_readable(self, conn: ExecSocket, exec_id: str) -> bool:
        """Wait until the exec's stream has data or its end; False when the command ended (or its
        container died) and the engine left the stream open, which it does when the container
        dies under an exec: reading on would wait forever."""
        while True:
            if conn.pending():  # read with the response's head: already here
                return True
            ready, _, _ = select.select([conn.raw], [], [], self.EXEC_IDLE_CHECK)
            if ready:
                return True
            try:
                if not self.client.api.exec_inspect(exec_id).get("Running"):
                    # ended: what it wrote is in the stream already, or never comes
                    return bool(select.select([conn.raw], [], [], 1.0)[0])
            except docker.errors.NotFound:
                return False

    # ------------------------------------------------------------------ files
    def write_files(
        self,
        files: Mapping[str, bytes | str],
        *,
        mode: int = 0o644,
        uid: int = 0,
        gid: int = 0,
        dir_mode: int | None = None,
        modes: Mapping[str, int] | None = None,
    ) -> None:
        """Write files given as {absolute path: content}, in one archive; parent directories are
        created. ``modes``: {path: mode} for files whose mode is not ``mode``."""
        if not files:
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            seen_dirs: set[str] = set()
            for path, content in files.items():
                p = PurePosixPath(path)
                if not p.is_absolute():
                    raise ConfigError(f"write_files needs absolute paths, got {path!r}")
                for parent in reversed(p.parents[:-1]):
                    if dir_mode is None:
                        break  # put_archive makes missing parents; existing ones keep modes
                    if str(parent) not in seen_dirs:
                        seen_dirs.add(str(parent))
                        info = tarfile.TarInfo(str(parent).lstrip("/"))
                        info.type, info.mode = tarfile.DIRTYPE, dir_mode
                        info.mtime = int(time.time())
                        tar.addfile(info)
                data = content.encode() if isinstance(content, str) else content
                info = tarfile.TarInfo(str(p).lstrip("/"))
                info.size, info.uid, info.gid = len(data), uid, gid
                info.mode = modes.get(path, mode) if modes else mode
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        self._put_archive("/", buf.getvalue())

    def copy_in(self, src: str | os.PathLike[str], dest: str) -> None:
        """Copy a host file or directory to ``dest`` (a directory in the container, created)."""
        src = os.fspath(src)
        if not os.path.exists(src):
            raise ConfigError(f"copy_in: {src!r} does not exist on the host")
        self.exec(["mkdir", "-p", dest], user="root", timeout=30)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            if os.path.isdir(src):
                for entry in sorted(os.listdir(src)):
                    tar.add(os.path.join(src, entry), arcname=entry)
            else:
                tar.add(src, arcname=os.path.basename(src))
        self._put_archive(dest, buf.getvalue())

    def host_view(self) -> HostView | None:
        """The container's files as the host can read them (None where it cannot: then the
        engine's archive API answers); see :mod:`.hostview`. Close it after use."""
        return HostView.of(self)

    def read_file(self, path: str, *, limit: int = 64 * 1024 * 1024) -> bytes:
        """Read one regular file from the container (raises FileNotFoundError if absent)."""
        view = self.host_view()
        if view is not None:
            with view:
                st = view.lstat(path)
                if st is None:
                    raise FileNotFoundError(f"{path} (in sandbox {self.name})")
                if not stat.S_ISREG(st.st_mode):
                    raise IsADirectoryError(f"{path} (in sandbox {self.name}) is not a regular file")
                if st.st_size > limit:
                    raise SandboxError(f"{path} in the sandbox is {st.st_size} bytes, over {limit}")
                data = view.read_file(path, limit)
                if data is None:
                    raise SandboxError(f"{path} in the sandbox changed while it was read")
                return data
        try:
            stream, info = self.container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"{path} (in sandbox {self.name})") from None
        if info.get("size", 0) > limit:
            raise SandboxError(f"{path} in the sandbox is {info['size']} bytes, over {limit}")
        data = b"".join(stream)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise IsADirectoryError(f"{path} (in sandbox {self.name}) is not a regular file")
            fh = tar.extractfile(member)
            return fh.read() if fh else b""

    def read_dir(self, path: str, *, limit: int = 64 * 1024 * 1024) -> dict[str, bytes]:
        """The regular files directly in a directory of the container, by name (links, devices,
        subdirectories and files over ``limit`` bytes are left out); FileNotFoundError if absent."""
        view = self.host_view()
        if view is not None:
            with view:
                try:
                    return view.read_dir(path, limit)
                except FileNotFoundError:
                    raise FileNotFoundError(f"{path} (in sandbox {self.name})") from None
        try:
            stream, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"{path} (in sandbox {self.name})") from None
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            for member in tar:
                parts = member.name.split("/")
                if len(parts) == 2 and member.isfile() and member.size <= limit:
                    fh = tar.extractfile(member)
                    if fh is not None:
                        out[parts[1]] = fh.read()
        return out

    def copy_out(self, path: str, dest: str | os.PathLike[str]) -> None:
        """Copy a file or directory from the container into the host directory ``dest``."""
        try:
            stream, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"{path} (in sandbox {self.name})") from None
        os.makedirs(dest, exist_ok=True)
        data = b"".join(stream)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")

    def _put_archive(self, dest: str, data: bytes) -> None:
        try:
            ok = self.container.put_archive(dest, data)
        except docker.errors.APIError as exc:
            self.check_alive()
            raise SandboxError(f"copy into {self.name}:{dest} failed: {exc}") from None
        if not ok:
            raise SandboxError(f"copy into {self.name}:{dest} was refused by the engine")

    def __repr__(self) -> str:
        return f"Sandbox(name={self.name!r}, image={self.config.image!r})"


def quote(argv: list[str]) -> str:
    """Shell-quote an argument list (for messages and for ``bash -c``)."""
    return " ".join(shlex.quote(a) for a in argv)
