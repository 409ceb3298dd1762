"""Terminal-Bench 1.x tasks, read as they are.

A 1.x task is ``task.yaml`` (the instruction and metadata), a ``Dockerfile`` at the task root
(the build context is the root), ``docker-compose.yaml`` (one ``client`` service), ``run-tests.sh``
(pytest on ``$TEST_DIR``, which is ``/tests``), ``tests/`` and ``solution.sh`` or ``solution.yaml``
(keystrokes, converted here to a script). Its result is pytest's ``-rA`` summary on stdout.

Read natively, ``tests/`` plus ``run-tests.sh`` go to ``/tests`` and ``bash /tests/run-tests.sh``
runs; the task-format files at the root are left out of the build context, so a Dockerfile
cannot bake the tests into the agent's image. :func:`~terminal_env.tasks.tb1_import.import_tb1`
writes the same task as a Harbor directory whose ``tests/test.sh`` turns the pytest summary into
``reward.txt``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from .dockerfile import dockerfile_workdir
from .model import Task, environment_digest, files_digest, tree_files
from .schema import (
    Problems,
    _Closed,
    check_seconds,
    read_terminal_env_metadata,
    strip_unknown,
    validation_problems,
)

TB1_FILES = ("task.yaml", "docker-compose.yaml", "docker-compose.yml", "run-tests.sh",
             "solution.sh", "solution.yaml", "tests")
# What Terminal-Bench's harness put into the compose file's ${...} variables.
TB1_COMPOSE_VARS = {
    "T_BENCH_TEST_DIR": "/tests",
    "T_BENCH_CONTAINER_LOGS_PATH": "/logs",
    "T_BENCH_CONTAINER_AGENT_LOGS_PATH": "/agent-logs",
}


class TB1TaskYaml(_Closed):
    instruction: str | None = None
    descriptions: list[dict[str, Any]] | None = None
    author_name: str | None = None
    author_email: str | None = None
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    parser_name: str = "pytest"
    max_agent_timeout_sec: float = 360.0
    max_test_timeout_sec: float = 60.0
    run_tests_in_same_shell: bool = False
    disable_asciinema: bool = False
    estimated_duration_sec: float | None = None
    expert_time_estimate_min: float | None = None
    junior_time_estimate_min: float | None = None
    test_scripts: list[str] = Field(default_factory=list)
    # this project's own fields, as in Harbor's [metadata]
    split: str | None = None
    canary: str | None = None
    terminal_env: dict[str, Any] = Field(default_factory=dict)


class TB1Command(_Closed):
    command: str
    min_timeout_sec: float = 0.0
    max_timeout_sec: float = 180.0
    block: bool = False
    append_enter: bool = True


def _load_yaml(file: Path, problems: Problems) -> Any:
    try:
        return yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        reason = getattr(exc, "problem", None) or str(exc)
        problems.error(file, "", f"invalid YAML{where}: {reason}; fix the syntax there")
    except UnicodeDecodeError as exc:
        problems.error(file, "", f"not UTF-8 text ({exc.reason} at byte {exc.start})")
    except ValueError as exc:  # a value PyYAML parses but cannot build, e.g. date 2001-13-01
        problems.error(file, "", f"invalid YAML value: {exc}; fix or quote it")
    except RecursionError:  # PyYAML's composer recurses into nested collections
        problems.error(file, "", "invalid YAML: collections nested too deeply")
    return None


def solution_yaml_to_script(commands: list[TB1Command]) -> str:
    """A bash script typing the same commands as a 1.x ``solution.yaml``.

    >>> print(solution_yaml_to_script([TB1Command(command="cd /app", block=True),
    ...     TB1Command(command="echo ", append_enter=False), TB1Command(command="hi")]))
    ... # doctest: +NORMALIZE_WHITESPACE
    #!/bin/bash
    # Converted by terminal-env from solution.yaml (Terminal-Bench 1.x keystrokes):
    # each command that ended with Enter is one line; a non-blocking one then sleeps
    # its min_timeout_sec.
    cd /app
    echo hi
    """
    out = [
        "#!/bin/bash",
        "# Converted by terminal-env from solution.yaml (Terminal-Bench 1.x keystrokes):",
        "# each command that ended with Enter is one line; a non-blocking one then sleeps",
        "# its min_timeout_sec.",
    ]
    pending = ""
    for cmd in commands:
        text = pending + cmd.command
        if not cmd.append_enter:
            pending = text
            continue
        pending = ""
        out.append(text.rstrip("\n"))
        if not cmd.block and cmd.min_timeout_sec > 0:
            out.append(f"sleep {cmd.min_timeout_sec:g}")
    if pending:
        out.append("# typed without Enter at the end of solution.yaml, so never run:")
        out += [f"# {line}" for line in pending.splitlines()]
    return "\n".join(out) + "\n"


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False for a path the system cannot even look up (a name over the
    file system's limit, from a task's own compose file or task.yaml): reported as missing."""
    try:
        return path.is_file()
    except OSError:
        return False


