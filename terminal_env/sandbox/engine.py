"""Connecting to the Docker engine, and starting it where we are allowed to.

Everything that talks to Docker gets its client from :func:`get_client`, so there is one place
that decides which engine we use (``DOCKER_HOST`` or the local socket) and one error message
when it is not there. :func:`ensure_engine` is the "fix it" path behind ``terminal-env doctor
--fix``: on the machines this project targets (Debian, root, no systemd) it installs and starts
``dockerd`` itself, doing the same steps as ``scripts/install-engine.sh``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import docker
import requests

from ..errors import ConfigError, EngineUnavailableError
from .runtimes import RUNSC_REGISTRATION

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
DOCKERD_LOG = Path(os.environ.get("TERMINAL_ENV_DOCKERD_LOG", "/var/log/terminal-env-dockerd.log"))
REMEDY = "run `terminal-env doctor --fix` or `bash scripts/install-engine.sh`"

# One client per (engine, process). Keyed by pid because a client's HTTP connection pool must not
# be shared across fork (runners fork workers); keyed by DOCKER_HOST so tests and users can point
# at another engine without restarting Python.
_clients: dict[tuple[str | None, int], docker.DockerClient] = {}

# What a failed connection raises varies with the transport (unix socket, tcp, ssh), hence the set.
_CONNECT_ERRORS = (docker.errors.DockerException, requests.RequestException, OSError)


def _engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def _short(exc: BaseException) -> str:
    """The last line of an exception's text: the useful part of requests' nested messages."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[-1][:300]


def _unreachable(exc: BaseException) -> EngineUnavailableError:
    return EngineUnavailableError(
        f"cannot reach the Docker engine at {_engine_address()}: {_short(exc)}. To fix: {REMEDY}"
        + (" (or unset DOCKER_HOST to use the local engine)" if os.environ.get("DOCKER_HOST") else "")
    )


@contextlib.contextmanager
def engine_errors() -> Iterator[None]:
    """Turn a lost connection to the engine (stopped, restarting, unreachable) into
    :class:`EngineUnavailableError` (an infrastructure error: masked, retried), wherever in the
    sandbox or session layers it surfaces."""
    try:
        yield
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise _unreachable(exc) from None


def get_client(timeout: float = 120) -> docker.DockerClient:
    """A pinged client for the engine named by ``DOCKER_HOST`` (default: the local socket).

    Raises :class:`EngineUnavailableError` naming the address and the remedy. ``timeout`` is the
    per-request timeout; it only matters for the first call in a process, as clients are cached.
    """
    key = (os.environ.get("DOCKER_HOST"), os.getpid())
    client = _clients.get(key)
    if client is not None:
        return client
    try:
        # version="auto" negotiates the API version down to the daemon's (Debian's docker.io is
        # 20.10, API 1.41), so a newer SDK or CLI works against an older engine.
        client = docker.from_env(timeout=int(timeout), version="auto")
        client.ping()
    except _CONNECT_ERRORS as exc:
        raise _unreachable(exc) from None  # the chain is requests' internals: noise to a user
    _clients[key] = client
    return client


def clear_client_cache() -> None:
    """Forget cached clients (after the engine restarted, or when DOCKER_HOST changed in tests)."""
    for client in _clients.values():
        try:
            client.close()
        except Exception:  # closing a dead connection may fail; we are discarding it anyway
            pass
    _clients.clear()


def engine_status() -> dict[str, Any]:
    """What ``terminal-env doctor`` prints: never raises, reports the error instead."""
    status: dict[str, Any] = {
        "address": _engine_address(),
        "reachable": False,
        "version": None,
        "api_version": None,
        "runtimes": [],
        "cgroup": None,
        "init_binary": None,
        "error": None,
    }
    try:
        client = get_client(timeout=10)
        version = client.version()
        info = client.info()
    except EngineUnavailableError as exc:
        status["error"] = str(exc)
        return status
    except _CONNECT_ERRORS as exc:  # the engine died between ping and info
        status["error"] = _short(exc)
        return status
    status.update(
        reachable=True,
        version=version.get("Version"),
        api_version=client.api.api_version,  # the negotiated one, which is what we actually use
        runtimes=sorted(info.get("Runtimes", {})),
        cgroup=f"v{info.get('CgroupVersion', '1')} {info.get('CgroupDriver', '?')}",
        init_binary=info.get("InitBinary"),
    )
    return status


