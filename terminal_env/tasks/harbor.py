"""What of Harbor's task schema runs here: the checks of ``task.toml`` fields that go beyond
their types (sizes, limits, network modes, hosts) and the refusals of the fields whose behaviour
this project does not implement (yet). A refused field is an error naming the field and saying
why, never a field silently dropped. :func:`terminal_env.tasks.load.read_harbor` calls these.
"""

from __future__ import annotations

import ipaddress
import math
import posixpath
import re
from pathlib import Path
from typing import Any

from ..artifacts import ArtifactSpec, check_destination
from ..task import Healthcheck
from .model import CollectHook, TaskStep
from .schema import MIN_MEMORY_MB, HarborTaskToml, Problems, parse_size_mb

#: the versions of Harbor's task schema read here (Harbor 0.26 writes 1.4)
SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")


def size_mb(
    problems: Problems, file: Path, field: str, mb: int | None, text: str | None
) -> int | None:
    if mb is not None:
        return mb
    if text is None:
        return None
    try:
        return parse_size_mb(text)
    except ValueError as exc:
        problems.error(file, field, f"{exc}; or write {field}_mb = <megabytes>")
        return None


def limits(problems: Problems, file: Path, env: Any, prefix: str) -> dict[str, Any]:
    """cpus / memory_mb / storage_mb of an [environment]-like table, checked; GPUs and TPUs,
    which no sandbox here is given, refused."""
    memory = size_mb(problems, file, f"{prefix}.memory", env.memory_mb, env.memory)
    storage = size_mb(problems, file, f"{prefix}.storage", env.storage_mb, env.storage)
    for old, new, given, parsed in (("memory", "memory_mb", env.memory_mb, env.memory),
                                    ("storage", "storage_mb", env.storage_mb, env.storage)):
        if given is not None and parsed is not None:
            try:
                other = parse_size_mb(parsed)
            except ValueError:
                continue
            if other != given:
                problems.error(file, f"{prefix}.{old}", f"{parsed!r} ({other} MB) contradicts "
                               f"{new} = {given}; keep only {new}")
    if not math.isfinite(env.cpus) or env.cpus <= 0:
        problems.error(file, f"{prefix}.cpus", f"must be a positive number, got {env.cpus!r}")
    if memory is not None and memory < MIN_MEMORY_MB:
        problems.error(file, f"{prefix}.memory_mb",
                       f"{memory} MB is too little to start a shell; give at least {MIN_MEMORY_MB}")
    if storage is not None and storage <= 0:
        problems.error(file, f"{prefix}.storage_mb", f"must be positive, got {storage}")
    if env.gpus < 0:
        problems.error(file, f"{prefix}.gpus", f"must be 0 or more, got {env.gpus}")
    elif env.gpus > 0:
        refuse(problems, file, f"{prefix}.gpus", f"{env.gpus} GPU(s) asked for, but sandboxes "
                "here are given no GPU; run the task where Harbor can give one, or set gpus = 0")
    elif env.gpu_types:
        problems.warning(file, f"{prefix}.gpu_types", "has no effect without gpus > 0 (as in "
                         "Harbor); remove it")
    if env.tpu is not None:
        refuse(problems, file, f"{prefix}.tpu", "sandboxes here are given no TPU; remove [tpu]")
    out: dict[str, Any] = {"cpus": float(env.cpus)}
    if memory is not None:
        out["memory_mb"] = memory
    if storage is not None:
        out["storage_mb"] = storage
    return out


def refuse(problems: Problems, file: Path, field: str, reason: str) -> None:
    """A field of Harbor's schema this project cannot honour (yet): an error, never dropped."""
    problems.error(file, field, f"not supported yet: {reason}")


def runtime(problems: Problems, file: Path, runtime: str | None) -> str | None:
    if runtime is None:
        return None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", runtime):
        problems.error(file, "environment.runtime",
                       f"{runtime!r} is not a runtime name; write e.g. runtime = \"runsc\" (gVisor)")
        return None
    problems.warning(file, "environment.runtime", "a terminal-env extension that Harbor does not read")
    return runtime


