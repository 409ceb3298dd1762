"""Reading a run directory for the report: the manifest, the results, each trial's files.

Damage that makes the whole report meaningless (no run.json, bad JSON, a damaged result.json)
raises :class:`~terminal_env.errors.ConfigError` naming the file and the remedy. Damage local to
one trial (a missing or unreadable trajectory, verifier result or recording) is reported on
that trial's page instead.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..runner.records import RUN_SCHEMA, RUN_VERSION, TrialResult, load_results, trial_dir
from ..trajectory import Trajectory
from ..verify.result import VerifierResult

#: the most of a log file shown (its end)
LOG_TAIL_BYTES = 64_000


@dataclass
class Run:
    dir: Path
    manifest: dict[str, Any]
    results: list[TrialResult]
    #: task name -> {"category", "difficulty", "split"} from the manifest
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest.get("config") or {}

    @property
    def harness(self) -> str:
        return str(self.config.get("harness") or "?")

    @property
    def model(self) -> str:
        return str(self.config.get("model") or "?")

    @property
    def attempts(self) -> int:
        planned = self.config.get("attempts")
        seen = max((r.attempt for r in self.results), default=0)
        if isinstance(planned, int) and not isinstance(planned, bool) and planned > 0:
            return max(planned, seen)
        return max(seen, 1)

    @property
    def task_names(self) -> list[str]:
        """Every task of the manifest and of the results, sorted."""
        return sorted(set(self.tasks) | {r.task for r in self.results})

    @property
    def label(self) -> str:
        return f"{self.model} · {self.harness} ({self.dir.name})"


def _manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.json"
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run directory; pass the directory a run wrote")
    if not path.is_file():
        raise ConfigError(
            f"{path}: missing; {run_dir} is not a run directory (pass the directory written by "
            "`terminal-env run`, which holds run.json and trials/)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as exc:
        raise ConfigError(
            f"{path}: not valid JSON ({exc}); the file is damaged: restore it, or re-create it "
            "by running the same configuration again into this directory"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a run manifest (expected a JSON object)")
    if data.get("schema") not in (None, RUN_SCHEMA):
        raise ConfigError(f"{path}: not a terminal-env run manifest (schema {data.get('schema')!r})")
    version = data.get("version")
    if isinstance(version, int) and version > RUN_VERSION:
        raise ConfigError(
            f"{path}: run manifest version {version} is newer than this terminal-env reads "
            f"({RUN_VERSION}); upgrade terminal-env"
        )
    if not isinstance(data.get("config", {}), dict) or not isinstance(data.get("tasks", []), list):
        raise ConfigError(f"{path}: damaged manifest ('config' must be an object, 'tasks' a list)")
    return data


def load_run(run_dir: str | Path) -> Run:
    """The manifest and the finished trials of a run; task metadata missing from a result is
    filled in from the manifest."""
    run_dir = Path(run_dir)
    manifest = _manifest(run_dir)
    tasks: dict[str, dict[str, Any]] = {}
    for entry in manifest.get("tasks") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            tasks[entry["name"]] = {k: entry.get(k) for k in ("category", "difficulty", "split")}
        elif isinstance(entry, str):
            tasks[entry] = {}
    results = []
    for r in load_results(run_dir):
        meta = tasks.get(r.task, {})
        update = {k: meta.get(k) for k in ("category", "difficulty", "split")
                  if getattr(r, k) is None and isinstance(meta.get(k), str)}
        results.append(r.model_copy(update=update) if update else r)
    return Run(dir=run_dir, manifest=manifest, results=results, tasks=tasks)


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def slug(task: str) -> str:
    """A file name for a task's pages: the name itself when it is safe, else a safe form with a
    short digest (so two names never share a file).

    >>> slug("fix-git"), slug("a/../b")
    ('fix-git', 'a_.._b-900ea8b7')
    """
    clean = _SAFE.sub("_", task).lstrip(".") or "_"
    if clean == task:
        return task
    return f"{clean[:80]}-{hashlib.sha256(task.encode()).hexdigest()[:8]}"


def trial_page(task: str, attempt: int) -> str:
    """The trial page's path, relative to the report directory."""
    return f"trials/{slug(task)}/{attempt}.html"


def trial_path(run: Run, result: TrialResult) -> Path:
    """The trial's directory: the recorded ``trial_dir`` when it stays inside the run, else the
    standard layout."""
    if result.trial_dir:
        candidate = (run.dir / result.trial_dir).resolve()
        if candidate.is_dir() and candidate.is_relative_to(run.dir.resolve()):
            return candidate
    return trial_dir(run.dir, result.task, result.attempt)


@dataclass
class TrialFiles:
    trajectory: Trajectory | None = None
    verifier: VerifierResult | None = None
    #: the verification as a plain dict when it could not be validated
    verification_raw: dict[str, Any] | None = None
    log: str | None = None
    cast: Path | None = None
    #: artifacts.json: what was copied out of the sandbox after the run (terminal_env.artifacts)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size > limit:
            fh.seek(size - limit)
        data = fh.read()
    text = data.decode("utf-8", errors="replace")
    return (f"[{size - limit:,} bytes cut]... " + text) if size > limit else text


def read_trial(directory: Path) -> TrialFiles:
    """Whatever of a trial's files can be read; what cannot is said in ``problems``."""
    out = TrialFiles()
    tpath = directory / "trajectory.json"
    if tpath.is_file():
        try:
            out.trajectory = Trajectory.load(tpath)
        except ConfigError as exc:
            out.problems.append(f"trajectory.json is unreadable: {exc}")
    vpath = directory / "verifier.json"
    if vpath.is_file():
        try:
            out.verifier = VerifierResult.model_validate_json(vpath.read_bytes())
        except ValueError as exc:
            out.problems.append(f"verifier.json is unreadable: {str(exc).splitlines()[0]}")
    if out.verifier is None and out.trajectory is not None and out.trajectory.verification:
        try:
            out.verifier = VerifierResult.model_validate(out.trajectory.verification)
        except ValueError:
            out.verification_raw = out.trajectory.verification
    lpath = directory / "verifier.log"
    if lpath.is_file():
        try:
            out.log = read_tail(lpath)
        except OSError as exc:
            out.problems.append(f"verifier.log is unreadable: {exc}")
    cpath = directory / "recording.cast"
    if cpath.is_file():
        out.cast = cpath
    apath = directory / "artifacts.json"
    if apath.is_file():
        try:
            records = json.loads(apath.read_text())
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise ValueError("not a list of records")
            out.artifacts = records
        except (OSError, ValueError) as exc:
            out.problems.append(f"artifacts.json is unreadable: {exc}")
    return out
