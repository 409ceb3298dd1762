"""The loaded task: :class:`Task`, what the rest of the project uses, the same for both source
formats, validated once by the readers in :mod:`terminal_env.tasks.load` and
:mod:`terminal_env.tasks.tb1` against the file schemas of :mod:`terminal_env.tasks.schema`;
and the content digests that name a task's tests and image.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..artifacts import ArtifactSpec
from ..errors import ConfigError
from ..task import Healthcheck, TaskSpec
from .schema import Problem

# ---- digests -------------------------------------------------------------------------------


def tree_files(root: Path, *, exclude: tuple[str, ...] = ()) -> dict[str, Path]:
    """Every file and symlink under ``root`` as {posix relative path: path}, in sorted order;
    top-level names in ``exclude`` are left out, and so is every ``__pycache__`` (Python's own
    cache, made by running the tests locally: never the task's content)."""
    out: dict[str, Path] = {}
    if not root.is_dir():
        return out
    top = os.fspath(root)
    for dirpath, dirnames, filenames in os.walk(top):
        # plain strings here: a pool of thousands of generated tasks is walked on every load
        rel_dir = os.path.relpath(dirpath, top).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        if not prefix:
            dirnames[:] = [d for d in dirnames if d not in exclude]
            filenames = [f for f in filenames if f not in exclude]
        # os.walk lists symlinks to directories among dirnames and does not follow them
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out[prefix + name] = Path(dirpath, name)
    return dict(sorted(out.items()))


def environment_digest(
    context: Path, excludes: tuple[str, ...], dockerfile: Path | None, docker_image: str | None,
    compose_file: Path | None = None,
) -> str:
    """What decides the bytes of a task's image: the build context, the Dockerfile (wherever it
    is), or the name of the prebuilt image; and the compose file of its other services."""
    files: dict[str, Path | bytes] = dict(tree_files(context, exclude=excludes))
    if compose_file is not None:
        files["\0compose"] = compose_file.read_bytes() if compose_file.is_file() else b""
    if dockerfile is not None:
        files["\0dockerfile"] = dockerfile.read_bytes() if dockerfile.is_file() else b""
    if docker_image is not None:
        files["\0docker_image"] = docker_image.encode()
    return files_digest(files)


def files_digest(files: dict[str, Path | bytes]) -> str:
    """sha256 over sorted (relative path, kind, executable bit, content or link target)."""
    h = hashlib.sha256()
    for rel in sorted(files):
        src = files[rel]
        if isinstance(src, bytes):
            kind, data = b"f", src
        elif src.is_symlink():
            kind, data = b"l", os.readlink(src).encode()
        elif not stat.S_ISREG(mode := src.stat().st_mode):  # a FIFO would block, a socket raise
            kind, data = b"s", stat.filemode(mode).encode()
        else:
            exe = bool(mode & stat.S_IXUSR)
            kind, data = (b"x" if exe else b"f"), src.read_bytes()
        h.update(rel.encode() + b"\0" + kind + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


# ---- the loaded task -----------------------------------------------------------------------



class CollectHook(BaseModel):
    """One ``[[verifier.collect]]`` command: run by the verifier in the agent's sandbox, as
    ``user`` (root when unset), within ``timeout_sec`` seconds, before the tests."""

    command: str
    timeout_sec: float = 600.0
    user: str | None = None


class TaskStep(BaseModel):
    """One step of a multi-step Harbor task (``[[steps]]``, its files under ``steps/<name>/``):
    its own instruction, its tests laid over the task's ``tests/``, its reference solution, the
    files put in the working directory before it (``workdir/``, with ``setup.sh`` run there),
    and ``min_reward``, below which the later steps are not run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    instruction: str
    #: ``steps/<name>/tests`` (None: the task's ``tests/`` alone judge this step)
    tests_dir: Path | None = None
    solution_script: Path | None = None
    #: ``steps/<name>/workdir``: copied into the working directory before the step's agent
    workdir_dir: Path | None = None
    #: a number gates the ``reward`` metric; a table gates each named metric (a missing one fails)
    min_reward: float | dict[str, float] | None = None
    #: run after the step's setup.sh, until it succeeds, before the step's agent
    healthcheck: Healthcheck | None = None
    agent_timeout: float | None = None
    verifier_timeout: float | None = None
    verifier_env: dict[str, str] = Field(default_factory=dict)


class Task(BaseModel):
    """A validated task, the same whatever its source format. Build its image with
    :func:`terminal_env.tasks.build.build_image`; run it through :meth:`to_spec`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    path: Path
    format: Literal["harbor", "terminal-bench-1"]
    instruction: str
    # the image
    environment_dir: Path  # the build context
    dockerfile: Path | None  # None when the task names a prebuilt `docker_image`
    docker_image: str | None = None
    context_excludes: tuple[str, ...] = ()  # top-level names of the context not sent to builds
    #: the compose file of a multi-container environment (its other services: tasks.compose)
    compose_file: Path | None = None
    # the verifier
    tests_dir: Path
    test_command: list[str]
    result_format: Literal["harbor", "pytest-output"]
    extra_verifier_files: dict[str, Path] = Field(default_factory=dict)
    verifier_env: dict[str, str] = Field(default_factory=dict)
    verifier_user: str | None = None
    verifier_mode: Literal["same", "separate"] = "same"
    verifier_environment: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[str] = Field(default_factory=list)
    #: Harbor's ``artifacts``: copied out of the agent's sandbox into the trial's directory after
    #: the run (the convention directory /logs/artifacts too, without being listed)
    trial_artifacts: list[ArtifactSpec] = Field(default_factory=list)
    #: Harbor's ``[[verifier.collect]]``: commands the verifier runs in the agent's sandbox after
    #: the agent's processes are stopped and before the tests (and the artifacts) read it
    verifier_collect: list[CollectHook] = Field(default_factory=list)
    check_weights: dict[str, float] = Field(default_factory=dict)
    protected_paths: list[str] = Field(default_factory=list)
    # the oracle
    solution_script: Path | None = None  # the source file; None when generated (solution.yaml)
    solution_text: str | None = None  # the generated script, when there is no file to copy
    solution_env: dict[str, str] = Field(default_factory=dict)
    # limits
    agent_timeout: float = 600.0
    verifier_timeout: float = 600.0
    build_timeout: float = 600.0
    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int = 10240
    gpus: int = 0
    allow_internet: bool = False
    #: Harbor's ``network_mode = "allowlist"``: the only hosts the agent's sandbox may reach
    allowed_hosts: list[str] | None = None
    #: ``[verifier] network_mode = "allowlist"``: the tests run with a network, reaching only these
    verifier_allowed_hosts: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)  # sandbox env; Harbor's ${VAR} from host
    #: ``[environment] healthcheck``: run until it succeeds before the agent starts
    healthcheck: Healthcheck | None = None
    agent_user: str | None = None
    workdir: str = "/app"
    runtime: str | None = None  # OCI runtime of the sandbox (None: the engine's default)
    # what it is
    split: Literal["train", "validation", "test"] | None = None
    category: str | None = None
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    canary: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Harbor's task.toml, as read (its other fields are above, or refused by the loader)
    schema_version: str | None = None
    source: str | None = None
    description: str = ""
    #: how a multi-step task's steps make its reward: ``mean`` (Harbor's default: the mean over
    #: the steps that were verified) or ``final`` (the last verified step's); no effect on a
    #: one-step task, as in Harbor
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    #: the steps of a multi-step task (``[[steps]]``), in order; empty for a one-step task
    steps: list[TaskStep] = Field(default_factory=list)
    tests_digest: str
    environment_digest: str
    warnings: list[Problem] = Field(default_factory=list)

    @property
    def reaches_network(self) -> bool:
        """Whether the agent or the tests may reach hosts beyond the sandbox (public, or an
        allowlist with hosts in either phase)."""
        return self.allow_internet or bool(self.allowed_hosts) or bool(self.verifier_allowed_hosts)

    @property
    def network_mode(self) -> Literal["public", "no-network", "allowlist"]:
        """Harbor's spelling of :attr:`allow_internet` and :attr:`allowed_hosts`: the sandbox's
        network from start to submit."""
        if self.allowed_hosts is not None:
            return "allowlist"
        return "public" if self.allow_internet else "no-network"

    # -- steps ------------------------------------------------------------------------------
    def step_task(self, index: int) -> "Task":
        """Step ``index`` of a multi-step task as a one-step task: its instruction, the task's
        tests with the step's laid over them (same-named files replaced, as Harbor uploads them),
        its verifier timeout and environment, its solution. The protected verifier and the oracle
        take it as they take any task."""
        step = self.steps[index]
        overlay = dict(tree_files(step.tests_dir)) if step.tests_dir is not None else {}
        view = self.model_copy(update={
            "instruction": step.instruction,
            "extra_verifier_files": {**self.extra_verifier_files, **overlay},
            "verifier_env": {**self.verifier_env, **step.verifier_env},
            "verifier_timeout": step.verifier_timeout or self.verifier_timeout,
            "agent_timeout": step.agent_timeout or self.agent_timeout,
            "solution_script": step.solution_script,
            "solution_text": None,
            "steps": [],
        })
        return view.model_copy(update={"tests_digest": files_digest(dict(view.verifier_files()))})

    # -- files ------------------------------------------------------------------------------
    def verifier_files(self) -> dict[str, Path]:
        """{name under /tests: host path}: the tests dir, plus e.g. TB1's ``run-tests.sh``."""
        return {**tree_files(self.tests_dir), **self.extra_verifier_files}

    def current_tests_digest(self) -> str:
        """The tests digest recomputed from disk (equal to ``tests_digest`` unless they changed);
        a multi-step task's covers every step's tests."""
        return files_digest(self.all_tests())

    def all_tests(self) -> dict[str, Path | bytes]:
        """What ``tests_digest`` is made of: the tests, or for a multi-step task each step's
        (the task's with the step's laid over them) under the step's name."""
        if not self.steps:
            return dict(self.verifier_files())
        out: dict[str, Path | bytes] = {}
        for i, step in enumerate(self.steps):
            view = self.step_task(i)
            out.update({f"{step.name}/{name}": src for name, src in view.verifier_files().items()})
        return out

    def environment_files(self) -> dict[str, Path]:
        """{relative path: host path} of the build context (without ``context_excludes``)."""
        return tree_files(self.environment_dir, exclude=self.context_excludes)

    @property
    def has_solution(self) -> bool:
        return self.solution_script is not None or self.solution_text is not None

    def solution_files(self) -> dict[str, Path | bytes]:
        """{name under /solution: host path or content}; run with :attr:`solution_command`."""
        if self.solution_text is not None:
            return {"solve.sh": self.solution_text.encode()}
        if self.solution_script is None:
            return {}
        if self.format == "harbor":
            return dict(tree_files(self.solution_script.parent))
        return {"solve.sh": self.solution_script}

    @property
    def solution_command(self) -> list[str]:
        return ["bash", "/solution/solve.sh"]

    # -- running ----------------------------------------------------------------------------
    def sandbox_env(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """``env`` with Harbor's ``${VAR}`` / ``${VAR:-default}`` resolved from the host."""
        environ = dict(os.environ if environ is None else environ)

        def sub(m: re.Match[str]) -> str:
            var, default = m.group(1), m.group(3)
            if var in environ:
                return environ[var]
            if default is not None:
                return default
            raise ConfigError(
                f"task {self.name!r}: environment variable {var} is not set on the host; "
                f"[environment].env needs it (export {var}=... or give a default ${{{var}:-...}})"
            )

        return {k: re.sub(r"\$\{(\w+)(:-([^}]*))?\}", sub, v) for k, v in self.env.items()}

    def to_spec(self, image: str) -> TaskSpec:
        """The :class:`~terminal_env.task.TaskSpec` an episode runs in ``image`` (the task's image,
        from :func:`~terminal_env.tasks.build.build_image`). Nothing is built here: building is
        a step of its own, never hidden in a conversion (:func:`terminal_env.prepare.prepare_task`
        does both)."""
        return TaskSpec(
            name=self.name,
            instruction=self.instruction,
            image=image,
            workdir=self.workdir,
            env=self.sandbox_env(),
            user=self.agent_user,
            healthcheck=self.healthcheck,
            cpus=self.cpus,
            memory_mb=self.memory_mb,
            storage_mb=self.storage_mb,
            # a verifier with an allowlist needs a network the agent's phase then lacks: the
            # sandbox gets one, firewalled to nothing (loopback only) until the tests run
            network=self.allow_internet or self.allowed_hosts is not None or self.verifier_allowed_hosts is not None,
            allowed_hosts=self.allowed_hosts if self.allowed_hosts is not None else (
                [] if self.verifier_allowed_hosts is not None and not self.allow_internet else None),
            runtime=self.runtime,
            metadata={
                "split": self.split,
                "category": self.category,
                "difficulty": self.difficulty,
                "tags": list(self.tags),
                "format": self.format,
                "path": str(self.path),
                "tests_digest": self.tests_digest,
                "environment_digest": self.environment_digest,
                "agent_timeout": self.agent_timeout,
                "verifier_timeout": self.verifier_timeout,
                "storage_mb": self.storage_mb,
            },
        )
