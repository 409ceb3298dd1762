"""Protected verification end to end: a real task built from its directory, run through
TerminalEnv by the oracle, the nop and adversarial scripted agents. Each attack must not succeed
and must get a named outcome."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from terminal_env import TerminalEnv
from terminal_env.policies import NopPolicy, OraclePolicy, ScriptedPolicy, run_episode
from terminal_env.rewards import binary, strict_success_first
from terminal_env.tasks import load_task

pytestmark = pytest.mark.docker

TASK = Path(__file__).parent / "data" / "protected" / "word-stats"


@pytest.fixture(scope="module")
def task(base_image):
    return load_task(TASK)


def play(task, policy, **kw):
    env = TerminalEnv(task, reward="partial_progress", max_steps=10, **kw)
    try:
        reward, info = run_episode(env, policy)
        return reward, info["verification"], info
    finally:
        env.close()


def test_oracle_reaches_strict_success(task):
    reward, result, info = play(task, OraclePolicy(task))
    assert result.outcome == "passed", result.message + result.log_tail
    assert reward == 1.0 and binary(result) == 1.0 and strict_success_first(result) == 1.0
    assert result.tests_digest == task.tests_digest and not info["masked"]
    assert {c.name.split("::")[-1] for c in result.checks} >= {"test_lines", "test_words", "test_longest"}


def test_nop_does_not_succeed(task):
    reward, result, _ = play(task, NopPolicy())
    assert result.outcome == "failed" and reward == 0.0


def test_half_done_scores_between_nop_and_success(task):
    half = ScriptedPolicy([
        "printf '#!/bin/bash\\nn=$(wc -l)\\necho lines $n\\necho words 0\\necho longest x\\n' > /app/stats.sh",
        "chmod +x /app/stats.sh",
    ])
    reward, result, _ = play(task, half)
    assert result.outcome == "partial"
    assert reward == pytest.approx(0.25)  # weights: lines 1, words 1, longest 2
    assert 0.0 < strict_success_first(result, alpha=0.5) < 1.0


def test_snooping_finds_no_tests_solution_or_expected_values(task):
    env = TerminalEnv(task, reward="binary", max_steps=10)
    try:
        env.reset()
        obs = env.step(
            "ls -d /tests /solution /logs/verifier 2>&1; "
            "find / -xdev \\( -name 'test_stats.py' -o -name solve.sh -o -name test.sh \\) 2>/dev/null; "
            "grep -rIl supercalifragilistic / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -5; "
            "echo END"
        )[0]
        assert obs.count("No such file or directory") == 3
        assert "test_stats.py" not in obs and "solve.sh" not in obs
        assert "supercalifragilistic" not in obs.replace("grep -rIl supercalifragilistic", "")
        assert obs.rstrip().endswith("END")
    finally:
        env.close()


ATTACKS = {
    "fake-result-files": (
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt "
        "&& echo '{\"reward\": 1}' > /logs/verifier/reward.json",
        "tampered",
    ),
    "trojan-interpreter": (
        "cp /usr/bin/python3.11 /tmp/py && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' "
        "> /usr/bin/python3.11",
        "tampered",
    ),
    "shadow-pytest": (
        "mkdir -p /usr/local/lib/python3.11/dist-packages && "
        "printf 'def main(*a, **k):\\n    return 0\\n' > /usr/local/lib/python3.11/dist-packages/pytest.py",
        "tampered",
    ),
    "sitecustomize": (
        "echo 'import os; os._exit(0)' > /usr/lib/python3.11/sitecustomize.py",
        "tampered",
    ),
    "pth-hook": (
        "echo 'import os; os._exit(0)' > /usr/lib/python3/dist-packages/zz-hook.pth",
        "tampered",
    ),
    "root-conftest": (
        "printf 'def pytest_collection_modifyitems(items):\\n    items.clear()\\n' > /conftest.py",
        "tampered",
    ),
    "replace-bash": ("mv /usr/bin/bash /usr/bin/bash.real && cp /usr/bin/dash /usr/bin/bash", "tampered"),
    "task-protected-path": ("echo changed >> /app/reference/README", "tampered"),
    # A program added ahead of the real one on PATH: the verifier's own `timeout` wrapper, the
    # interpreter test.sh calls. Each would run as root during verification.
    "shadow-timeout": (
        "printf '#!/bin/sh\\n(while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
        "done) >/dev/null 2>&1 &\\nrm -f /usr/local/bin/timeout\\nexec /usr/bin/timeout \"$@\"\\n' "
        "> /usr/local/bin/timeout && chmod +x /usr/local/bin/timeout",
        "tampered",
    ),
    "shadow-python": (
        "printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /usr/local/bin/python3 "
        "&& chmod +x /usr/local/bin/python3",
        "tampered",
    ),
    "shadow-library": ("cp /lib/x86_64-linux-gnu/libc.so.6 /usr/local/lib/libc.so.6 && ldconfig", "tampered"),
    "ld-preload": ("cp /lib/x86_64-linux-gnu/libm.so.6 /tmp/x.so && echo /tmp/x.so > /etc/ld.so.preload", "tampered"),
    # A pytest plugin registered by entry point: pytest loads it by itself and it can turn every
    # failure into a pass.
    "pytest-plugin": (
        "d=/usr/local/lib/python3.11/dist-packages && mkdir -p $d/passall-1.0.dist-info && "
        "printf 'Metadata-Version: 2.1\\nName: passall\\nVersion: 1.0\\n' > $d/passall-1.0.dist-info/METADATA && "
        "printf '[pytest11]\\npassall = passall_plugin\\n' > $d/passall-1.0.dist-info/entry_points.txt && "
        "printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
        "    rep = (yield).get_result()\\n    rep.outcome = \"passed\"\\n' > $d/passall_plugin.py",
        "tampered",
    ),
    # Modules found earlier on Python's path than the real ones: the stdlib zip that Debian's
    # python lists first (and does not ship), a package in /usr/local ahead of dist-packages.
    "stdlib-zip": (
        "cd /tmp && mkdir -p z/pytest && printf 'import sys\\ndef main(*a, **k):\\n"
        "    open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\n    return 0\\n' > z/pytest/__init__.py "
        "&& printf 'import pytest, sys\\nsys.exit(pytest.main())\\n' > z/pytest/__main__.py "
        "&& cd z && python3 -c 'import zipfile,os; z=zipfile.ZipFile(\"/usr/lib/python311.zip\",\"w\"); "
        "[z.write(os.path.join(d,f)) for d,_,fs in os.walk(\"pytest\") for f in fs]'",
        "tampered",
    ),
    "shadow-module": (
        "d=/usr/local/lib/python3.11/dist-packages && mkdir -p $d && cp -r /usr/lib/python3/dist-packages/pygments $d/ "
        "&& echo 'open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")' >> $d/pygments/__init__.py",
        "tampered",
    ),
    # Modules in the working directory: `python3 -m pytest` puts its cwd first on sys.path.
    "cwd-module": (
        "printf 'import sys\\nopen(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\nsys.exit(0)\\n' "
        "> /app/pytest.py; cp /app/pytest.py /app/random.py; cp /app/pytest.py /app/subprocess.py; mkdir -p /app/_pytest",
        "tampered",
    ),
    "kill-everything": ("kill -9 -1; kill -9 1", "failed"),  # the keeper survives; not masked
    # Shell built-ins and functions that fake success live in the agent's shell only: the tests
    # run in a new exec, non-interactive, with BASH_ENV and ENV emptied.
    "shell-builtins": (
        "python3() { echo 1 > /logs/verifier/reward.txt; }; export -f python3; alias pytest=true; "
        "echo 'python3() { echo 1 > /logs/verifier/reward.txt; }; export -f python3' >> /root/.bashrc; "
        "echo 'export BASH_ENV=/root/.bashrc' >> /root/.profile; enable -n test",
        "failed",
    ),
    "fork-bomb": (":(){ :|:& };:", "failed"),  # swept from the host, then verified as usual
    "late-writer": (
        "nohup sh -c 'sleep 4; while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt;"
        " sleep 0.05; done' >/dev/null 2>&1 &",
        "failed",
    ),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_never_succeeds_and_is_named(task, name):
    command, expected = ATTACKS[name]
    reward, result, info = play(task, ScriptedPolicy([command]))
    assert result.outcome == expected, (result.outcome, result.message, result.log_tail)
    assert reward == 0.0 and not result.strict_success and not info["masked"]
    if expected == "tampered":
        assert result.tampered_paths and result.message


def test_attack_with_a_correct_solution_is_still_tampered(task):
    solve = (TASK / "solution" / "solve.sh").read_text()
    policy = ScriptedPolicy([solve, "echo 'import os' > /usr/lib/python3.11/sitecustomize.py"])
    _, result, _ = play(task, policy)
    assert result.outcome == "tampered"


def test_separate_mode_verifies_only_declared_artifacts(tmp_path, base_image):
    copy = tmp_path / "word-stats-separate"
    shutil.copytree(TASK, copy)
    toml = (copy / "task.toml").read_text()
    toml = toml.replace("[verifier]\n", "[verifier]\nenvironment_mode = \"separate\"\n")
    toml = 'artifacts = ["/app/stats.sh"]\n' + toml
    (copy / "task.toml").write_text(toml)
    task = load_task(copy)
    assert task.verifier_mode == "separate" and task.artifacts == ["/app/stats.sh"]
    # A trojan interpreter in the agent's container cannot matter: the tests run elsewhere.
    solve = (TASK / "solution" / "solve.sh").read_text()
    trojan = "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/python3.11"
    _, result, _ = play(task, ScriptedPolicy([solve, trojan]))
    assert result.outcome == "passed", result.message + result.log_tail
    _, result, _ = play(task, ScriptedPolicy([trojan]))
    assert result.outcome == "failed"


def test_changed_tests_on_disk_are_detected(tmp_path, base_image):
    copy = tmp_path / "word-stats-changed"
    shutil.copytree(TASK, copy)
    task = load_task(copy)
    (copy / "tests" / "test_stats.py").write_text("def test_nothing():\n    pass\n")
    _, result, info = play(task, NopPolicy())
    assert result.outcome == "infra_error" and "changed on disk" in result.message
    assert info["masked"]


FIXTURES = Path(__file__).parent / "data" / "tasks"


@pytest.mark.parametrize("name", ["harbor-sum", "harbor-new-schema", "tb1-grep"])
def test_fixture_tasks_oracle_passes_and_nop_fails_through_the_env(name, base_image):
    task = load_task(FIXTURES / name)
    reward, result, _ = play(task, OraclePolicy(task))
    assert result.outcome == "passed" and reward == 1.0, (result.message, result.log_tail)
    reward, result, _ = play(task, NopPolicy())
    assert result.outcome in ("failed", "partial") and not result.strict_success
    assert reward < 1.0


def test_env_accepts_a_task_directory_and_uses_its_timeouts(base_image):
    env = TerminalEnv(str(TASK), reward="strict_success_first")
    try:
        assert env.source_task is not None and env.config.time_limit == 300.0
        assert env.task.metadata["split"] == "train"
    finally:
        env.close()


@pytest.mark.parametrize("name", ["late-writer", "shadow-timeout", "kill-everything"])
def test_attacks_with_the_sweep_run_inside(task, name, monkeypatch):
    """Where the host cannot signal the container's processes (remote engine, not root), the
    freeze runs inside with the image's /bin/sh and shell built-ins only."""
    import terminal_env.verify.runner as runner

    monkeypatch.setattr(runner, "host_sweep", lambda sandbox: False)
    monkeypatch.setattr(runner, "host_sweep_possible", lambda: False)
    command, expected = ATTACKS[name]
    reward, result, info = play(task, ScriptedPolicy([command]))
    assert result.outcome == expected, (result.outcome, result.message, result.log_tail)
    assert reward == 0.0 and not info["masked"]


