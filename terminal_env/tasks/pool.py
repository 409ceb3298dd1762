"""The bundled task pool: loading by split, and the rules that keep the splits honest.

* Splits are disjoint by *family*: near-variants of one task share a family and stay in one
  split, so no near-copy of a test task is ever trained on.
* The ``test`` split is protected: :func:`load_pool` refuses it unless ``allow_test=True``, so
  training code that asks for tasks cannot receive test tasks by accident. Checkpoint selection
  uses ``validation``.
* Every task carries the pool's canary string (in ``task.toml`` and its test and solution files)
  so that others can detect the pool in training corpora.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable

from ..errors import ConfigError
from .check import CANARY
from .load import find_tasks, load_task
from .model import Task
from .schema import Problem

SPLITS = ("train", "validation", "test")


def pool_dir() -> Path:
    """The bundled pool: ``tasks/`` at the root of the checkout this package runs from."""
    return Path(__file__).resolve().parents[2] / "tasks"


def load_pool(
    root: str | Path | None = None,
    *,
    splits: Iterable[str] = ("train",),
    allow_test: bool = False,
) -> list[Task]:
    """Tasks of the given splits, sorted by name. Asking for ``test`` needs ``allow_test=True``."""
    splits = tuple(splits)
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise ConfigError(f"unknown split(s) {unknown}; the splits are {', '.join(SPLITS)}")
    if "test" in splits and not allow_test:
        raise ConfigError(
            "the test split is protected: it is for final evaluation only, never for training "
            "or checkpoint selection (use 'validation'). Pass allow_test=True to evaluate on it."
        )
    root = Path(root) if root is not None else pool_dir()
    tasks = [load_task(p) for p in find_tasks([root])]
    return sorted((t for t in tasks if t.split in splits), key=lambda t: t.name)


def pool_problems(root: str | Path | None = None) -> list[Problem]:
    """Pool-level rules: a split for every task, families within one split, the canary."""
    root = Path(root) if root is not None else pool_dir()
    problems: list[Problem] = []
    families: dict[str, set[str]] = defaultdict(set)
    for path in find_tasks([root]):
        task = load_task(path)
        toml = str(Path(path) / "task.toml")
        if task.split not in SPLITS:
            problems.append(Problem(toml, "metadata.split", "every pool task needs a split", "error"))
        family = str(task.metadata.get("family") or task.name)
        families[family].add(f"{task.split}:{task.name}")
        if task.canary != CANARY:
            problems.append(Problem(toml, "metadata.canary", f"set canary = {CANARY!r}", "error"))
        for name, src in task.verifier_files().items():
            if isinstance(src, bytes) or CANARY not in Path(src).read_text(errors="replace"):
                problems.append(Problem(str(src), "", "test file without the canary comment", "error"))
    for family, members in sorted(families.items()):
        if len({m.split(":", 1)[0] for m in members}) > 1:
            problems.append(
                Problem(str(root), "metadata.family",
                        f"family {family!r} spans several splits: {sorted(members)}; keep a "
                        "family's near-variants in one split", "error")
            )
    return problems
