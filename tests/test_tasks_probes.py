"""The gate's probes for foolable tests, on planted tasks: tests that recompute expectations from
inputs the agent can rewrite, partial credit for a constant answer, and a build that makes a new
instance each time. Each attack is first shown to work on the planted task; the probe then flags
it by itself, and the repaired task passes."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from scripted import play  # tests/scripted.py

from terminal_env.tasks.build import build_image
from terminal_env.tasks.check import check_task
from terminal_env.tasks.load import load_task
from terminal_env.tasks.probes import constant_variants, instance_digest, shrink

pytestmark = pytest.mark.docker

TEST_SH = (Path(__file__).parent / "data" / "protected" / "word-stats" / "tests" / "test.sh").read_text()
TEST_SH = TEST_SH.replace("/tests/test_stats.py", "/tests/test_outputs.py")

NUMBERS = "region,amount\n" + "".join(f"r{i % 3},{(i * 37) % 101}\n" for i in range(40))
TOTAL = sum((i * 37) % 101 for i in range(40))
PARITY = [(i * 37) % 101 for i in range(12)]

TOML = """version = "1.0"
[metadata]
category = "text-data"
difficulty = "easy"
split = "train"
[metadata.terminal_env]
check_weights = {{ test_total_written = 1.0, test_total = 1.0, test_evens = 2.0, test_odds = 2.0 }}
[verifier]
timeout_sec = 60.0
[agent]
timeout_sec = 120.0
[environment]
cpus = 1
memory_mb = 512
allow_internet = false
"""

DOCKERFILE = """FROM terminal-env/base:bookworm-1
WORKDIR /app
COPY numbers.csv /app/data/numbers.csv
{extra}"""

SOLVE = """#!/bin/bash
python3 - <<'EOF'
import csv
rows = list(csv.DictReader(open('/app/data/numbers.csv')))
open('/app/total.txt', 'w').write(str(sum(int(r['amount']) for r in rows)) + '\\n')
with open('/app/parity.csv', 'w') as f:
    f.write('n,label\\n')
    for r in rows[:12]:
        n = int(r['amount'])
        f.write(f"{n},{'even' if n % 2 == 0 else 'odd'}\\n")
EOF
"""

# Naive tests: expectations are recomputed from the live input, and each parity class is its
# own check, so labelling everything "even" earns the evens check.
NAIVE_TESTS = """import csv
def data():
    return list(csv.DictReader(open('/app/data/numbers.csv')))
def labels():
    rows = list(csv.DictReader(open('/app/parity.csv')))
    assert len(rows) == min(12, len(data()))
    return rows
def test_total_written():
    assert open('/app/total.txt').read().strip().isdigit()
def test_total():
    assert int(open('/app/total.txt').read()) == sum(int(r['amount']) for r in data())
def test_evens():
    assert all(r['label'] == 'even' for r in labels() if int(r['n']) % 2 == 0)
def test_odds():
    assert all(r['label'] == 'odd' for r in labels() if int(r['n']) % 2 == 1)
"""

# Repaired tests: the expectation is kept here, and each parity check needs both classes right.
SOUND_TESTS = f"""import csv
NUMBERS = {PARITY!r}
def labels():
    return [(int(r['n']), r['label']) for r in csv.DictReader(open('/app/parity.csv'))]
def right(rows):
    return [n for n, lab in rows] == NUMBERS and all(lab == ('even' if n % 2 == 0 else 'odd') for n, lab in rows)
def test_total_written():
    assert int(open('/app/total.txt').read()) == {TOTAL}
def test_total():
    assert int(open('/app/total.txt').read()) == {TOTAL}
def test_evens():
    assert right(labels())
def test_odds():
    assert right(labels())
