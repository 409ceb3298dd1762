"""A multi-container task's compose file, read by the compose tool and checked for the sandbox.

Harbor's ``environment/docker-compose.yaml`` (the agent's container is the service ``main``,
built from ``environment/Dockerfile``) and a Terminal-Bench 1.x ``docker-compose.yaml`` with
more services than its ``client`` describe the services around the agent. The compose tool reads
the file (``config``: interpolation, ``extends``, relative paths, short forms made long), so this
module never parses the format itself; it checks the tool's output against what a sandbox may
have, builds the services' images once per task, and hands
:class:`~terminal_env.sandbox.stack.StackSpec` to the sandbox, which starts them per episode.

What a service may not have: anything that reaches past its own container into the host
(``privileged``, ``cap_add``, devices, host namespaces, bind mounts from outside the task's
directory, a runtime or security options of its own). Published ``ports`` are dropped (the agent
reaches services by name; host ports would collide between episodes), and a ``container_name``
becomes an alias on the service's networks (one fixed name cannot serve two episodes at once).
"""

from __future__ import annotations

import posixpath
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from ..errors import ConfigError, ImageNotFoundError
from ..sandbox.images import BASE_IMAGE_ALIASES, image_exists, map_base_image
from ..sandbox.stack import StackSpec, run_compose
from .build import BuildSettings, build_image
from .model import Task, environment_digest

#: the agent's service in each format
AGENT_SERVICE = {"harbor": "main", "terminal-bench-1": "client"}

#: where the harnesses' log directories would be mounted from: volumes from here are theirs
HARNESS_MOUNTS = "/nonexistent/terminal-env-harness"
#: the variables Harbor's and Terminal-Bench's harnesses give their compose files
HARNESS_VARS = {
    # Harbor
    "CONTEXT_DIR": "", "MAIN_IMAGE_NAME": "", "PREBUILT_IMAGE_NAME": "",
    "HOST_VERIFIER_LOGS_PATH": f"{HARNESS_MOUNTS}/verifier", "ENV_VERIFIER_LOGS_PATH": "/logs/verifier",
    "HOST_AGENT_LOGS_PATH": f"{HARNESS_MOUNTS}/agent", "ENV_AGENT_LOGS_PATH": "/logs/agent",
    "HOST_ARTIFACTS_PATH": f"{HARNESS_MOUNTS}/artifacts", "ENV_ARTIFACTS_PATH": "/logs/artifacts",
    # Terminal-Bench 1.x
    "T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME": "", "T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME": "client",
    "T_BENCH_TASK_DOCKER_NAME_PREFIX": "tb", "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_TASK_LOGS_PATH": f"{HARNESS_MOUNTS}/logs", "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_TASK_AGENT_LOGS_PATH": f"{HARNESS_MOUNTS}/agent-logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
}

#: service keys passed to the compose tool as the task wrote them
ALLOWED = frozenset({
    "build", "image", "command", "entrypoint", "environment", "working_dir", "user", "depends_on",
    "healthcheck", "volumes", "tmpfs", "expose", "hostname", "domainname", "labels", "init",
    "stop_signal", "stop_grace_period", "networks", "shm_size", "restart", "tty", "stdin_open",
    "read_only", "extra_hosts", "links", "ulimits", "mem_reservation", "cpu_shares", "sysctls",
    "cap_drop", "platform", "logging", "env_file", "profiles", "scale",
})
#: service keys the sandbox decides (the task's limits on every service): dropped
OVERRIDDEN = frozenset({"mem_limit", "memswap_limit", "cpus", "pids_limit", "deploy", "ports",
                        "container_name"})
#: service keys refused, and why
REFUSED = {
    "privileged": "it would give the service the host's devices and every capability",
    "cap_add": "capabilities beyond the engine's defaults reach into the host",
    "devices": "host devices are not given to sandboxes",
    "device_cgroup_rules": "host devices are not given to sandboxes",
    "network_mode": "services live on the episode's own networks",
    "pid": "host or other containers' process namespaces are not shared",
    "ipc": "host or other containers' IPC namespaces are not shared",
    "uts": "the host's UTS namespace is not shared",
    "userns_mode": "the host's user namespace is not shared",
    "cgroup_parent": "services run in the engine's own cgroups",
    "security_opt": "security options are the sandbox's (no-new-privileges)",
    "runtime": "the runtime is the sandbox's",
    "external_links": "services reach only their own episode's services",
    "volumes_from": "volumes are shared by name (a top-level volume) instead",
    "secrets": "give the file to the service through its build context instead",
    "configs": "give the file to the service through its build context instead",
    "gpus": "GPUs are not given to services here",
}
#: what the agent's service may set (the rest of that container is the sandbox's own)
AGENT_USED = frozenset({"environment", "working_dir", "user", "networks", "depends_on"})