# ---- the fix-it path ------------------------------------------------------------------------


def require_runtimes(client: Any, names: Any) -> None:
    """Raise :class:`ConfigError` unless every OCI runtime in ``names`` is registered in the
    engine (None entries are the engine's default and always there)."""
    wanted = sorted({n for n in names if n})
    if not wanted:
        return
    with engine_errors():
        have = set(client.info().get("Runtimes") or {})
    missing = [n for n in wanted if n not in have]
    if missing:
        hint = (
            " gVisor: install Debian's `runsc` package and register it in /etc/docker/daemon.json as "
            f"{RUNSC_REGISTRATION}, then reload the engine (`scripts/install-engine.sh` does both; "
            "SECURITY.md, Stronger options)."
            if "runsc" in missing else ""
        )
        raise ConfigError(
            f"the Docker engine has no OCI runtime {', '.join(map(repr, missing))} (it has: "
            f"{', '.join(sorted(have)) or 'none'}). Choose one of those, or register the runtime.{hint}"
        )


def _can_self_install() -> bool:
    """Only where we know the recipe works: root on Debian with apt, targeting the local socket."""
    local = _engine_address() == DEFAULT_SOCKET
    return local and os.geteuid() == 0 and Path("/etc/debian_version").exists() and bool(
        shutil.which("apt-get")
    )


def _missing_packages() -> list[str]:
    missing = []
    if not _which("dockerd"):
        missing.append("docker.io")
    if not _which("debootstrap"):  # builds the base image without a registry (see images.py)
        missing.append("debootstrap")
    if not (_which("docker-init") or Path("/usr/libexec/docker/docker-init").exists()):
        missing.append("tini")  # provides docker-init, which `docker run --init` needs
    return missing


def _which(name: str) -> str | None:
    # /usr/sbin is often missing from a non-login root PATH, and dockerd/debootstrap live there.
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return shutil.which(name, path=path)


def _apt_install(packages: list[str]) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
    ):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise EngineUnavailableError(f"`{' '.join(cmd)}` failed:\n{tail}")


def _dockerd_running() -> bool:
    return subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True).returncode == 0


def _start_dockerd() -> None:
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(DOCKERD_LOG, "ab") as log:
        # start_new_session: the daemon must outlive this process and not get its terminal's
        # SIGINT/SIGHUP. There is no systemd here to supervise it.
        subprocess.Popen(
            [_which("dockerd") or "dockerd"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def ensure_engine(wait: float = 60, log=print) -> None:
    """Make the engine answer: install and start it if we may, else explain how to.

    Idempotent; when the engine is up this is one ping.
    """
    try:
        get_client()
        return
    except EngineUnavailableError as exc:
        if not _can_self_install():
            raise EngineUnavailableError(
                f"{exc}\n(not starting an engine automatically: that needs root on Debian with "
                "apt, and DOCKER_HOST unset)"
            ) from None

    missing = _missing_packages()
    if missing:
        log(f"installing {' '.join(missing)} with apt-get")
        _apt_install(missing)

    if _dockerd_running():
        log("dockerd is running but not answering yet; waiting")  # never start a second one
    else:
        log(f"starting dockerd (log: {DOCKERD_LOG})")
        _start_dockerd()

    deadline = time.monotonic() + wait
    last: EngineUnavailableError | None = None
    while time.monotonic() < deadline:
        clear_client_cache()
        try:
            get_client(timeout=10)
            log("engine is up")
            return
        except EngineUnavailableError as exc:
            last = exc
            time.sleep(1)
    tail = ""
    if DOCKERD_LOG.exists():
        tail = "\n".join(DOCKERD_LOG.read_text(errors="replace").splitlines()[-20:])
    raise EngineUnavailableError(
        f"dockerd did not answer within {wait:.0f}s ({last}); see {DOCKERD_LOG}:\n{tail}"
    )
