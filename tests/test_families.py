"""Generated task families (terminal_env/tasks/families/): each family, on its own.

Without Docker: the same arguments write the same bytes; instances differ in substance (several
variants, different instructions and tests, not only other numbers); every instance is a valid
task of its family's split; validation and test families make real hard tasks; no family's theme
crosses splits, within the generated pool or against the bundled one. With Docker, one instance
of every family through the gate: its oracle passes, nop fails, the tests are out of the agent's
reach; ``pytest -m slow`` adds the rewrite, constant and instance probes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from terminal_env.cli import main
from terminal_env.errors import ConfigError
from terminal_env.runner.config import resolve_tasks
from terminal_env.tasks import load_task, validate
from terminal_env.tasks.check import check_task, sample_per_group
from terminal_env.tasks.families import CATEGORIES, FAMILIES
from terminal_env.tasks.generate import (MARKER, code_digest, ensure_default_pool, generate,
                                         instance_name, select)
from terminal_env.tasks.load import find_tasks
from terminal_env.tasks.pool import load_pool, pool_dir
from terminal_env.tasks.similarity import THRESHOLD, similar_pairs
from terminal_env.train.loop import Loop
from terminal_env.train.loop_config import parse_config

NAMES = sorted(FAMILIES)
N_SUBSTANCE = 12  # instances looked at for variety


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", NAMES)
def test_the_same_arguments_write_the_same_bytes(name, tmp_path):
    family = FAMILIES[name]
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    generate([family], a, n=3, seed=5)
    generate([family], b, n=3, seed=5)
    generate([family], c, n=3, seed=6)
    assert tree(a) == tree(b)
    assert tree(a) != tree(c)
    assert sorted(p.name for p in (a / name).iterdir() if p.is_dir()) == [
        instance_name(family, 5, i) for i in range(3)]


@pytest.mark.parametrize("name", NAMES)
def test_instances_differ_in_substance(name):
    family = FAMILIES[name]
    instances = [family.instance(0, i) for i in range(N_SUBSTANCE)]
    variants = Counter(inst.variant for inst in instances)
    assert len(variants) >= 3, f"{name}: {N_SUBSTANCE} instances show only the variants {dict(variants)}"
    # not only other numbers: with every digit masked, the instruction, the tests and the
    # instance's files still differ
    def text(inst) -> str:
        files = "".join(f"{k}\0{v if isinstance(v, str) else v.decode('latin-1')}"
                        for k, v in sorted({**inst.files, **inst.test_files}.items()))
        return inst.instruction + inst.tests + files

    masked = {re.sub(r"\d+", "#", text(inst)) for inst in instances}
    assert len(masked) >= 3, f"{name}: instances differ only in numbers"
    # different seeds, different instances of the same index
    assert family.instance(0, 0).instruction != family.instance(1, 0).instruction or \
        family.instance(0, 0).files != family.instance(1, 0).files


@pytest.mark.parametrize("name", NAMES)
def test_every_instance_is_a_valid_task_of_its_split(name, tmp_path):
    family = FAMILIES[name]
    assert family.category in CATEGORIES
    written = generate([family], tmp_path, n=4, seed=0)
    errors = [p for p in validate([tmp_path / name]) if p.severity == "error"]
    assert errors == [], errors
    for w in written:
        task = load_task(w.path)
        assert task.split == family.split and task.category == family.category
        assert task.metadata["family"] == name and task.metadata["variant"] == w.variant
        assert len(task.check_weights) >= 3 or (w.path / "tests" / "test_outputs.py").read_text().count(
            "def test_") >= 3, f"{w.name}: fewer than 3 checks"
        # the instruction never carries the tests' data files
        for data in (w.path / "tests").iterdir():
            if data.name not in ("test.sh", "te_checks.py", "test_outputs.py") and data.stat().st_size > 64:
                assert data.read_text(errors="replace")[:64] not in task.instruction


@pytest.mark.parametrize("name", [n for n in NAMES if FAMILIES[n].split != "train"])
def test_held_out_families_make_real_hard_tasks(name):
    family = FAMILIES[name]
    mix = Counter(family.instance(0, i).difficulty for i in range(60))
    assert mix["hard"] >= 15, f"{name} ({family.split}): only {mix['hard']} hard of 60: {dict(mix)}"


def test_the_registry_and_the_writer_refuse_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="unknown task family 'nope'"):
        select(["nope"])
    with pytest.raises(ConfigError, match="at least one instance"):
        generate(select([NAMES[0]]), tmp_path, n=0)
    (tmp_path / NAMES[0]).mkdir()
    (tmp_path / NAMES[0] / "mine.txt").write_text("not generated")
    with pytest.raises(ConfigError, match="not a generated family"):
        generate(select([NAMES[0]]), tmp_path, n=1)
    assert (tmp_path / NAMES[0] / "mine.txt").read_text() == "not generated"  # nothing lost


def test_a_second_generation_replaces_the_first(tmp_path):
    family = select([NAMES[0]])
    generate(family, tmp_path, n=3)
    generate(family, tmp_path, n=2)
    assert len(find_tasks([tmp_path])) == 2 and (tmp_path / NAMES[0] / MARKER).is_file()
    manifest = json.loads((tmp_path / "generated.json").read_text())
    assert manifest["instances"] == 2 and manifest["code"] == code_digest()


def test_the_cli_lists_generates_and_samples_per_family(tmp_path, capsys):
    assert main(["tasks", "families", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed] == list(FAMILIES)
    assert main(["tasks", "generate", "all", "--n", "2", "--seed", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {2 * len(FAMILIES)} task(s) of {len(FAMILIES)} family" in out
    paths = find_tasks([tmp_path])
    picked = sample_per_group(paths, lambda p: load_task(p).metadata["family"], 1, seed=0)
    assert sorted(load_task(p).metadata["family"] for p in picked) == NAMES
    assert picked == sample_per_group(paths, lambda p: load_task(p).metadata["family"], 1, seed=0)
    assert main(["tasks", "generate", "no-such-family", "--out", str(tmp_path / "x")]) == 2
    assert "unknown task family 'no-such-family'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def _sample(root: Path, per_family: int) -> list:
    tasks = []
    for name in NAMES:
        tasks += [load_task(p) for p in find_tasks([root / name])[:per_family]]
    return tasks


def test_no_theme_crosses_splits_in_the_generated_pool_or_against_the_bundled_one(tmp_path):
    generate(FAMILIES.values(), tmp_path, n=2, seed=0)
    generated = _sample(tmp_path, 2)
    bundled = load_pool(pool_dir(), splits=("train", "validation", "test"), allow_test=True)
    pairs = similar_pairs(generated + bundled, threshold=THRESHOLD, cross_split_only=True)
    assert pairs == [], [(p.a, p.b, round(p.score, 3)) for p in pairs[:10]]


@pytest.fixture(scope="module")
def default_pool_dir(tmp_path_factory):
    """Where the default generated pool goes: one per module (writing 2,400 tasks takes a while)."""
    return tmp_path_factory.mktemp("generated") / "pool"


def test_the_generated_pool_is_addressable_like_the_bundled_one(default_pool_dir, monkeypatch):
    monkeypatch.setenv("TERMINAL_ENV_GENERATED", str(default_pool_dir))
    train = resolve_tasks(["pool:generated:train"])
    assert train and all(t.split == "train" and t.metadata.get("family") in FAMILIES for t in train)
    assert len(train) == 60 * sum(f.split == "train" for f in FAMILIES.values())
    with pytest.raises(ConfigError, match="test split is protected"):
        resolve_tasks(["pool:generated:test"])
    stamp = (default_pool_dir / "generated.json").stat().st_mtime_ns
    assert ensure_default_pool() == default_pool_dir
    assert (default_pool_dir / "generated.json").stat().st_mtime_ns == stamp  # written once
    with pytest.raises(ConfigError, match="pool:generated"):
        resolve_tasks(["pool:generated:train:x"])


def _gate_sample() -> list[tuple[str, int]]:
    """One instance of every family; which one rotates with the family's name."""
    return [(name, sum(map(ord, name)) % 6) for name in NAMES]


