"""Task loading and validation (no engine): both Harbor schemas, Terminal-Bench 1.x, every
problem reported with its file and field, the import to Harbor's format, and the CLI commands."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from terminal_env.errors import ConfigError, TerminalEnvError
from terminal_env.task import TaskSpec
from terminal_env.tasks import (
    Problem,
    TaskFormatError,
    find_tasks,
    import_tb1,
    import_tb1_folder,
    load_task,
    validate,
)
from terminal_env.tasks.cli import add_tasks_parser, parse_base_map
from terminal_env.tasks.tb1 import TB1Command, solution_yaml_to_script

TASKS = Path(__file__).parent / "data" / "tasks"
BROKEN = TASKS / "broken"


def copy_task(name: str, tmp_path: Path, new_name: str | None = None) -> Path:
    dest = tmp_path / (new_name or name)
    shutil.copytree(TASKS / name, dest)
    return dest


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def problems_of(path: Path, strict: bool = False) -> list[Problem]:
    return validate([path], strict=strict)


def find(problems: list[Problem], file_end: str, field: str, severity: str = "error") -> Problem:
    for p in problems:
        if p.file.endswith(file_end) and p.field == field and p.severity == severity:
            return p
    raise AssertionError(f"no {severity} for {file_end}:{field} in {[str(p) for p in problems]}")


# ---- Harbor, old schema ------------------------------------------------------------------------


def test_harbor_old_schema_loads_with_our_metadata():
    task = load_task(TASKS / "harbor-sum")
    assert task.format == "harbor" and task.name == "harbor-sum"
    assert task.path.is_absolute() and task.path.name == "harbor-sum"
    assert "sum of the integers" in task.instruction
    assert task.dockerfile == task.environment_dir / "Dockerfile"
    assert task.test_command == ["bash", "/tests/test.sh"] and task.result_format == "harbor"
    assert set(task.verifier_files()) == {"test.sh", "test_sum.py"}
    assert task.solution_files() == {"solve.sh": task.path / "solution" / "solve.sh"}
    assert task.solution_command == ["bash", "/solution/solve.sh"]
    assert (task.agent_timeout, task.verifier_timeout, task.build_timeout) == (300, 60, 300)
    limits = (task.cpus, task.memory_mb, task.storage_mb, task.allow_internet)
    assert limits == (1, 1024, 2048, False)
    assert (task.split, task.category, task.difficulty) == ("train", "programming", "easy")
    assert task.tags == ["python", "cli"]
    assert task.check_weights == {
        "test_no_arguments": 1.0, "test_positive_numbers": 1.0, "test_negative_numbers": 2.0}
    assert task.protected_paths == ["/usr/bin/python3"]
    assert task.workdir == "/app" and task.verifier_mode == "same" and task.artifacts == []
    assert task.metadata["author_name"] == "terminal-env developers"  # the whole free dict
    assert len(task.tests_digest) == 64 and len(task.environment_digest) == 64
    assert task.current_tests_digest() == task.tests_digest
    assert task.warnings == []


def test_old_size_spellings_are_read(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", "memory_mb = 1024\nstorage_mb = 2048", 'memory = "2G"\nstorage = "10G"')
    task = load_task(d)
    assert (task.memory_mb, task.storage_mb) == (2048, 10240)


def test_a_task_can_ask_for_a_runtime(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", "memory_mb = 1024\n", 'memory_mb = 1024\nruntime = "runsc"\n')
    task = load_task(d)
    assert task.runtime == "runsc"
    assert task.to_spec(image="x").sandbox_config().runtime == "runsc"
    assert task.to_spec(image="x").sandbox_config(runtime="runc").runtime == "runc"  # the run's wins
    assert any(w.field == "environment.runtime" for w in task.warnings)
    edit(d / "task.toml", 'runtime = "runsc"', 'runtime = "run sc; rm -rf /"')
    p = find(problems_of(d), "task.toml", "environment.runtime")
    assert "not a runtime name" in p.message


def test_defaults_when_tables_are_absent(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    (d / "task.toml").write_text('version = "1.0"\n')
    task = load_task(d)
    assert (task.verifier_timeout, task.build_timeout, task.memory_mb) == (600, 600, 2048)
    assert task.split is None and task.check_weights == {} and task.allow_internet is False


# ---- Harbor, current schema --------------------------------------------------------------------


def test_harbor_new_schema_loads():
    task = load_task(TASKS / "harbor-new-schema")
    assert task.name == "count-words"  # [task].name "terminal-env/count-words", last part
    assert task.split == "validation" and task.category == "text-processing"
    assert task.tags == ["text", "shell"]  # [task].keywords when [metadata] has no tags
    assert task.artifacts == ["/app/count.txt"]
    assert task.verifier_mode == "separate"  # from [verifier] environment_mode
    # a separate verifier runs with the agent sandbox's limits: only equal ones are accepted
    assert task.verifier_environment == {"cpus": 1.0, "network": False}
    assert task.agent_timeout == 120 and task.warnings == []
    assert task.schema_version == "1.3" and task.network_mode == "no-network"


def test_verifier_environment_alone_implies_separate(tmp_path):
    d = copy_task("harbor-new-schema", tmp_path)
    edit(d / "task.toml", 'environment_mode = "separate"\n', "")
    assert load_task(d).verifier_mode == "separate"


def test_our_verifier_mode_contradicting_harbors_is_an_error(tmp_path):
    d = copy_task("harbor-new-schema", tmp_path)
    edit(d / "task.toml", "[metadata.terminal_env]\n",
         '[metadata.terminal_env]\nverifier_mode = "same"\n')
    find(problems_of(d), "task.toml", "metadata.terminal_env.verifier_mode")


def test_artifact_tables_are_read(tmp_path):
    # Harbor's artifacts: copied out of the sandbox into the trial (tests/test_artifacts.py)
    d = copy_task("harbor-new-schema", tmp_path)
    edit(d / "task.toml", 'schema_version = "1.3"\n',
         'schema_version = "1.3"\nartifacts = [{ source = "/app/count.txt" }, "/tmp/x"]\n')
    assert not [p for p in problems_of(d) if p.severity == "error"]
    assert [(a.source, a.destination) for a in load_task(d).trial_artifacts] == [
        ("/app/count.txt", "count.txt"), ("/tmp/x", "x")]


# ---- Terminal-Bench 1.x ------------------------------------------------------------------------


def test_tb1_task_loads():
    task = load_task(TASKS / "tb1-grep")
    assert task.format == "terminal-bench-1" and task.name == "tb1-grep"
    assert "ERROR" in task.instruction
    assert task.test_command == ["bash", "/tests/run-tests.sh"]
    assert task.result_format == "pytest-output"
    assert set(task.verifier_files()) == {"run-tests.sh", "test_outputs.py"}
    assert task.verifier_env == {"TEST_DIR": "/tests"}
    assert task.env == {"TEST_DIR": "/tests"}  # from the compose file, ${T_BENCH_TEST_DIR} resolved
    assert (task.agent_timeout, task.verifier_timeout) == (180, 60)
    assert task.category == "file-operations" and task.tags == ["grep", "text-processing"]
    assert task.metadata["expert_time_estimate_min"] == 2
    assert task.solution_files() == {"solve.sh": task.path / "solution.sh"}
    # the task-format files are not part of the build context
    assert set(task.environment_files()) == {"Dockerfile", "make_log.py"}
    assert task.workdir == "/app" and task.warnings == []


def test_tb1_descriptions_and_solution_yaml(tmp_path):
    d = copy_task("tb1-grep", tmp_path)
    text = (d / "task.yaml").read_text()
    head, _, rest = text.partition("author_name")
    (d / "task.yaml").write_text(
        "descriptions:\n  - key: base\n    description: Find the errors.\n"
        "  - key: hard\n    description: Harder.\nauthor_name" + rest)
    (d / "solution.sh").unlink()
    (d / "solution.yaml").write_text(
        "- command: cd /app\n  block: true\n"
        "- command: grep ' ERROR ' logs/server.log > errors.txt\n  min_timeout_sec: 0.5\n")
    task = load_task(d)
    assert task.instruction == "Find the errors."
    script = task.solution_files()["solve.sh"]
    assert isinstance(script, bytes)
    assert b"cd /app\ngrep ' ERROR ' logs/server.log > errors.txt\nsleep 0.5\n" in script
    assert task.solution_script is None and task.has_solution


def test_solution_yaml_keystrokes_without_enter_join_the_next():
    script = solution_yaml_to_script([
        TB1Command(command="echo a", append_enter=False), TB1Command(command="b", block=True),
        TB1Command(command="never", append_enter=False)])
    assert "echo ab\n" in script and "# never" in script


def test_tb1_problems(tmp_path):
    d = copy_task("tb1-grep", tmp_path)
    edit(d / "task.yaml", "parser_name: pytest", "parser_name: swebench\n"
         "run_tests_in_same_shell: true\nmax_test_timeout_sec: 0\nfrobnicate: 1\nsplit: holdout")
    edit(d / "task.yaml", "run_tests_in_same_shell: false\n", "")
    edit(d / "task.yaml", "max_test_timeout_sec: 60.0\n", "")
    (d / "run-tests.sh").unlink()
    (d / "solution.sh").unlink()
    problems = problems_of(d)
    find(problems, "task.yaml", "parser_name")
    find(problems, "task.yaml", "run_tests_in_same_shell", "warning")
    find(problems, "task.yaml", "max_test_timeout_sec")
    find(problems, "task.yaml", "frobnicate", "warning")
    find(problems, "task.yaml", "split")
    find(problems, "run-tests.sh", "")
    find(problems, "solution.sh", "", "warning")


def test_tb1_bad_yaml_names_the_line(tmp_path):
    d = copy_task("tb1-grep", tmp_path)
    (d / "task.yaml").write_text("instruction: fine\ntags: [a, b\ndifficulty: easy\n")
    p = find(problems_of(d), "task.yaml", "")
    assert "invalid YAML (line" in p.message


def test_tb1_multi_service_compose_runs_the_others_around_client(tmp_path):
    """Terminal-Bench's agent container is `client`; more services make a multi-container task
    (started by tasks.compose), and the compose file is part of the environment's digest."""
    d = copy_task("tb1-grep", tmp_path)
    before = load_task(d)
    assert before.compose_file is None
    with open(d / "docker-compose.yaml", "a") as f:
        f.write("  db:\n    image: postgres:16\n")
    task = load_task(d)
    assert task.compose_file == d / "docker-compose.yaml"
    assert task.environment_digest != before.environment_digest
    assert task.env == before.env and task.dockerfile == before.dockerfile


