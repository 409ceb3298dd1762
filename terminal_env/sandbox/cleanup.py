"""Removing sandboxes whatever happens to the process that owns them.

Three layers, because no single one covers every way a process ends:

1. context managers and ``close()`` in normal code paths;
2. a registry of live sandboxes emptied by ``atexit`` and by SIGTERM/SIGHUP handlers (installed
   only where the application left the default handler in place);
3. owner labels on every container (host, pid, process start time), so that ``terminal-env gc``
   can remove the containers of processes that died by SIGKILL or power loss, and never those of
   a process that is still alive (the start time defends against pid reuse).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
from typing import TYPE_CHECKING, Any

from .engine import get_client

if TYPE_CHECKING:
    from .container import Sandbox

# Every container of this project carries these labels (owner host, boot id, pid, start time).
LABEL_PREFIX = "terminal-env"
LABEL_MANAGED = f"{LABEL_PREFIX}.managed"

_lock = threading.Lock()
_live: dict[int, "Sandbox"] = {}
_installed = False


def _proc_start_time(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields follow the last ')'.
    rest = stat[stat.rfind(b")") + 2 :].split()
    return rest[19].decode() if len(rest) > 19 else None


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown"


def owner_labels() -> dict[str, str]:
    pid = os.getpid()
    return {
        "terminal-env.owner-host": socket.gethostname(),
        "terminal-env.owner-boot": _boot_id(),
        "terminal-env.owner-pid": str(pid),
        "terminal-env.owner-start": _proc_start_time(pid) or "",
    }


def owner_alive(labels: dict[str, str]) -> bool | None:
    """Whether the process that owns a container still runs; None if it is on another host."""
    if labels.get("terminal-env.owner-host") != socket.gethostname():
        return None
    if labels.get("terminal-env.owner-boot") != _boot_id():
        return False  # the machine rebooted since: the owner is certainly gone
    try:
        pid = int(labels.get("terminal-env.owner-pid", ""))
    except ValueError:
        return False
    start = _proc_start_time(pid)
    return start is not None and start == labels.get("terminal-env.owner-start")


def register(sandbox: "Sandbox") -> None:
    global _installed
    with _lock:
        _live[id(sandbox)] = sandbox
        if not _installed:
            _installed = True
            atexit.register(remove_all)
            _install_signal_handlers()


def unregister(sandbox: "Sandbox") -> None:
    with _lock:
        _live.pop(id(sandbox), None)


def live_count() -> int:
    with _lock:
        return len(_live)


def remove_all() -> None:
    """Remove every sandbox this process still holds (called at exit)."""
    with _lock:
        boxes = list(_live.values())
    for box in boxes:
        try:
            box.remove()
        except Exception:  # noqa: BLE001 - at exit, keep going with the others
            pass


def _install_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: Any) -> None:
        remove_all()
        # Re-raise the default behaviour so the exit status still says which signal ended us.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def gc(client: Any = None, *, everything: bool = False, dry_run: bool = False) -> list[dict[str, str]]:
    """Remove the project's containers whose owning process is gone, then the networks and
    volumes of multi-container tasks (:mod:`.stack`) whose owner is gone.

    With ``everything=True`` everything labelled by this project is removed, whoever owns it.
    Returns one record per object considered: kind, name, task, owner pid, action.
    """
    client = client or get_client()
    records = []
    flt = {"label": f"{LABEL_MANAGED}=1"}
    kinds = (
        ("container", lambda: client.containers.list(all=True, filters=flt, ignore_removed=True),
         lambda o: o.remove(force=True, v=True), lambda o: o.name),
        ("network", lambda: client.networks.list(filters=flt), lambda o: o.remove(), lambda o: o.name),
        ("volume", lambda: client.volumes.list(filters=flt), lambda o: o.remove(force=True),
         lambda o: o.name),
    )
    for kind, listing, remove, name_of in kinds:
        for obj in listing():
            labels = (obj.labels if kind == "container" else obj.attrs.get("Labels")) or {}
            alive = owner_alive(labels)
            if everything or alive is False:
                action = "would remove" if dry_run else "removed"
                if not dry_run:
                    try:
                        remove(obj)
                    except Exception as exc:  # noqa: BLE001 - report and continue with the rest
                        action = f"failed: {exc}"
            elif alive is None:
                action = "kept (owned by another host)"
            else:
                action = "kept (owner alive)"
            records.append(
                {
                    "kind": kind,
                    "name": name_of(obj),
                    "task": labels.get("terminal-env.task", "?"),
                    "owner_pid": labels.get("terminal-env.owner-pid", "?"),
                    "action": action,
                }
            )
    return records
