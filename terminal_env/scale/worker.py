"""The rollout worker: a Ray actor on one host that plays trials on that host's Docker engine
(the driver side, :class:`~terminal_env.scale.cluster.RayRollouts`, starts and feeds them).

A worker answers every job with plain data, errors included, so that only its death reaches the
driver as a Ray error; the trial itself is played by the one trial driver,
:func:`terminal_env.trial.play_trial`.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError, EngineUnavailableError, InfraError
from ..sandbox import LABEL_MANAGED, LABEL_PREFIX
from ..sandbox.cleanup import _boot_id, owner_alive
from ..sandbox.engine import get_client
from ..task import TaskSpec
from ..tasks import load_task
from ..trial import TrialOutcome, TrialSpec, masked_trajectory
from .executor import LocalExecutor, TrialJob

# ---------------------------------------------------------------------- the worker (a Ray actor)


class RolloutWorker:
    """A rollout worker: one Ray actor on one node, with that host's Docker engine and a warm
    pool of its own; episodes run in the actor's threads, each played by this host's
    :class:`~terminal_env.scale.executor.LocalExecutor` (which keeps the live environments, the
    build locks and the backends). Every method answers with plain data (errors included), so
    that only the death of the worker reaches the driver as a Ray error."""

    def __init__(self, index: int, warm: int = 0, creation_rate: float | None = None):
        import ray  # the optional extra [ray]: only a Ray worker gets here

        self.index = index
        self.node = {"index": index, "node_id": ray.get_runtime_context().get_node_id(),
                     "host": socket.gethostname(), "boot": _boot_id(), "pid": os.getpid()}
        self.executor: LocalExecutor | None = None
        self.engine_error: str | None = None
        try:
            self.executor = LocalExecutor(warm=warm, creation_rate=creation_rate)
        except InfraError as exc:
            self.engine_error = str(exc)
        self._lock = threading.Lock()
        self.episodes = self.failures = self.trials = 0

    # -- control (a concurrency group of its own: answers while every episode thread is busy)
    def info(self) -> dict[str, Any]:
        return {**self.node, "engine_error": self.engine_error}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = {"episodes": self.episodes, "failures": self.failures, "trials": self.trials}
        local = self.executor.stats() if self.executor is not None else {"live": 0}
        warm = {k: v for k, v in local.items() if k != "live"}
        return {**counts, "live": local["live"], "warm": warm}

    def abort(self, job_id: str | None = None, run_id: str | None = None) -> int:
        """Close the environments of one job, of one run, or (neither given) all of them: their
        episodes end as infrastructure failures and their sandboxes are removed."""
        return self.executor.abort(run_id=run_id, job_id=job_id) if self.executor is not None else 0

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()

    # -- episodes
    def rollout(self, job: dict[str, Any]) -> dict[str, Any]:
        """One episode; its trajectory comes back as JSON (masked when the infrastructure failed)."""
        outcome = self._play(job)
        with self._lock:
            self.episodes += 1
            self.failures += outcome.failure is not None or outcome.traj.masked
        if outcome.failure in ("config", "model_setup"):
            return {"kind": "config", "error": outcome.error.removeprefix("ConfigError: ")}
        if outcome.failure == "bug":
            return {"kind": "bug", "error": outcome.error, "traceback": outcome.traceback}
        traj = outcome.traj
        if outcome.failure == "infra":
            ref = job["task"]
            traj = masked_trajectory(ref.get("name"), job["spec"].get("harness", "generic"),
                                     _model_name(job["backend"]), outcome.error, path=ref.get("path"))
        return {"trajectory": traj.model_dump_json(by_alias=True), "masked": traj.masked}

    def trial(self, job: dict[str, Any]) -> dict[str, Any]:
        """One try of a benchmark trial, played into a temporary directory; the files come back."""
        with tempfile.TemporaryDirectory(prefix="terminal-env-trial-") as tmp:
            outcome = self._play(job, out_dir=Path(tmp))
            files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir())
                     if p.is_file() and not p.name.startswith(".")}
        with self._lock:
            self.trials += 1
            self.failures += outcome.failure is not None or bool(outcome.traj is not None and outcome.traj.masked)
        return {"failure": outcome.failure, "error": outcome.error, "duration": outcome.duration, "files": files}

    def _play(self, job: dict[str, Any], out_dir: Path | None = None) -> TrialOutcome:
        """The job as a :class:`TrialJob` for this host's executor (a rollout also gets the warm
        pool; a benchmark trial starts cold)."""
        try:
            spec = TrialSpec.model_validate(job["spec"])
            task = self._task(job["task"])
            if self.executor is None:
                raise EngineUnavailableError(f"on host {self.node['host']}: {self.engine_error}")
        except ConfigError as exc:
            return TrialOutcome(failure="config", error=f"ConfigError: {exc}")
        except ValidationError as exc:
            return TrialOutcome(failure="config", error=f"ConfigError: invalid trial: {exc}")
        except InfraError as exc:
            return TrialOutcome(failure="infra", error=f"{type(exc).__name__}: {exc}")
        ref = job["backend"]
        backend, options = (ref["object"], {}) if "object" in ref else (ref["spec"], ref["options"])
        return self.executor.play(TrialJob(
            task=task, spec=spec, backend=backend, backend_options=options, out_dir=out_dir,
            title=job.get("title"), run_id=job.get("run_id"), id=job["id"], warm=out_dir is None,
        ))

    def _task(self, ref: dict[str, Any]) -> Any:
        if "spec" in ref:
            return TaskSpec.coerce(ref["spec"])
        path = Path(ref["path"])
        where = f"host {self.node['host']} (Ray node {self.node['node_id'][:8]})"
        if not path.is_dir():
            raise ConfigError(
                f"task directory {path} does not exist on {where}: tasks travel by path, so every "
                "host needs the same task directories at the same absolute paths"
            )
        task = load_task(path)
        if ref.get("tests_digest") and task.tests_digest != ref["tests_digest"]:
            raise ConfigError(
                f"the task at {path} on {where} differs from the driver's (tests digest "
                f"{task.tests_digest[:12]} here, {ref['tests_digest'][:12]} there): sync the task directories"
            )
        return task


def _model_name(ref: dict[str, Any]) -> str:
    if "spec" in ref:
        return ref["spec"]
    obj = ref.get("object")
    return getattr(obj, "name", None) or type(obj).__name__


def _owner_gone(labels: dict[str, str]) -> bool:
    """The container's owning process is dead (a zombie counts as dead)."""
    alive = owner_alive(labels)
    if alive is not True:
        return alive is False
    try:
        with open(f"/proc/{labels['terminal-env.owner-pid']}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2:].split()[:1] == [b"Z"]


def remove_orphans(host: str, boot: str, pid: int, wait: float = 15.0) -> list[str]:
    """On the dead worker's host: remove the containers of the process (``host``, ``boot``,
    ``pid``) once it is gone. Returns the names removed."""
    if host != socket.gethostname() or boot != _boot_id():
        raise InfraError(f"remove_orphans for host {host} ran on {socket.gethostname()}")
    client = get_client()
    filters = {"label": [f"{LABEL_MANAGED}=1", f"{LABEL_PREFIX}.owner-host={host}", f"{LABEL_PREFIX}.owner-pid={pid}"]}
    deadline = time.monotonic() + wait
    removed: list[str] = []
    for sweep in range(2):  # again after a pause: a create sent just before the death may land late
        while True:
            boxes = [c for c in client.containers.list(all=True, filters=filters)
                     if (c.labels or {}).get(f"{LABEL_PREFIX}.owner-boot") == boot]
            if all(_owner_gone(c.labels or {}) for c in boxes):
                break
            if time.monotonic() > deadline:
                raise InfraError(f"process {pid} on {host} still runs; its containers were left in place")
            time.sleep(0.2)
        for c in boxes:
            try:
                c.remove(force=True, v=True)
                removed.append(c.name)
            except Exception:  # noqa: BLE001 - gone already, or the engine refuses: gc finds it
                pass
        if sweep == 0:
            time.sleep(1.0)
    return removed
