"""Protected verification end to end: a real task built from its directory, run through
TerminalEnv by the oracle, the nop and adversarial scripted agents. Each attack must not succeed
and must get a named outcome."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from terminal_env import TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.models.simple import NopBackend, OracleBackend, ScriptedBackend
from terminal_env.rewards import binary, strict_success_first
from terminal_env.sandbox.sweep import cgroup_pids
from terminal_env.tasks import load_task

pytestmark = pytest.mark.docker

TASK = Path(__file__).parent / "data" / "protected" / "word-stats"


def under(task, runtime: str):
    """The task, its sandboxes run under ``runtime``."""
    return task.model_copy(update={"runtime": runtime})


@pytest.fixture(scope="module")
def task(base_image, runtime):
    """The protected test task; every test that uses it runs under runc and under runsc."""
    return under(load_task(TASK), runtime)


def play(task, agent, on_step=None, **kw):
    env = TerminalEnv(task, reward="partial_progress", max_steps=10, **kw)
    try:
        reward, info = run_episode(env, agent, on_step=on_step)
        return reward, info["verification"], info
    finally:
        env.close()


def test_oracle_reaches_strict_success(task):
    reward, result, info = play(task, OracleBackend())
    assert result.outcome == "passed", result.message + result.log_tail
    assert reward == 1.0 and binary(result) == 1.0 and strict_success_first(result) == 1.0
    assert result.tests_digest == task.tests_digest and not info["masked"]
    assert {c.name.split("::")[-1] for c in result.checks} >= {"test_lines", "test_words", "test_longest"}


def test_nop_does_not_succeed(task):
    reward, result, _ = play(task, NopBackend())
    assert result.outcome == "failed" and reward == 0.0


def test_half_done_scores_between_nop_and_success(task):
    half = ScriptedBackend.of_actions([
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


@dataclass(frozen=True)
class Attack:
    """An adversarial agent's one command, what the verifier must call it, and a proof that the
    attack really took place. ``proof`` runs in the sandbox after the attack and before the
    verifier, with ``/bin/sh`` by absolute path and builtins only (the attacks replace bash,
    ``timeout``, ``python3``...), and must exit 0: an attack that silently did nothing (a package
    missing from this image, a typo) fails the test instead of passing it. The attack's command must
    exit 0 as well; where nothing is left to look at afterwards (``proof=None``), the command checks
    its own effect and that exit code is the proof.

    ``under`` gives, per OCI runtime, a different ending that proves the same: ``("refused",
    text)``, the runtime refuses the attack outright (its command fails showing ``text``) and the
    episode is the agent's plain failure; ``("stopped", text)``, the attack stopped the sandbox
    and the environment named it (``text`` in the step's notes) as the agent's failure."""

    command: str
    expected: str
    proof: str | Callable[[Any], tuple[bool, str]] | None
    under: dict[str, tuple[str, str]] = field(default_factory=dict)


def _runsc_processes(container_id: str) -> list[int] | None:
    """The pids of a gVisor sandbox's processes, as its own kernel lists them (``runsc ps``)."""
    for root in ("/var/run/docker/runtime-runc/moby", "/run/docker/runtime-runsc/moby"):
        done = subprocess.run(["runsc", "--root", root, "ps", "--format", "json", container_id],
                              capture_output=True, text=True, timeout=30)
        if done.returncode == 0:
            return [int(p) for p in json.loads(done.stdout) or []]  # a list of pids
    return None


def _many_processes(sandbox, n: int, wait: float = 10.0) -> tuple[bool, str]:
    """Whether the sandbox holds at least ``n`` processes within ``wait`` seconds: its cgroup's
    under runc, gVisor's own list under runsc."""
    deadline = time.monotonic() + wait
    where = "the container's cgroup" if sandbox.runtime.host_processes else "runsc ps"
    while True:
        pids = cgroup_pids(sandbox.id) if sandbox.runtime.host_processes else _runsc_processes(sandbox.id)
        assert pids is not None, f"{where} cannot be read from here (root is needed)"
        if len(pids) >= n or time.monotonic() > deadline:
            return len(pids) >= n, f"{len(pids)} processes in {where}"
        time.sleep(0.05)


PY_SPEC = "/usr/bin/python3.11 -I -c 'import importlib.util as u, sys; o = u.find_spec(sys.argv[1]).origin; sys.exit(not o.startswith(sys.argv[2]))'"
DIST = "/usr/local/lib/python3.11/dist-packages"

ATTACKS = {
    "fake-result-files": Attack(
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt "
        "&& echo '{\"reward\": 1}' > /logs/verifier/reward.json",
        "tampered",
        "read r < /logs/verifier/reward.txt && [ \"$r\" = 1 ] && [ -s /logs/verifier/reward.json ]",
    ),
    "trojan-interpreter": Attack(
        "cp /usr/bin/python3.11 /tmp/py && printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' "
        "> /usr/bin/python3.11",
        "tampered",
        "read l < /usr/bin/python3.11 && [ \"$l\" = '#!/bin/sh' ]",
    ),
    "shadow-pytest": Attack(
        f"mkdir -p {DIST} && printf 'def main(*a, **k):\\n    return 0\\n' > {DIST}/pytest.py",
        "tampered",
        f"{PY_SPEC} pytest {DIST}/pytest.py",
    ),
    "sitecustomize": Attack(
        "echo 'import os; os._exit(0)' > /usr/lib/python3.11/sitecustomize.py",
        "tampered",
        "[ -s /usr/lib/python3.11/sitecustomize.py ]",
    ),
    "pth-hook": Attack(
        "echo 'import os; os._exit(0)' > /usr/lib/python3/dist-packages/zz-hook.pth",
        "tampered",
        "[ -s /usr/lib/python3/dist-packages/zz-hook.pth ]",
    ),
    "root-conftest": Attack(
        "printf 'def pytest_collection_modifyitems(items):\\n    items.clear()\\n' > /conftest.py",
        "tampered",
        "[ -s /conftest.py ]",
    ),
    "replace-bash": Attack(
        "mv /usr/bin/bash /usr/bin/bash.real && cp /usr/bin/dash /usr/bin/bash",
        "tampered",
        "[ -x /usr/bin/bash.real ] && /usr/bin/cmp -s /usr/bin/bash /usr/bin/dash",
    ),
    "task-protected-path": Attack(
        "echo changed >> /app/reference/README", "tampered", "/bin/grep -q changed /app/reference/README"
    ),
    # A program added ahead of the real one on PATH: the verifier's own `timeout` wrapper, the
    # interpreter test.sh calls. Each would run as root during verification.
    "shadow-timeout": Attack(
        "printf '#!/bin/sh\\n(while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
        "done) >/dev/null 2>&1 &\\nrm -f /usr/local/bin/timeout\\nexec /usr/bin/timeout \"$@\"\\n' "
        "> /usr/local/bin/timeout && chmod +x /usr/local/bin/timeout",
        "tampered",
        "[ -x /usr/local/bin/timeout ]",
    ),
    "shadow-python": Attack(
        "printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /usr/local/bin/python3 "
        "&& chmod +x /usr/local/bin/python3",
        "tampered",
        "[ -x /usr/local/bin/python3 ]",
    ),
    "shadow-library": Attack(
        "cp /lib/x86_64-linux-gnu/libc.so.6 /usr/local/lib/libc.so.6 && ldconfig",
        "tampered",
        "/sbin/ldconfig -p | /bin/grep -q ' => /usr/local/lib/libc.so.6$'",
    ),
    "ld-preload": Attack(
        "cp /lib/x86_64-linux-gnu/libm.so.6 /tmp/x.so && echo /tmp/x.so > /etc/ld.so.preload",
        "tampered",
        "read p < /etc/ld.so.preload && [ \"$p\" = /tmp/x.so ] && [ -s /tmp/x.so ]",
        # gVisor's sandboxes get a read-only /etc/ld.so.preload of ours (the statx fix)
        under={"runsc": ("refused", "/etc/ld.so.preload: Read-only file system")},
    ),
    # A pytest plugin registered by entry point: pytest loads it by itself and it can turn every
    # failure into a pass.
    "pytest-plugin": Attack(
        f"d={DIST} && mkdir -p $d/passall-1.0.dist-info && "
        "printf 'Metadata-Version: 2.1\\nName: passall\\nVersion: 1.0\\n' > $d/passall-1.0.dist-info/METADATA && "
        "printf '[pytest11]\\npassall = passall_plugin\\n' > $d/passall-1.0.dist-info/entry_points.txt && "
        "printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
        "    rep = (yield).get_result()\\n    rep.outcome = \"passed\"\\n' > $d/passall_plugin.py",
        "tampered",
        "/usr/bin/python3.11 -c 'import importlib.metadata as m, sys; "
        "sys.exit(\"passall\" not in {e.name for e in m.entry_points(group=\"pytest11\")})'",
    ),
    # Modules found earlier on Python's path than the real ones: the stdlib zip that Debian's
    # python lists first (and does not ship), a package in /usr/local ahead of dist-packages.
    "stdlib-zip": Attack(
        "cd /tmp && mkdir -p z/pytest && printf 'import sys\\ndef main(*a, **k):\\n"
        "    open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\n    return 0\\n' > z/pytest/__init__.py "
        "&& printf 'import pytest, sys\\nsys.exit(pytest.main())\\n' > z/pytest/__main__.py "
        "&& cd z && python3 -c 'import zipfile,os; z=zipfile.ZipFile(\"/usr/lib/python311.zip\",\"w\"); "
        "[z.write(os.path.join(d,f)) for d,_,fs in os.walk(\"pytest\") for f in fs]'",
        "tampered",
        f"{PY_SPEC} pytest /usr/lib/python311.zip/",
    ),
    # pluggy, not an arbitrary package: pytest imports it on every run, and python3-pytest depends
    # on it, so it is in the image whichever way the image was made (pygments, for one, is only
    # in an image made from the host's packages).
    "shadow-module": Attack(
        f"d={DIST} && mkdir -p $d && cp -r /usr/lib/python3/dist-packages/pluggy $d/ "
        "&& echo 'open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")' >> $d/pluggy/__init__.py",
        "tampered",
        f"{PY_SPEC} pluggy {DIST}/pluggy/",
    ),
    # Modules in the working directory: `python3 -m pytest` puts its cwd first on sys.path.
    "cwd-module": Attack(
        "printf 'import sys\\nopen(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\nsys.exit(0)\\n' "
        "> /app/pytest.py && cp /app/pytest.py /app/random.py && cp /app/pytest.py /app/subprocess.py "
        "&& mkdir -p /app/_pytest",
        "tampered",
        f"cd /app && {PY_SPEC.replace(' -I ', ' -s ')} pytest /app/pytest.py",
    ),
    # Every process the agent can signal, and PID 1 (the keeper): the keeper survives, the episode
    # is the agent's failure, not masked. A sleeper first, so that `kill -1` has a victim to prove
    # it ran (with only the keeper and the agent's shell, it signals nothing at all).
    "kill-everything": Attack(
        "sleep 300 & kill -9 -1; wait $!; [ $? -eq 137 ] && kill -9 1", "failed", None,
        # gVisor delivers the SIGKILL to PID 1: the container stops, and that is named the agent's
        under={"runsc": ("stopped", "killed from inside the sandbox")},
    ),
    # Shell built-ins and functions that fake success live in the agent's shell only: the tests
    # run in a new exec, non-interactive, with BASH_ENV and ENV emptied.
    "shell-builtins": Attack(
        "python3() { echo 1 > /logs/verifier/reward.txt; }; export -f python3; alias pytest=true; "
        "echo 'python3() { echo 1 > /logs/verifier/reward.txt; }; export -f python3' >> /root/.bashrc; "
        "echo 'export BASH_ENV=/root/.bashrc' >> /root/.profile; enable -n test; "
        "[ \"$(type -t python3)\" = function ] && [ \"$(type -t test)\" = file ]",
        "failed",
        "/bin/grep -q 'export -f python3' /root/.bashrc && /bin/grep -q BASH_ENV /root/.profile",
    ),
    # swept from the host, then verified as usual; the proof counts the bomb's processes from the
    # host (inside, the bomb leaves no pid to run a proof with)
    "fork-bomb": Attack(":(){ :|:& };:", "failed", lambda sandbox: _many_processes(sandbox, 100)),
    "late-writer": Attack(
        "nohup sh -c 'sleep 4; while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt;"
        " sleep 0.05; done' >/dev/null 2>&1 &",
        "failed",
        "/usr/bin/pgrep -f 'echo 1 > /logs/verifier/reward.txt' >/dev/null",
    ),
    # the same for Harbor's several metrics: a reward.json with the reward and a metric of its own
    "late-metrics-writer": Attack(
        "nohup sh -c 'sleep 4; while :; do mkdir -p /logs/verifier; echo \"{\\\"reward\\\": 1, "
        "\\\"stolen\\\": 1}\" > /logs/verifier/reward.json; sleep 0.05; done' >/dev/null 2>&1 &",
        "failed",
        "/usr/bin/pgrep -f 'stolen' >/dev/null",
    ),
}


