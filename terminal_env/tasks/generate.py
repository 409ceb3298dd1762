"""Writing generated task families to disk: ``terminal-env tasks generate FAMILY|all``.

Each instance becomes an ordinary task directory in the bundled pool's format::

    OUT/<family>/<family>-s<seed>-<index>/
        task.toml            split, category, difficulty, family, variant, the pool's canary
        instruction.md
        environment/Dockerfile   the same bytes for every instance of every family on one image:
                                 FROM <image>, WORKDIR /app, COPY app /app (one layer per instance)
        environment/app/...      the instance's files
        tests/test.sh, tests/te_checks.py   the kit, vendored
        tests/test_outputs.py, tests/...    the hidden checks and their data
        solution/solve.sh

The same arguments write the same bytes (no time stamps; ``OUT/generated.json`` lists what was
written). Splits are the families' own, so no family crosses train, validation and test. A family
directory that holds a previous generation (it has ``.generated``) is replaced; anything else in
the way is refused, never deleted.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import ConfigError
from .check import CANARY
from .families import FAMILIES, Family
from .families.base import IMAGES, Instance
from .scaffold import kit_file

GENERATOR_VERSION = 1
DEFAULT_N = 60
DEFAULT_SEED = 0
MARKER = ".generated"

DOCKERFILE = """FROM {image}
WORKDIR /app
COPY app /app
"""


@dataclass(frozen=True)
class Written:
    """One instance on disk."""

    family: str
    name: str
    path: Path
    split: str
    difficulty: str
    variant: str


def code_digest() -> str:
    """A digest of the families' code (every module of the package and this writer): a cached
    pool written by other code is stale."""
    package = Path(__file__).parent / "families"
    h = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def select(names: Iterable[str]) -> list[Family]:
    """Families by name (``all`` for every one), in registry order; unknown names are refused."""
    names = list(names)
    if not names or "all" in names:
        return list(FAMILIES.values())
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise ConfigError(f"unknown task family {', '.join(map(repr, unknown))}; the families are: "
                          f"{', '.join(FAMILIES)} (or 'all'; `terminal-env tasks families` lists them)")
    return [FAMILIES[n] for n in dict.fromkeys(names)]


def instance_name(family: Family, seed: int, index: int) -> str:
    return f"{family.name}-s{seed}-{index:04d}"


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def task_toml(family: Family, inst: Instance, seed: int, index: int) -> str:
    tags = ", ".join(_toml_str(t) for t in (family.category, *inst.tags))
    return f"""version = "1.0"

[metadata]
author_name = "terminal-env generator"
category = {_toml_str(family.category)}
difficulty = {_toml_str(inst.difficulty)}
split = {_toml_str(family.split)}
family = {_toml_str(family.name)}
variant = {_toml_str(inst.variant)}
generator = "terminal-env tasks generate {family.name} --seed {seed}"
generator_version = {GENERATOR_VERSION}
generator_index = {index}
oracle_turns = {inst.oracle_turns}
tags = [{tags}]
canary = "{CANARY}"

[verifier]
timeout_sec = {float(inst.verifier_timeout_sec)}

[agent]
timeout_sec = {float(inst.agent_timeout_sec)}

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 1024
storage_mb = 1024
network_mode = "no-network"
"""


def _with_canary(rel: str, content: str | bytes) -> str | bytes:
    """Test and solution sources carry the canary in their first lines, like the bundled pool's."""
    if isinstance(content, bytes) or CANARY in content:
        return content
    if rel.endswith(".py"):
        return f"# {CANARY}\n{content}"
    if rel.endswith(".sh"):
        if content.startswith("#!"):
            first, _, rest = content.partition("\n")
            return f"{first}\n# {CANARY}\n{rest}"
        return f"#!/bin/bash\n# {CANARY}\n{content}"
    return content


