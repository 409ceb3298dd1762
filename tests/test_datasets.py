"""Datasets by name and version: a registry file in Harbor's format names local tasks and tasks in
a Git repository pinned to a commit (a repository on this machine: nothing leaves it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from terminal_env.errors import ConfigError
from terminal_env.runner.datasets import dataset_tasks
from terminal_env.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
SUM = ROOT / "tests/data/tasks/harbor-sum"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def registry(tmp_path):
    """A repository with one task whose instruction changes after the released commit, a local
    task next to the registry file, and the registry naming both."""
    repo = tmp_path / "repo"
    shutil.copytree(SUM, repo / "tasks" / "sum")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "release 1.0")
    released = git(repo, "rev-parse", "HEAD")
    (repo / "tasks" / "sum" / "instruction.md").write_text("changed after the release\n")
    git(repo, "commit", "-qam", "work in progress")
    shutil.copytree(SUM, tmp_path / "local" / "sum-local")
    entries = [
        {"name": "mini", "version": "1.0", "description": "one Git task", "metrics": [{"type": "mean"}],
         "tasks": [{"name": "sum", "git_url": str(repo), "git_commit_id": released, "path": "tasks/sum"}]},
        {"name": "mini", "version": "head", "description": "",
         "tasks": [{"name": "sum", "git_url": str(repo), "git_commit_id": None, "path": "tasks/sum"}]},
        {"name": "local", "version": "1.0", "description": "",
         "tasks": [{"name": "sum-local", "path": "local/sum-local"}]},
    ]
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(entries))
    return path


def test_a_git_dataset_is_checked_out_at_its_pinned_commit(registry, tmp_path):
    (path,) = dataset_tasks("mini@1.0", registry, cache=tmp_path / "cache")
    assert load_task(path).instruction == (SUM / "instruction.md").read_text()  # not the later edit
    assert dataset_tasks("mini@1.0", registry, cache=tmp_path / "cache") == [path]  # fetched once
    (local,) = dataset_tasks("local", registry, cache=tmp_path / "cache")
    assert local == (tmp_path / "local" / "sum-local").resolve()


@pytest.mark.parametrize("ref, message", [
    ("nope@1.0", "no dataset named 'nope'.*it has: local@1.0, mini@1.0, mini@head"),
    ("mini@2.0", "no version '2.0' of mini.*1.0, head"),
    ("mini", "has versions 1.0, head; name one as mini@VERSION"),
    ("mini@head", "git_commit_id None is not a full commit hash; pin the task"),
])
def test_bad_references_name_the_fix(registry, tmp_path, ref, message):
    with pytest.raises(ConfigError, match=message):
        dataset_tasks(ref, registry, cache=tmp_path / "cache")


def test_bad_registry_files_name_the_file_and_field(tmp_path):
    with pytest.raises(ConfigError, match="registry file .* not found: pass --registry"):
        dataset_tasks("x@1", tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"name": "x", "version": "1"}]))
    with pytest.raises(ConfigError, match=r"bad.json: dataset \[0\] tasks: Field required"):
        dataset_tasks("x@1", bad)
    bad.write_text(json.dumps([{"name": "x", "version": "1", "tasks": [{"name": "t", "path": "../.."}]}]))
    with pytest.raises(ConfigError, match="leaves its registry directory"):
        dataset_tasks("x@1", bad)


@pytest.mark.docker
def test_run_a_dataset_and_refuse_to_resume_on_changed_tasks(registry, tmp_path, base_image, monkeypatch,
                                                               capsys):
    from terminal_env.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out = tmp_path / "run"
    argv = ["run", "--dataset", "local@1.0", "--registry", str(registry), "--model", "oracle", "-k", "1",
            "--out", str(out), "--quiet"]
    assert main(argv) == 0
    saved = json.loads((out / "run.json").read_text())
    assert saved["config"]["dataset"] == "local@1.0"
    assert saved["tasks"][0]["environment_digest"] and saved["tasks"][0]["tests_digest"]
    assert json.loads((out / "summary.json").read_text())["mean_at_k"]["value"] == 1.0
    # the same run again: resumed, nothing to do; then a task's environment changes: refused
    assert main(argv) == 0
    dockerfile = tmp_path / "local" / "sum-local" / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN true\n")
    capsys.readouterr()
    assert main(argv) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "the environment of sum-local changed since this run started" in err and "Traceback" not in err
    assert main(["run", "--model", "oracle", "--out", str(tmp_path / "none")]) != 0
    assert "--tasks PATH... or --dataset NAME@VERSION" in " ".join(capsys.readouterr().err.split())


@pytest.mark.docker
def test_leaderboard_runs_pin_everything_and_record_where_they_ran(registry, tmp_path, base_image,
                                                                   monkeypatch, capsys):
    from terminal_env.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    base = ["run", "--registry", str(registry), "--model", "oracle", "-k", "1", "--quiet", "--leaderboard"]
    refusals = {
        "not pinned to a commit": ["--dataset", "local@1.0"],
        "--timeout-multiplier 2.0 (a leaderboard run keeps the tasks' own timeouts)":
            ["--dataset", "mini@1.0", "--timeout-multiplier", "2"],
        "no --dataset": ["--tasks", str(SUM)],
    }
    for message, extra in refusals.items():
        capsys.readouterr()
        assert main(base + extra + ["--out", str(tmp_path / "refused")]) != 0
        assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "refused").exists()  # refused before the run directory is made

    out = tmp_path / "board"
    assert main(base + ["--dataset", "mini@1.0", "--out", str(out)]) == 0
    saved = json.loads((out / "run.json").read_text())
    env = saved["environment"]
    assert env["engine"]["version"] and env["runtime"] and env["executor"] == "local"
    assert env["images"]["sum"].startswith("sha256:")
    atif = json.loads((out / "trials" / "sum" / "1" / "trajectory.atif.json").read_text())
    assert atif["schema_version"] == "ATIF-v1.8" and atif["steps"]
    import atif as atif_spec  # an independent implementation of the format reads it

    assert atif_spec.Trajectory.model_validate(atif).trajectory_id == atif["session_id"]
    # a task file changed in the fetched checkout: no leaderboard run on it
    checkout = Path(saved["config"]["tasks"][0])
    (checkout / "instruction.md").write_text("easier now\n")
    capsys.readouterr()
    assert main(base + ["--dataset", "mini@1.0", "--out", str(tmp_path / "board2")]) != 0
    assert "were changed since they were fetched (tasks/sum/instruction.md)" in " ".join(capsys.readouterr().err.split())


def test_a_leaderboard_run_takes_a_task_with_the_internet_only_when_its_dataset_declares_it(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(SUM, repo / "tasks" / "online")
    toml = repo / "tasks" / "online" / "task.toml"
    toml.write_text(toml.read_text().replace('allow_internet = false', 'network_mode = "public"'))
    assert load_task(repo / "tasks" / "online").allow_internet
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "release")
    task = {"name": "online", "git_url": str(repo), "git_commit_id": git(repo, "rev-parse", "HEAD"),
            "path": "tasks/online"}
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps([{"name": "net", "version": "1", "tasks": [task]},
                                    {"name": "net", "version": "2", "tasks": [task], "allow_internet": True}]))
    cache = tmp_path / "cache"
    assert dataset_tasks("net@1", registry, cache=cache)  # an ordinary run takes it
    with pytest.raises(ConfigError, match='asks for the network .*"allow_internet": true'):
        dataset_tasks("net@1", registry, cache=cache, pinned=True)
    assert dataset_tasks("net@2", registry, cache=cache, pinned=True)