@pytest.fixture(scope="module")
def gate_pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    generate(FAMILIES.values(), root, n=6, seed=0)
    return root


def _gate(root: Path, name: str, index: int, probes: tuple[str, ...]):
    path = root / name / instance_name(FAMILIES[name], 0, index)
    row = check_task(path, probes=probes)
    if not row.ok:  # once more on a loaded machine; a real problem fails both
        print(f"{path.name}: the first gate run failed: {row.reason}")
        row = check_task(path, probes=probes)
    return row


@pytest.fixture(scope="module")
def gate_rows(gate_pool, base_image):
    """Every family's sampled instance through oracle, nop and snoop, two at a time (the engine
    overlaps one task's container work with another's)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        rows = pool.map(lambda ni: _gate(gate_pool, ni[0], ni[1], ()), _gate_sample())
        return dict(zip(NAMES, rows))


@pytest.mark.docker
@pytest.mark.parametrize("name", NAMES)
def test_an_instance_passes_its_oracle_and_fails_nop(gate_rows, name):
    row = gate_rows[name]
    assert row.ok, row.reason
    assert row.oracle.startswith("passed 1.00") and row.nop.startswith("failed"), (row.oracle, row.nop)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name,index", _gate_sample(), ids=[n for n, _ in _gate_sample()])
def test_an_instance_passes_the_whole_gate(gate_pool, name, index, base_image):
    row = _gate(gate_pool, name, index, probes=("rewrite", "constant", "instance"))
    assert row.ok, row.reason
    assert "-" not in (row.rewrite, row.constant, row.instance)


def test_a_loop_takes_its_splits_from_the_generated_pool(default_pool_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TERMINAL_ENV_GENERATED", str(default_pool_dir))
    config = parse_config({"start": str(tmp_path / "base"), "tasks": {
        split: ["pool:generated"] for split in ("train", "validation", "test")},
        "stages": [{"kind": "rsr", "name": "rsr-1"}]})
    assert {f.split for f in FAMILIES.values()} == {"train", "validation", "test"}
    loop = Loop(config, tmp_path / "loop")
    for split, paths in loop.splits.items():
        families = {Path(p).name.rsplit("-s0-", 1)[0] for p in paths}  # <family>-s<seed>-<index>
        assert families == {n for n in NAMES if FAMILIES[n].split == split}, split


def test_a_change_ticket_never_changes_one_record_twice():
    """ia-menu-register: a looked-up or bulk edit that lands on a record the ticket already changed
    would make the expected register contradict the ticket's own earlier line (the full gate found
    two such instances: the oracle, following the ticket, failed). Every expectation of every
    shipped instance must hold in the final register."""
    import ast

    family = FAMILIES["ia-menu-register"]
    clashes = []
    for i in range(60):  # the shipped generation: 60 instances of seed 0
        tests = family.instance(0, i).tests
        final = {r["id"]: r for r in ast.literal_eval(re.search(r"^FINAL = (.*)$", tests, re.M).group(1))}
        groups = ast.literal_eval(re.search(r"^GROUPS = (.*)$", tests, re.M).group(1))
        for group in ("direct_changes", "looked_up_changes"):
            for rid, name, value in groups.get(group, []):
                if final[rid][name] != value:
                    clashes.append((i, group, rid, name))
    assert clashes == []


def test_a_spec_cli_program_that_prints_nothing_earns_nothing_anywhere(tmp_path, monkeypatch):
    """spec-cli: the full gate found two instances where a program printing nothing scored 0.38
    (a journal of reads only, so an empty report; a `status` sequence with no limit ever set, so
    `status` never printed). In every shipped instance, now: the journal's report has lines, and
    each subcommand's hidden sequence has that subcommand print something at least once."""
    import importlib
    import sys

    family = FAMILIES["spec-cli"]
    empty = []
    for i in range(60):  # the shipped generation: 60 instances of seed 0
        inst = family.instance(0, i)
        box = tmp_path / str(i)
        box.mkdir()
        (box / "h4_cli.py").write_text(inst.test_files["h4_cli.py"])
        (box / "journal.json").write_text(inst.test_files["journal.json"])
        (box / "t_outputs.py").write_text(inst.tests)
        monkeypatch.syspath_prepend(str(box))
        for mod in ("h4_cli", "t_outputs"):
            sys.modules.pop(mod, None)
        tests = importlib.import_module("t_outputs")
        st: dict = {}
        for line in json.loads(inst.test_files["journal.json"]):
            tests.apply(tests.TOOL, st, line.split())
        report = re.search(r"code, out = apply\(TOOL, st, (.+?)\.split\(\)\)", inst.tests).group(1)
        if not tests.apply(tests.TOOL, st, ast_literal(report).split())[1].strip():
            empty.append((i, "journal report"))
        for sub in tests.SUBS:
            import random

            st = {}
            outs = [(argv[0], *tests.apply(tests.TOOL, st, argv)) for argv in
                    tests.focused(random.Random(sum(map(ord, sub))), sub)]
            if not any(name == sub and code == 0 and out for name, code, out in outs):
                empty.append((i, sub))
        sys.path.remove(str(box))
    assert empty == []


def ast_literal(text: str):
    import ast

    return ast.literal_eval(text)


@pytest.mark.docker
def test_a_panel_journal_with_an_edited_state_earns_nothing(tmp_path, base_image):
    """ia-control-panel: the journal's seal covers its commands, not the state it records. The full
    gate's constant probe wrote the oracle's journal back with the state's dials set to one value
    and scored 1.00 on 6 of 60 instances (instance 4 among them), since the tests replayed only the
    commands. The tests now require the recorded state to be the one the commands make."""
    family = FAMILIES["ia-control-panel"]
    generate([family], tmp_path, n=5, seed=0)
    row = check_task(tmp_path / family.name / instance_name(family, 0, 4), probes=("constant",))
    # the probe's edited journals were written and scored (the attack happened), and earned nothing
    assert "most common value everywhere 0.00" in row.constant, row.constant
    assert "second value everywhere 0.00" in row.constant, row.constant
    assert row.ok, row.reason