_HOST_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def _check_hosts(problems: Problems, file: Path, field: str, hosts: list[str]) -> None:
    """Harbor's rule for allowed_hosts entries: hostnames, ``*.`` wildcards, IP addresses or
    CIDR ranges; no URLs, ports or paths."""
    for i, raw in enumerate(hosts):
        host = raw.strip().lower().rstrip(".")
        try:
            ipaddress.ip_network(host, strict=True) if "/" in host else ipaddress.ip_address(host)
            continue
        except ValueError:
            pass
        name = host[2:] if host.startswith("*.") else host
        if not name or not all(_HOST_LABEL.fullmatch(part) for part in name.split(".")):
            problems.error(file, f"{field}[{i}]", f"{raw!r} is not a hostname, a '*.' wildcard, "
                           "an IP address or a CIDR range (no URL, port or path); fix the entry")


def network(problems: Problems, file: Path, prefix: str, table: Any,
             legacy: bool | None = None) -> str | None:
    """The network mode a table declares (``public``, ``no-network``, ``allowlist``), or None
    when it declares none. ``legacy`` is the old ``allow_internet`` of the same table; both
    spellings given must agree. An allowlist's hosts are :func:`allowed_hosts`."""
    mode, hosts = table.network_mode, table.allowed_hosts
    if hosts is not None:
        _check_hosts(problems, file, f"{prefix}.allowed_hosts", hosts)
        if mode != "allowlist":
            problems.error(file, f"{prefix}.allowed_hosts", "only valid with network_mode = "
                           "\"allowlist\" (as in Harbor); remove it or set the mode")
        for i, host in enumerate(hosts):
            if host.strip().startswith("*."):
                refuse(problems, file, f"{prefix}.allowed_hosts[{i}]", f"{host!r}: a wildcard needs "
                        "filtering by name, and the allowlist here filters addresses (names resolved when "
                        "the sandbox starts); list the host names")
    if mode == "allowlist":
        return mode
    if mode is not None and legacy is not None and legacy != (mode == "public"):
        problems.error(file, f"{prefix}.network_mode", f"{mode!r} contradicts {prefix}."
                       f"allow_internet = {str(legacy).lower()}; remove allow_internet (the old "
                       "spelling) and keep network_mode")
    if mode is not None:
        return mode
    if legacy is not None:
        return "public" if legacy else "no-network"
    return None


def phases(problems: Problems, file: Path, config: HarborTaskToml, baseline: str) -> None:
    """The agent's and the verifier's network overrides. The sandbox keeps one network from its
    start to the end of the agent's turn, so an agent mode other than the environment's is
    refused; the protected verifier always runs cut off (networks disconnected), so only
    ``no-network`` is honoured there."""
    agent = network(problems, file, "agent", config.agent)
    if agent is not None and agent != baseline:
        refuse(problems, file, "agent.network_mode", f"{agent!r} for the agent with "
                f"{baseline!r} for the environment (the sandbox keeps one network from start to "
                f"submit); set [environment] network_mode = \"{agent}\" instead")
    elif agent == "allowlist" and allowed_hosts(config.agent) != allowed_hosts(config.environment):
        refuse(problems, file, "agent.allowed_hosts", "other hosts for the agent than for the "
                "environment (the sandbox keeps one allowlist from start to submit); give them once, "
                "in [environment]")
    verifier = network(problems, file, "verifier", config.verifier)
    if verifier == "public":
        refuse(problems, file, "verifier.network_mode", "\"public\": the protected verifier "
                "runs its tests with every network disconnected; use \"no-network\" (or remove it)")
    venv = config.verifier.environment
    if venv is not None:
        vmode = network(problems, file, "verifier.environment", venv, venv.allow_internet)
        if vmode == "public":
            refuse(problems, file, "verifier.environment.network_mode", "\"public\": the "
                    "separate verifier sandbox has no network here; use \"no-network\"")


