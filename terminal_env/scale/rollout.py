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
workers instead, each using the Docker engine of its own host (:mod:`terminal_env.scale.cluster`).

``backend`` is a model spec (``"openai:NAME"``, ``"oracle"``, ...: built per episode when the
backend keeps episode state, else once), a backend object, or a zero-argument factory.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..harness import harness_class
from ..models.base import SamplingParams
from ..protocols import Executor
from ..trajectory import Trajectory
from ..trial import TrialSpec, masked_trajectory
from .cluster import RayRollouts
from .executor import LocalExecutor, TrialJob


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
        self._closed = False
        #: where the episodes are played: this host's engine, or a Ray cluster's workers
        self.executor: Executor
        if ray_address is not None:
            self.executor = RayRollouts(ray_address, workers=ray_workers, warm=warm, creation_rate=creation_rate,
                                        env_config=self.env_config, concurrency=max_concurrency)
        else:
            self.executor = LocalExecutor(client, warm=warm, creation_rate=creation_rate,
                                          fill_workers=fill_workers)
        self._threads = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="rollout")

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
        harness_class(harness)  # an unknown harness fails here, before an environment is made
        spec = TrialSpec(harness=harness, params=params, max_turns=max_turns, reward=reward, seed=seed,
                         env=self.env_config)
        job = TrialJob(task=task, spec=spec, backend=backend, backend_options=backend_options,
                       trajectory_path=Path(trajectory_path) if trajectory_path is not None else None)
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.max_concurrency)
        async with self._sem:
            outcome = await asyncio.get_running_loop().run_in_executor(self._threads, self.executor.play, job)
        if outcome.failure in ("config", "model_setup", "bug"):
            raise outcome.exception  # the caller's mistake (or a bug): raised as it was
        if outcome.failure == "infra":  # the image could not be built, the engine is gone
            return masked_trajectory(getattr(task, "name", None) or str(task), harness,
                                     getattr(backend, "name", None) or str(backend), outcome.error)
        return outcome.traj

    async def map(self, backend: Any, tasks: list[Any], harness: str = "generic", **kw: Any) -> list[Trajectory]:
        """One rollout per task (repeat a task to get several attempts), in order."""
        return list(await asyncio.gather(*(self.rollout(backend, t, harness, **kw) for t in tasks)))

    def stats(self) -> dict[str, Any]:
        return self.executor.stats()

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._threads.shutdown(wait=True)
        self.executor.close()

    async def __aenter__(self) -> "RolloutPool":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


async def rollout(backend: Any, task: Any, harness: str = "generic", **kw: Any) -> Trajectory:
    """One episode with a pool of its own (use :class:`RolloutPool` for many)."""
    async with RolloutPool(max_concurrency=1) as pool:
        return await pool.rollout(backend, task, harness, **kw)


