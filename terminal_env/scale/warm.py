"""Warm pools: sandboxes started ahead of time, so that ``reset()`` takes one that is ready.

Every episode still gets a fresh container. A pool holds, per *recipe* (the image, the limits,
the task's files and setup, the terminal's size: everything that makes two sandboxes
interchangeable), a few sandboxes that are started, prepared and have their shell running, and
no episode has touched yet. ``acquire`` hands one out (or starts one on the spot when none is
ready: a miss) and asks the background workers to refill; a used sandbox is removed in the
background, off the episode's critical path.

Container creation goes through one rate limiter (``creation_rate`` per second), so a trainer
that resets hundreds of environments at once does not flood the engine. A pool that cannot fill
(the image is missing, the engine refuses) stops trying for that recipe after a few failures in a
row and says why in :meth:`WarmPool.stats`; ``acquire`` then starts sandboxes itself, so the
failure reaches the episode as the infrastructure error it is.
"""

from __future__ import annotations

import collections
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ConfigError, InfraError


@dataclass
class Ready:
    """A sandbox with its shell running, ready for one episode."""

    sandbox: Any
    session: Any
    made_at: float = field(default_factory=time.monotonic)
    seconds_to_make: float = 0.0

    def discard(self) -> None:
        try:
            self.session.close()
        finally:
            self.sandbox.remove()


