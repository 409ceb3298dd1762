"""Stopping every process of a sandbox but its keeper, without running anything the agent wrote.

Used by the verifier before and after the tests, and by the disk guard over budget, through
:func:`stop_processes`. Two ways:

1. **From the host** (this process is root, the engine is local and the runtime's processes are
   host processes, as under runc): the container's processes are read from its cgroup and
   signalled with ``os.kill``. Nothing runs inside the container, so a trojaned tool cannot take
   part.
2. **Inside the container**, when the host way is not available (a remote engine, not root, or a
   runtime with a kernel of its own such as gVisor's, whose processes the host cannot see; see
   :mod:`terminal_env.sandbox.runtimes`):
   ``/bin/sh`` (an image file under a protected tree: any change to it is caught by the tamper
   check that follows) runs a script of shell built-ins only (no PATH lookups, no ``timeout``
   wrapper), so a program the agent added in ``/usr/local/bin`` is never started.

Either way SIGSTOP comes before SIGKILL (a fork bomb cannot outrun the sweep) and rounds repeat
until one finds no live process but PID 1, the keeper (see :data:`terminal_env.sandbox.KEEPER`),
which cannot be killed from inside and never runs another program. Zombies are skipped: they run
nothing, and the keeper reaps them.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

import docker.errors

from ..errors import SandboxError
from .cgroups import cgroup_files

if TYPE_CHECKING:
    from .container import Sandbox

# POSIX sh, built-ins only (dash: read, kill, case, [, echo); no external program is started.
SWEEP_SCRIPT = r"""
self=$$
round=0
while [ $round -lt 200 ]; do
  round=$((round + 1)); found=0
  for sig in STOP KILL; do
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      case "$p" in 1|"$self") continue ;; esac
      line=
      read -r line 2>/dev/null < "$d/stat"
      [ -n "$line" ] || continue
      state=${line##*) }; state=${state%% *}
      [ "$state" = Z ] && continue
      kill -"$sig" "$p" 2>/dev/null && found=1
    done
  done
  [ $found = 0 ] && exit 0
done
echo "processes still alive after 200 sweeps" >&2
exit 3
"""


def host_sweep_possible() -> bool:
    """Whether this process can signal a local engine's container processes (root, local
    socket); whether a sandbox's processes are host processes is its runtime's fact."""
    host = os.environ.get("DOCKER_HOST", "")
    return os.geteuid() == 0 and (not host or host.startswith("unix://"))


def stop_processes(sandbox: Sandbox) -> tuple[bool, str]:
    """Stop and kill every process of the sandbox but its keeper, the one way that fits it:
    from the host where its processes are host processes and this process may signal them,
    else from inside with the built-in-only script. Returns (success, what went wrong)."""
    if host_sweep_possible() and sandbox.runtime.host_processes:
        if host_sweep(sandbox):
            return True, ""
        return False, "the processes could not be listed from the host"
    try:
        return sweep_inside(sandbox)
    except SandboxError as exc:
        sandbox.check_alive()
        return False, str(exc)


def host_sweep(sandbox: Sandbox, rounds: int = 100) -> bool:
    """Stop and kill the container's processes from the host, sparing its PID 1. Returns
    whether a round found nothing left to kill (False also when this is not possible here, and
    when the keeper is not among the processes seen: then they are not the agent's)."""
    if not host_sweep_possible() or not sandbox.runtime.host_processes:
        return False
    for _ in range(rounds):
        pids = cgroup_pids(sandbox.id)
        if pids is None:
            try:
                top = sandbox.client.api.top(sandbox.id, ps_args="-o pid")
            except docker.errors.APIError:
                return False
            # Only processes whose cgroup is the container's: where the runtime's processes are
            # not host processes, the engine's `top` was seen listing the whole host's.
            pids = [
                int(r[0]) for r in top.get("Processes") or []
                if r and r[0].isdigit() and _in_cgroup_of(int(r[0]), sandbox.id)
            ]
        victims = []
        init_seen = False
        for pid in pids:
            nspid, state = _ns_info(pid)
            if nspid == 1:
                init_seen = True
            elif state not in (None, "Z", "X"):
                victims.append(pid)
        if not init_seen:
            return False
        if not victims:
            _settle(sandbox.id)
            return True
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in victims:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.02)
    return False


def _settle(container_id: str, timeout: float = 5.0) -> None:
    """Wait (a little) until the keeper has reaped the killed: zombies still count against the
    container's pid limit, and after a fork bomb the verifier's next exec needs a free pid."""
    def current(path: str) -> int:
        with open(path) as fh:
            return int(fh.read())

    deadline = time.monotonic() + timeout
    for path in cgroup_files(container_id, "pids", "pids.current"):
        try:
            while current(path) > 16 and time.monotonic() < deadline:
                time.sleep(0.05)
            return
        except (OSError, ValueError):
            continue


def sweep_inside(sandbox: Sandbox) -> tuple[bool, str]:
    """The built-in-only sweep run by the image's ``/bin/sh``: (success, detail)."""
    res = sandbox.exec(["/bin/sh", "-c", SWEEP_SCRIPT], user="root", timeout=None)
    return res.exit_code == 0, res.output[-500:]


def cgroup_pids(container_id: str) -> list[int] | None:
    """Host pids of every process in the container's cgroup (None if not readable here).

    Read from the cgroup itself: under a fork bomb `docker top` was seen listing 2 processes of
    the 1016 that the cgroup held."""
    for path in cgroup_files(container_id, "pids", "cgroup.procs"):
        try:
            with open(path) as fh:
                return [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            continue
    return None


def _in_cgroup_of(host_pid: int, container_id: str) -> bool:
    """Whether a host process belongs to the container's cgroup (/proc/PID/cgroup names it)."""
    try:
        with open(f"/proc/{host_pid}/cgroup") as fh:
            return container_id in fh.read()
    except OSError:
        return False


def _ns_levels(host_pid: int) -> list[int] | None:
    """The process's pid in each pid namespace it is in, outermost first (/proc/PID/status
    NSpid); None if it is gone."""
    try:
        with open(f"/proc/{host_pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return None


def _ns_info(host_pid: int) -> tuple[int | None, str | None]:
    """(pid inside the container, state letter) from /proc/PID/status; (None, None) if gone."""
    nspid = state = None
    try:
        with open(f"/proc/{host_pid}/status") as fh:
            for line in fh:
                if line.startswith("State:"):
                    state = line.split()[1]
                elif line.startswith("NSpid:"):
                    nspid = int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return nspid, state
