"""Episodes on many hosts, with Ray: each host plays them on its own Docker engine.

::

    async with RolloutPool(ray_address="head:6379", warm=2) as pool:   # or RayRollouts(...)
        trajs = await pool.map("openai:qwen", tasks, "terminus", base_url=URL)

    terminal-env run --tasks pool --model oracle --ray-address head:6379     # the runner

**Deployment.** Every host that plays episodes runs a Ray node and a Docker engine: ``ray start
--head --port=6379`` on one host, ``ray start --address=HEAD:6379`` on the others, and on every
host the same terminal-env and Ray as the driver (``pip install 'terminal-env[ray]'``) and the
base image (``terminal-env images bootstrap``). The driver (a trainer, or ``terminal-env run
--ray-address``) runs on a host of the cluster and connects with :class:`RayRollouts`, which
starts *rollout workers*: Ray actors, by default one per node that has CPUs, each pinned to its
node. A worker talks to the Docker engine of its own host (``DOCKER_HOST`` as that host's ``ray
start`` saw it, else the local socket), keeps its own warm pool and creation rate limit, and
plays episodes in threads. A job goes to the worker with the fewest episodes in flight.

**Tasks travel by path.** A task directory must exist at the same absolute path on every host
(a shared file system, or the same checkout everywhere); nothing of it is shipped. The job
carries the task's tests digest, and a worker whose copy differs refuses it rather than score
against other tests. A host builds a task's image on first use (cached by content, like
locally). Task specs (:class:`~terminal_env.task.TaskSpec`) travel whole.

**What comes back.** A rollout's trajectory comes back as JSON and is rebuilt on the driver,
with ``traj.extra["ray"]`` saying where it ran (node, host, worker pid, tries). A benchmark
trial is played into a temporary directory on the worker; the *contents* of its files
(trajectory, recording, verifier output) come back and the driver writes them into the run
directory: no file system is shared for outputs.

**Faults.** A worker that dies under an episode (its actor killed, its process SIGKILLed, its
node gone) costs the episode, never the caller: it is retried on another worker, or on the
worker started in the dead one's place, up to ``max_task_retries`` times, and then comes back as
a masked trajectory (``termination="infra_error"``) whose error names the cause. In the runner a
lost try is an infrastructure failure like any other, retried up to ``--retries`` times (what the
lost try had written dies with its worker). The dead worker's sandboxes are removed before the
episode is retried or returned: containers carry their owner's host, boot and pid, so a Ray task
pinned to a live node of the dead worker's host removes those whose owner is gone. Only when a
whole host is lost do its containers wait for ``terminal-env gc`` there. A driver that dies takes
its workers with it (Ray's fate sharing); ``terminal-env gc`` on each host removes what they held.

**One host, loopback only.** Ray replaces a node address of 127.0.0.1 by the host's first
non-loopback address. ``tests/test_distributed.py`` shows how to keep a two-node cluster on one
host entirely on loopback (a shim for ``ray start``, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` for
drivers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from ..errors import ConfigError, TerminalEnvError
from ..fileio import write_atomic
from ..harness import harness_class
from ..models.registry import BACKEND_KINDS, parse_spec
from ..task import TaskSpec
from ..tasks import load_task
from ..trajectory import Trajectory
from ..trial import TrialOutcome, TrialSpec, masked_trajectory
from .executor import TrialJob
from .worker import RolloutWorker, _model_name, remove_orphans

INSTALL_HINT = "pip install 'terminal-env[ray]'"
START_HINT = (
    "Start a cluster there (`ray start --head --port=PORT` on one host, `ray start --address=HEAD:PORT` "
    "on the others) and pass the address `ray start --head` printed, or leave out the Ray address "
    "(--ray-address) to run on this host's engine"
)
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}


class RemoteError(TerminalEnvError, RuntimeError):
    """Code on a rollout worker failed in a way that is neither the user's nor the
    infrastructure's (a bug); the message carries the worker's traceback."""


def require_ray() -> Any:
    try:
        import ray  # the optional extra [ray]
    except ImportError:
        raise ConfigError(f"rollouts on a Ray cluster need Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def _short(exc: BaseException) -> str:
    """The first line of an error's text, and the line giving the cause when Ray's text has one
    ("The actor is dead because it was killed by `ray.kill`.")."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    cause = next((ln for ln in lines[1:] if " because " in ln), None)
    if cause:
        text = f"{text} {cause}"
    return text[:400]


