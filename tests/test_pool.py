"""The bundled pool: its shape, its splits, and the quality gate on a fixed sample."""

from __future__ import annotations

from collections import Counter

import pytest

from terminal_env.errors import ConfigError
from terminal_env.tasks import load_task, validate
from terminal_env.tasks.check import check_task, sample_paths
from terminal_env.tasks.load import find_tasks
from terminal_env.tasks.pool import load_pool, pool_dir, pool_problems

POOL = pool_dir()
PATHS = find_tasks([POOL])
TASKS = [load_task(p) for p in PATHS]
MIN_TASKS = 60


def test_pool_has_the_promised_shape():
    assert len(TASKS) >= MIN_TASKS
    categories = Counter(t.category for t in TASKS)
    assert len(categories) >= 8, categories
    assert {t.difficulty for t in TASKS} == {"easy", "medium", "hard"}
    assert {t.split for t in TASKS} == {"train", "validation", "test"}
    for t in TASKS:
        assert len(t.check_weights) >= 3, f"{t.name}: fewer than 3 weighted checks"


def test_every_task_validates_and_the_pool_rules_hold():
    errors = [p for p in validate([POOL]) if p.severity == "error"]
    assert errors == []
    assert pool_problems(POOL) == []


def test_the_test_split_is_protected():
    with pytest.raises(ConfigError, match="test split is protected"):
        load_pool(POOL, splits=["train", "test"])
    test_tasks = load_pool(POOL, splits=["test"], allow_test=True)
    assert test_tasks and all(t.split == "test" for t in test_tasks)
    assert all(t.split == "train" for t in load_pool(POOL))
    with pytest.raises(ConfigError, match="unknown split"):
        load_pool(POOL, splits=["dev"])


@pytest.mark.docker
@pytest.mark.parametrize("path", sample_paths(PATHS, 4, seed=0), ids=lambda p: p.name)
def test_quality_gate_on_a_fixed_sample(path, base_image):
    row = check_task(path)
    assert row.ok, row.reason


def one_per_category(paths, n: int) -> list:
    """The first task (by name) of each of the first ``n`` categories (by name)."""
    first: dict[str, object] = {}
    for path, task in sorted(zip(paths, TASKS), key=lambda pt: pt[0].name):
        first.setdefault(task.category, path)
    return [first[c] for c in sorted(first)[:n]]


@pytest.mark.docker
@pytest.mark.parametrize("path", one_per_category(PATHS, 8), ids=lambda p: p.name)
def test_quality_gate_under_gvisor_on_eight_categories(path, runsc):
    """The hardened mode scores tasks: under runsc the oracle passes, the nop fails and the
    snooping agent finds nothing, on one task of each of eight categories."""
    row = check_task(path, runtime=runsc)
    assert row.ok, row.reason
