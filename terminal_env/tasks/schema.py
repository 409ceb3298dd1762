"""The schemas of the files a task comes from, and the problems found in them.

* *problems*: :class:`Problem` (file, field, reason, remedy), collected by :class:`Problems`,
  never raised one at a time; :class:`TaskFormatError` carries them all;
* *file schemas*: pydantic models of Harbor's ``task.toml`` tables (old ``version = "1.0"``
  and current ``schema_version = "1.x"`` spellings) and of this project's own
  ``[metadata.terminal_env]`` table. They are closed (``extra="forbid"``); keys they do not know
  are taken out first by :func:`strip_unknown` and reported, so a task written for a newer Harbor
  still loads (Harbor itself ignores unknown keys) while a typo is still seen.

The readers (:mod:`terminal_env.tasks.load`, :mod:`terminal_env.tasks.tb1`) validate a task
directory against these once and make a :class:`~terminal_env.tasks.model.Task`.
"""

from __future__ import annotations

import math
import re
import types
import typing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError

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
    version: str | None = Field(default=None, min_length=1)  # the package's version
    description: str = ""
    authors: list[HarborAuthor] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class HarborHealthcheck(_Closed):
    """``healthcheck`` of ``[environment]`` or of a step (Docker's HEALTHCHECK options)."""

    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


class HarborMCPServer(_Closed):
    """One ``[[environment.mcp_servers]]`` entry: an MCP server offered to the agent."""

    name: str
    transport: Literal["stdio", "sse", "streamable-http", "http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)


class HarborTpu(_Closed):
    """``[environment.tpu]`` (schema 1.4): a TPU slice, ``type`` and ``topology``."""

    type: str = Field(min_length=1)
    topology: str


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
    tpu: HarborTpu | None = None
    allow_internet: bool | None = None  # old spelling of network_mode
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None
    mcp_servers: list[HarborMCPServer] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    skills_dir: str | None = None
    healthcheck: HarborHealthcheck | None = None
    workdir: str | None = None
    #: terminal-env's own: the OCI runtime the sandbox must run under ("runsc" for gVisor)
    runtime: str | None = None


class HarborCollect(_Closed):
    """One ``[[verifier.collect]]`` entry: a command run in a service before artifacts are taken."""

    command: str
    service: str = "main"
    timeout_sec: float = 600.0  # as in Harbor
    user: str | int | None = None


class HarborVerifier(_Closed):
    timeout_sec: float = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    environment: HarborEnvironment | None = None
    collect: list[HarborCollect] = Field(default_factory=list)


class HarborAgent(_Closed):
    timeout_sec: float | None = None
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class HarborSolution(_Closed):
    env: dict[str, str] = Field(default_factory=dict)


class HarborArtifact(_Closed):
    source: str
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str | None = None


class HarborStep(_Closed):
    """One ``[[steps]]`` entry of a multi-step task (its files under ``steps/<name>/``)."""

    name: str = Field(min_length=1)
    agent: HarborAgent = Field(default_factory=HarborAgent)
    verifier: HarborVerifier = Field(default_factory=HarborVerifier)
    min_reward: float | dict[str, float] | None = None
    healthcheck: HarborHealthcheck | None = None
    artifacts: list[str | HarborArtifact] = Field(default_factory=list)


class HarborTaskToml(_Closed):
    """A whole ``task.toml`` (Harbor's schema up to 1.4). ``[metadata]`` is free-form, as in
    Harbor."""

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
    steps: list[HarborStep] | None = None
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
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


def _branch_name(part: Any) -> bool:
    """True for the parts of a pydantic error location that name a union's branch (``str``,
    ``float``, ``dict[str,float]``, ``HarborArtifact``...), not a field: noise to a task author."""
    if not isinstance(part, str):
        return False
    return (part in ("str", "int", "float", "bool", "none") or part.startswith(
        ("function-", "union[", "dict[", "list[", "literal[", "Harbor")))


def validation_problems(
    exc: ValidationError, file: Path | str, prefix: str, problems: Problems
) -> None:
    """One error per field, with the dotted field and the offending value."""
    seen: set[str] = set()
    for err in exc.errors():
        # For `str | Model` unions pydantic names the branch (`str`, `HarborArtifact`): noise here.
        loc = [p for p in err["loc"] if not _branch_name(p)]
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
