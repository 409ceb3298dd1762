"""The loaded task and the schemas of the files it comes from.

Two layers:

* the *file schemas*: pydantic models of Harbor's ``task.toml`` tables (old ``version = "1.0"``
  and current ``schema_version = "1.x"`` spellings) and of this project's own
  ``[metadata.terminal_env]`` table. They are closed (``extra="forbid"``); keys they do not know
  are taken out first by :func:`strip_unknown` and reported, so a task written for a newer Harbor
  still loads (Harbor itself ignores unknown keys) while a typo is still seen;
* :class:`Task`: what the rest of the project uses, the same for both source formats, validated
  once by the readers in :mod:`terminal_env.tasks.load` and :mod:`terminal_env.tasks.tb1`.

Problems are collected, never raised one at a time: a reader reports every problem of a task
with its file, field, reason and remedy, and :class:`TaskFormatError` carries them all.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat
import types
import typing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError
from ..task import TaskSpec

Severity = Literal["error", "warning"]
SPLITS = ("train", "validation", "test")
MAX_SECONDS = 24 * 3600  # a timeout past a day is a unit mistake (ms for s), not a plan
MIN_MEMORY_MB = 64


# ---- problems ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a task: where (file, dotted field), why, and what to do."""

    file: str
    field: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{self.severity}: {where}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


class Problems:
    """The problems found while reading one task."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def error(self, file: Path | str, field: str, message: str) -> None:
        self.items.append(Problem(str(file), field, message, "error"))

    def warning(self, file: Path | str, field: str, message: str) -> None:
        self.items.append(Problem(str(file), field, message, "warning"))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "warning"]


class TaskFormatError(ConfigError):
    """A task directory is not valid; ``problems`` lists everything found, not just the first."""

    def __init__(self, path: Path | str, problems: list[Problem]):
        self.path = str(path)
        self.problems = list(problems)
        n_err = sum(p.severity == "error" for p in problems)
        n_warn = len(problems) - n_err
        head = f"task {self.path} is not valid ({n_err} error(s), {n_warn} warning(s)):"
        super().__init__("\n".join([head, *(f"  {p}" for p in problems)]))


# ---- file schemas --------------------------------------------------------------------------


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


NetworkMode = Literal["public", "no-network", "allowlist"]


class HarborAuthor(_Closed):
    name: str
    email: str | None = None


class HarborTaskInfo(_Closed):
    """``[task]`` of the current schema: the registry identity, ``org/name``."""

    name: str = Field(min_length=1)
    description: str = ""
    authors: list[HarborAuthor] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class HarborEnvironment(_Closed):
    """``[environment]`` (and ``[verifier.environment]`` in separate-verifier mode)."""

    build_timeout_sec: float = 600.0
    docker_image: str | None = None
    os: str | None = None
    cpus: float = 1
    memory_mb: int | None = None
    memory: str | None = None  # old spelling, "2G"
    storage_mb: int | None = None
    storage: str | None = None  # old spelling, "10G"
    gpus: int = 0
    gpu_types: list[str] | None = None
    allow_internet: bool | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: dict[str, Any] | None = None
    #: terminal-env's own: the OCI runtime the sandbox must run under ("runsc" for gVisor)
    runtime: str | None = None


class HarborVerifier(_Closed):
    timeout_sec: float = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)
    environment_mode: Literal["shared", "separate"] | None = None
    environment: HarborEnvironment | None = None


class HarborAgent(_Closed):
    timeout_sec: float | None = None
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)


class HarborSolution(_Closed):
    env: dict[str, str] = Field(default_factory=dict)


class HarborArtifact(_Closed):
    source: str
    destination: str | None = None


class HarborTaskToml(_Closed):
    """A whole ``task.toml``. ``[metadata]`` is free-form, as in Harbor."""

    schema_version: str | None = None
    version: str | None = None  # the old name of schema_version
    task: HarborTaskInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: HarborVerifier = Field(default_factory=HarborVerifier)
    agent: HarborAgent = Field(default_factory=HarborAgent)
    environment: HarborEnvironment = Field(default_factory=HarborEnvironment)
    solution: HarborSolution = Field(default_factory=HarborSolution)
    source: str | None = None
    artifacts: list[str | HarborArtifact] = Field(default_factory=list)
    steps: list[dict[str, Any]] | None = None  # multi-step tasks: known, not supported here
    multi_step_reward_mode: Any = None  # pre-1.3 spelling Harbor itself drops


class TerminalEnvMeta(_Closed):
    """``[metadata.terminal_env]``: this project's own fields, where Harbor keeps a free dict."""

    check_weights: dict[str, float] = Field(default_factory=dict)
    protected_paths: list[str] = Field(default_factory=list)
    workdir: str | None = None
    verifier_mode: Literal["same", "separate"] | None = None
    artifacts: list[str] = Field(default_factory=list)