def healthcheck(problems: Problems, file: Path, field: str, table: Any) -> Healthcheck | None:
    """A ``healthcheck`` table as run here (Docker's meaning), its numbers checked."""
    if table is None:
        return None
    if not table.command.strip():
        problems.error(file, f"{field}.command", "must be a non-empty shell command")
        return None
    for name in ("interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec"):
        value = getattr(table, name)
        if not math.isfinite(value) or value < 0 or (name == "timeout_sec" and value == 0) or value > 86400:
            problems.error(file, f"{field}.{name}", f"must be a number of seconds in [0, 86400] (timeout above 0), "
                           f"got {value!r}")
            return None
    if table.retries < 1:
        problems.error(file, f"{field}.retries", f"must be 1 or more, got {table.retries}")
        return None
    return Healthcheck(**table.model_dump())


def allowed_hosts(table: Any) -> list[str] | None:
    """The hosts a table with ``network_mode = "allowlist"`` allows (None: not an allowlist)."""
    if table.network_mode != "allowlist":
        return None
    return [h.strip().lower().rstrip(".") for h in table.allowed_hosts or []]


def verifier_environment(problems: Problems, file: Path, config: HarborTaskToml,
                          agent_limits: dict[str, Any], tests_dir: Path) -> dict[str, Any]:
    """[verifier.environment] of a separate verifier, checked against what runs here: the
    separate verifier starts from the task's own image with the agent sandbox's limits and no
    network; a field asking for anything else is refused (never silently dropped)."""
    for name in ("Dockerfile", "docker-compose.yaml"):
        if (tests_dir / name).is_file():
            refuse(problems, tests_dir / name, "", "Harbor builds the separate verifier from "
                    f"tests/{name} (with the tests in its image); here the separate verifier runs "
                    "from the task's environment image, as Harbor does without this file; "
                    "remove it or run the verifier in shared mode")
    venv = config.verifier.environment
    if venv is None:
        return {}
    p = "verifier.environment"
    found = limits(problems, file, venv, p)
    for key, value in found.items():
        given = key in venv.model_fields_set or (key == "memory_mb" and venv.memory) or (
            key == "storage_mb" and venv.storage)
        if given and agent_limits.get(key) != value:
            refuse(problems, file, f"{p}.{key}", f"{value:g} differs from [environment]'s "
                    f"{agent_limits.get(key)}: the separate verifier runs with the agent "
                    "sandbox's limits here; remove it or make it equal")
    if venv.docker_image:
        refuse(problems, file, f"{p}.docker_image", "the separate verifier runs from the "
                "task's own image here; remove it")
    for name in ("mcp_servers", "skills_dir", "healthcheck", "workdir", "env"):
        if getattr(venv, name):
            refuse(problems, file, f"{p}.{name}", "not applied to the separate verifier "
                    "sandbox here; remove it")
    if venv.os not in (None, "linux", "Linux", "LINUX"):
        problems.error(file, f"{p}.os", f"only linux sandboxes run here, got {venv.os!r}")
    if venv.runtime is not None:
        refuse(problems, file, f"{p}.runtime", "the separate verifier runs under the agent "
                "sandbox's runtime; remove it")
    found["network"] = False
    return found


def artifacts(problems: Problems, file: Path, config: HarborTaskToml) -> list[ArtifactSpec]:
    """``artifacts``: each path (saved under its base name) or ``{source, destination,
    exclude}``, checked; collected from the agent's sandbox after the run
    (:mod:`terminal_env.artifacts`)."""
    out = []
    for i, item in enumerate(config.artifacts):
        field = f"artifacts[{i}]"
        entry = item if not isinstance(item, str) else None
        source = item if isinstance(item, str) else item.source
        if not source.startswith("/"):
            problems.error(file, f"{field}" + ("" if entry is None else ".source"),
                           f"must be an absolute path in the sandbox, got {source!r}")
            continue
        if entry is not None and entry.service not in (None, "main"):
            refuse(problems, file, f"{field}.service", f"{entry.service!r}: artifacts are collected "
                   "from the agent's sandbox only, not from the task's other services")
            continue
        destination = (entry.destination if entry is not None and entry.destination
                       else posixpath.basename(source.rstrip("/")) or "root")
        why = check_destination(destination)
        if why:
            problems.error(file, f"{field}.destination", why)
            continue
        out.append(ArtifactSpec(source=source, destination=destination,
                                exclude=tuple(entry.exclude) if entry is not None else ()))
    return out