class AttackWitness:
    """Watches a scripted agent play the attack; right after the attack's step, before the
    submit, proves that it took place (see :class:`Attack`)."""

    def __init__(self, attack: Attack):
        self.attack = attack
        self.env: Any = None
        self.attack_info: dict[str, Any] | None = None
        self.proof: Any = None
        self.observation = ""
        self.runtime = ""

    def on_step(self, action: Any, observation: str, info: dict[str, Any]) -> None:
        if self.attack_info is not None:
            return
        self.attack_info = dict(info)  # the attack's step has just been played
        self.observation = observation
        self.runtime = self.env.sandbox.runtime.name
        if self.ending() is not None:
            return
        proof = self.attack.proof
        if callable(proof):
            self.proof = proof(self.env.sandbox)
        elif proof is not None:
            res = self.env.sandbox.exec(["/bin/sh", "-c", proof], timeout=None)
            self.proof = (res.exit_code == 0, f"exit {res.exit_code}: {res.output!r}")

    def ending(self) -> tuple[str, str] | None:
        """The runtime's own ending of this attack (see :class:`Attack`), if it has one."""
        return self.attack.under.get(self.runtime)

    def expected(self) -> str:
        ending = self.ending()
        return "failed" if ending is not None else self.attack.expected

    def assert_attack_happened(self, result: Any) -> None:
        info = self.attack_info
        assert info is not None, "the attack's step was never played"
        ending = self.ending()
        if ending is not None:
            kind, text = ending
            if kind == "refused":
                assert info.get("exit_code") not in (0, None) and text in self.observation, (self.observation, info)
            else:  # named in the step, or by the verifier if the stop came after the step
                named = any(text in note for note in info.get("notes", []))
                assert named or text in result.message, (info, result.message)
            return
        assert info.get("exit_code") == 0, f"the attack's command failed: {info}"
        if self.attack.proof is not None:
            ok, detail = self.proof
            assert ok, f"the attack did not take place ({self.attack.proof!r}: {detail}); step: {info}"


