"""Harbor's task schema 1.3 (and 1.4, Harbor 0.26's): every field is read typed and validated;
the fields whose behaviour does not run here are refused with "not supported yet", naming the
field and the reason, never dropped. No Docker: this is the loader (the Docker side is
tests/test_harbor_13_docker.py). docs/benchmarking.md's table "Harbor task schema 1.3" names
these tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from terminal_env.tasks import load_task
from terminal_env.tasks.load import bundled_dir, read_task
from terminal_env.tasks.schema import Problem

FIXTURES = Path(__file__).parent / "data" / "tasks"


def task_with(tmp_path: Path, *, top: str = "", tables: str = "", env: str = "",
              fixture: str = "harbor-sum") -> Path:
    """A copy of ``fixture`` whose task.toml is rewritten: ``top`` keys before any table,
    ``env`` lines inside [environment], ``tables`` appended at the end."""
    d = tmp_path / "task"
    shutil.copytree(FIXTURES / fixture, d)
    text = (
        f'schema_version = "1.3"\n{top}\n'
        '[task]\nname = "test/t"\n\n'
        "[metadata]\nsplit = \"train\"\n\n"
        "[verifier]\ntimeout_sec = 60.0\n\n"
        "[agent]\ntimeout_sec = 60.0\n\n"
        f"[environment]\ncpus = 1\nmemory_mb = 1024\n{env}\n"
        f"{tables}\n"
    )
    (d / "task.toml").write_text(text)
    return d


def problems(d: Path) -> list[Problem]:
    return read_task(d)[1]


def error(d: Path, field: str) -> str:
    """The message of the error on ``field`` (the test fails if there is none)."""
    found = [p for p in problems(d) if p.field == field and p.severity == "error"]
    assert found, f"no error on {field}: {[str(p) for p in problems(d)]}"
    return found[0].message


def refused(d: Path, field: str) -> str:
    message = error(d, field)
    assert message.startswith("not supported yet: "), message
    assert read_task(d)[0] is None  # the task does not load
    return message


# ---- fields that load, with Harbor's meaning ---------------------------------------------------


def test_every_supported_field_of_1_3_loads_clean(tmp_path):
    d = task_with(
        tmp_path,
        top='source = "https://example.invalid/tasks"\nmulti_step_reward_strategy = "final"',
        env=('build_timeout_sec = 120.0\nstorage_mb = 2048\ngpus = 0\nos = "Linux"\n'
             'network_mode = "public"\nworkdir = "/srv"\nenv = { A = "1" }'),
        tables='[solution]\nenv = { S = "2" }\n\n[verifier.env]\nV = "3"\n',
    )
    text = (d / "task.toml").read_text().replace(
        '[task]\nname = "test/t"\n',
        '[task]\nname = "test/t"\nversion = "0.1.0"\ndescription = "a task"\nkeywords = ["k"]\n'
        'authors = [{ name = "A", email = "a@example.invalid" }]\n')
    text = text.replace("[agent]\ntimeout_sec = 60.0\n",
                        '[agent]\ntimeout_sec = 60.0\nuser = "nobody"\nnetwork_mode = "public"\n')
    text = text.replace("[verifier]\ntimeout_sec = 60.0\n",
                        '[verifier]\ntimeout_sec = 60.0\nuser = "root"\nnetwork_mode = "no-network"\n'
                        'environment_mode = "shared"\n')
    (d / "task.toml").write_text(text)
    task, found = read_task(d)
    assert found == [] and task is not None, [str(p) for p in found]
    assert task.schema_version == "1.3" and task.source == "https://example.invalid/tasks"
    assert task.description == "a task" and task.tags == ["k"]
    assert task.multi_step_reward_strategy == "final"  # no effect on one step, as in Harbor
    assert (task.build_timeout, task.storage_mb, task.gpus) == (120.0, 2048, 0)
    assert task.network_mode == "public" and task.allow_internet is True
    assert task.workdir == "/srv" and task.env == {"A": "1"}
    assert task.agent_user == "nobody" and task.verifier_mode == "same"
    assert task.solution_env == {"S": "2"} and task.verifier_env == {"V": "3"}


@pytest.mark.parametrize("spelling, internet", [
    ('network_mode = "no-network"', False), ('network_mode = "public"', True),
    ("allow_internet = false", False), ("allow_internet = true", True),
    ('network_mode = "public"\nallow_internet = true', True), ("", False),
])
def test_network_mode_and_allow_internet_mean_the_same(tmp_path, spelling, internet):
    task = load_task(task_with(tmp_path, env=spelling))
    assert task.allow_internet is internet
    assert task.network_mode == ("public" if internet else "no-network")
    assert task.to_spec("img").network is internet  # what the sandbox is given


@pytest.mark.parametrize("mode, legacy", [("no-network", "true"), ("public", "false")])
def test_network_mode_contradicting_allow_internet_is_an_error_naming_both(tmp_path, mode, legacy):
    d = task_with(tmp_path, env=f'network_mode = "{mode}"\nallow_internet = {legacy}')
    message = error(d, "environment.network_mode")
    assert f"allow_internet = {legacy}" in message and mode in message


def test_an_unknown_network_mode_is_an_error(tmp_path):
    message = error(task_with(tmp_path, env='network_mode = "offline"'), "environment.network_mode")
    assert "offline" in message


def test_environment_workdir_contradicting_ours_is_an_error(tmp_path):
    d = task_with(tmp_path, env='workdir = "/srv"',
                  tables='[metadata.terminal_env]\nworkdir = "/app"\n')
    assert "/srv" in error(d, "metadata.terminal_env.workdir")
    assert "absolute" in error(task_with(tmp_path / "b", env='workdir = "srv"'), "environment.workdir")


def test_memory_contradicting_memory_mb_is_an_error(tmp_path):
    d = task_with(tmp_path, env='memory = "2G"')  # memory_mb = 1024 is in every task here
    assert "2048 MB" in error(d, "environment.memory")


def test_fractional_cpus_load_as_in_harbor_0_26(tmp_path):
    d = task_with(tmp_path)
    (d / "task.toml").write_text((d / "task.toml").read_text().replace("cpus = 1", "cpus = 0.5"))
    task, found = read_task(d)
    assert task is not None and task.cpus == 0.5 and found == []


def test_pre_1_3_reward_mode_is_ignored_with_a_warning(tmp_path):
    d = task_with(tmp_path, top='multi_step_reward_mode = "mean"')
    task, found = read_task(d)
    assert task is not None
    assert [p.field for p in found if p.severity == "warning"] == ["multi_step_reward_mode"]


def test_invalid_strategy_and_types_name_the_field(tmp_path):
    d = task_with(tmp_path, top='multi_step_reward_strategy = "max"')
    assert "max" in error(d, "multi_step_reward_strategy")
    d = task_with(tmp_path / "b", tables='[verifier.environment]\ncpus = "many"\n')
    assert "many" in error(d, "verifier.environment.cpus")


# ---- fields refused: they do not run here (yet) ------------------------------------------------


STEPS = FIXTURES / "harbor-steps"


def steps_task(tmp_path: Path, toml_edit=None) -> Path:
    d = tmp_path / "steps-task"
    shutil.copytree(STEPS, d)
    if toml_edit:
        (d / "task.toml").write_text(toml_edit((d / "task.toml").read_text()))
    return d


def test_steps_load_each_with_its_instruction_tests_solution_and_workdir(tmp_path):
    task, found = read_task(STEPS)
    assert task is not None and not [p for p in found if p.severity == "error"]
    assert [s.name for s in task.steps] == ["01-notes", "02-count"]
    assert task.multi_step_reward_strategy == "mean"
    first, second = task.steps
    assert first.min_reward == 1.0 and second.min_reward is None
    assert task.instruction == first.instruction and "alpha" in first.instruction
    assert second.agent_timeout == 60.0 and second.workdir_dir is not None
    # a step as a task: the task's tests/ with the step's laid over them (test.sh replaced)
    view = task.step_task(1)
    assert sorted(view.verifier_files()) == ["check.sh", "test.sh"]
    assert view.verifier_files()["test.sh"] == STEPS / "steps" / "02-count" / "tests" / "test.sh"
    assert view.verifier_env == {"EXPECTED_FILE": "/app/count.txt"} and view.agent_timeout == 60.0
    assert view.solution_script == STEPS / "steps" / "02-count" / "solution" / "solve.sh"
    # the task's digest covers every step's tests: one step's test changed changes it
    d = steps_task(tmp_path)
    (d / "steps" / "02-count" / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    assert load_task(d).tests_digest != task.tests_digest
    assert load_task(d).step_task(0).tests_digest == task.step_task(0).tests_digest


@pytest.mark.parametrize("edit, field, says", [
    (lambda t: t.replace('name = "02-count"', 'name = "../02-count"'), "steps[1].name", "portable directory name"),
    (lambda t: t.replace('name = "02-count"', 'name = "01-NOTES"'), "steps[1].name", "used by an earlier step"),
    (lambda t: t.replace("min_reward = 1.0", "min_reward = {}"), "steps[0].min_reward", "empty table"),
    (lambda t: t.replace("min_reward = 1.0", 'min_reward = "high"'), "steps[0].min_reward", "high"),
    (lambda t: t + "[[steps]]\nname = \"03-missing\"\n", "", "03-missing"),
])
def test_bad_steps_are_named(tmp_path, edit, field, says):
    d = steps_task(tmp_path, edit)
    found = [p for p in problems(d) if p.severity == "error" and (p.field == field or not field)]
    assert any(says in p.message or says in str(p) for p in found), [str(p) for p in problems(d)]
    assert read_task(d)[0] is None


@pytest.mark.parametrize("edit, field", [
    (lambda t: t.replace('[[steps]]\nname = "01-notes"', '[[steps]]\nname = "01-notes"\n'
                         'artifacts = ["/app/notes.txt"]'), "steps[0].artifacts"),
    (lambda t: t.replace("[steps.agent]\n", '[steps.agent]\nuser = "nobody"\n'), "steps[1].agent.user"),
    (lambda t: t.replace("[steps.agent]\n", '[steps.agent]\nnetwork_mode = "public"\n'),
     "steps[1].agent.network_mode"),
    (lambda t: t.replace("[steps.verifier]\n", '[steps.verifier]\nenvironment_mode = "separate"\n'),
     "steps[1].verifier"),
    (lambda t: t.replace("[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n'), "steps"),
    (lambda t: t.replace('network_mode = "no-network"', 'network_mode = "public"'), "steps"),
])
def test_step_fields_not_run_here_are_refused(tmp_path, edit, field):
    refused(steps_task(tmp_path, edit), field)


def test_healthchecks_load_with_dockers_defaults_and_bad_numbers_are_named(tmp_path):
    d = task_with(tmp_path, env='healthcheck = { command = "pg_isready", retries = 5, start_period_sec = 2 }')
    check = load_task(d).healthcheck
    assert (check.command, check.retries, check.start_period_sec, check.interval_sec, check.timeout_sec) == (
        "pg_isready", 5, 2.0, 5.0, 30.0)
    assert load_task(d).to_spec("img").healthcheck == check
    bad = task_with(tmp_path / "b", env='healthcheck = { command = "true", retries = 0 }')
    assert "1 or more" in error(bad, "environment.healthcheck.retries")
    bad = task_with(tmp_path / "c", env='healthcheck = { command = "true", interval_sec = -1 }')
    assert "seconds" in error(bad, "environment.healthcheck.interval_sec")
    step = steps_task(tmp_path, lambda t: t.replace('[[steps]]\nname = "01-notes"', '[[steps]]\nname = "01-notes"\n'
                                                  'healthcheck = { command = "test -d /app" }'))
    assert load_task(step).steps[0].healthcheck.command == "test -d /app"


def test_a_multi_step_task_needs_no_top_level_instruction_or_solution(tmp_path):
    d = steps_task(tmp_path)
    assert not (d / "instruction.md").exists() and not (d / "solution").exists()
    (d / "tests" / "test.sh").unlink()  # every step has its own test.sh
    assert load_task(d).steps
    (d / "steps" / "01-notes" / "tests" / "test.sh").unlink()  # now step 1 has none to fall back on
    assert "no test.sh of its own" in error(d, "")


def test_artifacts_load_as_harbor_means_them(tmp_path):
    d = task_with(tmp_path, top='artifacts = ["/app/out.txt", { source = "/app/log", '
                                'destination = "logs/run", exclude = ["*.tmp"] }, { source = "/data/" }]')
    task, _ = read_task(d)
    assert [(a.source, a.destination, a.exclude) for a in task.trial_artifacts] == [
        ("/app/out.txt", "out.txt", ()), ("/app/log", "logs/run", ("*.tmp",)), ("/data/", "data", ())]


@pytest.mark.parametrize("entry, field, says", [
    ('"app/out.txt"', "artifacts[0]", "must be an absolute path"),
    ('{ source = "out" }', "artifacts[0].source", "must be an absolute path"),
    ('{ source = "/app/x", destination = "../../etc" }', "artifacts[0].destination", "no '..'"),
    ('{ source = "/app/x", destination = "/abs" }', "artifacts[0].destination", "relative path"),
])
def test_bad_artifacts_are_named(tmp_path, entry, field, says):
    d = task_with(tmp_path, top=f"artifacts = [{entry}]")
    assert says in error(d, field)


def test_artifacts_of_other_services_are_refused(tmp_path):
    d = task_with(tmp_path, top='artifacts = [{ source = "/var/lib/db", service = "db" }]')
    assert "agent's sandbox only" in refused(d, "artifacts[0].service")


def test_verifier_collect_hooks_load_and_other_services_are_refused(tmp_path):
    d = task_with(tmp_path, tables='[[verifier.collect]]\ncommand = "sqlite3 /app/db .dump > /app/db.sql"\n'
                                   'timeout_sec = 30\nuser = "root"\n')
    [hook] = load_task(d).verifier_collect
    assert (hook.command, hook.timeout_sec, hook.user) == ("sqlite3 /app/db .dump > /app/db.sql", 30, "root")
    other = task_with(tmp_path / "b", tables='[[verifier.collect]]\ncommand = "pg_dump > /app/db.sql"\n'
                                             'service = "db"\n')
    assert "agent's sandbox only" in refused(other, "verifier.collect[0].service")
    empty = task_with(tmp_path / "c", tables='[[verifier.collect]]\ncommand = " "\n')
    assert "non-empty" in error(empty, "verifier.collect[0].command")


def test_allowlist_loads_with_its_hosts_and_wildcards_are_refused(tmp_path):
    d = task_with(tmp_path, env='network_mode = "allowlist"\nallowed_hosts = ["PyPI.org.", "10.0.0.0/8"]')
    task = load_task(d)
    assert task.network_mode == "allowlist" and task.allowed_hosts == ["pypi.org", "10.0.0.0/8"]
    spec = task.to_spec("img")
    assert spec.network and spec.allowed_hosts == ["pypi.org", "10.0.0.0/8"] and task.reaches_network
    # allowlist with no host: the sandbox reaches nothing (and is no network dependence)
    empty = load_task(task_with(tmp_path / "e", env='network_mode = "allowlist"'))
    assert empty.allowed_hosts == [] and not empty.reaches_network
    wild = task_with(tmp_path / "w", env='network_mode = "allowlist"\nallowed_hosts = ["*.example.com"]')
    assert "wildcard" in refused(wild, "environment.allowed_hosts[0]")
    bad = task_with(tmp_path / "b", env='network_mode = "allowlist"\n'
                                        'allowed_hosts = ["https://pypi.org/simple"]')
    assert "https://pypi.org/simple" in error(bad, "environment.allowed_hosts[0]")
    lone = task_with(tmp_path / "c", env='allowed_hosts = ["pypi.org"]')
    assert "allowlist" in error(lone, "environment.allowed_hosts")


def test_a_verifier_allowlist_gives_the_sandbox_a_network_firewalled_to_nothing_until_the_tests(tmp_path):
    d = task_with(tmp_path)
    text = (d / "task.toml").read_text().replace(
        "[verifier]\n", '[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = ["10.1.2.3"]\n', 1)
    (d / "task.toml").write_text(text)
    task = load_task(d)
    assert task.verifier_allowed_hosts == ["10.1.2.3"] and task.network_mode == "no-network"
    spec = task.to_spec("img")
    assert spec.network and spec.allowed_hosts == []  # the agent reaches nothing
    (d / "task.toml").write_text(text.replace("[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n', 1))
    assert "separate verifier" in refused(d, "verifier.network_mode")


def test_an_agent_allowlist_other_than_the_environments_is_refused(tmp_path):
    d = task_with(tmp_path, env='network_mode = "allowlist"\nallowed_hosts = ["10.0.0.1"]')
    text = (d / "task.toml").read_text().replace(
        "[agent]\n", '[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["10.0.0.2"]\n', 1)
    (d / "task.toml").write_text(text)
    assert "one allowlist" in refused(d, "agent.allowed_hosts")
    (d / "task.toml").write_text(text.replace('allowed_hosts = ["10.0.0.2"]', 'allowed_hosts = ["10.0.0.1"]'))
    assert load_task(d).allowed_hosts == ["10.0.0.1"]


@pytest.mark.parametrize("env, field, why", [
    ("gpus = 1", "environment.gpus", "GPU"),
    ('tpu = { type = "v6e", topology = "2x4" }', "environment.tpu", "TPU"),
    ('skills_dir = "/skills"', "environment.skills_dir", "skills"),
    ('mcp_servers = [{ name = "m", transport = "stdio", command = "srv" }]',
     "environment.mcp_servers", "MCP"),
])
def test_environment_fields_not_run_here_are_refused(tmp_path, env, field, why):
    assert why in refused(task_with(tmp_path, env=env), field)


@pytest.mark.parametrize("table, field, why", [
    ('[agent]\nnetwork_mode = "public"', "agent.network_mode", "one network"),
    ('[verifier]\nnetwork_mode = "public"', "verifier.network_mode", "disconnected"),
    ('[verifier]\nuser = "tester"', "verifier.user", "root"),
    ("[verifier]\nuser = 1000", "verifier.user", "root"),
])
def test_phase_fields_not_run_here_are_refused(tmp_path, table, field, why):
    d = task_with(tmp_path)
    section, line = table.split("\n")
    text = (d / "task.toml").read_text().replace(f"{section}\n", f"{section}\n{line}\n", 1)
    (d / "task.toml").write_text(text)
    assert why in refused(d, field)


def test_agent_network_equal_to_the_environments_is_honoured(tmp_path):
    d = task_with(tmp_path, env='network_mode = "public"')
    text = (d / "task.toml").read_text().replace("[agent]\n", '[agent]\nnetwork_mode = "public"\n')
    (d / "task.toml").write_text(text)
    assert load_task(d).allow_internet is True


def test_verifier_no_network_is_honoured_in_both_modes(tmp_path):
    d = task_with(tmp_path)
    text = (d / "task.toml").read_text().replace(
        "[verifier]\n", '[verifier]\nnetwork_mode = "no-network"\nuser = 0\n')
    (d / "task.toml").write_text(text)
    assert load_task(d).verifier_mode == "same"
    d = task_with(tmp_path / "b", tables='[verifier.environment]\nnetwork_mode = "no-network"\n')
    task = load_task(d)
    assert task.verifier_mode == "separate" and task.verifier_environment["network"] is False


@pytest.mark.parametrize("line, field", [
    ('network_mode = "public"', "verifier.environment.network_mode"),
    ("memory_mb = 512", "verifier.environment.memory_mb"),
    ('docker_image = "python:3.13"', "verifier.environment.docker_image"),
    ('env = { X = "1" }', "verifier.environment.env"),
])
def test_separate_verifier_fields_it_does_not_apply_are_refused(tmp_path, line, field):
    d = task_with(tmp_path, tables=f"[verifier.environment]\n{line}\n")
    refused(d, field)


def test_separate_verifier_limits_equal_to_the_agents_are_accepted(tmp_path):
    task = load_task(task_with(tmp_path, tables="[verifier.environment]\ncpus = 1\nmemory_mb = 1024\n"))
    assert task.verifier_environment == {"cpus": 1.0, "memory_mb": 1024, "network": False}


def test_shared_mode_with_a_verifier_environment_is_an_error(tmp_path):
    d = task_with(tmp_path, tables="[verifier.environment]\ncpus = 1\n")
    text = (d / "task.toml").read_text().replace(
        "[verifier]\n", '[verifier]\nenvironment_mode = "shared"\n')
    (d / "task.toml").write_text(text)
    assert "shared" in error(d, "verifier.environment")


# ---- the separate verifier's image: Harbor falls back to environment/ --------------------------


def test_separate_mode_without_tests_dockerfile_has_no_warning(tmp_path):
    """Harbor 0.26 builds a separate verifier from environment/ when tests/ has no Dockerfile
    (verifier_mode.resolve_verifier_environment_definition): nothing to warn about."""
    d = task_with(tmp_path)
    text = (d / "task.toml").read_text().replace(
        "[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n')
    (d / "task.toml").write_text(text)
    task, found = read_task(d)
    assert task is not None and task.verifier_mode == "separate"
    assert found == [], [str(p) for p in found]


def test_separate_mode_with_tests_dockerfile_is_refused(tmp_path):
    """With tests/Dockerfile Harbor builds the verifier's image from tests/; here it would run
    from the task's image instead: refused rather than run differently."""
    d = task_with(tmp_path, tables="[verifier.environment]\ncpus = 1\n")
    (d / "tests" / "Dockerfile").write_text("FROM terminal-env/base:bookworm-1\nCOPY . /tests/\n")
    found = [p for p in problems(d) if p.file.endswith("tests/Dockerfile")]
    assert found and found[0].message.startswith("not supported yet: ")


# ---- the bundled pool ------------------------------------------------------------------------


def test_bundled_tasks_use_the_current_spelling_and_load_clean():
    dirs = sorted(p for p in bundled_dir().iterdir() if (p / "task.toml").is_file())
    assert len(dirs) >= 60
    for d in dirs:
        text = (d / "task.toml").read_text()
        assert 'network_mode = "no-network"' in text and "allow_internet" not in text, d.name
        task = load_task(d)
        assert task.network_mode == "no-network" and not task.allow_internet