# ---- reading helpers shared by the Harbor and Terminal-Bench readers ------------------------


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models inside an annotation such as ``list[str | HarborArtifact] | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _nested_models(arg)
    return found


def strip_unknown(
    data: Any, model: type[BaseModel], where: str, report: Callable[[str, str, list[str]], None]
) -> Any:
    """A copy of ``data`` without the keys ``model`` does not declare (recursing into sub-models);
    ``report(field, key, known)`` is called for each key taken out."""
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = model.model_fields.get(key)
        dotted = f"{where}.{key}" if where else str(key)
        if field is None:
            report(dotted, key, sorted(model.model_fields))
            continue
        for sub in _nested_models(field.annotation):
            if isinstance(value, dict):
                value = strip_unknown(value, sub, dotted, report)
            elif isinstance(value, list):
                value = [strip_unknown(v, sub, f"{dotted}[{i}]", report)
                         if isinstance(v, dict) else v for i, v in enumerate(value)]
        out[key] = value
    return out


def validation_problems(
    exc: ValidationError, file: Path | str, prefix: str, problems: Problems
) -> None:
    """One error per field, with the dotted field and the offending value."""
    seen: set[str] = set()
    for err in exc.errors():
        # For `str | Model` unions pydantic names the branch (`str`, `HarborArtifact`): noise here.
        loc = [p for p in err["loc"] if p not in ("str", "int", "HarborArtifact")
               and not str(p).startswith(("function-", "union["))]
        field = prefix
        for p in loc:
            field = f"{field}[{p}]" if isinstance(p, int) else ".".join(filter(None, [field, str(p)]))
        if field in seen:  # a union reports once per branch: the first says enough
            continue
        seen.add(field)
        value = err.get("input")
        shown = "" if isinstance(value, dict) else f", got {value!r}"
        problems.error(file, field, f"{err['msg']}{shown}; fix the value")


def check_seconds(problems: Problems, file: Path | str, field: str, value: float | None) -> None:
    if value is None:
        return
    if not math.isfinite(value) or value <= 0:
        problems.error(file, field, f"a timeout must be a positive number of seconds, got "
                       f"{value!r}; set it in seconds, e.g. 600")
    elif value > MAX_SECONDS:
        problems.error(
            file, field,
            f"{value:g} s is more than 24 hours; timeouts are in seconds (not milliseconds): "
            f"set a value up to {MAX_SECONDS}",
        )


def parse_size_mb(text: str) -> int:
    """``"2G"`` -> 2048, ``"512M"`` -> 512 (the old ``memory``/``storage`` spelling).

    >>> parse_size_mb("2G"), parse_size_mb("512mb"), parse_size_mb("1.5Gi")
    (2048, 512, 1536)
    """
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([GgMmKk])(?:[Ii]?[Bb]?)\s*", text)
    if not m:
        raise ValueError(f"expected a size such as '2G' or '512M', got {text!r}")
    number, unit = float(m.group(1)), m.group(2).upper()
    if not math.isfinite(number * 1024):
        raise ValueError(f"{text!r} is too large a size")
    return int(number * {"G": 1024, "M": 1, "K": 1 / 1024}[unit])