def play_attack(task, name):
    witness = AttackWitness(ATTACKS[name])
    env = TerminalEnv(task, reward="partial_progress", max_steps=10)
    witness.env = env
    try:
        reward, info = run_episode(env, ScriptedBackend.of_actions([ATTACKS[name].command]), on_step=witness.on_step)
    finally:
        env.close()
    result = info["verification"]
    witness.assert_attack_happened(result)
    assert result.outcome == witness.expected(), (result.outcome, result.message, result.log_tail)
    assert reward == 0.0 and not info["masked"]
    return result


def test_a_late_writer_of_reward_json_adds_no_metric(task):
    result = play_attack(task, "late-metrics-writer")
    assert "stolen" not in result.metrics and result.metrics.get("reward", 0.0) == 0.0, result.metrics


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_never_succeeds_and_is_named(task, name):
    result = play_attack(task, name)
    assert not result.strict_success
    if result.outcome == "tampered":
        assert result.tampered_paths and result.message


def test_attack_with_a_correct_solution_is_still_tampered(task):
    solve = (TASK / "solution" / "solve.sh").read_text()
    agent = ScriptedBackend.of_actions([solve, "echo 'import os' > /usr/lib/python3.11/sitecustomize.py"])
    _, result, _ = play(task, agent)
    assert result.outcome == "tampered"