def collect_hooks(problems: Problems, file: Path, config: HarborTaskToml) -> list[CollectHook]:
    """``[[verifier.collect]]``: commands the verifier runs in the agent's sandbox (after the
    agent's processes are stopped, before the tests and the artifacts read it). Only the agent's
    own sandbox (``service = "main"``) is run in here; another service is refused."""
    out = []
    for i, hook in enumerate(config.verifier.collect):
        field = f"verifier.collect[{i}]"
        if hook.service not in (None, "main"):
            refuse(problems, file, f"{field}.service", f"{hook.service!r}: collect hooks run in the "
                   "agent's sandbox only, not in the task's other services")
            continue
        if not hook.command.strip():
            problems.error(file, f"{field}.command", "must be a non-empty shell command")
            continue
        if not 0 < hook.timeout_sec <= 3600:
            problems.error(file, f"{field}.timeout_sec", f"must be in (0, 3600] seconds, got {hook.timeout_sec!r}")
            continue
        out.append(CollectHook(command=hook.command, timeout_sec=hook.timeout_sec,
                               user=None if hook.user is None else str(hook.user)))
    return out


def unsupported(problems: Problems, file: Path, config: HarborTaskToml) -> None:
    """Fields of Harbor's schema whose behaviour this project does not implement yet: each an
    error naming the field and the reason."""
    env = config.environment
    if env.mcp_servers:
        refuse(problems, file, "environment.mcp_servers", "no MCP server is started for the "
                "agent here; remove [[environment.mcp_servers]]")
    if env.skills_dir is not None:
        refuse(problems, file, "environment.skills_dir", "skills are not copied to agents' "
                "configuration here; remove it")
    user = config.verifier.user
    if user not in (None, "root", 0):
        refuse(problems, file, "verifier.user", f"{user!r}: the protected verifier runs the "
                "tests as root (they are owned by root and read-only to other users); remove it")
    agent_user = config.agent.user
    if isinstance(agent_user, int) and agent_user < 0 or agent_user == "":
        problems.error(file, "agent.user", f"must be a user name or a UID >= 0, got {agent_user!r}")


#: Harbor's rule for a step's name: one portable directory name
_BAD_STEP_NAME = re.compile(r'[\x00-\x1f<>:"/\\|?*]')


