"""The examples (examples/*.py) as smoke tests: each runs as a user would run it, with its defaults,
in a subprocess from the repository's root; it must exit 0, print what it demonstrates, and leave
no container behind."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: example -> a line its output must hold when what it shows happened
EXAMPLES = {
    "gym_loop.py": "reward 1.0  outcome passed",
    "policy_gradient.py": "learned the solving command",
    "score_a_model.py": '"mean_at_3": 1.0',
    "agent_loop.py": "submitted, outcome passed, reward 1.0",
    "harness_plugin.py": "with the 'run-done' harness: submitted, outcome passed, reward 1.0",
    "rsr_pipeline.py": '"kind": "rsr-rendered"',
    "trl_grpo.py": "GRPO: 2 optimizer steps, 4 episodes verified",
    "skyrl_episode.py": "done: reward 1.0, outcome passed",
    "openenv_client.py": "done: True, reward 1.0, outcome passed",
    "miniswe_gateway.py": "calls recorded",  # and it exits 1 unless every call was token-exact
    "verifiers_eval.py": "vf-eval: 2 episodes",  # and it exits 1 unless every episode and call was sound
}
#: example -> the optional package it needs (its test skips, saying how to install, without it)
NEEDS = {"trl_grpo.py": ("trl", "pip install 'terminal-env[trl]'"),
         "skyrl_episode.py": ("skyrl_gym", "pip install 'terminal-env[skyrl]'"),
         "openenv_client.py": ("openenv", "pip install 'terminal-env[openenv]'"),
         "miniswe_gateway.py": ("minisweagent", "pip install 'terminal-env[miniswe]'"),
         # a path: the verifiers package lives in a virtual environment of its own
         "verifiers_eval.py": (".venv-verifiers/bin/vf-eval", "bash scripts/setup.sh")}


def _missing(need: str) -> bool:
    if "/" in need:
        return not (ROOT / need).exists()
    return importlib.util.find_spec(need) is None  # found, not imported
#: each finishes in well under a minute on 2 cores; the margin is for a first build of a task image
TIMEOUT = 300


def test_every_example_is_tested():
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py")) == sorted(EXAMPLES)


#: examples whose run is left to ``-m slow``: the default run has a test of the same path
SLOW = {"verifiers_eval.py": "tests/test_integrations_verifiers.py runs vf-eval the same way"}


@pytest.mark.docker
@pytest.mark.parametrize("example", [pytest.param(e, marks=pytest.mark.slow) if e in SLOW else e
                                     for e in sorted(EXAMPLES)])
def test_example_runs(example, client, base_image, tmp_path):
    if example in NEEDS and _missing(NEEDS[example][0]):
        pytest.skip(f"{example} needs {NEEDS[example][1]}")
    # the checkout's terminal_env, as the tests use it (pytest's pythonpath is not inherited)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    # mini-swe-agent keeps its settings in the user's config folder: the test's, here
    env = {**os.environ, "PYTHONPATH": path, "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mswea")}
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / example)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()  # its containers go with it: the check below, or `terminal-env gc`, finds them
        out, err = proc.communicate()
        pytest.fail(f"{example} ran past {TIMEOUT} s\n{out[-3000:]}\n{err[-3000:]}")
    assert proc.returncode == 0, f"{example} exited {proc.returncode}\n{out[-3000:]}\n{err[-3000:]}"
    assert EXAMPLES[example] in out, out[-3000:]
    # Every container an example makes carries its process's id; none may outlive it.
    left = client.containers.list(all=True, filters={
        "label": ["terminal-env.managed", f"terminal-env.owner-pid={proc.pid}"]})
    for c in left:
        c.remove(force=True)
    assert not left, f"{example} left containers behind: {[c.name for c in left]}"