# ---------------------------------------------------------------------- connecting


def _host_port(address: str) -> tuple[str, int] | None:
    """``("host", port)`` of ``host:port`` or ``ray://host:port``; None for ``auto`` and the like."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def probe(address: str, timeout: float = 5.0) -> None:
    """Raise :class:`ConfigError` unless a gRPC server (a Ray GCS) answers at ``address``, within
    about ``timeout`` seconds. ``ray.init`` itself waits minutes for a GCS that is not there."""
    parsed = _host_port(address)
    if parsed is None:
        return
    host, port = parsed
    reason = None
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return  # a TLS handshake is Ray's business
            sock.settimeout(timeout)
            # the HTTP/2 client preface and an empty SETTINGS frame: a gRPC server answers with
            # its own SETTINGS frame (type 4); anything else is not a Ray cluster
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            head = b""
            while len(head) < 9:
                chunk = sock.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
            if len(head) < 9 or head[3] != 4:
                reason = "something listens there, but it is not a Ray cluster (no gRPC answer)"
    except TimeoutError:
        reason = f"no answer within {timeout:g} s"
    except OSError as exc:
        reason = exc.strerror or _short(exc)
    if reason is not None:
        raise ConfigError(f"cannot reach a Ray cluster at {address}: {reason}. {START_HINT}.")


def connect(address: str, *, log_to_driver: bool = False) -> bool:
    """Connect this process to the Ray cluster at ``address``; True when this call did
    ``ray.init`` (and so its owner may ``ray.shutdown``), False when the process was connected
    already (to the same cluster: another one is refused)."""
    ray = require_ray()
    if ray.is_initialized():
        _check_same_cluster(ray, address)
        return False
    probe(address)
    try:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=log_to_driver)
    except Exception as exc:  # ConnectionError, RuntimeError, RpcError, ...: all mean "not there"
        raise ConfigError(f"cannot connect to the Ray cluster at {address}: {_short(exc)}. {START_HINT}.") from None
    return True


def _check_same_cluster(ray: Any, address: str) -> None:
    wanted = _host_port(address)
    if wanted is None or address.startswith("ray://"):
        return
    try:
        current = _host_port(ray.get_runtime_context().gcs_address or "")
    except Exception:  # noqa: BLE001 - a client-mode connection has no GCS address to compare
        return
    if current is None:
        return

    def norm(hp: tuple[str, int]) -> tuple[str, int]:
        return ("localhost" if hp[0] in LOCAL_HOSTS else hp[0], hp[1])

    if norm(current) != norm(wanted):
        raise ConfigError(
            f"this process is connected to the Ray cluster at {current[0]}:{current[1]}, not {address}; "
            "call ray.shutdown() first, or pass the address it is connected to"
        )


# ---------------------------------------------------------------------- jobs


def task_ref(task: Any) -> dict[str, Any]:
    """A task as it travels to a worker: a directory by absolute path (with its tests digest), or
    a whole :class:`~terminal_env.task.TaskSpec`."""
    if isinstance(task, (str, os.PathLike)):
        task = load_task(task)  # a missing or broken task fails here, on the driver
    if hasattr(task, "tests_digest") and hasattr(task, "path"):
        return {"path": os.path.abspath(task.path), "tests_digest": task.tests_digest, "name": task.name}
    spec = TaskSpec.coerce(task)
    return {"spec": spec.model_dump(mode="json"), "name": spec.name}


def backend_ref(backend: Any, options: dict[str, Any]) -> dict[str, Any]:
    """A model backend as it travels: a spec and its options (built on the worker), or a
    picklable backend object or zero-argument factory (each episode gets its own copy)."""
    if isinstance(backend, str):
        kind, _ = parse_spec(backend)
        if kind not in BACKEND_KINDS:
            raise ConfigError(f"unknown model kind {kind!r} in {backend!r}; "
                              f"known kinds: {', '.join(sorted(BACKEND_KINDS))}")
        return {"spec": backend, "options": dict(options)}
    if options:
        raise ConfigError(f"backend options {sorted(options)} need a backend spec string, not an object")
    return {"object": backend}


def _raise_for(reply: dict[str, Any]) -> dict[str, Any]:
    """Raise what a worker's answer says was a mistake of the user or a bug; else the answer."""
    if reply.get("kind") == "config":
        raise ConfigError(reply["error"])
    if reply.get("kind") == "bug":
        raise RemoteError(f"{reply['error']} on {reply['where']}\n{reply.get('traceback', '')}".rstrip())
    return reply


# Ray's remote wrappers of the worker class and the orphan remover, made once (on first use:
# ray is an optional extra).
_ACTOR_CLASSES: dict[int, Any] = {}
_ORPHAN_TASK: Any = None


def _actor_class(concurrency: int) -> Any:
    ray = require_ray()
    cls = _ACTOR_CLASSES.get(concurrency)
    if cls is None:
        cls = _ACTOR_CLASSES[concurrency] = ray.remote(
            num_cpus=0, max_restarts=0, max_task_retries=0,
            concurrency_groups={"episodes": concurrency, "control": 4},
        )(RolloutWorker)
    return cls


def _orphan_task() -> Any:
    global _ORPHAN_TASK
    if _ORPHAN_TASK is None:
        _ORPHAN_TASK = require_ray().remote(num_cpus=0, max_retries=0)(remove_orphans)
    return _ORPHAN_TASK


# ---------------------------------------------------------------------- the driver side


class _Slot:
    """One rollout worker as the driver sees it."""

    def __init__(self, index: int, actor: Any, restarts: int = 0):
        self.index, self.actor, self.restarts = index, actor, restarts
        self.info: dict[str, Any] | None = None  # set when the worker answered
        self.alive = True
        self.error: str | None = None
        self.inflight = self.episodes = self.failures = 0
        self.lost: asyncio.Future | None = None

    def where(self) -> str:
        i = self.info or {}
        return (f"rollout worker {self.index} on Ray node {str(i.get('node_id', '?'))[:8]} "
                f"(host {i.get('host', '?')}, pid {i.get('pid', '?')})")


class RayRollouts:
    """Rollout workers on a Ray cluster (see the module's text for the deployment).

    ``workers``: how many (default: one per node with CPUs); ``warm`` and ``creation_rate``: each
    worker's warm pool; ``env_config``: the environments' :class:`~terminal_env.env.EnvConfig`;
    ``max_task_retries``: how many times an episode whose worker died is tried again;
    ``concurrency``: episodes at once per worker.
    """

    def __init__(
        self,
        address: str,
        *,
        workers: int | None = None,
        warm: int = 0,
        creation_rate: float | None = None,
        env_config: dict[str, Any] | None = None,
        max_task_retries: int = 2,
        concurrency: int = 32,
        max_restarts: int = 3,
        start_timeout: float = 120.0,
        log_to_driver: bool = False,
    ):
        if workers is not None and workers < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        if max_task_retries < 0 or concurrency < 1 or warm < 0:
            raise ConfigError("max_task_retries and warm must be >= 0 and concurrency >= 1")
        if creation_rate is not None and creation_rate <= 0:
            raise ConfigError(f"creation_rate must be > 0 containers per second, not {creation_rate!r}")
        self.address = address
        self.n_workers = workers
        self.warm, self.creation_rate = warm, creation_rate
        self.env_config = dict(env_config or {})
        self.max_task_retries, self.concurrency = max_task_retries, concurrency
        self.max_restarts, self.start_timeout = max_restarts, start_timeout
        self._slots: list[_Slot] = []
        self._retired: list[_Slot] = []
        self._deaths = self._retries = self._orphans_removed = 0
        self._cleanup_errors: list[str] = []
        self._closed = False
        self._rr = 0
        self._ray = require_ray()
        self._owns_ray = connect(address, log_to_driver=log_to_driver)
        # All driver-side state lives on one event loop in a thread of its own: rollout() awaits
        # it from any loop, the runner's threads block on it.
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ray-rollouts", daemon=True)
        self._thread.start()
        try:
            self._submit(self._start()).result()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ API
    async def rollout(self, backend: Any, task: Any, harness: str = "generic", *, params: Any = None,
                      max_turns: int = 100, reward: str = "binary", seed: int | None = None,
                      backend_options: dict[str, Any] | None = None) -> Any:
        """Play one episode on a worker and return its trajectory. A worker's death is retried and
        at worst masked, never raised; a mistake in the arguments raises :class:`ConfigError`."""
        harness_class(harness)  # an unknown harness fails here, not on a worker
        spec = TrialSpec(harness=harness, params=params, max_turns=max_turns, reward=reward, seed=seed,
                         env=self.env_config)
        return await self._rollout(task, spec, backend, backend_options or {}, self.max_task_retries)

    # ------------------------------------------------------------------ the executor protocol
    def check_backend(self, backend: Any, options: dict[str, Any]) -> None:
        """The backend is built on the workers: a spec of an unknown kind fails here."""
        backend_ref(backend, options)

    def play(self, job: TrialJob) -> TrialOutcome:
        """One trial on a worker (blocking; from any thread but this object's own loop). With
        ``job.out_dir`` the worker plays it into a directory of its own and the files come back
        and are written there; a lost worker is then an infrastructure failure for the caller to
        retry. Without, a lost worker's episode is retried (``job.retries``, else
        ``max_task_retries``) and at worst comes back masked."""
        t0 = time.monotonic()
        try:
            if job.out_dir is None:
                retries = self.max_task_retries if job.retries is None else job.retries
                traj = asyncio.run(self._rollout(job.task, job.spec, job.backend, job.backend_options, retries))
                if job.trajectory_path is not None:
                    traj.save(job.trajectory_path)
                return TrialOutcome(traj=traj, duration=time.monotonic() - t0)
            return self._trial(job)
        except ConfigError as exc:
            return TrialOutcome(failure="config", error=f"ConfigError: {exc}", exception=exc,
                                duration=time.monotonic() - t0)
        except RemoteError as exc:
            return TrialOutcome(failure="bug", error=str(exc).splitlines()[0], traceback=str(exc),
                                exception=exc, duration=time.monotonic() - t0)

    async def _rollout(self, task: Any, spec: TrialSpec, backend: Any, options: dict[str, Any],
                       retries: int) -> Trajectory:
        if self._closed:
            raise ConfigError("the Ray rollouts are closed")
        job = {"id": uuid.uuid4().hex, "task": task_ref(task), "backend": backend_ref(backend, options),
               "spec": spec.model_dump(mode="json")}
        reply = _raise_for(await asyncio.wrap_future(self._submit(self._call("rollout", job, retries))))
        if "trajectory" in reply:
            traj = Trajectory.model_validate_json(reply["trajectory"])
        else:
            tries = reply["tries"]
            traj = masked_trajectory(job["task"].get("name"), spec.harness, _model_name(job["backend"]),
                                     f"InfraError: {reply['lost']} (tried {tries} time{'s' * (tries > 1)})",
                                     path=job["task"].get("path"))
        traj.extra["ray"] = {**(reply.get("node") or {}), "tries": reply["tries"]}
        return traj

    def _trial(self, job: TrialJob) -> TrialOutcome:
        """A trial played into a directory on a worker; its files are written into ``job.out_dir``."""
        if self._closed:
            raise ConfigError("the Ray rollouts are closed")
        ref = {"id": uuid.uuid4().hex, "task": task_ref(job.task), "spec": job.spec.model_dump(mode="json"),
               "title": job.title, "run_id": job.run_id,
               "backend": backend_ref(job.backend, job.backend_options)}
        try:
            reply = _raise_for(self._submit(self._call("trial", ref, job.retries or 0)).result())
        except concurrent.futures.CancelledError:
            raise ConfigError("the Ray rollouts were closed while a trial ran") from None
        if "lost" in reply:
            return TrialOutcome(failure="infra", error=f"InfraError: {reply['lost']}")
        files: dict[str, bytes] = reply["files"]
        for name, data in files.items():
            if "/" in name or name.startswith(".") or name == "result.json":
                continue  # only plain trial files; result.json is the caller's to write
            write_atomic(job.out_dir / name, data)
        traj = Trajectory.model_validate_json(files["trajectory.json"]) if reply["failure"] is None else None
        return TrialOutcome(traj=traj, failure=reply["failure"], error=reply["error"], duration=reply["duration"])

    def abort(self, run_id: str | None = None) -> None:
        """End the episodes in flight (of one run, or all): their sandboxes are removed."""
        if not self._closed:
            try:
                self._submit(self._abort(run_id)).result(timeout=30)
            except Exception:  # noqa: BLE001 - close() follows and kills the workers anyway
                pass

    def stats(self) -> dict[str, Any]:
        """Per worker: where it runs, whether it lives, episodes, failures, its warm pool."""
        if self._closed:
            return {"address": self.address, "closed": True, "workers": []}
        return self._submit(self._stats()).result(timeout=60)

    @property
    def workers(self) -> list[dict[str, Any]]:
        """The live workers' node, host and pid (for logs and tests)."""
        return [{**s.info, "actor": s.actor} for s in list(self._slots) if s.alive and s.info]

    def close(self) -> None:
        """Close the workers' environments and warm pools, end the workers, and disconnect if
        this object connected (a cluster it did not start keeps running)."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            try:
                self._submit(self._close()).result(timeout=120)
            except Exception:  # noqa: BLE001 - still stop the loop below
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if self._owns_ray:
            try:
                self._ray.shutdown()
            except Exception:  # noqa: BLE001
                pass

    def __enter__(self) -> "RayRollouts":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ internals (on self._loop)
    def _submit(self, coro: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    @staticmethod
    async def _wait(ref: Any, timeout: float | None = None) -> Any:
        return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout)

    async def _start(self) -> None:
        nodes = [n for n in self._ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not nodes:
            raise ConfigError(f"the Ray cluster at {self.address} has no live node with CPUs to run rollout workers on")
        n = self.n_workers or len(nodes)
        self._slots = [self._spawn(i, nodes[i % len(nodes)]["NodeID"], soft=False) for i in range(n)]
        await asyncio.gather(*(self._ready(s) for s in self._slots))
        if not any(s.alive for s in self._slots):
            raise ConfigError("no rollout worker could start on the Ray cluster at "
                              f"{self.address}: " + "; ".join(sorted({s.error or '?' for s in self._slots})))

    def _spawn(self, index: int, node_id: str, *, soft: bool, restarts: int = 0) -> _Slot:
        from ray.util.scheduling_strategies import (
            NodeAffinitySchedulingStrategy,  # the optional extra [ray]
        )

        actor = _actor_class(self.concurrency).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=soft),
        ).remote(index, self.warm, self.creation_rate)
        return _Slot(index, actor, restarts)

    async def _ready(self, slot: _Slot) -> None:
        try:
            info = await self._wait(slot.actor.info.options(concurrency_group="control").remote(), self.start_timeout)
        except Exception as exc:  # noqa: BLE001 - e.g. terminal-env missing on that host
            info, error = None, (f"could not start a rollout worker: {_short(exc)} "
                                 "(is the same terminal-env installed on every host?)")
        else:
            error = f"host {info['host']}: {info['engine_error']}" if info.get("engine_error") else None
        if error is not None:
            slot.alive, slot.error, slot.info = False, error, info
            self._kill(slot)
            return
        slot.info = info

    def _kill(self, slot: _Slot) -> None:
        try:
            self._ray.kill(slot.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - dead already
            pass

    async def _pick(self, exclude: set[int]) -> _Slot | None:
        """The live worker with the fewest jobs in flight, preferring those not in ``exclude``
        (ids of slots that failed this job); waits for workers that are starting."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            ready = [s for s in self._slots if s.alive and s.info is not None]
            starting = any(s.alive and s.info is None for s in self._slots)
            fresh = [s for s in ready if id(s) not in exclude]
            if not fresh and starting and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                continue
            pool = fresh or ready
            if not pool:
                return None
            self._rr += 1
            return min(pool, key=lambda s: (s.inflight, (s.index - self._rr) % len(self._slots)))

    async def _call(self, method: str, job: dict[str, Any], retries: int) -> dict[str, Any]:
        tried: set[int] = set()
        lost = "no live rollout worker"
        node: dict[str, Any] | None = None
        for attempt in range(1, retries + 2):
            slot = await self._pick(tried)
            if slot is None:
                return {"lost": lost, "tries": attempt - 1 or 1, "node": node}
            if attempt > 1:
                self._retries += 1
            node = {k: slot.info[k] for k in ("node_id", "host", "pid", "index")}
            try:
                ref = getattr(slot.actor, method).options(concurrency_group="episodes").remote(job)
            except Exception as exc:  # noqa: BLE001 - the job does not pickle
                return {"kind": "config", "error": f"the job cannot be sent to a Ray worker ({type(exc).__name__}: "
                        f"{_short(exc)}); a backend object or factory must be picklable", "tries": attempt}
            slot.inflight += 1
            try:
                reply = await self._wait(ref)
            except asyncio.CancelledError:  # the caller gave up: end the episode over there
                slot.actor.abort.options(concurrency_group="control").remote(job["id"])
                raise
            except (self._ray.exceptions.RayError, OSError) as exc:
                if isinstance(exc, self._ray.exceptions.RayTaskError):
                    return {"kind": "bug", "error": _short(exc), "where": slot.where(), "tries": attempt, "node": node}
                slot.failures += 1
                lost = f"{slot.where()} was lost: {type(exc).__name__}: {_short(exc)}"
                tried.add(id(slot))
                await self._lost(slot, exc)
                continue
            finally:
                slot.inflight -= 1
            slot.episodes += 1
            slot.failures += bool(reply.get("masked") or reply.get("failure") or reply.get("kind"))
            return {**reply, "tries": attempt, "where": slot.where(), "node": node}
        return {"lost": lost, "tries": retries + 1, "node": node}

    async def _lost(self, slot: _Slot, exc: BaseException) -> None:
        """A call to ``slot`` failed: if the worker is dead, remove its sandboxes and start
        another in its place. Concurrent callers share one handling."""
        if slot.lost is None:
            slot.lost = asyncio.ensure_future(self._handle_loss(slot, exc))
        await asyncio.shield(slot.lost)

    async def _handle_loss(self, slot: _Slot, exc: BaseException) -> None:
        try:
            await self._retire_if_dead(slot, exc)
        except Exception as err:  # noqa: BLE001 - the episode is retried or masked regardless
            self._cleanup_errors.append(f"handling the loss of {slot.where()}: {type(err).__name__}: {_short(err)}")

    async def _retire_if_dead(self, slot: _Slot, exc: BaseException) -> None:
        errors = self._ray.exceptions
        dead = isinstance(exc, (errors.ActorDiedError, errors.WorkerCrashedError, errors.NodeDiedError))
        if not dead:
            try:
                await self._wait(slot.actor.info.options(concurrency_group="control").remote(), 10)
            except Exception:  # noqa: BLE001
                dead = True
        if not dead:
            slot.lost = None  # a passing failure: the worker stays
            return
        slot.alive = False
        slot.error = f"{type(exc).__name__}: {_short(exc)}"
        self._deaths += 1
        self._kill(slot)  # make sure: its containers are removed only once it is gone
        await self._remove_orphans(slot)
        if slot in self._slots:
            self._slots.remove(slot)
            self._retired.append(slot)
            if not self._closed and slot.restarts < self.max_restarts and slot.info is not None:
                # on the same node while it lives (Ray's soft affinity may move it anyway), else anywhere
                alive = {n["NodeID"] for n in self._ray.nodes() if n.get("Alive")}
                node_id = slot.info["node_id"]
                new = self._spawn(slot.index, node_id, soft=node_id not in alive, restarts=slot.restarts + 1)
                self._slots.append(new)
                asyncio.ensure_future(self._ready(new))

    async def _remove_orphans(self, slot: _Slot) -> None:
        from ray.util.scheduling_strategies import (
            NodeAffinitySchedulingStrategy,  # the optional extra [ray]
        )

        info = slot.info
        if info is None:
            return
        alive_nodes = {n["NodeID"] for n in self._ray.nodes() if n.get("Alive")}
        same_host = [s.info["node_id"] for s in self._slots
                     if s.alive and s.info and (s.info["host"], s.info["boot"]) == (info["host"], info["boot"])]
        target = next((n for n in [info["node_id"], *same_host] if n in alive_nodes), None)
        what = f"the sandboxes of dead {slot.where()}"
        if target is None:
            self._cleanup_errors.append(f"{what}: no live Ray node on host {info['host']}; run `terminal-env gc` there")
            return
        task = _orphan_task().options(scheduling_strategy=NodeAffinitySchedulingStrategy(target, soft=False))
        try:
            removed = await self._wait(task.remote(info["host"], info["boot"], info["pid"]), 120)
        except Exception as exc:  # noqa: BLE001 - kept for stats(); gc is the fallback
            self._cleanup_errors.append(f"{what}: {type(exc).__name__}: {_short(exc)}; run `terminal-env gc` there")
            return
        self._orphans_removed += len(removed)

    async def _abort(self, run_id: str | None) -> None:
        refs = [s.actor.abort.options(concurrency_group="control").remote(None, run_id)
                for s in self._slots if s.alive and s.info]
        await asyncio.gather(*(self._wait(r, 20) for r in refs), return_exceptions=True)

    async def _stats(self) -> dict[str, Any]:
        slots = list(self._slots) + list(self._retired)
        live = [s for s in slots if s.alive and s.info]
        answers = await asyncio.gather(
            *(self._wait(s.actor.stats.options(concurrency_group="control").remote(), 20) for s in live),
            return_exceptions=True,
        )
        remote = {id(s): a for s, a in zip(live, answers, strict=True) if isinstance(a, dict)}
        rows = []
        for s in sorted(slots, key=lambda s: (s.index, s.restarts)):
            i = s.info or {}
            got = remote.get(id(s), {})
            rows.append({
                "index": s.index, "node_id": i.get("node_id"), "host": i.get("host"), "pid": i.get("pid"),
                "alive": s.alive, "restarts": s.restarts, "error": s.error, "inflight": s.inflight,
                "episodes": s.episodes, "failures": s.failures, "live": got.get("live"), "warm": got.get("warm"),
            })
        return {"address": self.address, "workers": rows, "deaths": self._deaths, "retries": self._retries,
                "orphans_removed": self._orphans_removed, "cleanup_errors": list(self._cleanup_errors)}

    async def _close(self) -> None:
        slots = [s for s in self._slots if s.alive and s.info]
        answers = await asyncio.gather(
            *(self._wait(s.actor.close.options(concurrency_group="control").remote(), 60) for s in slots),
            return_exceptions=True,
        )
        # what is still in flight ends now (its callers see the cancellation), before the kills,
        # so that no kill is taken for a worker's death
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for s in self._slots:
            self._kill(s)
        # a worker that could not close its sandboxes leaves them to its dead pid: remove them
        stuck = [s for s, a in zip(slots, answers, strict=True) if isinstance(a, BaseException)]
        await asyncio.gather(*(self._remove_orphans(s) for s in stuck), return_exceptions=True)