def test_tb1_services_without_client_are_an_error(tmp_path):
    d = copy_task("tb1-grep", tmp_path)
    text = (d / "docker-compose.yaml").read_text()
    (d / "docker-compose.yaml").write_text(text.replace("client:", "agent:") + "  db:\n    image: x\n")
    p = find(problems_of(d), "docker-compose.yaml", "services")
    assert "none is `client`" in p.message


def test_tb1_without_compose_is_a_warning(tmp_path):
    d = copy_task("tb1-grep", tmp_path)
    (d / "docker-compose.yaml").unlink()
    task = load_task(d)
    assert [p.field for p in task.warnings] == [""]
    assert task.warnings[0].file.endswith("docker-compose.yaml")


# ---- problems: each with file and field --------------------------------------------------------


@pytest.mark.parametrize(
    "case, file_end, field, words",
    [
        ("bad-toml", "task.toml", "", ["invalid TOML", "line 5"]),
        ("missing-tests", "tests/test.sh", "", ["missing", "bash /tests/test.sh"]),
        ("negative-timeout", "task.toml", "agent.timeout_sec", ["positive", "-5"]),
        ("unknown-field", "task.toml", "metadata.terminal_env.check_weight", ["unknown key",
                                                                              "check_weights"]),
    ],
)
def test_broken_fixtures_report_file_and_field(case, file_end, field, words):
    problems = problems_of(BROKEN / case)
    p = find(problems, file_end, field)
    assert p.file.startswith(str(BROKEN / case))
    for word in words:
        assert word in p.message
    with pytest.raises(TaskFormatError) as info:
        load_task(BROKEN / case)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, TerminalEnvError)
    assert p in info.value.problems and p.message in str(info.value)