def test_separate_mode_verifies_only_declared_artifacts(tmp_path, base_image, runtime):
    copy = tmp_path / "word-stats-separate"
    shutil.copytree(TASK, copy)
    toml = (copy / "task.toml").read_text()
    toml = toml.replace("[verifier]\n", "[verifier]\nenvironment_mode = \"separate\"\n")
    # the files handed to the separate verifier (Harbor's top-level artifacts are refused here)
    toml = toml.replace("[metadata.terminal_env]\n", '[metadata.terminal_env]\nartifacts = ["/app/stats.sh"]\n')
    (copy / "task.toml").write_text(toml)
    task = under(load_task(copy), runtime)
    assert task.verifier_mode == "separate" and task.artifacts == ["/app/stats.sh"]
    # A trojan interpreter in the agent's container cannot matter: the tests run elsewhere.
    solve = (TASK / "solution" / "solve.sh").read_text()
    trojan = "printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/python3.11"
    _, result, _ = play(task, ScriptedBackend.of_actions([solve, trojan]))
    assert result.outcome == "passed", result.message + result.log_tail
    _, result, _ = play(task, ScriptedBackend.of_actions([trojan]))
    assert result.outcome == "failed"


def test_changed_tests_on_disk_are_detected(tmp_path, base_image):
    copy = tmp_path / "word-stats-changed"
    shutil.copytree(TASK, copy)
    task = load_task(copy)
    (copy / "tests" / "test_stats.py").write_text("def test_nothing():\n    pass\n")
    _, result, info = play(task, NopBackend())
    assert result.outcome == "infra_error" and "changed on disk" in result.message
    assert info["masked"]