def read_compose(task: Task, image: str, *, timeout: float = 120) -> dict[str, Any]:
    """The compose tool's reading (``config``) of the task's compose file, with the agent's
    service given ``image`` and a build context first (as Harbor's own build file gives
    ``main``; Terminal-Bench's ``client`` names a Dockerfile but no context, which the
    compose tool would refuse)."""
    assert task.compose_file is not None
    agent = AGENT_SERVICE[task.format]
    with tempfile.TemporaryDirectory(prefix="terminal-env-compose-") as tmp:
        base = Path(tmp) / "agent.yaml"
        base.write_text(yaml.safe_dump({"services": {agent: {
            "image": image, "build": {"context": str(task.environment_dir)}}}}))
        env = {**HARNESS_VARS, "CONTEXT_DIR": str(task.environment_dir), "MAIN_IMAGE_NAME": image,
               "T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME": image,
               "CPUS": f"{task.cpus:g}", "MEMORY": f"{task.memory_mb}M"}
        try:
            text = run_compose(
                ["--project-directory", str(task.compose_file.parent), "-p", "terminal-env-check",
                 "-f", str(base), "-f", str(task.compose_file), "config"],
                env=env, timeout=timeout, what=f"reading {task.compose_file}")
        except ConfigError:
            raise
        except Exception as exc:  # the tool's own message says what is wrong with the file
            raise ConfigError(f"{task.compose_file}: the compose tool cannot read it: {exc}") from None
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        raise ConfigError(f"{task.compose_file}: the compose tool gave no services")
    return doc


@dataclass
class Checked:
    """A compose document split into what the sandbox runs and what the agent's container takes."""

    services: dict[str, Any]
    networks: dict[str, Any]
    volumes: dict[str, Any]
    agent_env: dict[str, str]
    agent_workdir: str | None
    agent_user: str | None
    agent_networks: dict[str, list[str]]
    notes: list[str]


def _inside(path: str, top: Path) -> bool:
    p = Path(posixpath.normpath(path))
    return p == top or top in p.parents


def _aliases(networks: Any) -> dict[str, list[str]]:
    if isinstance(networks, list):
        return {str(n): [] for n in networks}
    if isinstance(networks, dict):
        return {str(k): list((v or {}).get("aliases") or []) for k, v in networks.items()}
    return {"default": []}


def check_compose(doc: dict[str, Any], *, source: Path, agent: str, task_dir: Path) -> Checked:
    """Split and check the tool's reading; a :class:`ConfigError` lists every problem, each
    naming the file, the service, the key and the fix."""
    problems: list[str] = []
    notes: list[str] = []
    services: dict[str, Any] = {}
    top = task_dir.resolve()
    named_volumes = set(doc.get("volumes") or {})
    declared = doc.get("networks") or {}
    for key, net in declared.items():
        if (net or {}).get("external"):
            problems.append(f"networks.{key}: external networks are refused (services reach only "
                            "their own episode's networks); drop `external`")
    for key, vol in (doc.get("volumes") or {}).items():
        if (vol or {}).get("external") or (vol or {}).get("driver_opts"):
            problems.append(f"volumes.{key}: external volumes and driver options (a host bind in "
                            "disguise) are refused; use a plain named volume")
    agent_svc = doc["services"].get(agent) or {}
    for name, svc in doc["services"].items():
        where = f"services.{name}"
        if name == agent:
            continue
        svc = dict(svc or {})
        for key in sorted(svc):
            if key in REFUSED:
                problems.append(f"{where}.{key}: refused, {REFUSED[key]}; remove it")
            elif key not in ALLOWED and key not in OVERRIDDEN:
                problems.append(f"{where}.{key}: not supported in a sandbox's services; remove it")
        for i, vol in enumerate(svc.get("volumes") or []):
            source_path = (str(vol).split(":")[0] if isinstance(vol, str)
                           else str((vol or {}).get("source") or ""))
            if source_path.startswith("/"):
                if not _inside(source_path, top):
                    problems.append(f"{where}.volumes[{i}]: {source_path} is outside the task's "
                                    f"directory {top}; mount files from the task, or a named volume")
            elif source_path and source_path not in named_volumes:
                problems.append(f"{where}.volumes[{i}]: unknown volume {source_path!r}")
        if "image" not in svc and "build" not in svc:
            problems.append(f"{where}: neither an image nor a build; give one")
        build = svc.get("build")
        context = build.get("context") if isinstance(build, dict) else build
        if context and not _inside(str(context), top):
            problems.append(f"{where}.build.context: {context} is outside the task's directory "
                            f"{top}; keep the service's build context in the task")
        if isinstance(build, dict) and (set(build) - {"context", "dockerfile"}):
            extra = ", ".join(sorted(set(build) - {"context", "dockerfile"}))
            problems.append(f"{where}.build.{extra}: only context and dockerfile are used here; "
                            "write the values into the Dockerfile")
        if svc.pop("ports", None):
            notes.append(f"{where}.ports: not published on the host (the agent reaches "
                         f"{name!r} by name, on the episode's network)")
        alias = svc.pop("container_name", None)
        nets = _aliases(svc.get("networks"))
        if alias:
            nets = {k: sorted({*v, str(alias)}) for k, v in nets.items()}
            notes.append(f"{where}.container_name: {alias!r} is an alias on its networks instead")
        svc["networks"] = {k: ({"aliases": v} if v else None) for k, v in nets.items()}
        for key in OVERRIDDEN:
            svc.pop(key, None)
        for key in ("depends_on", "links"):  # the agent's container comes after the services
            deps = svc.get(key)
            if isinstance(deps, dict) and agent in deps:
                svc[key] = {k: v for k, v in deps.items() if k != agent}
            elif isinstance(deps, list):
                svc[key] = [d for d in deps if str(d).split(":")[0] != agent]
        services[name] = svc
    for key in sorted(set(agent_svc) - AGENT_USED):
        if key in REFUSED:
            problems.append(f"services.{agent}.{key}: refused, {REFUSED[key]}; remove it")
        elif key == "volumes":
            for i, vol in enumerate(agent_svc["volumes"]):
                src = vol.split(":")[0] if isinstance(vol, str) else str((vol or {}).get("source"))
                if not src.startswith(HARNESS_MOUNTS):
                    problems.append(
                        f"services.{agent}.volumes[{i}]: the agent's container takes its files "
                        "from its image (environment/Dockerfile); share data with a service "
                        "over the network instead")
        elif key not in ("image", "build"):
            notes.append(f"services.{agent}.{key}: the sandbox makes the agent's container; ignored")
    if problems:
        raise ConfigError(f"{source}: this multi-container environment cannot run here:\n  "
                          + "\n  ".join(problems))
    env = {str(k): "" if v is None else str(v) for k, v in (agent_svc.get("environment") or {}).items()}
    agent_nets = _aliases(agent_svc.get("networks"))
    agent_nets = {k: sorted({*v, agent}) for k, v in agent_nets.items()}
    return Checked(services, {k: {} for k in declared}, {k: {} for k in named_volumes}, env,
                   agent_svc.get("working_dir"), agent_svc.get("user"), agent_nets, notes)