def _compose(path: Path, problems: Problems) -> dict[str, Any]:
    """context, dockerfile, env, workdir, image of the compose file's single service."""
    result: dict[str, Any] = {"context": path, "dockerfile": "Dockerfile", "env": {},
                              "workdir": None, "image": None, "compose": None}
    file = next((path / n for n in ("docker-compose.yaml", "docker-compose.yml")
                 if (path / n).is_file()), None)
    if file is None:
        problems.warning(path / "docker-compose.yaml", "", "missing: assuming one container "
                         "built from the Dockerfile at the task root")
        return result
    data = _load_yaml(file, problems)
    if data is None:
        return result
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        problems.error(file, "services", "expected one service (Terminal-Bench's `client`)")
        return result
    if len(services) > 1:
        # The other services run around the agent's `client` (tasks.compose reads them).
        if "client" not in services:
            problems.error(file, "services", f"{len(services)} services "
                           f"({', '.join(map(str, services))}) and none is `client`, the agent's; "
                           "name the agent's service `client`")
            return result
        result["compose"] = file
        name, svc = "client", services["client"]
    else:
        name, svc = next(iter(services.items()))
    svc = svc if isinstance(svc, dict) else {}
    build = svc.get("build")
    if isinstance(build, str):
        build = {"context": build}
    if isinstance(build, dict):
        result["context"] = Path(os.path.normpath(path / str(build.get("context", "."))))
        result["dockerfile"] = str(build.get("dockerfile", "Dockerfile"))
        if build.get("args"):
            problems.warning(file, f"services.{name}.build.args", "build args are not passed")
    elif svc.get("image"):
        result["image"] = str(svc["image"])
    environment = svc.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(str(e).partition("=")[::2] for e in environment)
    elif not isinstance(environment, dict):
        problems.error(file, f"services.{name}.environment",
                       f"expected a mapping or a list of KEY=VALUE, got {environment!r}")
        environment = {}
    for key, value in dict(environment).items():
        value = re.sub(r"\$\{(\w+)\}", lambda m: TB1_COMPOSE_VARS.get(m.group(1), m.group(0)),
                       "" if value is None else str(value))
        if "${" in value:
            problems.warning(file, f"services.{name}.environment.{key}",
                             f"{value!r} needs Terminal-Bench's harness; left out")
        else:
            result["env"][str(key)] = value
    if isinstance(svc.get("working_dir"), str):
        result["workdir"] = svc["working_dir"]
    return result


