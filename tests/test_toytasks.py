"""The generated toy family (:mod:`terminal_env.tasks.toy`): it loads through the task loader
with its splits and metadata, its values never repeat across splits (for ``choose-word``: its
combinations never do, and every validation word and file is in train; for ``count-letters``:
its words never do, and every split deals the lengths alike), a non-empty destination is
refused, and (with Docker) the oracle solves each kind, the nop agent does not, and writing
several numbers or a wrong one is only partial progress."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.errors import ConfigError
from terminal_env.models.simple import NopBackend, OracleBackend, ScriptedBackend
from terminal_env.protocols import ModelBackend
from terminal_env.tasks import Task, load_task, validate
from terminal_env.tasks.check import CANARY
from terminal_env.tasks.pool import load_pool, pool_problems
from terminal_env.tasks.toy import (
    CHOICE_FILES,
    COUNT_LENGTHS,
    COUNT_LETTERS,
    KINDS,
    WORDS,
    write_toy_family,
)
from terminal_env.verify import VerifierResult

N_TRAIN, N_VALIDATION = 8, 2  # choose-word needs 8 train tasks to hold every word and file
#: the kinds whose every task has a value of its own
DISTINCT = [kind for kind in KINDS if kind not in ("choose-word", "count-letters")]


@pytest.fixture(scope="module")
def families(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("toy")
    return {kind: write_toy_family(root / kind, n_train=N_TRAIN, n_validation=N_VALIDATION,
                                   seed=7, kind=kind)[0].parent for kind in KINDS}


def value_of(instruction: str) -> str:
    found = re.search(r"\b(?:number|word) (\w+)", instruction)
    assert found, instruction
    return found.group(1)


def combination_of(instruction: str) -> tuple[str, str]:
    found = re.fullmatch(r"Write the word (\w+) to /app/([\w.]+)\.", instruction.strip())
    assert found, instruction
    return found.group(1), found.group(2)


def values_by_split(root: Path) -> dict[str, list[str]]:
    return {split: [value_of(t.instruction) for t in load_pool(root, splits=[split])]
            for split in ("train", "validation")}


def tree(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files}


@pytest.mark.parametrize("kind", KINDS)
def test_the_family_loads_with_its_splits_and_metadata(kind, families):
    root = families[kind]
    assert validate([root], strict=True) == []  # not even a warning
    train, val = load_pool(root, splits=["train"]), load_pool(root, splits=["validation"])
    assert [t.name for t in train] == [f"toy-{kind}-train-{i:03d}" for i in range(N_TRAIN)]
    assert [t.name for t in val] == [f"toy-{kind}-validation-{i:03d}" for i in range(N_VALIDATION)]
    for t in train + val:
        assert t.metadata["family"] == f"toy-{kind}"
        assert (t.category, t.difficulty, t.canary) == ("toy", "easy", CANARY)
        assert len(t.check_weights) == 3 and sum(t.check_weights.values()) == 4.0
        assert not t.allow_internet and t.has_solution and t.warnings == []
        assert t.dockerfile is not None
        assert t.dockerfile.read_text().splitlines()[0] == "FROM terminal-env/base:bookworm-1"
        instruction = t.instruction.strip()
        assert "\n" not in instruction and ". " not in instruction  # one sentence
        assert instruction.endswith(".")
    # the pool's rules hold, except the one a toy family breaks on purpose: train and
    # validation share the family (see the module's docstring)
    assert [p for p in pool_problems(root) if p.field != "metadata.family"] == []


@pytest.mark.parametrize("kind", DISTINCT)
def test_values_never_repeat_across_splits_and_follow_the_seed(kind, tmp_path):
    write_toy_family(tmp_path / "a", n_train=60, n_validation=40, seed=3, kind=kind)
    values = values_by_split(tmp_path / "a")
    assert len(values["train"]) == 60 and len(values["validation"]) == 40
    assert len(set(values["train"] + values["validation"])) == 100  # none repeats anywhere
    write_toy_family(tmp_path / "b", n_train=60, n_validation=40, seed=3, kind=kind)
    assert tree(tmp_path / "a") == tree(tmp_path / "b")  # the same arguments, the same bytes
    write_toy_family(tmp_path / "c", n_train=60, n_validation=40, seed=4, kind=kind)
    assert values_by_split(tmp_path / "c") != values


def test_choose_word_validation_holds_unseen_combinations_of_seen_words_and_files(tmp_path):
    write_toy_family(tmp_path / "a", n_train=48, n_validation=16, seed=3, kind="choose-word")
    combos = {split: [combination_of(t.instruction) for t in load_pool(tmp_path / "a", splits=[split])]
              for split in ("train", "validation")}
    train, val = combos["train"], combos["validation"]
    assert len(set(train)) == 48 and len(set(val)) == 16  # no combination twice in a split
    assert not set(train) & set(val)  # nor in both
    assert {w for w, _ in train} == set(WORDS) and {f for _, f in train} == set(CHOICE_FILES)
    # 16 validation tasks are two whole diagonals: each word and each file exactly twice
    assert sorted(w for w, _ in val) == sorted(WORDS * 2)
    assert sorted(f for _, f in val) == sorted(CHOICE_FILES * 2)
    # the smallest family with a validation split still has every word and file in train
    write_toy_family(tmp_path / "small", n_train=8, n_validation=56, seed=5, kind="choose-word")
    small = [combination_of(t.instruction) for t in load_pool(tmp_path / "small", splits=["train"])]
    assert {w for w, _ in small} == set(WORDS) and {f for _, f in small} == set(CHOICE_FILES)
    write_toy_family(tmp_path / "b", n_train=48, n_validation=16, seed=3, kind="choose-word")
    assert tree(tmp_path / "a") == tree(tmp_path / "b")  # the same arguments, the same bytes
    write_toy_family(tmp_path / "c", n_train=48, n_validation=16, seed=4, kind="choose-word")
    assert tree(tmp_path / "c") != tree(tmp_path / "a")
    with pytest.raises(ConfigError, match="at least 8 train tasks"):
        write_toy_family(tmp_path / "d", n_train=7, n_validation=1, kind="choose-word")
    assert not (tmp_path / "d").exists()
    with pytest.raises(ConfigError, match="only 64 distinct values"):
        write_toy_family(tmp_path / "d", n_train=60, n_validation=5, kind="choose-word")
    assert len(write_toy_family(tmp_path / "e", n_train=3, n_validation=0, kind="choose-word")) == 3


def counted_word(instruction: str) -> str:
    found = re.fullmatch(r"Write to /app/answer\.txt the number of letters in (\w+)\.", instruction.strip())
    assert found, instruction
    return found.group(1)


def test_count_letters_validation_holds_unseen_words_of_every_length(tmp_path):
    write_toy_family(tmp_path / "a", n_train=48, n_validation=16, seed=3, kind="count-letters")
    words = {split: [counted_word(t.instruction) for t in load_pool(tmp_path / "a", splits=[split])]
             for split in ("train", "validation")}
    train, val = words["train"], words["validation"]
    assert len(set(train + val)) == 64  # no word twice, in a split or across them
    assert all(set(w) <= set(COUNT_LETTERS) for w in train + val)
    # each split deals the lengths alike: 48 train tasks hold each length 6 times, 16 validation 2
    assert sorted(len(w) for w in train) == sorted(COUNT_LENGTHS * 6)
    assert sorted(len(w) for w in val) == sorted(COUNT_LENGTHS * 2)
    for task in load_pool(tmp_path / "a"):  # the answer is the count, in the oracle and the tests
        n = len(counted_word(task.instruction))
        assert (task.path / "solution" / "solve.sh").read_text().splitlines()[-1] == f"echo {n} > /app/answer.txt"
        # the tests count the public word themselves: no answer only they hold
        assert f"EXPECTED = len({counted_word(task.instruction)!r})\n" in (
            task.path / "tests" / "test_outputs.py").read_text()
    write_toy_family(tmp_path / "b", n_train=48, n_validation=16, seed=3, kind="count-letters")
    assert tree(tmp_path / "a") == tree(tmp_path / "b")  # the same arguments, the same bytes
    write_toy_family(tmp_path / "c", n_train=48, n_validation=16, seed=4, kind="count-letters")
    assert tree(tmp_path / "c") != tree(tmp_path / "a")


def test_a_non_empty_or_wrong_destination_is_refused_with_the_fix(tmp_path):
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match="is not empty") as exc:
        write_toy_family(dest, n_train=1, n_validation=1)
    assert str(dest) in str(exc.value) and "another dest" in str(exc.value)
    assert tree(dest) == {"keep.txt": b"mine\n"}  # nothing written
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        write_toy_family(a_file)
    with pytest.raises(ConfigError, match="unknown toy task kind 'copy-all'; use one of write-num"):
        write_toy_family(tmp_path / "new", kind="copy-all")
    with pytest.raises(ConfigError, match="distinct values"):
        write_toy_family(tmp_path / "new", n_train=10_000, n_validation=1)
    with pytest.raises(ConfigError, match="n_train must be a whole number"):
        write_toy_family(tmp_path / "new", n_train=-1)
    assert not (tmp_path / "new").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert len(write_toy_family(empty, n_train=1, n_validation=0)) == 1  # an empty dir is fine


def play(task: Task, agent: ModelBackend) -> tuple[float, VerifierResult]:
    env = TerminalEnv(task, reward="partial_progress", max_steps=5)
    try:
        reward, info = run_episode(env, agent)
    finally:
        env.close()
    return reward, info["verification"]


@pytest.mark.docker
@pytest.mark.parametrize("kind", KINDS)
def test_the_oracle_solves_each_kind_and_nop_does_not(kind, families, base_image):
    task = load_task(families[kind] / f"toy-{kind}-validation-000")
    reward, result = play(task, OracleBackend())
    assert result.strict_success and reward == 1.0, result.message + result.log_tail
    assert len(result.checks) == 3
    reward, result = play(task, NopBackend())
    assert not result.strict_success and result.outcome == "failed" and reward == 0.0


@pytest.mark.docker
def test_several_numbers_or_a_wrong_one_are_only_partial_progress(families, base_image):
    task = load_task(families["write-number"] / "toy-write-number-train-000")
    n = int(value_of(task.instruction))
    several = ScriptedBackend.of_actions([f"seq {n - 1} {n + 1} > /app/answer.txt"])
    reward, result = play(task, several)  # the right one among others: only "it exists" passes
    assert result.outcome == "partial" and reward == pytest.approx(0.25), result.message
    reward, result = play(task, ScriptedBackend.of_actions([f"echo {n + 1} > /app/answer.txt"]))
    assert result.outcome == "partial" and reward == pytest.approx(0.5), result.message


@pytest.mark.docker
def test_a_wrong_count_or_the_word_itself_is_only_partial_progress(families, base_image):
    task = load_task(families["count-letters"] / "toy-count-letters-train-000")
    word = counted_word(task.instruction)
    reward, result = play(task, ScriptedBackend.of_actions([f"echo {len(word) + 1} > /app/answer.txt"]))
    assert result.outcome == "partial" and reward == pytest.approx(0.5), result.message
    reward, result = play(task, ScriptedBackend.of_actions([f"echo {word} > /app/answer.txt"]))
    assert result.outcome == "partial" and reward == pytest.approx(0.25), result.message


def test_a_test_split_is_dealt_with_validation_and_the_leak_checks_find_no_hidden_answer(tmp_path):
    from terminal_env.rsr.review import LeakChecks

    paths = write_toy_family(tmp_path / "a", n_train=8, n_validation=4, n_test=4, seed=3, kind="count-letters")
    splits = [load_pool(tmp_path / "a", splits=[s], allow_test=True) for s in ("train", "validation", "test")]
    assert [len(s) for s in splits] == [8, 4, 4]
    assert [p.name for p in paths[-4:]] == [f"toy-count-letters-test-{i:03d}" for i in range(4)]
    words = [counted_word(t.instruction) for s in splits for t in s]
    assert len(set(words)) == 16  # no word in two tasks, across the three splits
    checks = LeakChecks(paths[0], instruction=load_pool(tmp_path / "a", splits=["train"])[0].instruction)
    assert checks.answers == [] and checks.hidden == []  # writing the count is no leak: the word is public