def test_unknown_keys_in_harbor_tables_are_warnings_that_still_load(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", 'version = "1.0"\n', 'version = "1.0"\nflavour = 1\n')
    edit(d / "task.toml", "[verifier]\n", "[verifier]\ncolour = 'red'\n")
    edit(d / "task.toml", "[environment]\n", "[environment]\nsize = 3\n")
    task = load_task(d)
    assert {p.field for p in task.warnings} == {"flavour", "verifier.colour", "environment.size"}
    assert all(p.severity == "warning" and "ignored" in p.message for p in task.warnings)
    with pytest.raises(TaskFormatError):
        load_task(d, strict=True)
    assert {p.severity for p in validate([d], strict=True)} == {"error"}


def test_free_form_metadata_keys_are_fine(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", "[metadata]\n", "[metadata]\nanything_goes = { a = 1 }\n")
    assert load_task(d).warnings == []


def test_every_problem_is_listed_at_once(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", 'split = "train"', 'split = "holdout"')
    edit(d / "task.toml", "timeout_sec = 60.0", "timeout_sec = 172800")  # 48 h
    edit(d / "task.toml", "memory_mb = 1024", "memory_mb = 32")
    edit(d / "task.toml", "test_negative_numbers = 2.0", "test_negative_numbers = -2.0, x = inf")
    edit(d / "task.toml", '["/usr/bin/python3"]', '["usr/bin/python3"]')
    (d / "instruction.md").write_text("  \n")
    (d / "solution" / "solve.sh").unlink()
    problems = problems_of(d)
    find(problems, "task.toml", "metadata.split")
    assert "24 hours" in find(problems, "task.toml", "verifier.timeout_sec").message
    assert "64" in find(problems, "task.toml", "environment.memory_mb").message
    find(problems, "task.toml", "metadata.terminal_env.check_weights.test_negative_numbers")
    find(problems, "task.toml", "metadata.terminal_env.check_weights.x")
    find(problems, "task.toml", "metadata.terminal_env.protected_paths[0]")
    find(problems, "instruction.md", "")
    find(problems, "solution/solve.sh", "", "warning")
    with pytest.raises(TaskFormatError) as info:
        load_task(d)
    message = str(info.value)
    assert "7 error(s), 1 warning(s)" in message
    assert all(p.message in message for p in problems)


def test_type_errors_name_the_field(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", "cpus = 1", 'cpus = "many"')
    edit(d / "task.toml", "allow_internet = false", 'allow_internet = "perhaps"')
    problems = problems_of(d)
    assert "'many'" in find(problems, "task.toml", "environment.cpus").message
    find(problems, "task.toml", "environment.allow_internet")


def test_bad_size_spelling(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", "memory_mb = 1024", 'memory = "lots"')
    assert "memory_mb" in find(problems_of(d), "task.toml", "environment.memory").message


@pytest.mark.parametrize(
    "remove, file_end",
    [("task.toml", "task.toml"), ("instruction.md", "instruction.md"),
     ("environment/Dockerfile", "environment/Dockerfile")],
)
def test_missing_files(tmp_path, remove, file_end):
    d = copy_task("harbor-sum", tmp_path)
    (d / remove).unlink()
    find(problems_of(d), file_end, "")


def test_missing_solution_is_only_a_warning(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    shutil.rmtree(d / "solution")
    task = load_task(d)
    assert not task.has_solution and task.solution_files() == {}
    assert task.warnings[0].file.endswith("solution/solve.sh")


def test_unsupported_features_are_errors(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", "[environment]\n", '[environment]\nos = "windows"\n')
    (d / "task.toml").write_text((d / "task.toml").read_text() + '\n[[steps]]\nname = "one"\n'
                                 'artifacts = ["/app/x"]\n')
    problems = problems_of(d)
    find(problems, "task.toml", "environment.os")
    find(problems, "task.toml", "steps[0].artifacts")


def test_a_docker_compose_yml_in_the_environment_is_build_context(tmp_path):
    """Harbor reads only environment/docker-compose.yaml as the environment; a
    docker-compose.yml there is task data (a task may ask the agent to repair it)."""
    d = copy_task("harbor-sum", tmp_path)
    (d / "environment" / "docker-compose.yml").write_text("services:\n  web:\n    image: nginx\n")
    task = load_task(d)
    assert "docker-compose.yml" in task.environment_files() and task.warnings == []
    assert task.compose_file is None
    (d / "environment" / "docker-compose.yaml").write_text("services: {main: {}}\n")
    task = load_task(d)
    assert task.compose_file == d / "environment" / "docker-compose.yaml"


def test_prebuilt_docker_image_needs_no_dockerfile(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    (d / "environment" / "Dockerfile").unlink()
    edit(d / "task.toml", "[environment]\n",
         '[environment]\ndocker_image = "terminal-env/base:bookworm-1"\n')
    task = load_task(d)
    assert task.dockerfile is None and task.docker_image == "terminal-env/base:bookworm-1"


# ---- finding tasks -----------------------------------------------------------------------------


def test_find_tasks_in_nested_directories():
    found = {p.name for p in find_tasks([TASKS])}
    assert {"harbor-sum", "harbor-new-schema", "tb1-grep", "bad-toml", "unknown-field"} <= found


def test_a_path_without_tasks_is_a_problem(tmp_path):
    (tmp_path / "empty").mkdir()
    [p] = validate([tmp_path / "empty"])
    assert p.severity == "error" and "no task found" in p.message
    [p] = validate([tmp_path / "nowhere"])
    assert "not a directory" in p.message
    with pytest.raises(ConfigError):
        find_tasks([tmp_path / "empty"])


# ---- digests and the spec ----------------------------------------------------------------------


def test_digests_follow_content_not_time(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    first = load_task(d)
    (d / "tests" / "test_sum.py").touch()
    assert load_task(d).tests_digest == first.tests_digest
    with open(d / "tests" / "test_sum.py", "a") as f:
        f.write("\n# changed\n")
    assert first.current_tests_digest() != first.tests_digest  # seen without reloading
    second = load_task(d)
    assert second.tests_digest != first.tests_digest
    assert second.environment_digest == first.environment_digest
    (d / "environment" / "data.txt").write_text("x")
    assert load_task(d).environment_digest != first.environment_digest


def test_to_spec_carries_limits_and_metadata():
    task = load_task(TASKS / "harbor-sum")
    spec = task.to_spec("some/image:tag")
    assert isinstance(spec, TaskSpec)
    assert (spec.name, spec.image, spec.workdir, spec.network) == ("harbor-sum", "some/image:tag",
                                                                   "/app", False)
    assert (spec.cpus, spec.memory_mb) == (1.0, 1024)
    assert spec.instruction == task.instruction
    meta = spec.metadata
    assert (meta["split"], meta["category"], meta["difficulty"]) == ("train", "programming", "easy")
    assert meta["tests_digest"] == task.tests_digest and meta["path"] == str(task.path)


def test_sandbox_env_resolves_host_variables(tmp_path):
    d = copy_task("harbor-sum", tmp_path)
    edit(d / "task.toml", "[environment]\n",
         '[environment]\nenv = { A = "${TE_TEST_A}", B = "${TE_TEST_B:-dflt}", C = "plain" }\n')
    task = load_task(d)
    assert task.sandbox_env({"TE_TEST_A": "x"}) == {"A": "x", "B": "dflt", "C": "plain"}
    with pytest.raises(ConfigError, match="TE_TEST_A"):
        task.sandbox_env({})


# ---- import of Terminal-Bench 1.x into Harbor's format -----------------------------------------


def test_import_tb1_writes_a_loadable_harbor_task(tmp_path):
    dest = import_tb1(TASKS / "tb1-grep", tmp_path / "grep")
    task = load_task(dest)
    assert task.format == "harbor" and task.name == "grep" and task.warnings == []
    assert set(task.verifier_files()) == {"test.sh", "run-tests.sh", "test_outputs.py"}
    assert "run-tests.sh" in (dest / "tests" / "test.sh").read_text()
    assert set(task.environment_files()) == {"Dockerfile", "make_log.py"}
    solution = (TASKS / "tb1-grep" / "solution.sh").read_bytes()
    assert (dest / "solution" / "solve.sh").read_bytes() == solution
    assert (task.agent_timeout, task.verifier_timeout) == (180, 60)
    assert task.category == "file-operations"
    assert task.metadata["imported_from"] == "terminal-bench-1"
    assert task.verifier_env == {"TEST_DIR": "/tests"}


def test_import_tb1_refuses_a_non_empty_destination(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        import_tb1(TASKS / "tb1-grep", tmp_path / "full")
    with pytest.raises(ConfigError, match="task.yaml"):
        import_tb1(TASKS / "harbor-sum", tmp_path / "other")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]  # nothing half-written


def test_import_tb1_of_a_broken_task_lists_its_problems(tmp_path):
    d = copy_task("tb1-grep", tmp_path)
    (d / "run-tests.sh").unlink()
    with pytest.raises(TaskFormatError, match="run-tests.sh"):
        import_tb1(d, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_import_tb1_of_a_folder_imports_each_task_and_reports_the_others(tmp_path):
    """A folder of tasks (a Terminal-Bench checkout's tasks/) in one call: each convertible task
    lands in DEST/<name>, each other one is reported with its reason, none stops the rest."""
    src = tmp_path / "tb1"
    copy_task("tb1-grep", src)
    copy_task("tb1-inprocess", src)
    broken = copy_task("tb1-grep", src, "tb1-no-tests")
    (broken / "run-tests.sh").unlink()
    copy_task("harbor-sum", src)  # not a Terminal-Bench task: not picked up
    (tmp_path / "out" / "tb1-inprocess").mkdir(parents=True)
    (tmp_path / "out" / "tb1-inprocess" / "keep.txt").write_text("mine")
    results = {r.name: r for r in import_tb1_folder(src, tmp_path / "out")}
    assert sorted(results) == ["tb1-grep", "tb1-inprocess", "tb1-no-tests"]
    assert results["tb1-grep"].ok and load_task(tmp_path / "out" / "tb1-grep").format == "harbor"
    assert not results["tb1-inprocess"].ok and "not empty" in results["tb1-inprocess"].detail
    assert (tmp_path / "out" / "tb1-inprocess" / "keep.txt").read_text() == "mine"  # untouched
    assert not results["tb1-no-tests"].ok and "run-tests.sh" in results["tb1-no-tests"].detail
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["tb1-grep", "tb1-inprocess"]
    with pytest.raises(ConfigError, match="no Terminal-Bench 1.x task"):
        import_tb1_folder(TASKS / "harbor-sum", tmp_path / "none")


def test_cli_import_tb1_of_a_folder_prints_one_row_a_task(tmp_path, capsys):
    src = tmp_path / "tb1"
    copy_task("tb1-grep", src)
    copy_task("tb1-inprocess", src)
    assert run_cli("tasks", "import-tb1", str(src), str(tmp_path / "out")) == 0
    out = capsys.readouterr().out
    assert "2 of 2 task(s) imported" in out and "tb1-grep" in out and "tb1-inprocess" in out
    broken = copy_task("tb1-grep", src, "tb1-broken")
    (broken / "task.yaml").write_text("instruction: [unclosed\n")
    assert run_cli("tasks", "import-tb1", str(src), str(tmp_path / "again")) == 1
    out = capsys.readouterr().out
    assert "2 of 3 task(s) imported" in out and "not imported" in out and "Traceback" not in out


# ---- the CLI commands (wired into `terminal-env tasks` by the main CLI) ------------------------


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="terminal-env")
    add_tasks_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_validate_ok(capsys):
    assert run_cli("tasks", "validate", str(TASKS / "harbor-sum"), str(TASKS / "tb1-grep")) == 0
    out = capsys.readouterr().out
    assert "2 task(s) checked" in out and "valid" in out


def test_cli_validate_reports_problems_without_traceback(capsys):
    assert run_cli("tasks", "validate", str(BROKEN)) == 1
    captured = capsys.readouterr()
    out = captured.out
    assert "Traceback" not in out + captured.err
    assert "invalid TOML" in out and "timeout_minutes" in out and "4 task(s) checked" in out


def test_cli_validate_json_and_strict(capsys):
    assert run_cli("tasks", "validate", "--json", str(BROKEN / "unknown-field")) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    severities = {(p["field"], p["severity"]) for p in report["problems"]}
    assert ("agent.timeout_minutes", "warning") in severities
    assert ("metadata.terminal_env.check_weight", "error") in severities


def test_cli_strict_turns_warnings_into_a_failure(tmp_path, capsys):
    d = copy_task("harbor-sum", tmp_path)
    shutil.rmtree(d / "solution")
    assert run_cli("tasks", "validate", str(d)) == 0
    assert run_cli("tasks", "validate", "--strict", str(d)) == 1


def test_cli_import_tb1(tmp_path, capsys):
    assert run_cli("tasks", "import-tb1", str(TASKS / "tb1-grep"), str(tmp_path / "g")) == 0
    assert "Harbor format" in capsys.readouterr().out
    assert (tmp_path / "g" / "task.toml").is_file()


def test_cli_base_map_parsing():
    assert parse_base_map(["a=b", "c:1=d:2"]) == {"a": "b", "c:1": "d:2"}
    with pytest.raises(ConfigError, match="IMAGE=LOCAL"):
        parse_base_map(["nonsense"])


def test_converting_a_loaded_task_never_builds_behind_the_callers_back():
    task = load_task(TASKS / "harbor-sum")
    with pytest.raises(ConfigError, match="image must be built first"):
        TaskSpec.coerce(task)
    assert task.to_spec("some/image:tag").image == "some/image:tag"  # the image is the caller's


def test_python_caches_are_not_part_of_a_task(tmp_path):
    """Running a task's tests locally leaves __pycache__ in tests/: not the task's content."""
    d = copy_task("harbor-sum", tmp_path)
    before = load_task(d)
    (d / "tests" / "__pycache__").mkdir()
    (d / "tests" / "__pycache__" / "test_sum.cpython-311.pyc").write_bytes(b"\x00cache")
    (d / "environment" / "__pycache__").mkdir()
    (d / "environment" / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    after = load_task(d)
    assert after.tests_digest == before.tests_digest and after.environment_digest == before.environment_digest
    assert not any("__pycache__" in name for name in after.verifier_files())