def instance_files(family: Family, inst: Instance, seed: int, index: int) -> dict[str, str | bytes]:
    """Every file of the instance's task directory, by path relative to it."""
    files: dict[str, str | bytes] = {
        "task.toml": task_toml(family, inst, seed, index),
        "instruction.md": inst.instruction.strip() + "\n",
        "environment/Dockerfile": DOCKERFILE.format(image=IMAGES[inst.image]),
        "tests/test.sh": kit_file("test.sh"),
        "tests/te_checks.py": kit_file("te_checks.py"),
        "tests/test_outputs.py": _with_canary("x.py", inst.tests),
        "solution/solve.sh": _with_canary("x.sh", inst.solution),
    }
    for rel, content in inst.files.items():
        files[f"environment/app/{rel}"] = content
    for rel, content in inst.test_files.items():
        if rel in ("test.sh", "te_checks.py", "test_outputs.py"):
            raise ValueError(f"family {family.name}: test file {rel!r} would replace the kit's")
        files[f"tests/{rel}"] = _with_canary(rel, content)
    if not inst.files:
        files["environment/app/.keep"] = ""
    return files


def _write(path: Path, content: str | bytes, executable: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    path.chmod(0o755 if executable else 0o644)


def _clear(family_dir: Path) -> None:
    """Remove a previous generation of one family; anything else in the way is refused."""
    if not family_dir.exists():
        return
    if not (family_dir / MARKER).is_file():
        raise ConfigError(f"{family_dir} exists and is not a generated family (no {MARKER} in it); "
                          "choose another --out or remove it yourself")
    resolved = family_dir.resolve()
    if resolved == Path("/") or len(resolved.parts) < 3:
        raise ConfigError(f"refusing to replace {resolved}: too close to the file system's root")
    shutil.rmtree(resolved)


def generate(families: Iterable[Family], out: str | Path, *, n: int = DEFAULT_N,
             seed: int = DEFAULT_SEED) -> list[Written]:
    """Write ``n`` instances of each family under ``out``; what was written, in order."""
    if n < 1:
        raise ConfigError(f"--n {n}: write at least one instance per family")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory")
    families = list(families)
    written: list[Written] = []
    for family in families:
        family_dir = out / family.name
        _clear(family_dir)
        family_dir.mkdir(parents=True)
        (family_dir / MARKER).write_text(f"{family.name} seed={seed} n={n}\n")
        for index in range(n):
            inst = family.instance(seed, index)
            name = instance_name(family, seed, index)
            task_dir = family_dir / name
            executable = {f"environment/app/{p}" for p in inst.executable} | \
                         {f"tests/{p}" for p in inst.executable}
            for rel, content in instance_files(family, inst, seed, index).items():
                _write(task_dir / rel, content, rel.endswith(".sh") or rel in executable)
            written.append(Written(family.name, name, task_dir, family.split, inst.difficulty,
                                   inst.variant))
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "code": code_digest(),
        "seed": seed,
        "n": n,
        "families": {f.name: {"category": f.category, "split": f.split,
                              "instances": sum(w.family == f.name for w in written)}
                     for f in families},
        "instances": len(written),
    }
    (out / "generated.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return written


def default_dir(seed: int = DEFAULT_SEED, n: int = DEFAULT_N) -> Path:
    """Where ``pool:generated`` lives: ``$TERMINAL_ENV_GENERATED``, else the user's cache."""
    env = os.environ.get("TERMINAL_ENV_GENERATED")
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "terminal-env" / "generated" / f"v{GENERATOR_VERSION}-s{seed}-n{n}"


def ensure_default_pool() -> Path:
    """The default generated pool's directory, written first if it is not there or was written by
    other code (one process at a time: a lock next to it)."""
    path = default_dir()
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = path / "generated.json"
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text())
            except (OSError, ValueError):
                data = {}
            if (sorted(data.get("families", {})) == sorted(FAMILIES) and data.get("n") == DEFAULT_N
                    and data.get("code") == code_digest()):
                return path
        for child in path.iterdir():  # families no longer registered
            if child.is_dir() and (child / MARKER).is_file() and child.name not in FAMILIES:
                _clear(child)
        generate(FAMILIES.values(), path, n=DEFAULT_N, seed=DEFAULT_SEED)
    return path
