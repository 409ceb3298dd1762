"""Executors: where trials are played. The runner and the rollout pool hand each trial to an
executor as a :class:`TrialJob` and get a :class:`~terminal_env.trial.TrialOutcome` back, without
knowing where it ran: :class:`LocalExecutor` plays it in the calling thread on this host's Docker
engine, :class:`~terminal_env.scale.cluster.RayRollouts` on a worker of a Ray cluster (each host on
its own engine). Both end in the one trial driver, :func:`terminal_env.trial.play_trial`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..sandbox.engine import get_client
from ..trial import Backends, TrialOutcome, TrialSpec, play_trial
from .warm import WarmPool


@dataclass
class TrialJob:
    """One trial to play: the task, how to play it, the backend (a spec string with its
    ``backend_options``, a backend object, or a zero-argument factory), and where its files go
    (``out_dir``: a run directory's trial directory; ``trajectory_path``: only the trajectory)."""

    task: Any
    spec: TrialSpec
    backend: Any
    backend_options: dict[str, Any] = field(default_factory=dict)
    out_dir: Path | None = None
    trajectory_path: Path | None = None
    title: str | None = None
    #: the run this trial belongs to (``abort(run_id=...)`` ends its trials)
    run_id: str | None = None
    #: this trial's own name among the executor's live ones (``abort(job_id=...)`` ends it)
    id: str | None = None
    #: how many times a trial whose worker died is tried again (Ray; None: the executor's default)
    retries: int | None = None
    #: take the sandbox from the warm pool when the executor keeps one (a benchmark trial that
    #: must start cold says False)
    warm: bool = True


class LocalExecutor:
    """Trials on this host's Docker engine, in the calling thread. ``warm`` ready sandboxes per
    task are kept by a :class:`~terminal_env.scale.warm.WarmPool` (created at most
    ``creation_rate`` per second) when ``warm`` is given. A Ray worker plays its trials through
    one of these on its own host, so everything below holds there too."""

    def __init__(self, client: Any = None, *, warm: int | None = None, creation_rate: float | None = None,
                 fill_workers: int = 2):
        self.client = client if client is not None else get_client()
        self.pool = (WarmPool(size=warm, workers=fill_workers, creation_rate=creation_rate)
                     if warm is not None else None)
        self.backends = Backends()
        self._lock = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = {}
        #: the environments of the trials being played: key -> (run id, job id, env)
        self._live: dict[Any, tuple[str | None, str | None, Any]] = {}

    def check_backend(self, backend: Any, options: dict[str, Any]) -> None:
        """Build the backend once now, so that one that refuses the configuration (a bad key, an
        unknown model) stops a run before its first trial."""
        self.backends.get(backend, options)

    def play(self, job: TrialJob) -> TrialOutcome:
        """Play ``job`` (never raises for what happens inside the trial; see ``TrialOutcome``).
        Trials of one task start their image build one at a time, so that it is built once."""
        name = getattr(job.task, "name", None) or str(job.task)
        with self._lock:
            build_lock = self._build_locks.setdefault(name, threading.Lock())

        def track(env: Any, live: bool) -> None:
            key = job.id if job.id is not None else id(env)
            with self._lock:
                if live:
                    self._live[key] = (job.run_id, job.id, env)
                else:
                    self._live.pop(key, None)

        return play_trial(
            job.task, job.spec, lambda: self.backends.get(job.backend, job.backend_options),
            out_dir=job.out_dir, trajectory_path=job.trajectory_path, title=job.title,
            client=self.client, pool=self.pool if job.warm else None, build_lock=build_lock, track=track,
        )

    def abort(self, run_id: str | None = None, job_id: str | None = None) -> int:
        """Close the environments of one run's trials, of one job, or (neither given) all of
        them: their episodes end as infrastructure failures and their sandboxes are removed.
        Returns how many were closed."""
        with self._lock:
            envs = [env for rid, jid, env in self._live.values()
                    if (run_id is None or rid == run_id) and (job_id is None or jid == job_id)]
        for env in envs:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - the trial's thread sees its sandbox gone
                pass
        return len(envs)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            live = len(self._live)
        return {"live": live, **(self.pool.stats() if self.pool is not None else {})}

    def close(self) -> None:
        self.abort()
        if self.pool is not None:
            self.pool.close()
