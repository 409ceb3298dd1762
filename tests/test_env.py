"""TerminalEnv: the Gymnasium contract against a real container."""

from __future__ import annotations

import gc
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import terminal_env
from terminal_env import Command, Keys, Submit, TaskSpec, TerminalEnv
from terminal_env.errors import ConfigError, SandboxGoneError

pytestmark = pytest.mark.docker


@pytest.fixture
def env(base_image):
    e = TerminalEnv(max_steps=10, render_mode="ansi")
    yield e
    e.close()


def test_check_env_passes_with_no_warning(base_image):
    gc.collect()  # garbage of earlier tests (e.g. clients of an unreachable engine) is not ours
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        e = gym.make("terminal_env:TerminalEnv-v0", max_steps=5)
        check_env(e.unwrapped)
        e.close()
    assert [str(w.message) for w in caught] == []


def test_make_by_id_after_import(base_image):
    e = gym.make(terminal_env.ENV_ID, max_steps=3)
    try:
        obs, info = e.reset(seed=0)
        assert "hello.txt" in obs
        obs, reward, term, trunc, info = e.step("echo hi")
        assert obs == "hi" + "\n" and info["exit_code"] == 0
    finally:
        e.close()


def test_episode_flow_and_info(env):
    obs, info = env.reset(seed=1)
    assert obs.startswith("Create a file /app/hello.txt") and "/app" in obs
    assert info["cwd"] == "/app" and info["timings"]["reset_total"] > 0
    assert obs in env.observation_space
    obs, r, term, trunc, info = env.step(Command(command="cd /tmp; false"))
    assert obs == "[exit code 1]"
    assert (r, term, trunc) == (0.0, False, False)
    assert info["exit_code"] == 1 and info["cwd"] == "/tmp" and info["duration"] >= 0
    assert info["truncated"] is False and info["timed_out"] is False
    obs, r, term, trunc, info = env.step(Keys(keys=["echo typed", "Enter"]))
    assert "typed" in obs and info["action_kind"] == "keys"
    assert env.render() == obs
    obs, r, term, trunc, info = env.step(Submit())
    assert term and not trunc
    with pytest.raises(ConfigError, match="call reset"):
        env.step("true")


def test_step_budget_truncates(base_image):
    e = TerminalEnv(max_steps=2)
    try:
        e.reset()
        assert e.step("true")[3] is False
        obs, _, term, trunc, _ = e.step("true")
        assert trunc and not term and "step budget" in obs
    finally:
        e.close()


def test_time_budget_truncates_and_caps_the_command(base_image):
    e = TerminalEnv(time_limit=1.5, command_timeout=100)
    try:
        e.reset()
        obs, _, term, trunc, info = e.step("sleep 60")
        assert trunc and info["timed_out"] and "time budget" in obs
        assert info["elapsed"] < 20
    finally:
        e.close()


def test_command_timeout_is_an_observation(env):
    env.reset()
    obs, _, term, trunc, info = env.step({"kind": "command", "command": "sleep 50", "timeout": 0.5})
    assert "timed out after 0.5 s" in obs and info["timed_out"] and not (term or trunc)


def test_reset_switches_task_and_gives_a_fresh_sandbox(env, base_image):
    env.reset()
    env.step("touch /app/left-behind; export LEFT=1")
    first = env.sandbox.name
    task = TaskSpec(name="other", instruction="Other task.", files={"/app/given.txt": "data"})
    obs, info = env.reset(options={"task": task})
    assert obs.startswith("Other task.") and info["container"] != first
    out = env.step("ls /app; echo ${LEFT:-unset}")[0]
    assert out == "given.txt\nunset\n"


def test_bad_input_raises_config_errors(env, base_image):
    with pytest.raises(ConfigError, match="unknown reset options"):
        env.reset(options={"colour": "red"})
    with pytest.raises(ConfigError, match="invalid TerminalEnv config"):
        TerminalEnv(max_steps=0)
    with pytest.raises(ConfigError, match="invalid task"):
        TerminalEnv({"name": "x"})
    env.reset()
    with pytest.raises(ConfigError, match="must be a str"):
        env.step(3.5)
    # the action limit holds for a typed command as for its text form
    short = TerminalEnv(max_action_chars=10)
    try:
        short.reset()
        for action in ("echo " + "x" * 10, Command(command="echo " + "x" * 10),
                       {"kind": "command", "command": "echo " + "x" * 10}, Keys(keys=["x" * 20, "Enter"])):
            with pytest.raises(ConfigError, match="exceeds max_action_chars=10"):
                short.step(action)
    finally:
        short.close()


def test_failing_setup_names_the_task_and_leaves_nothing(client, base_image):
    from terminal_env.sandbox import cleanup

    before = cleanup.live_count()
    e = TerminalEnv({"name": "broken-setup", "instruction": "x", "setup": ["exit 5"]})
    with pytest.raises(ConfigError, match="broken-setup.*exit 5"):
        e.reset()
    assert cleanup.live_count() == before
    e.close()


def test_container_killed_from_outside_is_an_infra_error(env, client):
    env.reset()
    client.api.kill(env.sandbox.id)
    with pytest.raises(SandboxGoneError, match="from outside"):
        env.step("echo hi")
    env.close()


def test_verifier_reward_on_the_final_step(base_image):
    def verifier(sandbox, task):
        ok = sandbox.exec(["cat", "/app/hello.txt"]).stdout == b"Hello, world!\n"
        return {"passed": ok}

    e = TerminalEnv(verifier=verifier, reward=lambda r: 1.0 if r["passed"] else 0.0)
    try:
        e.reset()
        assert e.step("echo 'Hello, world!' > hello.txt")[1] == 0.0
        obs, reward, term, trunc, info = e.step("#!submit")
        assert term and reward == 1.0 and info["verification"] == {"passed": True}
    finally:
        e.close()


def test_close_removes_the_container(client, base_image):
    e = TerminalEnv()
    e.reset()
    name = e.sandbox.name
    e.close()
    e.close()  # twice is fine
    assert not client.containers.list(all=True, filters={"name": f"^/{name}$"})


def test_observation_fits_the_space_even_for_odd_output(env):
    env.reset()
    obs = env.step("printf '\\xf0\\x9f\\x98\\x80 emoji \\x01 ctrl \\xe2\\x94\\x80 box'")[0]
    assert obs in env.observation_space
    assert "emoji" in obs and "\u2500" in obs


def test_non_root_agent_user(base_image):
    task = TaskSpec(name="as-nobody", instruction="x", user="nobody", workdir="/tmp")
    e = TerminalEnv(task)
    try:
        e.reset()
        assert e.step("id -un")[0] == "nobody\n"
        # A multi-line command goes through a file; it must work for a non-root user too.
        obs = e.step("for i in 1 2; do\n  echo n$i\ndone")[0]
        assert obs == "n1\nn2\n"
        assert "Permission denied" in e.step("touch /root/x")[0]
    finally:
        e.close()
