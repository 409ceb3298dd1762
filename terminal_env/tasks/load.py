"""Finding, reading and validating task directories.

Two formats are read: Harbor's (``task.toml``, ``instruction.md``, ``environment/``, ``tests/``,
``solution/``; the format of Terminal-Bench 2.x) and Terminal-Bench 1.x's (``task.yaml``; see
:mod:`terminal_env.tasks.tb1`). Both become the same :class:`~terminal_env.tasks.model.Task`.

Every problem of a task is collected with its file, field, reason and remedy. Errors make the
task unloadable; warnings (unknown keys, which Harbor also ignores, a missing oracle solution,
features this project does not run) let it load and are kept on ``Task.warnings``.
``strict=True`` treats warnings as errors.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Iterable

from pydantic import ValidationError

from ..errors import ConfigError
from . import harbor
from .dockerfile import dockerfile_workdir
from .model import Task, environment_digest, files_digest
from .schema import (
    HarborTaskToml,
    Problem,
    Problems,
    TaskFormatError,
    check_seconds,
    read_terminal_env_metadata,
    strip_unknown,
    validation_problems,
)
from .tb1 import read_tb1

HARBOR_MARKERS = ("task.toml", "instruction.md")
TB1_MARKERS = ("task.yaml",)
DEFAULT_WORKDIR = "/app"


# ---- finding tasks -------------------------------------------------------------------------


def bundled_dir() -> Path:
    """The bundled pool: ``tasks/`` at the root of the checkout this package runs from (so the
    package is installed editable, ``pip install -e``, for the bundled tasks to be found)."""
    return Path(__file__).resolve().parents[2] / "tasks"


def task_path(path: str | Path) -> Path:
    """``path`` as given when it exists; else, when it is a bare name (no ``/``) of a bundled
    task, that task's directory, so ``load_task("td-csv-region-totals")`` works from any working
    directory. An existing directory of that name in the working directory wins."""
    given = Path(path)
    if given.exists() or len(given.parts) != 1 or str(path).startswith("."):
        return given
    bundled = bundled_dir() / given
    return bundled if is_task_dir(bundled) else given



def is_task_dir(path: Path) -> bool:
    return path.is_dir() and any((path / m).is_file() for m in HARBOR_MARKERS + TB1_MARKERS)


def find_tasks(paths: Iterable[str | Path], *, max_depth: int = 3) -> list[Path]:
    """Task directories among ``paths``: each is a task directory, or a directory holding task
    directories (searched up to ``max_depth`` levels; hidden directories are skipped)."""
    found: list[Path] = []

    def walk(path: Path, depth: int) -> None:
        if is_task_dir(path):
            found.append(path)
        elif depth < max_depth:
            for child in sorted(p for p in path.iterdir() if p.is_dir()):
                if not child.name.startswith((".", "__")):
                    walk(child, depth + 1)

    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ConfigError(f"{path} is not a directory; give a task directory or a directory "
                              "of task directories")
        before = len(found)
        walk(path, 0)
        if len(found) == before:
            raise ConfigError(f"no task found in {path}: a task directory holds task.toml "
                              "(Harbor) or task.yaml (Terminal-Bench 1.x)")
    return list(dict.fromkeys(found))


# ---- loading -------------------------------------------------------------------------------


def read_task(path: str | Path) -> tuple[Task | None, list[Problem]]:
    """Read one task directory (or a bundled task by name, see :func:`task_path`): the task (None
    when it has errors) and every problem found."""
    given = task_path(path)
    problems = Problems()
    if not given.is_dir():
        problems.error(given, "", "not a directory; give a task directory, or the name of a bundled task "
                       f"(a folder of {bundled_dir()})")
        return None, problems.items
    path = Path(os.path.abspath(given))  # the Task holds absolute paths; problems show `given`
    try:
        if (path / "task.yaml").is_file() and not (path / "task.toml").is_file():
            task = read_tb1(path, problems)
        else:
            task = read_harbor(path, problems)
    except ValidationError as exc:  # a value the file schemas let through but Task does not
        validation_problems(exc, path, "", problems)
        task = None
    shown = [_relative(p, path, given) for p in problems.items]
    if problems.errors:
        return None, shown
    if task is not None and task.warnings:
        warnings = [_relative(p, path, given) for p in task.warnings]
        task = task.model_copy(update={"warnings": warnings})
    return task, shown


def _relative(p: Problem, root: Path, given: Path) -> Problem:
    if p.file == str(root) or p.file.startswith(f"{root}/"):
        return Problem(str(given) + p.file[len(str(root)):], p.field, p.message, p.severity)
    return p


def load_task(path: str | Path, *, strict: bool = False) -> Task:
    """Load and validate one task directory (Harbor or Terminal-Bench 1.x, detected).

    Raises :class:`TaskFormatError` listing every problem when there is an error (or, with
    ``strict``, a warning). Warnings of a loaded task are on ``task.warnings``.
    """
    task, problems = read_task(path)
    if task is None or (strict and problems):
        raise TaskFormatError(path, problems)
    return task


def split_tasks(folders: Iterable[str | Path], split: str, where: str) -> list[Path]:
    """The task directories under ``folders``, every one of which must be in ``split`` by its
    task.toml (a trainer's train tasks, a loop's validation tasks...); ``where`` names the setting
    in the error (``--tasks``, ``tasks.validation``)."""
    folders = [str(f) for f in folders]
    paths = find_tasks(folders)
    if not paths:
        raise ConfigError(f"{where}: no task directories in {', '.join(folders)}")
    wrong = [p.name for p in paths if (load_task(p).split or "") != split]
    if wrong:
        raise ConfigError(f"{where}: these tasks are not in the {split} split by their task.toml: "
                          f"{', '.join(wrong[:5])}{' ...' if len(wrong) > 5 else ''}; give only {split} tasks "
                          f"(the test split is never trained or selected on)")
    return paths


def validate(paths: Iterable[str | Path], strict: bool = False) -> list[Problem]:
    """Every problem of every task under ``paths``; with ``strict`` warnings become errors."""
    problems: list[Problem] = []
    for raw in paths:
        try:
            dirs = find_tasks([raw])
        except ConfigError as exc:
            problems.append(Problem(str(raw), "", str(exc), "error"))
            continue
        for d in dirs:
            problems += read_task(d)[1]
    if strict:
        problems = [Problem(p.file, p.field, p.message, "error") for p in problems]
    return problems


# ---- Harbor --------------------------------------------------------------------------------


def _read_toml(file: Path, problems: Problems) -> dict[str, Any] | None:
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line L, column C)"
        problems.error(file, "", f"invalid TOML: {exc}; fix the syntax there")
    except UnicodeDecodeError as exc:
        problems.error(file, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})")
    except RecursionError:  # tomllib recurses into nested arrays and inline tables
        problems.error(file, "", "invalid TOML: arrays or inline tables nested too deeply")
    return None


def read_instruction(file: Path, problems: Problems) -> str:
    if not file.is_file():
        problems.error(file, "", "missing: the instruction shown to the agent; "
                       "write it in Markdown")
        return ""
    text = file.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        problems.error(file, "", "empty: write what the agent must do")
    return text


def read_harbor(path: Path, problems: Problems) -> Task | None:
    toml_file = path / "task.toml"
    data: dict[str, Any] | None = None
    if toml_file.is_file():
        data = _read_toml(toml_file, problems)
    else:
        problems.error(toml_file, "", "missing: every Harbor task has a task.toml (copy one from "
                       "tests/data/tasks/harbor-sum and edit it)")
    # a multi-step task's instructions, tests and solutions are its steps' (steps/<name>/)
    multi = bool(isinstance(data, dict) and data.get("steps"))
    instruction = "" if multi else read_instruction(path / "instruction.md", problems)

    config: HarborTaskToml | None = None
    if data is not None:
        def unknown(field: str, key: str, known: list[str]) -> None:
            where = f"[{field.rsplit('.', 1)[0]}]" if "." in field else "the top level"
            problems.warning(toml_file, field, f"unknown key {key!r} in {where}, ignored "
                             f"(known: {', '.join(known)}); remove or rename it")

        data = strip_unknown(data, HarborTaskToml, "", unknown)
        try:
            config = HarborTaskToml.model_validate(data)
        except ValidationError as exc:
            validation_problems(exc, toml_file, "", problems)

    env_cfg = config.environment if config else None
    docker_image = env_cfg.docker_image if env_cfg else None
    env_dir = path / "environment"
    dockerfile: Path | None = env_dir / "Dockerfile"
    # As in Harbor, only environment/docker-compose.yaml describes the environment (its `main`
    # is the agent's container, built from environment/Dockerfile); any other file there (a
    # docker-compose.yml the task asks the agent to repair) is build context.
    compose_file: Path | None = env_dir / "docker-compose.yaml"
    if not compose_file.is_file():  # type: ignore[union-attr]
        compose_file = None
    if not (env_dir / "Dockerfile").is_file():
        if docker_image:
            dockerfile = None
        else:
            problems.error(env_dir / "Dockerfile", "", "missing: the sandbox image is built from "
                           "environment/Dockerfile (or name a prebuilt [environment] docker_image)")
    tests_dir = path / "tests"
    if not multi and not (tests_dir / "test.sh").is_file():
        problems.error(tests_dir / "test.sh", "", "missing: the verifier runs "
                       "`bash /tests/test.sh`, which writes /logs/verifier/reward.txt "
                       "(or reward.json)")
    solve = path / "solution" / "solve.sh"
    if not multi and not solve.is_file():
        problems.warning(solve, "", "missing: the oracle cannot run this task (write a reference "
                         "solution to check that the task is solvable)")
    if config is None:
        return None

    f = toml_file
    version = config.schema_version or config.version
    if config.schema_version and config.version and config.schema_version != config.version:
        problems.error(f, "version", f"{config.version!r} contradicts schema_version "
                       f"{config.schema_version!r}; keep only schema_version")
    if version is not None and str(version) not in harbor.SCHEMA_VERSIONS:
        problems.warning(f, "schema_version", f"{version!r} is not one of the versions this "
                         f"reads ({', '.join(harbor.SCHEMA_VERSIONS)}); fields it adds are reported below")
    if config.multi_step_reward_mode is not None:
        problems.warning(f, "multi_step_reward_mode", "the pre-1.3 spelling, ignored (as Harbor "
                         "ignores it); write multi_step_reward_strategy")
    if env_cfg is not None and (env_cfg.os or "linux").lower() != "linux":
        problems.error(f, "environment.os", f"only linux sandboxes run here, got {env_cfg.os!r}")
    harbor.unsupported(problems, f, config)
    trial_artifacts = harbor.artifacts(problems, f, config)
    collect = harbor.collect_hooks(problems, f, config)
    check_seconds(problems, f, "agent.timeout_sec", config.agent.timeout_sec)
    check_seconds(problems, f, "verifier.timeout_sec", config.verifier.timeout_sec)
    check_seconds(problems, f, "environment.build_timeout_sec",
                  config.environment.build_timeout_sec)
    limits = harbor.limits(problems, f, config.environment, "environment")
    network = harbor.network(problems, f, "environment", config.environment,
                       config.environment.allow_internet) or "no-network"

    ours, meta = read_terminal_env_metadata(config.metadata, f, "metadata", problems)
    harbor_mode = {"shared": "same", "separate": "separate"}.get(
        config.verifier.environment_mode or "")
    if harbor_mode == "same" and config.verifier.environment is not None:
        problems.error(f, "verifier.environment", "a verifier environment contradicts "
                       "environment_mode = \"shared\" (as in Harbor); remove one of them")
    if harbor_mode is None and config.verifier.environment is not None:
        harbor_mode = "separate"  # as in Harbor: a verifier environment implies separate mode
    if meta.verifier_mode and harbor_mode and meta.verifier_mode != harbor_mode:
        problems.error(f, "metadata.terminal_env.verifier_mode",
                       f"{meta.verifier_mode!r} contradicts [verifier] environment_mode "
                       f"{config.verifier.environment_mode!r}; keep one of them")
    verifier_mode = meta.verifier_mode or harbor_mode or "same"
    harbor.phases(problems, f, config, network)
    if verifier_mode == "separate" and config.verifier.network_mode == "allowlist":
        harbor.refuse(problems, f, "verifier.network_mode", "\"allowlist\" for a separate verifier: "
                      "its sandbox has no network here; run the verifier in shared mode, or use \"no-network\"")
    verifier_environment: dict[str, Any] = {}
    if verifier_mode == "separate":
        agent_limits = {k: Task.model_fields[k].default for k in ("cpus", "memory_mb", "storage_mb")}
        verifier_environment = harbor.verifier_environment(
            problems, f, config, {**agent_limits, **limits}, tests_dir)
    task_steps = harbor.steps(problems, f, config, path, network, verifier_mode)
    env_check = harbor.healthcheck(problems, f, "environment.healthcheck", config.environment.healthcheck)
    if task_steps:
        instruction = task_steps[0].instruction  # what the task shows first
    if config.task is not None and "/" not in config.task.name:
        problems.warning(f, "task.name", f"Harbor expects 'org/name', got {config.task.name!r}")

    workdir = meta.workdir
    env_workdir = config.environment.workdir
    if env_workdir is not None:
        if not env_workdir.startswith("/"):
            problems.error(f, "environment.workdir", f"must be an absolute path, got {env_workdir!r}")
        elif workdir is not None and workdir != env_workdir:
            problems.error(f, "metadata.terminal_env.workdir", f"{workdir!r} contradicts "
                           f"[environment] workdir {env_workdir!r}; keep only the latter")
        workdir = env_workdir
    if workdir is None and dockerfile is not None and dockerfile.is_file():
        workdir = dockerfile_workdir(dockerfile.read_text(encoding="utf-8", errors="replace"))
    if problems.errors:
        return None
    tags = list(ours["tags"]) or (list(config.task.keywords) if config.task else [])
    user = config.agent.user
    vuser = config.verifier.user
    task = Task(
        name=config.task.name.rsplit("/", 1)[-1] if config.task else path.name,
        path=path,
        format="harbor",
        instruction=instruction,
        environment_dir=env_dir,
        dockerfile=dockerfile,
        docker_image=docker_image,
        compose_file=compose_file,
        tests_dir=tests_dir,
        test_command=["bash", "/tests/test.sh"],
        result_format="harbor",
        verifier_env=dict(config.verifier.env),
        verifier_user=None if vuser is None else str(vuser),
        verifier_mode=verifier_mode,
        verifier_environment=verifier_environment,
        artifacts=list(dict.fromkeys(meta.artifacts)),
        trial_artifacts=trial_artifacts,
        verifier_collect=collect,
        check_weights=dict(meta.check_weights),
        protected_paths=list(meta.protected_paths),
        solution_script=solve if solve.is_file() else None,
        solution_env=dict(config.solution.env),
        agent_timeout=config.agent.timeout_sec or Task.model_fields["agent_timeout"].default,
        verifier_timeout=config.verifier.timeout_sec,
        build_timeout=config.environment.build_timeout_sec,
        gpus=config.environment.gpus,
        allow_internet=network == "public",
        allowed_hosts=harbor.allowed_hosts(config.environment),
        healthcheck=env_check,
        verifier_allowed_hosts=harbor.allowed_hosts(config.verifier),
        schema_version=None if version is None else str(version),
        source=config.source,
        description=config.task.description if config.task else "",
        multi_step_reward_strategy=config.multi_step_reward_strategy,
        steps=task_steps,
        runtime=harbor.runtime(problems, f, config.environment.runtime),
        env=dict(config.environment.env),
        agent_user=None if user is None else str(user),
        workdir=workdir or DEFAULT_WORKDIR,
        tags=tags,
        metadata=dict(config.metadata),
        tests_digest="",
        environment_digest=environment_digest(env_dir, (), dockerfile, docker_image),
        warnings=problems.warnings,
        **{k: v for k, v in ours.items() if k != "tags"},
        **limits,
    )
    return task.model_copy(update={"tests_digest": files_digest(task.all_tests())})
