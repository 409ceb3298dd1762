"""Artifacts: files copied out of a trial's sandbox into its directory after the agent stopped.

Harbor's ``artifacts = [...]`` of a task (a path, or ``{source, destination, exclude}``) and its
convention directory ``/logs/artifacts`` (collected whole when it exists). Each lands under the
trial's ``artifacts/``: a path under its base name, an object under its ``destination``, the
convention directory's files at the top.

The agent owns everything inside its sandbox, so nothing it wrote is trusted on the host: the
files come through the engine's archive API (read inside the container, never through a mount a
symlink could point out of), and are unpacked with :mod:`tarfile`'s ``data`` filter, which
refuses absolute names, ``..``, links that leave the destination and device files. Each
collection is capped in bytes and files; what is refused or missing is recorded with the reason,
never raised: an artifact never changes a verdict.
"""

from __future__ import annotations

import fnmatch
import posixpath
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import docker.errors
from pydantic import BaseModel, ConfigDict

#: Harbor's convention directory: collected whole, into the top of ``artifacts/``
CONVENTION_DIR = "/logs/artifacts"
MAX_BYTES = 100 * 1024 * 1024
MAX_FILES = 10_000


class ArtifactSpec(BaseModel):
    """One artifact to collect: ``source`` in the sandbox, ``destination`` under ``artifacts/``
    (``""`` for the top), members matching an ``exclude`` glob left out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    destination: str
    exclude: tuple[str, ...] = ()


def check_destination(destination: str) -> str | None:
    """Why ``destination`` cannot be a place under ``artifacts/``, or None."""
    p = PurePosixPath(destination)
    if p.is_absolute() or ".." in p.parts or "\\" in destination:
        return f"{destination!r} must be a relative path inside the trial's artifacts/ (no '..')"
    return None


def collect(sandbox: Any, specs: list[ArtifactSpec], dest: Path, *, max_bytes: int | None = None,
            max_files: int | None = None) -> list[dict[str, Any]]:
    """Copy ``specs`` (and the convention directory) out of ``sandbox`` into ``dest``; one record
    per artifact: ``{source, destination, status, files, bytes, reason}`` with status
    ``collected``, ``missing`` or ``refused``. The caps (default :data:`MAX_BYTES`,
    :data:`MAX_FILES`) hold for the trial's artifacts together."""
    records = []
    budget = {"bytes": MAX_BYTES if max_bytes is None else max_bytes,
              "files": MAX_FILES if max_files is None else max_files}
    for spec in [*specs, ArtifactSpec(source=CONVENTION_DIR, destination="")]:
        try:
            record = _collect_one(sandbox, spec, dest, budget)
        except Exception as exc:  # noqa: BLE001 - the engine went away mid-stream, a full disk
            record = {"source": spec.source, "destination": spec.destination, "status": "missing",
                      "files": [], "bytes": 0, "reason": f"{type(exc).__name__}: {exc}"}
        if spec.source == CONVENTION_DIR and spec.destination == "" and record["status"] == "missing":
            continue  # the convention directory is optional
        records.append(record)
    return records


def _collect_one(sandbox: Any, spec: ArtifactSpec, dest: Path, budget: dict[str, int]) -> dict[str, Any]:
    record: dict[str, Any] = {"source": spec.source, "destination": spec.destination,
                              "status": "collected", "files": [], "bytes": 0, "reason": ""}
    try:
        stream, stat = sandbox.container.get_archive(spec.source)
    except docker.errors.NotFound:
        return {**record, "status": "missing", "reason": "not in the sandbox"}
    except docker.errors.APIError as exc:
        return {**record, "status": "missing", "reason": f"the engine could not read it: {exc.explanation or exc}"}
    with tempfile.TemporaryFile() as tmp:
        size = 0
        for chunk in stream:
            size += len(chunk)
            if size > budget["bytes"] + 1024 * 1024:  # tar headers on top of the content
                return {**record, "status": "refused",
                        "reason": f"more than the {budget['bytes']} bytes left for this trial's artifacts"}
            tmp.write(chunk)
        tmp.seek(0)
        # the archive's top entry is the source's base name; it lands as the destination
        top = stat.get("name") or posixpath.basename(spec.source.rstrip("/"))
        target = dest / spec.destination if spec.destination else dest
        try:
            with tarfile.open(fileobj=tmp) as tar:
                members = _members(tar, top, spec, record, budget)
                if record["status"] == "refused":
                    return record
                staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=_made(dest)))
                try:
                    tar.extractall(staging, members=members, filter="data")
                    _move_into(staging / top, target, whole=bool(spec.destination))
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
        except (tarfile.TarError, OSError) as exc:  # the data filter's refusals are TarErrors
            return {**record, "status": "refused", "files": [], "bytes": 0,
                    "reason": f"{type(exc).__name__}: {exc}"}
    return record


def _members(tar: tarfile.TarFile, top: str, spec: ArtifactSpec, record: dict[str, Any],
             budget: dict[str, int]) -> list[tarfile.TarInfo]:
    keep = []
    for m in tar.getmembers():
        rel = m.name[len(top):].lstrip("/") if m.name.startswith(top) else m.name
        if rel and any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(posixpath.basename(rel), pat)
                       for pat in spec.exclude):
            continue
        if m.isfile():
            budget["bytes"] -= m.size
            budget["files"] -= 1
            record["bytes"] += m.size
            record["files"].append(rel or posixpath.basename(top))
            if budget["bytes"] < 0 or budget["files"] < 0:
                record.update(status="refused", files=[], bytes=0,
                              reason="over the byte or file limit for this trial's artifacts")
                return []
        keep.append(m)
    return keep


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _move_into(src: Path, target: Path, *, whole: bool) -> None:
    """``src`` (what was extracted) becomes ``target``; a directory without a destination of its
    own is merged into ``target`` (the convention directory, at the top of artifacts/)."""
    if not src.exists() and not src.is_symlink():
        return
    if whole or not src.is_dir() or src.is_symlink():
        target = target if whole else target / src.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        src.rename(target)
        return
    for child in src.iterdir():
        _move_into(child, target / child.name, whole=True)
