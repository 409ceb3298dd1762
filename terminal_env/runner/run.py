"""The benchmark runner: tasks x attempts through a harness and a model, into a run directory.

Resumable: a trial whose ``result.json`` exists is skipped, so running the same command again after
a crash or a kill finishes the run. Infrastructure failures (engine, sandbox, model server) are
retried up to ``infra_retries`` times and, if they persist, recorded as masked trials, reported
apart from agent failures and excluded from the scores.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from ..errors import ConfigError
from .config import RunConfig, resolve_tasks
from .records import (
    RUN_SCHEMA, RUN_VERSION, TrialResult, load_results, read_trial_result, trial_dir, write_json_atomic,
)

BackendFactory = Callable[[], Any]


class ModelSetupError(ConfigError):
    """The model backend refused the run's configuration (bad key, unknown model): stop the run."""


def default_backend_factory(config: RunConfig) -> BackendFactory:
    """One backend shared by all trials when it is stateless (a server client keeps one rate
    limiter), a fresh one per trial when it keeps episode state (scripted, oracle, replay)."""
    from ..models.base import EpisodeAware
    from ..models.registry import make_backend

    first = make_backend(config.model, **config.model_options)
    if not isinstance(first, EpisodeAware):
        return lambda: first
    return lambda: make_backend(config.model, **config.model_options)


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
    ):
        self.config = config
        self.run_dir = Path(run_dir)
        self.client = client
        self.tasks = tasks if tasks is not None else resolve_tasks(config.tasks, allow_test=config.allow_test)
        self._factory = backend_factory
        self._console = console
        self._build_locks: dict[str, threading.Lock] = {t.name: threading.Lock() for t in self.tasks}
        self._built: dict[str, Any] = {}
        self._stop = threading.Event()
        self._live_envs: set[Any] = set()
        self._lock = threading.Lock()
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
            from .. import __version__

            write_json_atomic(manifest, {
                "schema": RUN_SCHEMA, "version": RUN_VERSION, "created": time.time(),
                "terminal_env_version": __version__, "config": self.config.model_dump(mode="json"),
                "tasks": [{"name": t.name, "path": str(t.path), "category": t.category,
                           "difficulty": t.difficulty, "split": t.split, "tests_digest": t.tests_digest}
                          for t in self.tasks],
            })
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
        old_tasks = {t["name"]: t.get("tests_digest") for t in data.get("tasks", [])}
        changed = [t.name for t in self.tasks if old_tasks.get(t.name) not in (None, t.tests_digest)]
        if changed:
            raise ConfigError(
                f"{self.run_dir}: the tests of {', '.join(changed)} changed since this run started; "
                "its results would not be comparable. Use a new --out directory."
            )

    # ------------------------------------------------------------------ running
    def run(self) -> dict[str, Any]:
        todo = self.prepare()
        factory = self._factory or default_backend_factory(self.config)
        total = len(self.tasks) * self.config.attempts
        done0 = total - len(todo)
        from .progress import RunProgress

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
                        pending[pool.submit(self._trial, task, attempt, factory)] = (task, attempt)
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
                self._close_live_envs()
                raise
        pool.shutdown(wait=True)
        return self.summarize()

    def summarize(self) -> dict[str, Any]:
        from ..metrics import summarize

        results = load_results(self.run_dir)
        summary = summarize(results, attempts=self.config.attempts, seed=self.config.seed)
        summary["run"] = {"harness": self.config.harness, "model": self.config.model,
                          "attempts": self.config.attempts, "run_dir": str(self.run_dir)}
        write_json_atomic(self.run_dir / "summary.json", summary)
        return summary

    def _close_live_envs(self) -> None:
        with self._lock:
            envs = list(self._live_envs)
        for env in envs:
            try:
                env.close()
            except Exception:
                pass

    # ------------------------------------------------------------------ one trial
    def _trial(self, task: Any, attempt: int, factory: BackendFactory) -> TrialResult:
        tdir = trial_dir(self.run_dir, task.name, attempt)
        tdir.mkdir(parents=True, exist_ok=True)
        result: TrialResult | None = None
        tries = 0
        for tries in range(1, self.config.infra_retries + 2):
            if self._stop.is_set():
                raise ConfigError("run stopped")
            if tries > 1 and (tdir / "trajectory.json").exists():
                (tdir / "trajectory.json").rename(tdir / f"trajectory.try{tries - 1}.json")
            result = self._try_trial(task, attempt, factory, tdir)
            if result.termination not in ("infra_error", "model_error"):
                break
        assert result is not None
        if self._stop.is_set():
            # the run is being stopped (Ctrl-C, a refused key): this trial's end is not its own,
            # so it is not recorded as finished and a resumed run plays it again
            raise ConfigError("run stopped")
        result.tries, result.finished = tries, time.time()
        write_json_atomic(tdir / "result.json", result.model_dump(mode="json"))
        return result

    def _env(self, task: Any) -> Any:
        from ..env import EnvConfig, TerminalEnv

        cfg = EnvConfig(
            max_steps=self.config.max_steps,
            command_timeout=self.config.command_timeout,
            time_limit=self.config.episode_timeout or float(task.agent_timeout),
            run_id=self.run_id,
        )
        with self._build_locks[task.name]:  # one build per task image, even with many workers
            env = TerminalEnv(task, config=cfg, reward=self.config.reward, client=self.client)
        if self.config.verify_timeout and env.verifier is not None:
            env.verifier.timeout = self.config.verify_timeout
        return env

    def _try_trial(self, task: Any, attempt: int, factory: BackendFactory, tdir: Path) -> TrialResult:
        from ..agent import run_agent
        from ..errors import InfraError
        from ..harness import get_harness
        from ..models.base import ModelConfigError
        from ..recording import CastRecorder

        base = TrialResult(task=task.name, attempt=attempt, category=task.category,
                           difficulty=task.difficulty, split=task.split,
                           trial_dir=str(tdir.relative_to(self.run_dir)), started=time.time())
        t0 = time.monotonic()
        env = recorder = None
        try:
            env = self._env(task)
            with self._lock:
                self._live_envs.add(env)
            harness = get_harness(self.config.harness, **self.config.harness_options)
            backend = factory()
            recorder = CastRecorder(tdir / "recording.cast", width=env.config.cols, height=env.config.rows,
                                    title=f"{task.name} attempt {attempt}")
            traj = run_agent(env, harness, backend, params=self.config.params, max_turns=self.config.max_turns,
                             trajectory_path=tdir / "trajectory.json", recorder=recorder,
                             seed=self.config.seed + attempt)
        except ModelConfigError as exc:
            raise ModelSetupError(f"the model backend refused the run: {exc}") from None
        except ConfigError as exc:  # e.g. a task whose setup fails: this trial only
            return base.model_copy(update={"masked": True, "termination": "error", "error": f"ConfigError: {exc}",
                                           "duration": time.monotonic() - t0})
        except InfraError as exc:
            return base.model_copy(update={"masked": True, "termination": "infra_error",
                                           "error": f"{type(exc).__name__}: {exc}", "duration": time.monotonic() - t0})
        except Exception as exc:  # a bug must not take the whole run down; it is kept for the report
            (tdir / "error.txt").write_text(traceback.format_exc())
            return base.model_copy(update={"masked": True, "termination": "error",
                                           "error": f"{type(exc).__name__}: {exc} (see error.txt)",
                                           "duration": time.monotonic() - t0})
        finally:
            if recorder is not None:
                recorder.close()
            if env is not None:
                env.close()
                with self._lock:
                    self._live_envs.discard(env)
        return self._record(base, traj, tdir, time.monotonic() - t0)

    def _record(self, base: TrialResult, traj: Any, tdir: Path, duration: float) -> TrialResult:
        v = traj.verification or {}
        if v:
            write_json_atomic(tdir / "verifier.json", v)
            (tdir / "verifier.log").write_text(v.get("log_tail") or "")
        comps = [t.completion for t in traj.turns if t.completion is not None]
        return base.model_copy(update={
            "outcome": v.get("outcome"),
            "strict_success": bool(v.get("strict_success")),
            "progress": float(v.get("progress") or 0.0),
            "reward": float(traj.reward or 0.0),
            "rewards": traj.rewards,
            "termination": traj.termination,
            "masked": traj.masked,
            "error": traj.error,
            "turns": len(traj.turns),
            "commands": len(traj.generic_commands()),
            "format_errors": sum(1 for t in traj.turns if t.format_error),
            "duration": duration,
            "model_seconds": traj.timings.get("model", 0.0),
            "env_seconds": traj.timings.get("env", 0.0),
            "verify_seconds": traj.timings.get("verify", 0.0),
            "prompt_tokens": sum(c.usage.prompt_tokens or 0 for c in comps),
            "completion_tokens": sum(c.usage.completion_tokens or 0 for c in comps),
        })
