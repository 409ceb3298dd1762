"""A disk budget for a sandbox on engines that cannot give a container a quota.

Docker's ``--storage-opt size=`` needs overlay2 on xfs with ``pquota``; on ext4 the engine
refuses it. So the budget (``SandboxConfig.storage_mb``, from the task's ``storage_mb``) is
enforced by watching instead: :class:`DiskGuard` measures the container's writable layer and,
when it is over the budget, stops and kills every process of the container except its PID 1,
the keeper (the same sweep the verifier uses). The agent's shell dies with them, so a command that
is still writing (``dd if=/dev/zero of=/big``) ends at once and the session returns.

Measuring: the writable layer is the overlay2 ``UpperDir``. Read from the host it is walked with
``os.scandir`` summing ``st_blocks`` (real allocation: sparse files cost what they use, hard
links count once); this is fast (tens of ms for thousands of files) and bounded in time. Where
the directory is not readable (not root, remote engine, another storage driver) the engine's
``SizeRw`` (``docker inspect --size``) is used instead, which is slower and counts apparent size.

Checking: a background thread per sandbox checks while it lives (every ``interval`` seconds,
slower when a scan is expensive), so a writer running for minutes, or in the background between
steps, is caught while it runs; the session also checks after each command (rate-limited).
Not counted: tmpfs mounts (``/dev/shm``, 64 MB by default) and memory; volumes (none are used).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import docker.errors
import requests

from .sweep import stop_processes

log = logging.getLogger(__name__)

MB = 1024 * 1024
#: least seconds between two checks after commands
CHECK_INTERVAL = 0.5
#: least seconds between two background checks (stretched to 20x the time a scan takes)
POLL_INTERVAL = 0.01
#: bytes per second a writer of zeros reaches into the page cache on a small machine
FAST_WRITER = 1.5e9
#: a scan of the upper dir stops after this long and reports what it has counted so far
SCAN_TIME_LIMIT = 2.0
#: after a kill, growth beyond this means something still writes, and is killed again
GROWTH_MARGIN = 1 * MB


def scan_usage(root: str, *, time_limit: float = SCAN_TIME_LIMIT) -> tuple[int, int, bool]:
    """Allocated bytes below ``root`` (directories included, hard links once, symlinks not
    followed): ``(bytes, entries, complete)``. Stops after ``time_limit`` seconds with a lower
    bound (``complete`` False)."""
    deadline = time.monotonic() + time_limit
    total = entries = 0
    seen: set[int] = set()
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            it = os.scandir(path)
        except OSError:
            continue  # removed while we walk, or not a directory any more
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                entries += 1
                if st.st_nlink > 1 and not is_dir:
                    if st.st_ino in seen:
                        continue
                    seen.add(st.st_ino)
                total += st.st_blocks * 512
                if is_dir:
                    stack.append(entry.path)
                if not entries & 1023 and time.monotonic() > deadline:
                    return total, entries, False
    return total, entries, True


def size_rw(api: Any, container_id: str) -> int | None:
    """The engine's size of a container's writable layer (``docker inspect --size``); docker-py's
    ``inspect_container`` has no ``size`` argument, so the endpoint is called directly."""
    url = api._url("/containers/{0}/json", container_id)
    return api._result(api._get(url, params={"size": 1}), True).get("SizeRw")


class DiskGuard:
    """Keeps a sandbox's writable layer under ``limit_mb``; see the module's docstring."""

    def __init__(
        self,
        sandbox: Any,
        limit_mb: int,
        *,
        interval: float = CHECK_INTERVAL,
        poll: float = POLL_INTERVAL,
    ):
        self.sandbox = sandbox
        self.limit_mb = int(limit_mb)
        self.limit = self.limit_mb * MB
        #: least seconds between two checks after commands (check() without force)
        self.interval = interval
        #: least seconds between two background checks: a quarter of the time a fast writer
        #: (~1.5 GB/s into the page cache) needs to fill the budget, so small budgets are
        #: watched closely and the default 10 GB ones cost almost nothing (at most 1 s apart)
        self.poll = min(max(poll, self.limit / FAST_WRITER / 4), 1.0)
        #: the agent went over the budget at least once (sticky)
        self.tripped = False
        #: how many times processes were killed for it
        self.trips = 0
        #: bytes of the writable layer at the last measurement (None before the first)
        self.used: int | None = None
        #: largest measurement seen, bytes
        self.peak = 0
        #: "upperdir" or "sizerw": how the layer is measured
        self.method: str | None = None
        self.last_scan_seconds = 0.0
        self._upper: str | None = None
        self._last_check = 0.0
        self._killed_at = 0
        self._recent: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ measuring
    def _locate(self) -> None:
        """Find the upper dir once (one inspect); fall back to SizeRw if it is not readable."""
        try:
            attrs = self.sandbox.client.api.inspect_container(self.sandbox.id)
        except (docker.errors.APIError, requests.RequestException, OSError):
            return  # try again at the next check
        driver = attrs.get("GraphDriver") or {}
        upper = (driver.get("Data") or {}).get("UpperDir")
        local = os.environ.get("DOCKER_HOST", "unix://").startswith("unix://")
        if local and driver.get("Name") in ("overlay2", "overlay") and upper and os.access(upper, os.R_OK | os.X_OK):
            self._upper, self.method = upper, "upperdir"
        else:
            self.method = "sizerw"

    def measure(self) -> int | None:
        """Bytes in the container's writable layer now (None if it cannot be measured)."""
        if self.method is None:
            self._locate()
        t0 = time.perf_counter()
        used: int | None
        if self.method == "upperdir" and self._upper is not None:
            used, _, complete = scan_usage(self._upper)
            if not complete:
                log.warning("disk scan of %s stopped after %.1f s", self.sandbox.name, SCAN_TIME_LIMIT)
        elif self.method == "sizerw":
            try:
                used = size_rw(self.sandbox.client.api, self.sandbox.id)
            except (docker.errors.APIError, requests.RequestException, OSError):
                used = None
        else:
            used = None
        self.last_scan_seconds = time.perf_counter() - t0
        if used is not None:
            self.used = int(used)
            self.peak = max(self.peak, self.used)
        return used

    # ------------------------------------------------------------------ enforcing
    def check(self, *, force: bool = False) -> bool:
        """Measure (at most every ``interval`` seconds unless ``force``) and, if the layer is over
        the budget, kill the agent's processes. Returns whether the budget was ever exceeded."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_check < self.interval:
                return self.tripped
            self._last_check = now
            used = self.measure()
            # Over the budget: kill. Once killed, again only if the layer keeps growing (a
            # process that escaped), not for the files left behind: the session's new shell
            # must be able to start.
            if used is not None and used > max(self.limit, self._killed_at + GROWTH_MARGIN):
                self._killed_at = used
                self.tripped = True
                self.trips += 1
                log.warning(
                    "sandbox %s wrote %.0f MB, over its disk budget of %d MB: stopping its processes",
                    self.sandbox.name, used / MB, self.limit_mb,
                )
                self._kill_processes()
                # What the killed writers got out before they died is not growth.
                self._killed_at = max(used, self.measure() or 0)
            return self.tripped

    def _kill_processes(self) -> None:
        """Stop then kill everything but PID 1 (the keeper): the verifier's sweep (from the host
        when possible: no exec, immediate; else with the built-in-only script inside)."""
        try:
            ok, detail = stop_processes(self.sandbox)
        except Exception as exc:  # the container may be going away under us
            ok, detail = False, str(exc)
        if not ok:
            log.warning("could not stop the processes of %s: %s", self.sandbox.name, detail)

    def wait_idle(self) -> None:
        """Return once no check (and no kill) is in progress: a session that lost its shell to
        a kill waits here before it starts a new one, or the sweep would take that one too."""
        with self._lock:
            pass

    def message(self) -> str:
        used = f" ({self.peak / MB:.0f} MB written)" if self.peak else ""
        return f"disk budget of {self.limit_mb} MB exceeded{used}"

    # ------------------------------------------------------------------ background thread
    def start(self) -> "DiskGuard":
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"disk-guard-{self.sandbox.name}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the background checks (the verifier's own writes are not the agent's)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=SCAN_TIME_LIMIT + 5)

    def _run(self) -> None:
        while not self._stop.wait(self._pause()):
            try:
                self.check(force=True)
            except Exception as exc:  # never let the watcher die silently on a transient error
                log.debug("disk check of %s failed: %s", self.sandbox.name, exc)

    def _pause(self) -> float:
        # Often while a scan is cheap (a writer can put 1-2 GB/s into the page cache), and the
        # scanning cost near 5% of one core however many files the layer holds.
        # The least of the recent scans: one scan slowed by a writer must not stretch the pause.
        self._recent.append(self.last_scan_seconds)
        del self._recent[:-8]
        return min(max(self.poll, 20 * min(self._recent)), 5.0)
