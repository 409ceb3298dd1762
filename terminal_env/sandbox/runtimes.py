"""What differs between the OCI runtimes a sandbox runs under, in one place.

Every other module asks :func:`runtime_of` (or ``Sandbox.runtime``) a question about the runtime;
none of them tests a runtime's name.

- **runc** (the engine's usual default, and ``crun``): the agent's processes are host processes in
  the container's cgroup. The verifier stops them from the host with ``os.kill`` (nothing runs in
  the container); the host kernel's out-of-memory killer picks the offending process and counts it
  in the container's memory cgroup.
- **runsc** (gVisor): the agent's processes live in gVisor's own kernel (the Sentry), a user-space
  process on the host. What follows from that, each fact a field of :class:`Runtime`:

  - The container's cgroup holds the Sentry and its file server, never the agent's processes, so
    they cannot be listed or signalled from the host: they are stopped from inside with the
    built-in-only sweep (:data:`terminal_env.sandbox.sweep.SWEEP_SCRIPT`, run by the image's
    ``/bin/sh``, which the tamper check that follows vouches for).
  - The memory limit holds the whole Sentry, so exceeding it stops the sandbox, not one process:
    the agent's shell sets an address-space limit of the same size (``ulimit -v``), so one
    runaway process fails its own allocations and the sandbox lives on.
  - Each process of the sandbox costs the Sentry host tasks, and a Sentry that cannot make one
    more dies with the sandbox: see :meth:`Runtime.process_limits`.
  - Root in the sandbox can kill its PID 1, the keeper, which stops the container: a stop that
    the engine did not cause (no ``kill`` in its events) is the agent's
    (``Sandbox.stopped_by_agent``).
  - The runsc that Debian 12 ships refuses the ``AT_NO_AUTOMOUNT`` flag of ``statx`` and
    ``fstatat`` (coreutils' ``ls DIR`` and ``stat`` fail with "Invalid argument"): a small library
    of ours (``gvisor_statx.c``, built once with the host's C compiler) is mounted read-only into
    the sandbox with a read-only ``/etc/ld.so.preload`` that makes every program load it, the
    agent's and the verifier's, whatever their environment; it drops that flag.
  - gVisor mounts its own memory-backed ``/tmp`` when the image's ``/tmp`` is empty: files put
    there through the engine are not seen inside, so nothing is delivered there (the session's
    long commands go through ``/var/tmp``).

The engine must register ``runsc`` with :data:`RUNSC_ARGS` (``scripts/install-engine.sh`` does):
``--network=none`` because gVisor's own network stack does not work in nested setups like these
machines (a task that asks for a network does not get one under runsc), and
``--file-access=shared`` because the default (``exclusive``) caches the root file system inside
the Sentry, so files the verifier copies in through the engine (the tests) can stay invisible
where the agent looked before.

Other runtimes are treated as runc when their processes show up in the container's cgroup; the
verifier checks that (the keeper must be seen as PID 1) before it signals anything.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError

#: the runtime arguments runsc is registered with (``/etc/docker/daemon.json``)
RUNSC_ARGS = ("--network=none", "--file-access=shared")

#: what to add to ``/etc/docker/daemon.json`` for the hardened mode (messages and docs)
RUNSC_REGISTRATION = (
    '{"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["'
    + '", "'.join(RUNSC_ARGS) + '"]}}}'
)


@dataclass(frozen=True)
class Runtime:
    """The facts about one OCI runtime that the sandbox, the session and the verifier act on."""

    name: str
    #: the agent's processes are host processes in the container's cgroup (listed and signalled
    #: from the host; the host's OOM killer counts its kills in the memory cgroup)
    host_processes: bool = True
    #: the memory limit holds the runtime's own kernel too: going over it stops the whole
    #: sandbox, so the agent's shell limits each process's address space to the memory limit
    address_space_limit: bool = False
    #: the runtime needs the statx fix preloaded into every process (:func:`statx_fix_library`)
    statx_fix: bool = False
    #: root in the sandbox can kill its PID 1 (Linux drops such signals to a namespace's init;
    #: gVisor 20221219 delivers them), which stops the container: a death the engine did not
    #: cause is then the agent's (``Sandbox.stopped_by_agent``)
    init_killable_from_inside: bool = False
    #: host tasks the runtime may need per process of the sandbox (1: the sandbox's processes
    #: are the host's); see :meth:`process_limits`
    host_tasks_per_process: int = 1
    #: containers can join bridge networks (runsc is registered with ``--network=none`` here,
    #: without which it does not start in this nested setup: its sandboxes have loopback only)
    bridge_networks: bool = True
    #: /proc/PID/stat reports a terminal's foreground process group (``tpgid``); gVisor's says
    #: 0, so the session's prompt then carries what finds it another way (uptime, ``$!``)
    reports_tpgid: bool = True

    def mounts(self) -> dict[str, str]:
        """{path in the sandbox: host file} of the read-only files this runtime's sandboxes get
        (under gVisor: the statx fix, and an ``/etc/ld.so.preload`` that names it, so that every
        program loads it whatever its environment: cron jobs and ``env -i`` included)."""
        if not (self.statx_fix and _statx_fix_supported()):
            return {}
        lib = statx_fix_library()
        return {STATX_FIX_IN_SANDBOX: str(lib), PRELOAD_LIST: str(lib.with_suffix(".preload"))}

    def own_paths(self) -> frozenset[str]:
        """Paths in the sandbox that the runtime's mounts create (the engine's diff lists their
        mount points as added): read-only, so never the agent's change."""
        paths = set(self.mounts())
        return frozenset(paths | {p.rsplit("/", 1)[0] for p in paths if p.count("/") > 1})

    def container_options(self) -> dict[str, Any]:
        """What to add to the host config of a container of this runtime."""
        mounts = self.mounts()
        if not mounts:
            return {}
        return {"binds": {host: {"bind": inside, "mode": "ro"} for inside, host in mounts.items()}}

    def process_limits(self, pids_limit: int) -> tuple[int, int | None]:
        """(the engine's pids limit for the container, the limit on the agent's processes that
        its shell sets, or None) for a sandbox of ``pids_limit`` processes.

        Under runc the engine's limit is the sandbox's. Under gVisor's ptrace platform every
        process of the sandbox costs the Sentry about 20 host tasks (measured: 100 `sleep`s,
        ~2,000), and a Sentry that cannot make one more dies with the whole sandbox: the
        agent's processes are held to ``pids_limit // 8`` (at least 16) by its shell's
        ``ulimit -u``, which gVisor enforces, and the container gets room for 32 host tasks for
        each of them. A fork bomb then meets the agent's limit, not the Sentry's.

        >>> RUNC.process_limits(1024), RUNSC.process_limits(1024), RUNSC.process_limits(64)
        ((1024, None), (4096, 128), (512, 16))
        """
        if self.host_tasks_per_process == 1:
            return pids_limit, None
        inside = max(16, pids_limit // 8)
        return inside * self.host_tasks_per_process, inside

    def shell_limits(self, memory_mb: int, pids_limit: int) -> str:
        """Shell built-ins that the agent's shell runs before anything else ('' if none), under
        a runtime with a kernel of its own whose limits hold the whole sandbox: an address-space
        limit (one runaway process fails its own allocations instead of stopping the sandbox)
        and the process limit of :meth:`process_limits`."""
        out = ""
        if self.address_space_limit:
            out += f"ulimit -v {memory_mb * 1024} 2>/dev/null; "
        inside = self.process_limits(pids_limit)[1]
        if inside is not None:
            out += f"ulimit -u {inside} 2>/dev/null; "
        return out


RUNC = Runtime("runc")
RUNSC = Runtime(
    "runsc", host_processes=False, address_space_limit=True, statx_fix=True, host_tasks_per_process=32,
    init_killable_from_inside=True, bridge_networks=False, reports_tpgid=False,
)
_KNOWN = {"runc": RUNC, "crun": Runtime("crun"), "runsc": RUNSC}

_engines: dict[int, tuple[str, dict[str, list[str]]]] = {}
_lock = threading.Lock()


def _engine_runtimes(client: Any) -> tuple[str, dict[str, list[str]]]:
    """(the default runtime, {runtime: its registered arguments}) of the engine, asked once per
    client."""
    with _lock:
        known = _engines.get(id(client))
    if known is None:
        info = client.info()
        runtimes = {
            str(n): list((v or {}).get("runtimeArgs") or []) for n, v in (info.get("Runtimes") or {}).items()
        }
        known = (str(info.get("DefaultRuntime") or "runc"), runtimes)
        with _lock:
            _engines[id(client)] = known
    return known


def runtime_of(name: str | None, client: Any = None) -> Runtime:
    """The facts about runtime ``name``; ``None`` is the engine's default runtime. A runtime we
    know nothing about is taken for a runc-like one: the host-side sweep checks that it sees the
    container's processes before it signals any. With a client, runsc's registration is checked:
    a :class:`ConfigError` names the arguments it lacks and the fix."""
    if client is None:
        name = name or "runc"
        return _KNOWN.get(name) or Runtime(name)
    default, registered = _engine_runtimes(client)
    name = name or default
    runtime = _KNOWN.get(name) or Runtime(name)
    if runtime is RUNSC and name in registered:
        lacking = [a for a in RUNSC_ARGS if a not in registered[name]]
        if lacking:
            raise ConfigError(
                f"the Docker engine's runsc is registered with the arguments {registered[name]}, "
                f"without {' '.join(lacking)}, which terminal-env's sandboxes need (see "
                "terminal_env/sandbox/runtimes.py). Run scripts/install-engine.sh, or set its entry "
                f"in /etc/docker/daemon.json to {RUNSC_REGISTRATION} and reload the engine "
                "(`kill -HUP $(pidof dockerd)`)."
            )
    return runtime


# ---- the statx fix for gVisor ---------------------------------------------------------------
STATX_FIX_SOURCE = Path(__file__).with_name("gvisor_statx.c")
#: where the library is mounted (read-only) in a runsc sandbox: outside every protected tree
STATX_FIX_IN_SANDBOX = "/.terminal-env/gvisor-statx.so"
#: the loader's list of libraries to preload into every program (mounted read-only over it)
PRELOAD_LIST = "/etc/ld.so.preload"


def _statx_fix_supported() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")  # its system calls are x86-64's


@functools.lru_cache(maxsize=1)
def statx_fix_library() -> Path:
    """The statx fix, built once per version of its source into the user's cache with the host's
    C compiler (``cc``); a :class:`ConfigError` saying what to install if there is none. Found
    once per process: every runsc sandbox's start and tamper check asks for it."""
    source = STATX_FIX_SOURCE.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "terminal-env"
    lib = cache / f"gvisor-statx-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if lib.is_file() and lib.with_suffix(".preload").is_file():
        return lib
    cc = shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")
    if cc is None:
        raise ConfigError(
            "a gVisor (runsc) sandbox needs a small library of terminal-env built with a C compiler "
            "(the runsc of Debian 12 breaks `ls DIR` and `stat` without it), and this machine has "
            "no `cc`: install one (`apt-get install gcc`), or run scripts/install-engine.sh, "
            "which does"
        )
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-nostdlib", "-o", tmp, str(STATX_FIX_SOURCE)],
            capture_output=True, text=True, timeout=120,
        )
        if done.returncode != 0:
            raise ConfigError(
                f"building {STATX_FIX_SOURCE.name} for gVisor sandboxes with {cc} failed: "
                f"{done.stderr.strip()[-800:]}"
            )
        os.chmod(tmp, 0o644)
        listing = lib.with_suffix(".preload")
        if listing.is_dir():  # made by the engine for a bind of a missing file: empty
            listing.rmdir()
        listing.write_text(STATX_FIX_IN_SANDBOX + "\n")
        os.chmod(listing, 0o644)
        os.replace(tmp, lib)  # atomic, and last: the library's presence says both are there
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib
