"""The benchmark runner: tasks x attempts through a harness and a model, into a run directory.

Resumable: a trial whose ``result.json`` exists is skipped, so running the same command again after
a crash or a kill finishes the run. Infrastructure failures (engine, sandbox, model server) are
retried up to ``infra_retries`` times and, if they persist, recorded as masked trials, reported
apart from agent failures and excluded from the scores.

With ``ray_address`` the trials are played on the rollout workers of a Ray cluster
(:mod:`terminal_env.scale.cluster`), each on the Docker engine of its own host; the files of a trial
come back as contents and are written here, exactly as a local trial writes them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from .. import __version__
from ..errors import ConfigError
from ..fileio import write_json_atomic
from ..metrics import summarize
from ..prepare import prepare_task
from ..protocols import Executor
from ..sandbox.engine import get_client, require_runtimes
from ..scale.cluster import RayRollouts, backend_ref, probe, require_ray
from ..scale.executor import LocalExecutor, TrialJob
from ..trajectory import Trajectory
from ..trial import TrialOutcome, TrialSpec
from .config import RunConfig, resolve_tasks
from .progress import RunProgress
from .records import (
    RUN_SCHEMA,
    RUN_VERSION,
    TrialResult,
    load_results,
    read_trial_result,
    trial_dir,
)

BackendFactory = Callable[[], Any]


class ModelSetupError(ConfigError):
    """The model backend refused the run's configuration (bad key, unknown model): stop the run."""


def trial_spec(config: RunConfig, task: Any, attempt: int, run_id: str) -> TrialSpec:
    """What one trial of ``task`` plays under ``config``: its harness, sampling, budgets (the
    task's own agent timeout unless the run sets one), reward, seed and recording."""
    return TrialSpec(
        harness=config.harness, harness_options=config.harness_options, params=config.params,
        max_turns=config.max_turns, seed=config.seed + attempt, reward=config.reward, record=True,
        verify_timeout=config.verify_timeout or (
            float(task.verifier_timeout) * config.timeout_multiplier if config.timeout_multiplier != 1 else None),
        build={k: v for k, v in (("base_map", config.base_map), ("ca_bundle", config.ca_bundle)) if v is not None},
        env={"max_steps": config.max_steps, "command_timeout": config.command_timeout,
             "time_limit": config.episode_timeout or float(task.agent_timeout) * config.timeout_multiplier,
             "run_id": run_id,
             "runtime": config.runtime},
    )


class Runner:
    def __init__(
        self,
        config: RunConfig,
        run_dir: str | Path,
        *,
        backend_factory: BackendFactory | None = None,
        client: Any = None,
        console: Any = None,
        tasks: list[Any] | None = None,
        ray_address: str | None = None,
        ray_workers: int | None = None,
    ):
        if ray_workers is not None and ray_address is None:
            raise ConfigError("ray_workers (--ray-workers) needs a Ray cluster: give ray_address (--ray-address)")
        if ray_workers is not None and ray_workers < 1:
            raise ConfigError(f"ray_workers (--ray-workers) must be >= 1, got {ray_workers}")
        self.config = config
        #: with a Ray cluster's address, trials run on its rollout workers (terminal_env.scale.cluster)
        self.ray_address, self.ray_workers = ray_address, ray_workers
        #: where the trials are played: this host's engine, or a Ray cluster's workers
        self.executor: Executor | None = None
        self.run_dir = Path(run_dir)
        self.client = client
        self.tasks = tasks if tasks is not None else resolve_tasks(config.tasks, allow_test=config.allow_test)
        self.tasks = self.tasks[: config.n_tasks]  # sorted by name: the same N for the same tasks
        self._factory = backend_factory
        self._console = console
        self._stop = threading.Event()
        digest = hashlib.sha1(str(self.run_dir.resolve()).encode()).hexdigest()[:8]
        #: the sandbox label of this run's containers (terminal-env.run=...)
        self.run_id = f"{self.run_dir.name[:32]}-{digest}"

    # ------------------------------------------------------------------ run directory
    def prepare(self) -> list[tuple[Any, int]]:
        """Create or reopen the run directory; return the trials still to run."""
        manifest = self.run_dir / "run.json"
        if manifest.exists():
            self._check_resume(manifest)
        else:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            record = {
                "schema": RUN_SCHEMA, "version": RUN_VERSION, "created": time.time(),
                "terminal_env_version": __version__, "config": self.config.model_dump(mode="json"),
                "tasks": [{"name": t.name, "path": str(t.path), "category": t.category,
                           "difficulty": t.difficulty, "split": t.split, "tests_digest": t.tests_digest,
                           "environment_digest": t.environment_digest}
                          for t in self.tasks],
            }
            if self.config.leaderboard:
                record["environment"] = self._environment()
            write_json_atomic(manifest, record)
        todo = []
        for t in self.tasks:
            for attempt in range(1, self.config.attempts + 1):
                result = trial_dir(self.run_dir, t.name, attempt) / "result.json"
                if result.exists():
                    read_trial_result(result)  # a damaged record is reported now, not at the end
                    continue
                todo.append((t, attempt))
        return todo

    def _check_resume(self, manifest: Path) -> None:
        try:
            data = json.loads(manifest.read_text())
            if data.get("schema") != RUN_SCHEMA:
                raise ValueError(f"schema is {data.get('schema')!r}, expected {RUN_SCHEMA!r}")
            old = RunConfig.model_validate(data["config"])
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            raise ConfigError(
                f"{manifest}: cannot resume from a damaged run manifest ({str(exc).splitlines()[0]}). "
                "Use a new --out directory, or repair or delete this one."
            ) from None
        a, b = old.fingerprint(), self.config.fingerprint()
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if diff:
            raise ConfigError(
                f"{self.run_dir} holds a run with a different configuration ({', '.join(diff)} differ); "
                "resuming it would mix two experiments. Use a new --out directory."
            )
        old_tasks = {t["name"]: t for t in data.get("tasks", [])}
        changed = [f"{kind} of {t.name}" for t in self.tasks for kind, now in
                   (("the tests", t.tests_digest), ("the environment", t.environment_digest))
                   if old_tasks.get(t.name, {}).get(f"{kind.split()[-1]}_digest") not in (None, now)]
        if changed:
            raise ConfigError(
                f"{self.run_dir}: {', '.join(changed)} changed since this run started; "
                "its results would not be comparable. Use a new --out directory."
            )

    def _environment(self) -> dict[str, Any]:
        """What a leaderboard entry must say about where it ran: the engine, the runtime, and
        each task's image (built now, by this host's engine) by id."""
        client = self.client or get_client()
        version, info = client.version(), client.info()
        build = {"base_map": self.config.base_map, "ca_bundle": self.config.ca_bundle, "log": lambda _: None}
        images = {t.name: client.api.inspect_image(prepare_task(t, build=build, client=client).spec.image)["Id"]
                  for t in self.tasks}
        return {
            "engine": {"version": version.get("Version"), "api_version": version.get("ApiVersion"),
                       "os": info.get("OperatingSystem"), "kernel": info.get("KernelVersion"),
                       "cpus": info.get("NCPU"), "memory_bytes": info.get("MemTotal")},
            "runtime": self.config.runtime or info.get("DefaultRuntime"),
            "images": images,
            "executor": f"ray {self.ray_address}" if self.ray_address else "local",
        }

    # ------------------------------------------------------------------ running
    def run(self) -> dict[str, Any]:
        if self.ray_address is not None:  # a wrong address fails before the run directory is made
            require_ray()
            probe(self.ray_address)
        if self.ray_address is None:  # a missing runtime fails before the run directory is made
            wanted = [self.config.runtime] if self.config.runtime else [getattr(t, "runtime", None) for t in self.tasks]
            require_runtimes(get_client(), wanted)
        todo = self.prepare()
        backend, options = self._backend()
        if self.ray_address is not None:
            backend_ref(backend, options)  # a bad spec fails before the workers start
            self.executor = RayRollouts(self.ray_address, workers=self.ray_workers,
                                        concurrency=self.config.concurrency)
        else:
            self.executor = LocalExecutor(self.client)
        try:
            # a backend that refuses the configuration stops the run before any trial
            self.executor.check_backend(backend, options)
            self._run_trials(todo)
        finally:
            self.executor.close()
            self.executor = None
        return self.summarize()

    def _backend(self) -> tuple[Any, dict[str, Any]]:
        """The run's backend as the executor takes it: the factory given to the runner, or the
        configuration's spec and options."""
        if self._factory is not None:
            return self._factory, {}
        return self.config.model, dict(self.config.model_options)

    def _run_trials(self, todo: list[tuple[Any, int]]) -> None:
        total = len(self.tasks) * self.config.attempts
        done0 = total - len(todo)
        progress = RunProgress(total, done0, enabled=self.config.progress, console=self._console)
        pool = ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="trial")
        with progress:
            pending: dict[Future, tuple[Any, int]] = {}
            queue = list(todo)
            try:
                while queue or pending:
                    while queue and len(pending) < self.config.concurrency and not self._stop.is_set():
                        task, attempt = queue.pop(0)
                        progress.started(task.name, attempt)
                        pending[pool.submit(self._trial, task, attempt)] = (task, attempt)
                    if not pending:
                        break
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        pending.pop(fut)
                        progress.finished(fut.result())  # ModelSetupError propagates: stop the run
            except BaseException:
                # Stop: nothing new starts, running trials lose their sandboxes (and record
                # nothing), and we do not wait for workers stuck on a model server.
                self._stop.set()
                pool.shutdown(wait=False, cancel_futures=True)
                self.executor.abort(run_id=self.run_id)
                raise
        pool.shutdown(wait=True)

    def summarize(self) -> dict[str, Any]:
        results = load_results(self.run_dir)
        summary = summarize(results, attempts=self.config.attempts, seed=self.config.seed)
        summary["run"] = {"harness": self.config.harness, "model": self.config.model,
                          "attempts": self.config.attempts, "run_dir": str(self.run_dir)}
        write_json_atomic(self.run_dir / "summary.json", summary)
        return summary

    # ------------------------------------------------------------------ one trial
    def _trial(self, task: Any, attempt: int) -> TrialResult:
        tdir = trial_dir(self.run_dir, task.name, attempt)
        tdir.mkdir(parents=True, exist_ok=True)
        result: TrialResult | None = None
        tries = 0
        for tries in range(1, self.config.infra_retries + 2):
            if self._stop.is_set():
                raise ConfigError("run stopped")
            if tries > 1 and (tdir / "trajectory.json").exists():
                (tdir / "trajectory.json").rename(tdir / f"trajectory.try{tries - 1}.json")
            result = self._try_trial(task, attempt, tdir)
            if result.termination not in ("infra_error", "model_error"):
                break
        assert result is not None
        if self._stop.is_set():
            # the run is being stopped (Ctrl-C, a refused key): this trial's end is not its own,
            # so it is not recorded as finished and a resumed run plays it again
            raise ConfigError("run stopped")
        result.tries, result.finished = tries, time.time()
        if self.config.leaderboard and (tdir / "trajectory.json").exists():
            write_json_atomic(tdir / "trajectory.atif.json", Trajectory.load(tdir / "trajectory.json").to_atif())
        write_json_atomic(tdir / "result.json", result.model_dump(mode="json"))
        return result

    def _try_trial(self, task: Any, attempt: int, tdir: Path) -> TrialResult:
        base = TrialResult(task=task.name, attempt=attempt, category=task.category,
                           difficulty=task.difficulty, split=task.split,
                           trial_dir=str(tdir.relative_to(self.run_dir)), started=time.time())
        backend, options = self._backend()
        job = TrialJob(task=task, spec=trial_spec(self.config, task, attempt, self.run_id), backend=backend,
                       backend_options=options, out_dir=tdir, title=f"{task.name} attempt {attempt}",
                       run_id=self.run_id)
        return trial_result(base, self.executor.play(job))


# ---------------------------------------------------------------------- the record of a trial


def trial_result(base: TrialResult, outcome: TrialOutcome) -> TrialResult:
    """The scored record of one try. Raises :class:`ModelSetupError` when the backend refused
    the run's configuration (the run stops)."""
    if outcome.failure == "model_setup":
        raise ModelSetupError(f"the model backend refused the run: {outcome.error}")
    if outcome.failure is not None:
        return base.model_copy(update={
            "masked": True, "termination": "infra_error" if outcome.failure == "infra" else "error",
            "error": outcome.error, "duration": outcome.duration,
        })
    traj = outcome.traj
    v = traj.verification or {}
    comps = [t.completion for t in traj.turns if t.completion is not None]
    return base.model_copy(update={
        "outcome": v.get("outcome"),
        "strict_success": bool(v.get("strict_success")),
        "progress": float(v.get("progress") or 0.0),
        "reward": float(traj.reward or 0.0),
        "rewards": traj.rewards,
        "metrics": {str(k): float(x) for k, x in (v.get("metrics") or {}).items()},
        "steps": [{k: s.get(k) for k in ("name", "outcome", "reward", "progress")} for s in v.get("steps") or []],
        "termination": traj.termination,
        "masked": traj.masked,
        "error": traj.error,
        "turns": len(traj.turns),
        "commands": len(traj.generic_commands()),
        "format_errors": sum(1 for t in traj.turns if t.format_error),
        "duration": outcome.duration,
        "model_seconds": traj.timings.get("model", 0.0),
        "env_seconds": traj.timings.get("env", 0.0),
        "verify_seconds": traj.timings.get("verify", 0.0),
        "prompt_tokens": sum(c.usage.prompt_tokens or 0 for c in comps),
        "completion_tokens": sum(c.usage.completion_tokens or 0 for c in comps),
    })
