"""The one step from a task to what an episode needs.

::

    prepared = prepare_task("tasks/dbg-pagination")   # load, build (cached), verifier, budgets
    env = TerminalEnv(prepared)                        # or TerminalEnv(path): the same step inside

A task comes as a task directory (a path), a loaded :class:`~terminal_env.tasks.Task`, a
:class:`~terminal_env.task.TaskSpec` written in Python or its dict form, or an already
:class:`PreparedTask`. :func:`prepare_task` is the only place that turns any of them into a
``PreparedTask``: the sandbox's spec (image, limits, files, setup), the protected verifier when
the task has tests, the task's own time budget, and the task directory behind it (its name,
split, digest and ``solution/``, for trajectories and the oracle). Building the image happens
here and only here (cached by content, with the one :class:`~terminal_env.tasks.build.BuildSettings`);
no conversion builds.

A prepared task is immutable and can be shared by many environments and threads (a vector of
environments, a trainer's workers); each environment gets a verifier of its own from
:meth:`PreparedTask.verifier`. The trial driver prepares each trial's task under its executor's
per-task build lock, so that concurrent trials of one task build it once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .task import TaskSpec
from .tasks import Task, load_task
from .tasks.build import CA_PATH, BuildSettings, build_image, ca_env
from .tasks.compose import prepare_services
from .verify.runner import ProtectedVerifier

#: what ``build_options`` may hold (the arguments of :func:`~terminal_env.tasks.build.build_image`)
BUILD_OPTIONS = ("base_map", "ca_bundle", "timeout", "log", "force")


@dataclass(frozen=True)
class PreparedTask:
    """Everything an episode needs from one task, made by :func:`prepare_task`."""

    #: what the sandbox is made from: the built image, limits, files, setup, instruction
    spec: TaskSpec
    #: the task directory behind the spec (None for a TaskSpec written in Python)
    source: Task | None = None
    #: the task's own agent timeout, s: the episode's time budget unless the user chose one
    time_limit: float | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def verified(self) -> bool:
        """Whether episodes of this task end in the protected verifier (the task has tests)."""
        return self.source is not None

    def verifier(self, timeout: float | None = None, *, step: int | None = None) -> ProtectedVerifier | None:
        """A protected verifier of this task for one environment (None without tests);
        ``timeout`` overrides the task's verifier timeout; ``step``: of that step of a multi-step
        task (its tests laid over the task's)."""
        if self.source is None:
            return None
        task = self.source.step_task(step) if step is not None else self.source
        return ProtectedVerifier(task, timeout=timeout)

    @property
    def steps(self) -> list[Any]:
        """The steps of a multi-step task (:class:`~terminal_env.tasks.model.TaskStep`), else []."""
        return list(getattr(self.source, "steps", None) or [])


def prepare_task(
    task: Any,
    *,
    build: BuildSettings | dict[str, Any] | None = None,
    client: Any = None,
) -> PreparedTask:
    """A :class:`PreparedTask` from a path, a ``Task``, a ``TaskSpec`` (or dict), or a prepared
    task (returned as it is). ``build``: a ``BuildSettings``, or the keyword arguments of
    ``build_image`` (``base_map``, ``ca_bundle``, ``timeout``, ``log``, ``force``); the
    environment's ``$TERMINAL_ENV_BASE_MAP`` / ``$TERMINAL_ENV_CA_BUNDLE`` fill what is not given."""
    if isinstance(task, PreparedTask):
        return task
    if isinstance(task, (str, os.PathLike)):
        task = load_task(task)
    if not isinstance(task, Task):
        return PreparedTask(spec=TaskSpec.coerce(task))
    options = _build_options(build)
    settings = BuildSettings.resolve(options.get("base_map"), options.get("ca_bundle"))
    image = build_image(task, client=client, **{**options, "base_map": settings.base_map,
                                                "ca_bundle": settings.ca_bundle})
    spec = task.to_spec(image)
    if task.compose_file is not None:  # the other services of a multi-container task
        stack, agent = prepare_services(task, image, settings=settings, client=client,
                                        log=options.get("log", print), force=options.get("force", False))
        spec = spec.model_copy(update={
            "services": stack,
            "env": {**agent.agent_env, **spec.env},
            "workdir": agent.agent_workdir or spec.workdir,
            "user": spec.user or agent.agent_user,
            "metadata": {**spec.metadata, "compose_notes": agent.notes},
        })
    if settings.ca_bundle and spec.network:
        # Sandboxes with network trust the host's CA bundle too (TLS-intercepting proxies).
        spec = spec.model_copy(update={
            "env": {**spec.env, **ca_env(CA_PATH)},
            "files": {**spec.files, CA_PATH: Path(settings.ca_bundle).read_text()},
        })
    timeout = float(task.agent_timeout) if getattr(task, "agent_timeout", None) else None
    return PreparedTask(spec=spec, source=task, time_limit=timeout)


def _build_options(build: BuildSettings | dict[str, Any] | None) -> dict[str, Any]:
    if build is None:
        return {}
    if isinstance(build, BuildSettings):
        return {"base_map": build.base_map, "ca_bundle": build.ca_bundle}
    if not isinstance(build, dict):
        raise ConfigError(f"build options must be a BuildSettings or a dict, got {type(build).__name__}")
    unknown = sorted(set(build) - set(BUILD_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown build options {unknown}; known: {list(BUILD_OPTIONS)}")
    return dict(build)