def read_tb1(path: Path, problems: Problems) -> Task | None:
    f = path / "task.yaml"
    reported = len(problems.items)
    data = _load_yaml(f, problems)
    config: TB1TaskYaml | None = None
    if data is None and len(problems.items) == reported:  # an empty file (or a bare `null`)
        problems.error(f, "", "empty: expected a mapping of fields (instruction, difficulty, ...)")
    elif data is not None and not isinstance(data, dict):
        problems.error(f, "", "expected a mapping of fields (instruction, difficulty, ...)")
    elif data is not None:
        def unknown(field: str, key: str, known: list[str]) -> None:
            problems.warning(f, field, f"unknown key {key!r}, ignored (known: {', '.join(known)})")

        try:
            config = TB1TaskYaml.model_validate(strip_unknown(data, TB1TaskYaml, "", unknown))
        except ValidationError as exc:
            validation_problems(exc, f, "", problems)

    compose = _compose(path, problems)
    context: Path = compose["context"]
    dockerfile: Path | None = context / compose["dockerfile"]
    if compose["image"] and not _is_file(context / compose["dockerfile"]):
        dockerfile = None
    elif not _is_file(dockerfile):  # type: ignore[arg-type]
        problems.error(dockerfile, "", "missing: the sandbox image is built from it")
    if not (path / "run-tests.sh").is_file():
        problems.error(path / "run-tests.sh", "", "missing: the verifier runs "
                       "`bash /tests/run-tests.sh` (pytest on $TEST_DIR with -rA)")
    if not (path / "tests").is_dir():
        problems.error(path / "tests", "", "missing: the test files (e.g. test_outputs.py)")
    solution_script = path / "solution.sh" if (path / "solution.sh").is_file() else None
    solution_text = None
    if solution_script is None and (path / "solution.yaml").is_file():
        entries = _load_yaml(path / "solution.yaml", problems)
        try:
            commands = [TB1Command.model_validate(e) for e in (entries or [])]
            solution_text = solution_yaml_to_script(commands)
        except (ValidationError, TypeError) as exc:
            problems.error(path / "solution.yaml", "", f"expected a list of {{command: ...}} "
                           f"entries: {exc}".splitlines()[0])
    elif solution_script is None:
        problems.warning(path / "solution.sh", "", "missing (and no solution.yaml): the oracle "
                         "cannot run this task")
    if config is None:
        return None

    instruction = config.instruction
    if instruction is None and config.descriptions:
        base = [d for d in config.descriptions if d.get("key") == "base"] or config.descriptions
        instruction = str(base[0].get("description", ""))
    if not (instruction or "").strip():
        problems.error(f, "instruction", "missing or empty: write what the agent must do")
    if config.parser_name != "pytest":
        problems.error(f, "parser_name", f"only the pytest parser is supported, got "
                       f"{config.parser_name!r}")
    if config.run_tests_in_same_shell:
        problems.warning(f, "run_tests_in_same_shell", "tests run in a fresh shell here; "
                         "tests of shell state (variables, cwd) will not see the agent's")
    for script in config.test_scripts:
        if not _is_file(path / "tests" / script):
            problems.warning(f, "test_scripts", f"{script} comes from Terminal-Bench's harness, "
                             "not the task; run-tests.sh must not need it")
    check_seconds(problems, f, "max_agent_timeout_sec", config.max_agent_timeout_sec)
    check_seconds(problems, f, "max_test_timeout_sec", config.max_test_timeout_sec)
    metadata = config.model_dump(exclude_unset=True, exclude={"instruction", "descriptions"})
    ours, meta = read_terminal_env_metadata(metadata, f, "", problems)
    workdir = meta.workdir or compose["workdir"]
    if workdir is None and dockerfile is not None and _is_file(dockerfile):
        workdir = dockerfile_workdir(dockerfile.read_text(encoding="utf-8", errors="replace"))
    if problems.errors:
        return None
    excludes = TB1_FILES if context == path else ()
    extra = {"run-tests.sh": path / "run-tests.sh"}
    tests = {**tree_files(path / "tests"), **extra}
    return Task(
        name=path.name,
        path=path,
        format="terminal-bench-1",
        instruction=instruction or "",
        environment_dir=context,
        dockerfile=dockerfile,
        docker_image=compose["image"] if dockerfile is None else None,
        compose_file=compose["compose"],
        context_excludes=excludes,
        tests_dir=path / "tests",
        test_command=["bash", "/tests/run-tests.sh"],
        result_format="pytest-output",
        extra_verifier_files=extra,
        verifier_env={"TEST_DIR": "/tests"},
        verifier_mode=meta.verifier_mode or "same",
        artifacts=list(meta.artifacts),
        check_weights=dict(meta.check_weights),
        protected_paths=list(meta.protected_paths),
        solution_script=solution_script,
        solution_text=solution_text,
        agent_timeout=config.max_agent_timeout_sec,
        verifier_timeout=config.max_test_timeout_sec,
        env=compose["env"],
        workdir=workdir or "/app",
        metadata=metadata,
        tests_digest=files_digest(dict(tests)),
        environment_digest=environment_digest(context, excludes, dockerfile, compose["image"],
                                              compose["compose"]),
        warnings=problems.warnings,
        split=ours["split"], category=ours["category"], difficulty=ours["difficulty"],
        canary=ours["canary"], tags=ours["tags"],
    )
