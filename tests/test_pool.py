"""The bundled pool: its shape, its splits, and the quality gate on a fixed sample."""

from __future__ import annotations

from collections import Counter

import pytest

from terminal_env.errors import ConfigError
from terminal_env.tasks import load_task, validate
from terminal_env.tasks.check import CANARY, check_task, sample_paths
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
    if not row.ok:
        # The probes compare runs of the oracle, and once in a full run on a loaded machine
        # sys-profile-env's gate failed and then passed on every rerun: a failure is run once
        # more, and what the first run said is printed; a real problem fails both.
        print(f"{path.name}: the first gate run failed: {row.reason}")
        row = check_task(path)
    assert row.ok, row.reason
    assert "-" not in (row.rewrite, row.constant, row.instance)  # every probe ran


def one_per_category(paths, n: int) -> list:
    """The first task (by name) of each of the first ``n`` categories (by name)."""
    first: dict[str, object] = {}
    for path, task in sorted(zip(paths, TASKS), key=lambda pt: pt[0].name):
        first.setdefault(task.category, path)
    return [first[c] for c in sorted(first)[:n]]


#: of the eight, the ones the default run gates under gVisor (the quickest two, ~35 s each);
#: ``pytest -m slow`` gates the other seven (~6 min)
IN_DEFAULT_RUN = ("ia-access-review",)


@pytest.mark.docker
@pytest.mark.parametrize("path", [p if p.name in IN_DEFAULT_RUN else pytest.param(p, marks=pytest.mark.slow)
                                  for p in one_per_category(PATHS, 8)], ids=lambda p: p.name)
def test_quality_gate_under_gvisor_on_eight_categories(path, runsc):
    """The hardened mode scores tasks: under runsc the oracle passes, the nop fails, the
    snooping agent finds nothing and the rewrite probe (which rewrites files through the engine)
    holds, on one task of each of eight categories. The constant and instance probes do not
    depend on the runtime; the fixed sample above runs them."""
    row = check_task(path, runtime=runsc, probes=("rewrite",))
    assert row.ok, row.reason
    assert row.rewrite != "-" and row.constant == "-" and row.instance == "-"


def _twin(root, name: str, split: str, instruction: str, data: str | None = None):
    import shutil
    dest = root / name
    shutil.copytree(POOL / "td-csv-region-totals", dest)
    toml = dest / "task.toml"
    text = toml.read_text()
    for key in ("split", "family"):
        text = "\n".join(line for line in text.splitlines() if not line.startswith(f"{key} ="))
    toml.write_text(text.replace("[metadata]\n", f'[metadata]\nsplit = "{split}"\n', 1))
    (dest / "instruction.md").write_text(instruction)
    for f in (dest / "environment").iterdir():  # only what the caller shares
        if f.name != "Dockerfile":
            f.unlink() if f.is_file() else shutil.rmtree(f)
    test = name.replace("-", "_")
    (dest / "tests" / "test_outputs.py").write_text(f"# {CANARY}\ndef test_{test}():\n    assert 1\n")
    if data is not None:
        (dest / "environment" / "shared.csv").write_text(data)
    return dest


CRON = ("Fix the crontab entries under /etc/cron.d so that the backup job runs nightly as the "
        "backup user, the rotate job runs hourly and the cleanup job never runs as root.\n")


def test_a_theme_across_splits_is_an_error_naming_both_tasks(tmp_path):
    """Two tasks that differ only in their wording of one cron theme: in two splits they are an
    error (the report's words say why); in one split, or reworded apart, they are not."""
    _twin(tmp_path, "cron-a", "train", CRON)
    _twin(tmp_path, "cron-b", "test", CRON.replace("nightly", "every night at 02:00"))
    _twin(tmp_path, "unrelated", "validation", "Compile the program with make and install it.\n")
    problems = [p for p in pool_problems(tmp_path) if "similarity" in p.message]
    assert len(problems) == 1, problems
    assert "cron-a (train) and cron-b (test)" in problems[0].message
    assert "cron" in problems[0].message and "one split" in problems[0].message
    _twin(tmp_path / "same", "cron-a", "train", CRON)
    _twin(tmp_path / "same", "cron-b", "train", CRON)
    _twin(tmp_path / "same", "unrelated", "test", "Compile the program with make and install it.\n")
    assert [p for p in pool_problems(tmp_path / "same") if "similarity" in p.message] == []


def test_a_shared_environment_file_across_splits_scores_one(tmp_path):
    from terminal_env.tasks.similarity import similar_pairs
    data = "id,amount\n" + "".join(f"{i},{i * 7 % 13}\n" for i in range(30))
    a = _twin(tmp_path, "sum-a", "train", "Sum the amounts.\n", data)
    b = _twin(tmp_path, "sum-b", "test", "Report the largest id whose amount is odd.\n", data)
    pairs = similar_pairs([load_task(a), load_task(b)])
    assert pairs[0].score == 1.0 and pairs[0].shared_files == ("shared.csv",)
    assert "shared environment files shared.csv" in pairs[0].describe()
