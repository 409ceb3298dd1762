"""One trial: a task played in a fresh environment by a harness and a model backend, verified.

Everything that plays episodes goes through :func:`play_trial`: the benchmark runner
(:mod:`terminal_env.runner`), the rollout pool for trainers (:mod:`terminal_env.scale.rollout`) and the
Ray workers (:mod:`terminal_env.scale.worker`). So the environment, the harness, the backend, the
recording, the trajectory, the verification and the classification of what went wrong live in
one place, and :class:`Backends` alone decides whether a backend is shared between episodes or
built for each.

What to play is a :class:`TrialSpec`: plain, validated data, so that it travels to a Ray worker
as JSON and means the same there.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from . import __version__
from .agent import run_agent
from .env import TerminalEnv
from .errors import ConfigError, InfraError
from .fileio import write_json_atomic
from .harness import get_harness
from .models.base import EpisodeAware, ModelConfigError, SamplingParams
from .models.registry import make_backend
from .prepare import prepare_task
from .recording import CastRecorder
from .trajectory import ModelRef, TaskRef, Trajectory


class TrialSpec(BaseModel):
    """How to play a trial of any task: harness, sampling, budgets, reward, recording."""

    model_config = ConfigDict(extra="forbid")

    harness: str = "generic"
    harness_options: dict[str, Any] = Field(default_factory=dict)
    params: SamplingParams | None = None
    max_turns: int = Field(100, ge=1)
    seed: int | None = None
    reward: str = "binary"
    #: :class:`~terminal_env.env.EnvConfig` fields (budgets, limits, run id, runtime)
    env: dict[str, Any] = Field(default_factory=dict)
    #: overrides the task's verifier timeout, s
    verify_timeout: float | None = Field(None, gt=0)
    #: an asciinema recording of the terminal (``recording.cast`` in the trial's directory)
    record: bool = False
    #: how the task's image is built (``base_map``, ``ca_bundle``; see tasks.build.BuildSettings)
    build: dict[str, Any] = Field(default_factory=dict)


@dataclass
class TrialOutcome:
    """How one trial ended. ``failure`` is None when the episode ran to its end (``traj`` says
    how, infrastructure failures during it included: masked); else why it could not run:
    ``model_setup`` (the backend refused the configuration: a run stops), ``config`` (this
    trial's own mistake, e.g. a task whose setup fails), ``infra`` (the image could not be built,
    the engine is gone) or ``bug`` (``error`` and ``traceback`` say where)."""

    traj: Trajectory | None = None
    failure: str | None = None
    error: str | None = None
    duration: float = 0.0
    traceback: str | None = None
    #: what was raised (in this process only: it does not travel from a Ray worker)
    exception: BaseException | None = None


class Backends:
    """Model backends for episodes. A spec string (``"openai:NAME"``, ``"oracle"``...) is built
    once and shared when the backend keeps no episode state (a server client: one connection
    pool, one rate limiter), and built for each episode when it does (scripted, oracle, replay:
    :class:`~terminal_env.models.base.EpisodeAware`). A zero-argument factory is called for each
    episode; any other object is used as it is."""

    def __init__(self) -> None:
        self._shared: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, backend: Any, options: dict[str, Any] | None = None) -> Any:
        options = dict(options or {})
        if not isinstance(backend, str):
            if options:
                raise ConfigError(f"backend options {sorted(options)} need a backend spec string, not an object")
            return backend() if callable(backend) and not hasattr(backend, "complete") else backend
        key = backend + repr(sorted(options.items()))
        with self._lock:
            shared = self._shared.get(key)
        if shared is not None:
            return shared
        made = make_backend(backend, **options)
        if isinstance(made, EpisodeAware):
            return made
        with self._lock:
            return self._shared.setdefault(key, made)


def trial_env(task: Any, spec: TrialSpec, *, client: Any = None, pool: Any = None,
              build_lock: Any = None) -> TerminalEnv:
    """The environment of one trial (the task's image is built under ``build_lock``, so that many
    threads starting the same task build it once)."""
    with build_lock if build_lock is not None else contextlib.nullcontext():
        prepared = prepare_task(task, build=dict(spec.build), client=client)
    env = TerminalEnv(prepared, config=dict(spec.env), reward=spec.reward, client=client, pool=pool)
    if spec.verify_timeout and env.verifier is not None:
        env.verifier.timeout = spec.verify_timeout
    return env


def play_trial(
    task: Any,
    spec: TrialSpec,
    backend: Callable[[], Any],
    *,
    out_dir: Path | None = None,
    trajectory_path: str | Path | None = None,
    title: str | None = None,
    client: Any = None,
    pool: Any = None,
    build_lock: Any = None,
    track: Callable[[Any, bool], None] | None = None,
) -> TrialOutcome:
    """Play one trial of ``task``; never raises for what happens inside it (see
    :class:`TrialOutcome`). ``backend()`` gives this episode's backend (see :class:`Backends`).

    With ``out_dir`` the trial's files are written there: ``trajectory.json`` (saved as the
    episode goes), ``recording.cast`` when ``spec.record``, ``verifier.json`` and
    ``verifier.log``, or ``error.txt`` for a bug. ``track(env, live)`` is told when the
    environment exists and when it is gone (a stopping run closes the live ones)."""
    t0 = time.monotonic()
    env = recorder = traj = None
    out = TrialOutcome()
    if out_dir is not None and trajectory_path is None:
        trajectory_path = out_dir / "trajectory.json"
    try:
        env = trial_env(task, spec, client=client, pool=pool, build_lock=build_lock)
        if out_dir is not None:  # the task's artifacts, after the episode (artifacts.json lists them)
            env.artifacts_dir = out_dir / "artifacts"
        if track is not None:
            track(env, True)
        harness = get_harness(spec.harness, **spec.harness_options)
        model = backend()
        if spec.record and out_dir is not None:
            recorder = CastRecorder(out_dir / "recording.cast", width=env.config.cols,
                                    height=env.config.rows, title=title or env.task.name)
        traj = run_agent(env, harness, model, params=spec.params, max_turns=spec.max_turns,
                         trajectory_path=trajectory_path, recorder=recorder, seed=spec.seed)
    except ModelConfigError as exc:
        out.failure, out.error, out.exception = "model_setup", str(exc), exc
    except ConfigError as exc:
        out.failure, out.error, out.exception = "config", f"ConfigError: {exc}", exc
    except InfraError as exc:
        out.failure, out.error, out.exception = "infra", f"{type(exc).__name__}: {exc}", exc
    except Exception as exc:  # a bug must not take a whole run down; it is kept for the report
        out.failure, out.traceback, out.exception = "bug", traceback.format_exc(), exc
        out.error = f"{type(exc).__name__}: {exc}" + (" (see error.txt)" if out_dir is not None else "")
        if out_dir is not None:
            (out_dir / "error.txt").write_text(out.traceback)
    finally:
        if recorder is not None:
            recorder.close()
        if env is not None:
            env.close()
            if track is not None:
                track(env, False)
    out.traj = traj if out.failure is None else None
    if env is not None and env.artifacts and out_dir is not None:
        write_json_atomic(out_dir / "artifacts.json", env.artifacts)
    if out.traj is not None and out_dir is not None and out.traj.verification:
        v = out.traj.verification
        write_json_atomic(out_dir / "verifier.json", v)
        (out_dir / "verifier.log").write_text(v.get("log_tail") or "")
    out.duration = time.monotonic() - t0
    return out


def masked_trajectory(task_name: str, harness: str, model: str, error: str, path: str | None = None) -> Trajectory:
    """The record of an episode the infrastructure lost before it could end."""
    return Trajectory(
        terminal_env_version=__version__, task=TaskRef(name=task_name or "?", path=path),
        harness=harness, model=ModelRef(name=model, backend="?"), termination="infra_error", masked=True,
        error=error,
    )