def steps(problems: Problems, file: Path, config: HarborTaskToml, task_dir: Path, network_mode: str,
          verifier_mode: str) -> list[TaskStep]:
    """The ``[[steps]]`` of a multi-step task, each read from ``steps/<name>/``: its instruction
    (required), its tests (laid over the task's ``tests/``; one of the two has ``test.sh``), its
    solution, its ``workdir/`` (``setup.sh`` there runs before its agent). What a step may set
    that does not run here is refused, naming the step's field."""
    if not config.steps:
        if config.steps is not None:
            problems.error(file, "steps", "is empty: give at least one [[steps]] table, or remove it")
        return []
    if verifier_mode == "separate":
        refuse(problems, file, "steps", "a multi-step task's verifier runs in the shared sandbox "
                "here (each step's tests in the agent's sandbox, as environment_mode = \"shared\"); "
                "remove environment_mode = \"separate\" or [verifier.environment]")
    if network_mode != "no-network":
        refuse(problems, file, "steps", f"a multi-step task with network_mode = \"{network_mode}\": the "
                "verifier cuts the sandbox off the network, and a later step would run without it; "
                "use \"no-network\"")
    task_tests = (task_dir / "tests" / "test.sh").is_file()
    out: list[TaskStep] = []
    seen: set[str] = set()
    for i, step in enumerate(config.steps):
        field = f"steps[{i}]"
        name = step.name
        if (name in (".", "..") or name != name.strip() or name.endswith(".") or _BAD_STEP_NAME.search(name)
                or len(name.encode()) > 255):
            problems.error(file, f"{field}.name", f"{name!r} is not a portable directory name (no "
                           "slashes, control or reserved characters, trailing dots or spaces); rename it")
            continue
        if name.lower() in seen:
            problems.error(file, f"{field}.name", f"{name!r} is used by an earlier step; step names "
                           "must differ (also in case)")
            continue
        seen.add(name.lower())
        root = task_dir / "steps" / name
        instruction_file = root / "instruction.md"
        instruction = instruction_file.read_text(encoding="utf-8", errors="replace") \
            if instruction_file.is_file() else ""
        if not instruction.strip():
            problems.error(instruction_file, "", f"missing or empty: step {name!r} needs its own "
                           "instruction (the task's instruction.md is never shown in a multi-step task)")
        tests = root / "tests"
        if not (tests / "test.sh").is_file() and not task_tests:
            problems.error(tests / "test.sh", "", f"missing: step {name!r} has no test.sh of its own "
                           "and the task has no tests/test.sh to fall back on")
        solve = root / "solution" / "solve.sh"
        if not solve.is_file():
            problems.warning(solve, "", f"missing: the oracle cannot run step {name!r}")
        if step.artifacts:
            refuse(problems, file, f"{field}.artifacts", "a step's own artifacts are not collected "
                    "here (the task's artifacts are, after the last step); list them in the task's artifacts")
        agent, verifier = step.agent, step.verifier
        if agent.user is not None and agent.user != config.agent.user:
            refuse(problems, file, f"{field}.agent.user", f"{agent.user!r}: the agent's shell keeps the "
                    "task's [agent] user through every step here; remove it or set it at [agent]")
        for phase, table in (("agent", agent), ("verifier", verifier)):
            if table.network_mode is not None or table.allowed_hosts is not None:
                refuse(problems, file, f"{field}.{phase}.network_mode", "a step keeps the task's "
                        "network modes here; remove it")
        if verifier.user not in (None, "root", 0):
            refuse(problems, file, f"{field}.verifier.user", f"{verifier.user!r}: the protected "
                    "verifier runs the tests as root; remove it")
        if verifier.environment_mode is not None or verifier.environment is not None or verifier.collect:
            refuse(problems, file, f"{field}.verifier", "a step's verifier runs in the shared sandbox "
                    "with the task's collect commands here; remove environment_mode, environment and collect")
        if isinstance(step.min_reward, dict) and not step.min_reward:
            problems.error(file, f"{field}.min_reward", "is an empty table: name a metric, or give a number")
        for key, value in ({"reward": step.min_reward} if isinstance(step.min_reward, (int, float))
                           else dict(step.min_reward or {})).items():
            if not math.isfinite(float(value)):
                problems.error(file, f"{field}.min_reward", f"{key}: {value!r} is not a finite number")
        if agent.timeout_sec is not None and not 0 < agent.timeout_sec < 10**7:
            problems.error(file, f"{field}.agent.timeout_sec", f"must be a positive number of seconds, "
                           f"got {agent.timeout_sec!r}")
        vtimeout = verifier.timeout_sec if "timeout_sec" in verifier.model_fields_set else None
        if vtimeout is not None and not 0 < vtimeout < 10**7:
            problems.error(file, f"{field}.verifier.timeout_sec", f"must be a positive number of seconds, "
                           f"got {vtimeout!r}")
        out.append(TaskStep(
            name=name, instruction=instruction,
            tests_dir=tests if tests.is_dir() else None,
            solution_script=solve if solve.is_file() else None,
            workdir_dir=root / "workdir" if (root / "workdir").is_dir() else None,
            min_reward=step.min_reward, agent_timeout=agent.timeout_sec, verifier_timeout=vtimeout,
            healthcheck=healthcheck(problems, file, f"{field}.healthcheck", step.healthcheck),
            verifier_env=dict(verifier.env)))
    return out
