"""The asyncio rollout API: whole episodes for trainers, many at once.

::

    async with RolloutPool(max_concurrency=32, warm=2, creation_rate=8) as pool:
        trajs = await asyncio.gather(*(pool.rollout("openai:qwen", task, "terminus",
                                                    base_url=URL) for task in tasks))

    traj = await rollout(backend, task, "generic")   # one episode, a pool of its own

A rollout is one verified episode (:func:`terminal_env.agent.run_agent`) returning a
:class:`~terminal_env.trajectory.Trajectory` with token ids and log-probs per turn when the backend
gives them. The pool caps the episodes in flight, shares one Docker client and one warm pool
(creation rate-limited) between them, and runs each episode's blocking terminal and model calls in
a worker thread, so the event loop stays free. With ``ray_address`` the episodes run on Ray
workers instead, each using the Docker engine of its own host (:mod:`terminal_env.distributed`).

``backend`` is a model spec (``"openai:NAME"``, ``"oracle"``, ...: built per episode when the
backend keeps episode state, else once), a backend object, or a zero-argument factory.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .distributed import RayRollouts
from .errors import ConfigError
from .models.base import SamplingParams
from .sandbox.engine import get_client
from .trajectory import Trajectory
from .trial import Backends, TrialSpec, masked_trajectory, play_trial
from .warm import WarmPool


class RolloutPool:
    def __init__(
        self,
        *,
        max_concurrency: int = 8,
        warm: int = 0,
        creation_rate: float | None = None,
        fill_workers: int = 2,
        client: Any = None,
        env_config: dict[str, Any] | None = None,
        ray_address: str | None = None,
        ray_workers: int | None = None,
    ):
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self.env_config = dict(env_config or {})
        self._sem: asyncio.Semaphore | None = None
        self._backends = Backends()
        self._closed = False
        self.ray = None
        if ray_address is not None:
            self.ray = RayRollouts(ray_address, workers=ray_workers, warm=warm, creation_rate=creation_rate,
                                   env_config=self.env_config, concurrency=max_concurrency)
            self.pool = None
            self.client = None
            self._executor = None
            return
        self.client = client if client is not None else get_client()
        self.pool = WarmPool(size=warm, workers=fill_workers, creation_rate=creation_rate)
        self._executor = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="rollout")

    # ------------------------------------------------------------------ API
    async def rollout(
        self,
        backend: Any,
        task: Any,
        harness: str = "generic",
        *,
        params: SamplingParams | dict[str, Any] | None = None,
        max_turns: int = 100,
        reward: str = "binary",
        trajectory_path: str | Path | None = None,
        seed: int | None = None,
        **backend_options: Any,
    ) -> Trajectory:
        """Play one episode of ``task`` and return its verified trajectory. Infrastructure
        failures come back as a trajectory with ``masked=True`` (never raised); mistakes in the
        arguments raise :class:`ConfigError`."""
        if self._closed:
            raise ConfigError("the rollout pool is closed")
        if isinstance(params, dict):
            params = SamplingParams(**params)
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_concurrency)
        async with self._sem:
            if self.ray is not None:
                traj = await self.ray.rollout(backend, task, harness, params=params, max_turns=max_turns,
                                              reward=reward, seed=seed, backend_options=backend_options)
                if trajectory_path is not None:
                    traj.save(trajectory_path)
                return traj
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                self._executor,
                lambda: self._run(backend, task, harness, params, max_turns, reward, trajectory_path, seed,
                                  backend_options),
            )

    async def map(self, backend: Any, tasks: list[Any], harness: str = "generic", **kw: Any) -> list[Trajectory]:
        """One rollout per task (repeat a task to get several attempts), in order."""
        return list(await asyncio.gather(*(self.rollout(backend, t, harness, **kw) for t in tasks)))

    def stats(self) -> dict[str, Any]:
        return self.pool.stats() if self.pool is not None else self.ray.stats() if self.ray else {}

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        if self.pool is not None:
            self.pool.close()
        if self.ray is not None:
            self.ray.close()

    async def __aenter__(self) -> "RolloutPool":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ one episode (a thread)
    def _run(self, backend: Any, task: Any, harness: str, params: SamplingParams | None, max_turns: int,
             reward: str, trajectory_path: Any, seed: int | None, options: dict[str, Any]) -> Trajectory:
        spec = TrialSpec(harness=harness, params=params, max_turns=max_turns, reward=reward, seed=seed,
                         env=self.env_config)
        outcome = play_trial(task, spec, lambda: self._backends.get(backend, options),
                             trajectory_path=trajectory_path, client=self.client, pool=self.pool)
        if outcome.failure in ("config", "model_setup", "bug"):
            raise outcome.exception  # the caller's mistake (or a bug): raised as it was
        if outcome.failure == "infra":  # the image could not be built, the engine is gone
            name = getattr(task, "name", None) or str(task)
            return masked_trajectory(name, harness, getattr(backend, "name", str(backend)), outcome.error)
        return outcome.traj


async def rollout(backend: Any, task: Any, harness: str = "generic", **kw: Any) -> Trajectory:
    """One episode with a pool of its own (use :class:`RolloutPool` for many)."""
    async with RolloutPool(max_concurrency=1) as pool:
        return await pool.rollout(backend, task, harness, **kw)


