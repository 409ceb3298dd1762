"""The task author's kit (``verifiers/``): its pytest plugin's named, weighted checks as the verifier
reads them, its helpers, and the verifier rule it needs (result files the guard contradicts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripted import play

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "verifiers"

TESTS = '''
import sys

import pytest

sys.path.insert(0, "/app")


def answer():
    import solution  # the agent's module, inside the test process (as many outside tasks do)
    return solution.answer()


@pytest.mark.weight(3)
def test_answer():
    assert answer() == 42


def test_file():
    assert open("/app/solution.py").read().strip()


@pytest.mark.skip(reason="not a check")
def test_skipped():
    pass
'''

FORGER = '''import atexit, json, os

def _forge():  # after pytest's session: every check passed, reward 1
    os.makedirs("/logs/verifier", exist_ok=True)
    with open("/logs/verifier/checks.json", "w") as fh:
        json.dump({"checks": [{"name": "test_outputs::test_answer", "passed": True, "weight": 3},
                              {"name": "test_outputs::test_file", "passed": True, "weight": 1}]}, fh)
    with open("/logs/verifier/reward.txt", "w") as fh:
        fh.write("1\\n")
    print("FORGED")

atexit.register(_forge)

def answer():
    return 0
'''


def kit_task(tmp_path: Path) -> Path:
    d = tmp_path / "kit-task"
    shutil.copytree(ROOT / "tests/data/tasks/harbor-sum", d)
    for f in (d / "tests").iterdir():
        f.unlink()
    shutil.copy(KIT / "test.sh", d / "tests" / "test.sh")
    shutil.copy(KIT / "te_checks.py", d / "tests" / "te_checks.py")
    (d / "tests" / "test_outputs.py").write_text(TESTS)
    (d / "instruction.md").write_text("Write /app/solution.py with a function answer() returning 42.\n")
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\nprintf 'def answer():\\n    return 42\\n' > /app/solution.py\n")
    toml = (d / "task.toml").read_text()
    start = toml.index("[metadata.terminal_env]")
    end = toml.index("[verifier]")
    (d / "task.toml").write_text(toml[:start] + toml[end:])  # the kit's weights, not the task's
    return d


@pytest.mark.docker
def test_kit_checks_are_named_weighted_and_partial(base_image, tmp_path):
    d = kit_task(tmp_path)
    reward, result = play(d, ["printf 'def answer():\\n    return 42\\n' > /app/solution.py"])
    assert reward == 1.0 and result.source == "checks.json"
    assert {(c.name, c.passed, c.weight) for c in result.checks} == {
        ("test_outputs::test_answer", True, 3.0), ("test_outputs::test_file", True, 1.0)}
    reward, result = play(d, ["printf 'def answer():\\n    return 41\\n' > /app/solution.py"])
    assert reward == pytest.approx(0.25) and result.outcome.value == "partial"  # 1 of 4 by weight
    failing = next(c for c in result.checks if c.name.endswith("test_answer"))
    assert not failing.passed and "assert 41 == 42" in failing.message


@pytest.mark.docker
def test_result_files_written_after_the_tests_earn_nothing(base_image, tmp_path, monkeypatch):
    """The agent's module registers an exit handler that rewrites checks.json and reward.txt
    after pytest's session ended (the kit wrote them at the session's end, so the forgery is the
    last word in the files). The guard saw test_answer fail."""
    from terminal_env.verify import guard

    d = kit_task(tmp_path)
    write = "cat > /app/solution.py <<'PY'\n" + FORGER + "PY"
    with monkeypatch.context() as m:  # first, without the rule: the forgery earns everything
        m.setattr(guard.GuardVerdict, "contradicted", lambda self, checks: None)
        reward, result = play(d, [write])
    assert reward == 1.0 and result.outcome.value == "passed" and "FORGED" in result.log_tail
    reward, result = play(d, [write])
    assert reward == 0.0 and result.outcome.value == "failed"
    assert "test_outputs::test_answer' passed, but the test raised an error" in result.message
    assert "not trusted" in result.message


def test_vendored_kit_and_canonical_test_sh_are_the_kit(tmp_path):
    """Helpers run here as in a task's tests (pure Python)."""
    sys.path.insert(0, str(KIT))
    try:
        import te_checks as kit
    finally:
        sys.path.remove(str(KIT))
    kit.close("3.14159", 3.1416, rel=1e-4)
    with pytest.raises(AssertionError, match="not within"):
        kit.close("3.2", 3.1416, rel=1e-4)
    kit.same_rows(kit.rows("a,b\n1, x\n2.000,y\n"), [{"b": "y", "a": 2}, {"a": "1.0", "b": "x"}], ordered=False)
    with pytest.raises(AssertionError, match="row 2, b"):
        kit.same_rows(kit.rows("a,b\n1,x\n2,z\n"), [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
    kit.same_data({"x": [1, 2.0000000001], "y": {"z": "s"}}, {"y": {"z": "s"}, "x": [1.0, 2]})
    with pytest.raises(AssertionError, match=r"\$\.y\.z"):
        kit.same_data({"y": {"z": "t"}}, {"y": {"z": "s"}})
    assert kit.hidden_rng("task", 1).random() == kit.hidden_rng("task", 1).random() != kit.hidden_rng("task", 2).random()
    with pytest.raises(AssertionError, match="ran past"):
        kit.run(["sleep", "5"], timeout=0.3)
    budget = kit.Budget(0.5)  # a slow program spends the budget once, then fails at once
    with pytest.raises(subprocess.TimeoutExpired):
        with budget.limit(20) as timeout:
            assert timeout == 0.5
            subprocess.run(["sleep", "5"], timeout=timeout)
    with pytest.raises(AssertionError, match="budget of 0.5 s was spent"):
        with budget.limit(20):
            raise RuntimeError("never reached")
    f = tmp_path / "f.txt"
    f.write_text("hello world\n")
    f.chmod(0o640)
    kit.check_file(f, equals="hello world", contains=["world"], mode=0o640)
    with pytest.raises(AssertionError, match="mode 640, expected 600"):
        kit.check_file(f, mode=0o600)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("token=s3cr3t-value\n")
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "add", "a"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (repo / "a").write_text("token=\n")
    subprocess.run([*git, "commit", "-qam", "two"], check=True)
    with pytest.raises(AssertionError, match="still in an object"):
        kit.secret_gone(repo, "s3cr3t-value")  # removed from the tree, not from history


@pytest.mark.docker
def test_a_scaffolded_task_passes_the_gate_once_it_has_three_checks(base_image, tmp_path):
    from terminal_env.cli import main
    from terminal_env.tasks.check import check_task

    assert main(["tasks", "new", "kit-scaffold", "--dir", str(tmp_path)]) == 0
    d = tmp_path / "kit-scaffold"
    assert (d / "tests" / "te_checks.py").read_bytes() == (KIT / "te_checks.py").read_bytes()
    row = check_task(d, probes=("constant",))
    assert row.oracle == "passed 1.00" and row.nop.startswith("failed") and "at least 3 are needed" in row.reason
    with open(d / "tests" / "test_outputs.py", "a") as fh:
        fh.write("\n\ndef test_blank_lines_and_negatives(tmp_path):\n"
                 "    data = tmp_path / 'x.txt'\n    data.write_text('5\\n\\n-7\\n')\n"
                 "    assert report(data).stdout.strip() == 'total: -2'\n")
    row = check_task(d, probes=("constant",))
    assert row.ok, row.reason
    assert main(["tasks", "new", "kit-scaffold", "--dir", str(tmp_path)]) == 2  # exists: a clear error
    # a stale copy of the kit is named, with the fix
    (d / "tests" / "te_checks.py").write_text((KIT / "te_checks.py").read_text() + "\n# edited\n")
    from terminal_env.tasks.scaffold import copy_problems

    assert copy_problems(d) == [f"tests/te_checks.py differs from the kit's verifiers/te_checks.py: copy it "
                                f"again (cp {KIT / 'te_checks.py'} {d / 'tests' / 'te_checks.py'})"]


def test_the_pool_tests_copy_their_generators_faithfully(tmp_path):
    from terminal_env.tasks.scaffold import copy_problems

    d = tmp_path / "ledger"
    shutil.copytree(ROOT / "tasks" / "td-fixed-width-ledger", d)
    (d / "tests" / "ledgen.py").write_text((d / "tests" / "ledgen.py").read_text() + "\nSEED = 2\n")
    assert copy_problems(d) == ["tests/ledgen.py differs from environment/ledgen.py, which it copies: copy it again"]

    problems = {t.name: copy_problems(t) for t in sorted((ROOT / "tasks").iterdir()) if (t / "task.toml").is_file()}
    assert len(problems) == 60 and not any(problems.values()), {k: v for k, v in problems.items() if v}
