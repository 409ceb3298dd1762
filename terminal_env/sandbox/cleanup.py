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
import contextlib
import logging
import os
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import InfraError
from .engine import get_client

if TYPE_CHECKING:
    from .container import Sandbox

# Every container of this project carries these labels (owner host, boot id, pid, start time).
LABEL_PREFIX = "terminal-env"
LABEL_MANAGED = f"{LABEL_PREFIX}.managed"

_lock = threading.RLock()  # re-entrant: the signal handler may run while its thread holds it
_settled = threading.Condition(_lock)
_creating = 0  # sandboxes between their engine "create" and register()
_live: dict[int, "Sandbox"] = {}
_installed = False
_handlers = False
#: set by the SIGTERM/SIGHUP handler: the process is going, and a sandbox that a worker thread
#: creates meanwhile is removed at once instead of outliving it
_closing = False


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


@contextlib.contextmanager
def creating() -> Any:
    """Around a sandbox's creation in the engine up to its :func:`register`: the signal
    handler waits for these before the process ends, so that none is created unseen."""
    global _creating
    with _lock:
        if _closing:
            raise InfraError("this process is stopping (a signal): no new sandbox is started")
        _creating += 1
    try:
        yield
    finally:
        with _lock:
            _creating -= 1
            _settled.notify_all()


def register(sandbox: "Sandbox") -> None:
    global _installed
    with _lock:
        closing = _closing
        if not closing:
            _live[id(sandbox)] = sandbox
            if not _installed:
                _installed = True
                atexit.register(remove_all)
    if closing:
        with contextlib.suppress(Exception):  # the process is going: never let this one stay
            sandbox.remove()
        raise InfraError("this process is stopping (a signal): no new sandbox is started")
    install_signal_handlers()


def unregister(sandbox: "Sandbox") -> None:
    with _lock:
        _live.pop(id(sandbox), None)


_remover: Any = None


def remove_later(sandbox: "Sandbox") -> Any:
    """Remove ``sandbox`` on a background thread (a removal is ~50 ms of the engine's time the
    caller need not wait for); returns the future. It stays registered until its removal
    starts, so an exit meanwhile still removes it; the interpreter waits for removals under way."""
    global _remover
    with _lock:
        if _remover is None:
            _remover = ThreadPoolExecutor(max_workers=2, thread_name_prefix="terminal-env-remove")
        return _remover.submit(_remove_quietly, sandbox)


def _forget_remover() -> None:
    global _remover
    _remover = None  # a forked child has none of its parent's threads: it starts its own


os.register_at_fork(after_in_child=_forget_remover)


def _remove_quietly(sandbox: "Sandbox") -> None:
    try:
        sandbox.remove()
    except Exception as exc:  # noqa: BLE001 - a background removal has no caller to raise to
        logging.getLogger(__name__).warning("removing sandbox %s failed: %s", sandbox.name, exc)


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


def install_signal_handlers() -> None:
    """Remove this process's sandboxes on SIGTERM and SIGHUP. Signal handlers can only be set
    from the main thread: a program whose sandboxes start in worker threads (a thread pool of
    trials or checks) calls this from its main thread first (the CLI does); later calls, and
    calls from other threads, do nothing."""
    global _handlers
    if _handlers or threading.current_thread() is not threading.main_thread():
        return
    _handlers = True

    def handler(signum: int, frame: Any) -> None:
        global _closing
        with _lock:
            _closing = True
        remove_all()
        with _lock:  # creations under way register (and so remove themselves) first
            _settled.wait_for(lambda: _creating == 0, timeout=30)
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