@dataclass(frozen=True)
class _ServiceBuild:
    """A service's build context, in the shape :func:`build_image` builds (as a task's)."""

    name: str
    path: Path
    environment_dir: Path
    dockerfile: Path | None
    docker_image: str | None
    context_excludes: tuple[str, ...]
    environment_digest: str
    build_timeout: float


def prepare_services(
    task: Task, image: str, *, settings: BuildSettings | None = None, client: Any = None,
    log: Callable[[str], None] = print, force: bool = False,
) -> tuple[StackSpec, Checked]:
    """Read and check the task's compose file and build its services' images (cached by
    content, as the task's own): the :class:`StackSpec` its sandboxes start."""
    assert task.compose_file is not None
    settings = settings or BuildSettings.resolve()
    agent = AGENT_SERVICE[task.format]
    checked = check_compose(read_compose(task, image), source=task.compose_file, agent=agent,
                            task_dir=task.path)
    mapping = {**BASE_IMAGE_ALIASES, **settings.base_map}
    for name, svc in checked.services.items():
        build = svc.pop("build", None)
        if build is not None:
            context = Path(build["context"] if isinstance(build, dict) else build)
            dockerfile = context / (build.get("dockerfile") or "Dockerfile"
                                    if isinstance(build, dict) else "Dockerfile")
            if not dockerfile.is_file():
                raise ConfigError(f"{task.compose_file}: services.{name}.build: no Dockerfile at "
                                  f"{dockerfile}")
            unit = _ServiceBuild(
                name=f"{task.name}--{name}", path=task.path, environment_dir=context,
                dockerfile=dockerfile, docker_image=None, context_excludes=(),
                environment_digest=environment_digest(context, (), dockerfile, None),
                build_timeout=task.build_timeout)
            svc["image"] = build_image(unit, client, base_map=settings.base_map,
                                       ca_bundle=settings.ca_bundle, log=log, force=force)
        else:
            ref = map_base_image(str(svc["image"]), mapping)
            if client is not None and not image_exists(client, ref):
                raise ImageNotFoundError(
                    f"{task.compose_file}: services.{name}.image {svc['image']!r} is not on this "
                    "machine and nothing is pulled; build it, or map it to a local image "
                    f"(--base-map {svc['image']}=LOCAL_IMAGE)")
            svc["image"] = ref
    spec = StackSpec(
        document={"services": checked.services, "networks": checked.networks,
                  "volumes": checked.volumes},
        agent_networks=checked.agent_networks, source=str(task.compose_file))
    return spec, checked