def read_terminal_env_metadata(
    metadata: dict[str, Any], file: Path | str, prefix: str, problems: Problems
) -> tuple[dict[str, Any], TerminalEnvMeta]:
    """The project's fields of a metadata dict, checked: split/category/difficulty/canary/tags
    plus the ``terminal_env`` sub-table. Unknown keys in our own sub-table are errors: nobody
    else writes there, so an unknown key is a typo."""
    def at(key: str) -> str:
        return f"{prefix}.{key}" if prefix else key

    ours: dict[str, Any] = {"split": None, "category": None, "difficulty": None, "canary": None}
    split = metadata.get("split")
    if split is not None and split not in SPLITS:
        problems.error(file, at("split"), f"must be one of {', '.join(SPLITS)}, got {split!r}")
    else:
        ours["split"] = split
    for key in ("category", "difficulty", "canary"):
        value = metadata.get(key)
        if value is not None and not isinstance(value, str):
            problems.error(file, at(key), f"must be a string, got {value!r}")
        else:
            ours[key] = value
    tags = metadata.get("tags", [])
    if not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        problems.error(file, at("tags"), f"must be a list of strings, got {tags!r}")
        tags = []
    ours["tags"] = list(tags)

    raw = metadata.get("terminal_env", {})
    sub = at("terminal_env")
    if not isinstance(raw, dict):
        problems.error(file, sub, f"must be a table, got {raw!r}")
        return ours, TerminalEnvMeta()

    def unknown(field: str, key: str, known: list[str]) -> None:
        problems.error(file, field, f"unknown key {key!r}: rename it to one of "
                       f"{', '.join(known)} (or move free-form data up to [metadata])")

    raw = strip_unknown(raw, TerminalEnvMeta, sub, unknown)
    try:
        meta = TerminalEnvMeta.model_validate(raw)
    except ValidationError as exc:
        validation_problems(exc, file, sub, problems)
        return ours, TerminalEnvMeta()
    for name, weight in meta.check_weights.items():
        if not math.isfinite(weight) or weight < 0:
            problems.error(file, f"{sub}.check_weights.{name}",
                           f"a weight must be a finite number >= 0, got {weight!r}")
    for i, path in enumerate(meta.protected_paths):
        if not path.startswith("/"):
            problems.error(file, f"{sub}.protected_paths[{i}]",
                           f"must be an absolute path in the sandbox, got {path!r}")
    for i, path in enumerate(meta.artifacts):
        if not path.startswith("/"):
            problems.error(file, f"{sub}.artifacts[{i}]", f"must be an absolute path, got {path!r}")
    if meta.workdir is not None and not meta.workdir.startswith("/"):
        problems.error(file, f"{sub}.workdir", f"must be an absolute path, got {meta.workdir!r}")
    return ours, meta


# ---- digests -------------------------------------------------------------------------------


def tree_files(root: Path, *, exclude: tuple[str, ...] = ()) -> dict[str, Path]:
    """Every file and symlink under ``root`` as {posix relative path: path}, in sorted order;
    top-level names in ``exclude`` are left out."""
    out: dict[str, Path] = {}
    if not root.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in exclude]
            filenames = [f for f in filenames if f not in exclude]
        # os.walk lists symlinks to directories among dirnames and does not follow them
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            out[(rel_dir / name).as_posix()] = Path(dirpath) / name
    return dict(sorted(out.items()))


def environment_digest(
    context: Path, excludes: tuple[str, ...], dockerfile: Path | None, docker_image: str | None
) -> str:
    """What decides the bytes of a task's image: the build context, the Dockerfile (wherever it
    is), or the name of the prebuilt image."""
    files: dict[str, Path | bytes] = dict(tree_files(context, exclude=excludes))
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
    env: dict[str, str] = Field(default_factory=dict)  # sandbox env; Harbor's ${VAR} from host
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
    tests_digest: str
    environment_digest: str
    warnings: list[Problem] = Field(default_factory=list)

    # -- files ------------------------------------------------------------------------------
    def verifier_files(self) -> dict[str, Path]:
        """{name under /tests: host path}: the tests dir, plus e.g. TB1's ``run-tests.sh``."""
        return {**tree_files(self.tests_dir), **self.extra_verifier_files}

    def current_tests_digest(self) -> str:
        """The tests digest recomputed from disk (equal to ``tests_digest`` unless they changed)."""
        return files_digest(dict(self.verifier_files()))

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
        a step of its own, never hidden in a conversion (``TerminalEnv(task)`` does both)."""
        return TaskSpec(
            name=self.name,
            instruction=self.instruction,
            image=image,
            workdir=self.workdir,
            env=self.sandbox_env(),
            user=self.agent_user,
            cpus=self.cpus,
            memory_mb=self.memory_mb,
            storage_mb=self.storage_mb,
            network=self.allow_internet,
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