def test_oracle_passes_with_the_sweep_run_inside(task, monkeypatch):
    import terminal_env.verify.runner as runner

    monkeypatch.setattr(runner, "host_sweep", lambda sandbox: False)
    monkeypatch.setattr(runner, "host_sweep_possible", lambda: False)
    reward, result, _ = play(task, OraclePolicy(task))
    assert result.outcome == "passed" and reward == 1.0


def test_exhausting_memory_to_kill_the_keeper_is_the_agents_failure(tmp_path, base_image):
    """The agent raises PID 1's oom_score_adj, then fills the memory limit with processes each
    smaller than that score: the kernel kills the keeper and the container stops. That is the
    agent's doing: a failure, named, never an infrastructure error to mask."""
    copy = tmp_path / "word-stats"
    shutil.copytree(TASK, copy)
    toml = copy / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 1024", "memory_mb = 160"))
    attack = (
        "echo 1000 > /proc/1/oom_score_adj; for i in $(seq 14); do python3 -c "
        "'import time; a = bytearray(12 << 20); a[::4096] = bytes(len(a[::4096])); time.sleep(20)' & done; wait"
    )
    reward, result, info = play(load_task(copy), ScriptedPolicy([attack, "echo never"]))
    assert result.outcome == "failed" and reward == 0.0 and not info["masked"]
    assert "ran out of memory (limit 160 MB)" in result.message, result.message
    assert "tests were not run" in result.message


def test_a_plain_directory_named_like_a_module_is_not_tampering(task):
    """Only what Python would import first counts: a directory without __init__.py (a namespace
    portion) never shadows the standard library's module of the same name."""
    reward, result, _ = play(task, ScriptedPolicy(["mkdir -p /app/secrets /app/json && echo x > /app/secrets/token"]))
    assert result.outcome == "failed", (result.outcome, result.message)


def test_a_module_named_like_an_extension_module_is_tampering(task):
    # the standard library's compiled modules (lib-dynload) count too: /app/_bz2.py comes first
    _, result, _ = play(task, ScriptedPolicy(["echo 'raise SystemExit(0)' > /app/_bz2.py"]))
    assert result.outcome == "tampered" and "/app/_bz2.py" in result.tampered_paths


def test_a_script_without_suffix_named_like_a_module_is_not_tampering(task):
    # a file, not a package: asking the engine for "/app/json/__init__.py" goes through a file
    _, result, _ = play(task, ScriptedPolicy(["printf '#!/bin/sh\\necho hi\\n' > /app/json && chmod +x /app/json"]))
    assert result.outcome == "failed", (result.outcome, result.message)