"""


def planted(root: Path, name: str, tests: str, extra: str = "") -> Path:
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "instruction.md").write_text(
        "Write the sum of the `amount` column of /app/data/numbers.csv to /app/total.txt. Then write "
        "/app/parity.csv with a header `n,label` and, for each of the first 12 amounts, the amount and "
        "`even` or `odd`.\n")
    (task / "task.toml").write_text(TOML.format())
    (task / "environment" / "Dockerfile").write_text(DOCKERFILE.format(extra=extra))
    (task / "environment" / "numbers.csv").write_text(NUMBERS)
    (task / "tests" / "test.sh").write_text(TEST_SH)
    (task / "tests" / "test_outputs.py").write_text(tests)
    (task / "solution" / "solve.sh").write_text(SOLVE)
    return task


# The attacks, as an agent that never reads the real data would play them.
SHRINK_INPUT = ("printf 'region,amount\\nr0,5\\n' > /app/data/numbers.csv && echo 5 > /app/total.txt "
                "&& printf 'n,label\\n5,odd\\n' > /app/parity.csv")
ALL_EVEN = "(echo n,label; head -13 /app/data/numbers.csv | tail -12 | cut -d, -f2 | sed 's/$/,even/') > /app/parity.csv"


def test_the_attacks_work_on_naive_tests_and_the_probes_flag_them(tmp_path, base_image):
    naive = planted(tmp_path, "naive-totals", NAIVE_TESTS, extra="RUN head -c 8 /dev/urandom | od -An -tx1 > /app/build-id\n")
    reward, res = play(naive, [SHRINK_INPUT])
    assert reward == 1.0 and res.outcome.value == "passed", "the input-rewrite attack must work on naive tests"
    reward, res = play(naive, [ALL_EVEN])
    assert reward >= 0.3, "the constant answer must earn credit on the naive tests"

    row = check_task(naive)
    assert row.oracle.startswith("passed 1.00"), row.oracle
    assert not row.ok
    assert "rewrite: reward" in row.reason and "checks that passed read /app/data/numbers.csv themselves" in row.reason, row.reason
    assert "protected_paths" in row.reason  # the fix is named
    assert "constant answers" in row.reason and "most common value everywhere" in row.constant, row.constant
    assert "instance: /app/build-id" in row.reason, row.reason


def test_the_instance_digest_reads_the_builds_files_and_sees_a_base_file_rewritten(tmp_path, base_image):
    """The digest lists the base image's own files by size, mtime and mode instead of reading
    them; a build step that rewrites one of them (here at random) still shows as a difference."""
    task = load_task(planted(tmp_path, "rewrites-base", SOUND_TESTS,
                             extra="RUN head -c 8 /dev/urandom | od -An -tx1 > /etc/debian_version\n"))
    tag = build_image(task)
    first = instance_digest(tag, "terminal-env/base:bookworm-1")
    build_image(task, force=True, no_cache=True)
    second = instance_digest(tag, "terminal-env/base:bookworm-1")
    differ = sorted(p for p in set(first) | set(second) if first.get(p) != second.get(p))
    assert differ == ["/etc/debian_version"], differ
    assert first["/usr/bin/bash"].startswith("base ") and first["/usr/bin/bash"] == second["/usr/bin/bash"]
    assert first["/app/data/numbers.csv"] == hashlib.sha256(NUMBERS.encode()).hexdigest()
    assert len(first["/etc/debian_version"]) == 64  # read, not listed


def test_sound_tests_hold_against_the_same_attacks_and_pass_the_probes(tmp_path, base_image):
    sound = planted(tmp_path, "sound-totals", SOUND_TESTS)
    reward, res = play(sound, [SHRINK_INPUT])
    assert reward == 0.0 and res.outcome.value == "failed"
    reward, res = play(sound, [ALL_EVEN])
    assert reward == 0.0
    row = check_task(sound)
    assert row.ok, row.reason
    assert row.rewrite.startswith("failed 0.00 on 1 rewritten input"), row.rewrite
    assert row.instance == "same"
    assert "most common value everywhere 0.00" in row.constant, row.constant


def test_protected_inputs_are_left_to_the_verifier(tmp_path, base_image):
    """Inputs under protected_paths are not rewritten: the verifier already refuses any change
    there (the episode would end `tampered` and hide the other inputs)."""
    task = planted(tmp_path, "protected-totals", NAIVE_TESTS)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]", 'protected_paths = ["/app/data"]\n[verifier]'))
    reward, res = play(task, [SHRINK_INPUT])
    assert res.outcome.value == "tampered" and reward == 0.0
    row = check_task(task, probes=("rewrite",))
    assert row.rewrite == "no input to rewrite", row.rewrite
    assert row.constant == "-" and row.instance == "-"


def test_shrunk_inputs_and_constant_answers_keep_their_shape():
    assert shrink(NUMBERS.encode()) == b"region,amount\nr0,0\n"
    out = {"/app/parity.csv": b"n,label\n2,even\n3,odd\n4,even\n", "/app/total.txt": b"9\n"}
    variants = constant_variants(out)
    assert variants["empty outputs"] == {"/app/parity.csv": b"", "/app/total.txt": b""}
    assert variants["most common value everywhere"] == {"/app/parity.csv": b"n,label\n2,even\n3,even\n4,even\n"}
    assert variants["second value everywhere"] == {"/app/parity.csv": b"n,label\n2,odd\n3,odd\n4,odd\n"}


def test_unknown_probe_is_named():
    with pytest.raises(ValueError, match="unknown probes \\['typo'\\]"):
        check_task(Path("nowhere"), probes=("typo",))


@pytest.fixture(autouse=True)
def _no_leftover_images(tmp_path):
    yield
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_tests_that_read_inputs_through_a_program_are_flagged_by_the_outputs(tmp_path, base_image):
    """Tests that read the live input through another program (which the guard does not see)
    are still caught: the oracle's outputs follow the rewritten input and the tests pass."""
    tests = NAIVE_TESTS.replace(
        "def data():\n    return list(csv.DictReader(open('/app/data/numbers.csv')))",
        "import io, subprocess\ndef data():\n    text = subprocess.check_output(['cat', '/app/data/numbers.csv'], text=True)\n"
        "    return list(csv.DictReader(io.StringIO(text)))")
    assert tests != NAIVE_TESTS
    row = check_task(planted(tmp_path, "piped-totals", tests), probes=("rewrite",))
    assert "the oracle wrote other outputs (/app/parity.csv, /app/total.txt)" in row.reason, row.reason