FIXTURES = Path(__file__).parent / "data" / "tasks"


@pytest.mark.parametrize("name", ["harbor-sum", "harbor-new-schema", "tb1-grep"])
def test_fixture_tasks_oracle_passes_and_nop_fails_through_the_env(name, base_image, runtime):
    task = under(load_task(FIXTURES / name), runtime)
    reward, result, _ = play(task, OracleBackend())
    assert result.outcome == "passed" and reward == 1.0, (result.message, result.log_tail)
    reward, result, _ = play(task, NopBackend())
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
    import terminal_env.sandbox.sweep as sweep

    monkeypatch.setattr(sweep, "host_sweep_possible", lambda: False)
    play_attack(task, name)


def test_oracle_passes_with_the_sweep_run_inside(task, monkeypatch):
    import terminal_env.sandbox.sweep as sweep

    monkeypatch.setattr(sweep, "host_sweep_possible", lambda: False)
    reward, result, _ = play(task, OracleBackend())
    assert result.outcome == "passed" and reward == 1.0


def test_exhausting_memory_to_kill_the_keeper_is_the_agents_failure(tmp_path, base_image, runtime):
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
    reward, result, info = play(under(load_task(copy), runtime), ScriptedBackend.of_actions([attack, "echo never"]))
    assert result.outcome == "failed" and reward == 0.0 and not info["masked"]
    assert "ran out of memory (limit 160 MB)" in result.message, result.message
    assert "tests were not run" in result.message


def test_a_plain_directory_named_like_a_module_is_not_tampering(task):
    """Only what Python would import first counts: a directory without __init__.py (a namespace
    portion) never shadows the standard library's module of the same name."""
    reward, result, _ = play(task, ScriptedBackend.of_actions(["mkdir -p /app/secrets /app/json && echo x > /app/secrets/token"]))
    assert result.outcome == "failed", (result.outcome, result.message)


def test_a_module_named_like_an_extension_module_is_tampering(task):
    # the standard library's compiled modules (lib-dynload) count too: /app/_bz2.py comes first
    _, result, _ = play(task, ScriptedBackend.of_actions(["echo 'raise SystemExit(0)' > /app/_bz2.py"]))
    assert result.outcome == "tampered" and "/app/_bz2.py" in result.tampered_paths


def test_a_script_without_suffix_named_like_a_module_is_not_tampering(task):
    # a file, not a package: asking the engine for "/app/json/__init__.py" goes through a file
    _, result, _ = play(task, ScriptedBackend.of_actions(["printf '#!/bin/sh\\necho hi\\n' > /app/json && chmod +x /app/json"]))
    assert result.outcome == "failed", (result.outcome, result.message)
