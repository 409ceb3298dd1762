"""Datasets by name and version, resolved through a local registry file in Harbor's format.

A registry file (``registry.json``) is a JSON list of datasets, each with a ``name``, a
``version``, a ``description`` and its ``tasks``; a task has a ``name`` and a ``path``, and either
lies on this machine (``path`` relative to the registry file) or in a Git repository
(``git_url``, ``git_commit_id``, ``path`` inside the repository). ``terminal-env run --dataset
NAME@VERSION`` runs the dataset's tasks. A Git task must be pinned to a commit: the repository is
fetched once into the cache and checked out at that commit, so the same name and version always
mean the same task files (the run records each task's digests, and refuses to resume when they
change).

Nothing here reaches the network by itself: a ``git_url`` is fetched with the host's ``git``,
like any clone the user would make.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError
from ..tasks.load import is_task_dir, load_task

REGISTRY_ENV = "TERMINAL_ENV_REGISTRY"


class RegistryTask(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    path: str
    git_url: str | None = None
    git_commit_id: str | None = None


class Dataset(BaseModel):
    model_config = ConfigDict(extra="ignore")  # metrics and what later versions add

    name: str
    version: str
    description: str = ""
    tasks: list[RegistryTask]
    #: terminal-env's own key: the dataset's tasks may have the internet (network_mode =
    #: "public"); a leaderboard run refuses such a task unless its dataset says so here
    allow_internet: bool = False


def default_registry() -> Path:
    return Path(os.environ.get(REGISTRY_ENV) or "registry.json")


def load_registry(path: str | Path) -> list[Dataset]:
    """The datasets of a registry file (a list, or Harbor's ``{"datasets": [...]}``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"registry file {path} not found: pass --registry FILE or set ${REGISTRY_ENV} "
                          "(a JSON list of datasets in Harbor's registry.json format)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}); a registry is a JSON list of datasets") from None
    if isinstance(data, dict) and isinstance(data.get("datasets"), list):
        data = data["datasets"]
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a JSON list of datasets, got {type(data).__name__}")
    out = []
    for i, item in enumerate(data):
        try:
            out.append(Dataset.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"{path}: dataset [{i}] {where}: {err['msg']}") from None
    return out


def find_dataset(datasets: list[Dataset], ref: str, source: str | Path) -> Dataset:
    """``NAME@VERSION`` (or ``NAME`` when the registry holds one version of it)."""
    name, _, version = ref.partition("@")
    same = [d for d in datasets if d.name == name]
    if not same:
        known = ", ".join(sorted({f"{d.name}@{d.version}" for d in datasets})) or "none"
        raise ConfigError(f"--dataset {ref!r}: no dataset named {name!r} in {source} (it has: {known})")
    if not version:
        if len(same) > 1:
            raise ConfigError(f"--dataset {ref!r}: {source} has versions "
                              f"{', '.join(d.version for d in same)}; name one as {name}@VERSION")
        return same[0]
    match = [d for d in same if d.version == version]
    if not match:
        raise ConfigError(f"--dataset {ref!r}: {source} has no version {version!r} of {name} "
                          f"(it has: {', '.join(d.version for d in same)})")
    return match[0]


def dataset_tasks(ref: str, registry: str | Path | None = None, *, cache: Path | None = None,
                  pinned: bool = False) -> list[Path]:
    """The task directories of dataset ``ref`` (``NAME@VERSION``), Git tasks checked out at
    their pinned commits under ``cache``. ``pinned`` (leaderboard runs) refuses tasks that are
    not in Git, and checkouts whose files were changed since they were fetched."""
    registry = Path(registry) if registry is not None else default_registry()
    dataset = find_dataset(load_registry(registry), ref, registry)
    if not dataset.tasks:
        raise ConfigError(f"--dataset {ref!r}: the dataset lists no tasks in {registry}")
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "terminal-env" / "datasets"
    paths = []
    for task in dataset.tasks:
        if task.git_url:
            root = checkout(task.git_url, task.git_commit_id, cache, what=f"task {task.name!r} of {ref}")
            if pinned:
                _require_clean(root, f"task {task.name!r} of {ref}")
        elif pinned:
            raise ConfigError(f"--leaderboard: task {task.name!r} of {ref} is not pinned to a commit "
                              f"(no git_url in {registry}); a leaderboard run takes tasks from Git")
        else:
            root = registry.resolve().parent
        path = (root / task.path).resolve()
        if root not in path.parents and path != root:
            raise ConfigError(f"{registry}: task {task.name!r} path {task.path!r} leaves its "
                              f"{'repository' if task.git_url else 'registry directory'}")
        if not is_task_dir(path):
            raise ConfigError(f"{registry}: task {task.name!r} of {ref}: {path} is not a task directory "
                              "(no task.toml or task.yaml); fix its path")
        loaded = load_task(path) if pinned and not dataset.allow_internet else None
        if loaded is not None and loaded.reaches_network:
            raise ConfigError(f"--leaderboard: task {task.name!r} of {ref} asks for the network "
                              f"(network_mode = \"{loaded.network_mode}\", or a verifier's allowlist), "
                              "which makes its score depend on what the "
                              f"network serves that day; a leaderboard run takes it only when the dataset "
                              f"declares it (\"allow_internet\": true in {registry})")
        paths.append(path)
    return paths


def _require_clean(root: Path, what: str) -> None:
    res = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                         capture_output=True, text=True)
    changed = [line[3:] for line in res.stdout.splitlines() if line[3:] != ".terminal-env-complete"]
    if res.returncode != 0 or changed:
        raise ConfigError(f"--leaderboard: the files of {what} were changed since they were fetched "
                          f"({', '.join(changed[:5]) or res.stderr.strip()[-200:]}); delete {root} to fetch "
                          "them again")


def checkout(url: str, commit: str | None, cache: Path, *, what: str) -> Path:
    """The repository ``url`` at ``commit`` (a full hash), fetched once into ``cache``."""
    if not commit or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ConfigError(f"{what}: git_commit_id {commit!r} is not a full commit hash; pin the "
                          "task to the 40-character commit it was released at")
    if shutil.which("git") is None:
        raise ConfigError(f"{what}: needs git to fetch {url}; install git")
    dest = cache / hashlib.sha256(url.encode()).hexdigest()[:16] / commit
    if (dest / ".terminal-env-complete").is_file():
        return dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=dest.parent))
    try:
        for argv in (["git", "init", "-q"], ["git", "fetch", "-q", "--depth", "1", url, commit],
                     ["git", "-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"]):
            res = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=600)
            if res.returncode != 0 and argv[1] == "fetch":  # servers that refuse fetching a hash
                res = subprocess.run(["git", "fetch", "-q", url], cwd=tmp, capture_output=True,
                                     text=True, timeout=600)
                argv = ["git", "checkout", "-q", commit]
                if res.returncode == 0:
                    res = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, timeout=600)
            if res.returncode != 0:
                raise ConfigError(f"{what}: could not fetch {url} at {commit}: "
                                  f"{(res.stderr or res.stdout).strip()[-300:]}")
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp, capture_output=True, text=True)
        if head.stdout.strip() != commit:
            raise ConfigError(f"{what}: {url} gave {head.stdout.strip()} for {commit}")
        (tmp / ".terminal-env-complete").write_text(url + "\n")
        if dest.exists():  # an incomplete earlier fetch
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists() and tmp.parent == dest.parent and tmp.name.startswith(".fetch-"):
            shutil.rmtree(tmp)
    return dest.resolve()
