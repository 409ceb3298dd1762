"""Small file helpers shared by the run directory, trajectories and the Ray runner."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename:
    a reader never sees half a file, and a process killed mid-write leaves none."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    os.replace(tmp, path)
    return path


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> Path:
    """:func:`write_atomic` of ``data`` as JSON (indented by one: small, still readable)."""
    return write_atomic(path, json.dumps(data, indent=1, default=str))