class CreationLimiter:
    """A token bucket shared by every thread: at most ``rate`` container creations per second
    on average, bursts of up to ``burst``. ``rate=None`` means no limit."""

    def __init__(self, rate: float | None = None, burst: int = 4):
        if rate is not None and rate <= 0:
            raise ConfigError(f"creation_rate must be > 0 containers per second, not {rate!r}")
        self.rate, self.burst = rate, max(1, int(burst))
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Wait for a token; return the seconds waited."""
        if self.rate is None:
            return 0.0
        waited = 0.0
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return waited
                need = (1 - self._tokens) / self.rate
            time.sleep(need)
            waited += need


class _Recipe:
    def __init__(self, make: Callable[[], Ready]):
        self.make = make
        self.idle: collections.deque[Ready] = collections.deque()
        self.filling = 0
        self.failures = 0  # in a row
        self.last_error: str | None = None


class WarmPool:
    """Pre-started sandboxes per recipe. Share one pool between many environments::

        pool = WarmPool(size=4)
        envs = [TerminalEnv(task, pool=pool) for _ in range(8)]
        ...
        pool.close()   # removes the sandboxes nobody took
    """

    MAX_FAILURES = 3

    def __init__(self, size: int = 2, *, workers: int = 2, creation_rate: float | None = None,
                 burst: int = 4, max_idle_seconds: float = 1800.0):
        if size < 0 or workers < 1:
            raise ConfigError(f"WarmPool needs size >= 0 and workers >= 1, got size={size}, workers={workers}")
        self.size = size
        self.limiter = CreationLimiter(creation_rate, burst)
        self.max_idle_seconds = max_idle_seconds
        self._recipes: dict[str, _Recipe] = {}
        self._lock = threading.Lock()
        self._fill = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="warm-fill")
        self._reap = ThreadPoolExecutor(max_workers=2, thread_name_prefix="warm-reap")
        self._closed = False
        self.hits = self.misses = self.made = self.fill_failures = 0

    # ------------------------------------------------------------------ episodes
    def acquire(self, key: str, make: Callable[[], Ready]) -> tuple[Ready, bool]:
        """A ready sandbox for ``key`` and whether it came warm from the pool. ``make`` starts
        one (used on a miss and by the refill)."""
        if self._closed:
            raise ConfigError("the warm pool is closed")
        with self._lock:
            recipe = self._recipes.get(key)
            if recipe is None:
                recipe = self._recipes[key] = _Recipe(make)
        ready = None
        while ready is None:
            with self._lock:
                if not recipe.idle:
                    break
                candidate = recipe.idle.popleft()
            if self._usable(candidate):
                ready = candidate
            else:
                self.release(candidate)
        self._refill(key, recipe)
        with self._lock:
            if ready is not None:
                self.hits += 1
            else:
                self.misses += 1
        if ready is not None:
            return ready, True
        return self._make(recipe), False

    def release(self, ready: Ready | None) -> None:
        """Remove a used (or broken) sandbox in the background."""
        if ready is None:
            return
        if self._closed:
            ready.discard()
            return
        self._reap.submit(self._discard_quietly, ready)

    def prefill(self, key: str, make: Callable[[], Ready], n: int | None = None, timeout: float = 300.0) -> int:
        """Start up to ``n`` (default ``size``) sandboxes for ``key`` now and wait for them;
        return how many are ready."""
        n = self.size if n is None else n
        with self._lock:
            recipe = self._recipes.setdefault(key, _Recipe(make))
        self._refill(key, recipe, target=n)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                ready, filling = len(recipe.idle), recipe.filling
            if ready >= n or (filling == 0 and recipe.failures >= self.MAX_FAILURES):
                return ready
            if filling == 0:
                self._refill(key, recipe, target=n)
            time.sleep(0.02)
        return len(recipe.idle)

    # ------------------------------------------------------------------ state
    def stats(self) -> dict[str, Any]:
        with self._lock:
            recipes = {k: {"idle": len(r.idle), "filling": r.filling, "failures_in_a_row": r.failures,
                           "last_error": r.last_error} for k, r in self._recipes.items()}
        return {"size": self.size, "hits": self.hits, "misses": self.misses, "made": self.made,
                "fill_failures": self.fill_failures, "recipes": recipes}

    def close(self) -> None:
        """Stop refilling and remove every sandbox nobody took (used ones still being removed
        are waited for)."""
        if self._closed:
            return
        self._closed = True
        self._fill.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            idle = [r for recipe in self._recipes.values() for r in recipe.idle]
            for recipe in self._recipes.values():
                recipe.idle.clear()
        for ready in idle:
            self._discard_quietly(ready)
        self._reap.shutdown(wait=True)

    def __enter__(self) -> "WarmPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _make(self, recipe: _Recipe) -> Ready:
        self.limiter.acquire()
        t0 = time.monotonic()
        ready = recipe.make()
        ready.seconds_to_make = time.monotonic() - t0
        with self._lock:
            self.made += 1
        return ready

    def _usable(self, ready: Ready) -> bool:
        if time.monotonic() - ready.made_at > self.max_idle_seconds:
            return False
        try:  # one round trip through the shell: the container and the shell both answer
            out = ready.session.run("true", timeout=5)
        except InfraError:
            return False
        return out.exit_code == 0 and not out.shell_restarted and not out.timed_out

    def _refill(self, key: str, recipe: _Recipe, target: int | None = None) -> None:
        target = self.size if target is None else target
        with self._lock:
            if self._closed or recipe.failures >= self.MAX_FAILURES:
                return
            missing = target - len(recipe.idle) - recipe.filling
            recipe.filling += max(0, missing)
        for _ in range(max(0, missing)):
            try:
                self._fill.submit(self._fill_one, recipe)
            except RuntimeError:  # shut down meanwhile
                with self._lock:
                    recipe.filling -= 1

    def _fill_one(self, recipe: _Recipe) -> None:
        try:
            if self._closed:
                return
            ready = self._make(recipe)
        except Exception as exc:  # noqa: BLE001 - kept for stats(); acquire() surfaces it
            with self._lock:
                recipe.failures += 1
                recipe.last_error = f"{type(exc).__name__}: {exc}"
                self.fill_failures += 1
            return
        finally:
            with self._lock:
                recipe.filling -= 1
        with self._lock:
            recipe.failures = 0
            if not self._closed:
                recipe.idle.append(ready)
                return
        ready.discard()

    @staticmethod
    def _discard_quietly(ready: Ready) -> None:
        try:
            ready.discard()
        except Exception:  # noqa: BLE001 - cleanup's gc finds what is left
            pass
