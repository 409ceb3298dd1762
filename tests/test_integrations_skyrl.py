"""SkyRL-Gym's text environment over terminal tasks (terminal_env.integrations.skyrl).

Needs skyrl-gym (``pip install 'terminal-env[skyrl]'``, which CI installs) and Docker. The
environment is made the way SkyRL's generator makes it, ``skyrl_gym.make(env_class,
env_config=..., extras=row)``, and played to the verifier's reward by scripted replies and by the
tiny in-process model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="the SkyRL-Gym adapter's tests need: pip install 'terminal-env[skyrl]'")

from terminal_env.errors import ConfigError, InfraError  # noqa: E402
from terminal_env.integrations import skyrl as te_skyrl  # noqa: E402 (registers "terminal-env")
from terminal_env.tasks.toy import write_toy_family  # noqa: E402

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def rows(tmp_path_factory, base_image) -> list[dict]:
    paths = write_toy_family(tmp_path_factory.mktemp("toy") / "fam", n_train=2, n_validation=0, seed=5)
    return te_skyrl.task_rows([str(p) for p in paths])


def _answer(row: dict) -> str:
    return (Path(row["task"]) / "solution" / "solve.sh").read_text().splitlines()[-1]


def _make(row: dict, **config):
    return skyrl_gym.make("terminal-env", env_config=config, extras={**row, "max_turns": 4})


def test_registered_by_name_and_rows_name_it(rows):
    assert "terminal-env" in skyrl_gym.envs.registration.registry
    assert all(r["env_class"] == "terminal-env" and Path(r["task"]).is_dir() for r in rows)
    assert te_skyrl.register() == "terminal-env"  # again: harmless


def test_an_episode_steps_to_the_verified_reward(rows):
    row = rows[0]
    records = []
    env = te_skyrl.TerminalTextEnv(env_config={"reward": "partial_progress"}, extras={**row, "max_turns": 5},
                                   on_episode=records.append)
    try:
        messages, meta = env.init(row["prompt"])
        assert messages[0]["role"] == "system" and row["prompt"][0]["content"] in messages[-1]["content"]
        assert meta["task"] == row["extra_info"]["name"]
        out = env.step("I will look first.\n```bash\nls -la /app\n```")
        assert not out["done"] and out["reward"] == 0.0
        assert out["observations"] and "total" in out["observations"][-1]["content"]
        out = env.step("No block here.")  # the harness's format error comes back as the observation
        assert not out["done"] and out["metadata"]["format_error"]
        assert "Format error" in out["observations"][-1]["content"]
        env.step(f"```bash\n{_answer(row)}\n```")
        out = env.step("```bash\n#!submit\n```")
        assert out["done"] and out["reward"] == 1.0 and out["metadata"]["outcome"] == "passed"
        assert records[-1].actions == ["ls -la /app", _answer(row), "#!submit"]
        assert env.get_metrics() == {"turns": 4, "commands": 2, "format_errors": 1, "passed": 1.0, "masked": 0.0}
    finally:
        env.close()


def test_out_of_turns_the_work_so_far_is_verified(rows):
    env = _make(rows[1], reward="partial_progress")
    try:
        env.init(rows[1]["prompt"])
        for _ in range(3):
            assert not env.step("```bash\ntouch /app/answer.txt\n```")["done"]
        out = env.step("```bash\ntrue\n```")  # the 4th reply of 4
        # the file exists (1 of 4 by weight), empty: partial progress 0.25, verified
        assert out["done"] and out["reward"] == 0.25 and out["metadata"]["outcome"] == "partial"
    finally:
        env.close()


def test_the_tiny_model_plays_an_episode_to_a_verified_reward(rows):
    torch = pytest.importorskip("torch")
    from terminal_env.train.tiny import make_model, make_tokenizer

    tok = make_tokenizer()
    model = make_model(tok, context=4096)
    env = _make(rows[0])
    try:
        messages, _ = env.init(rows[0]["prompt"])
        torch.manual_seed(0)
        done, turns = False, 0
        while not done:
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
            with torch.no_grad():
                out_ids = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=True,
                                         pad_token_id=tok.pad_token_id)[0, len(ids):]
            reply = tok.decode(out_ids, skip_special_tokens=True)
            out = env.step(reply)
            messages += [{"role": "assistant", "content": reply}, *out["observations"]]
            done, turns = out["done"], turns + 1
        assert turns == 4  # an untrained model never submits: its 4 turns end it, verified
        assert out["reward"] == 0.0 and out["metadata"]["outcome"] in ("failed", "partial")
        assert env.get_metrics()["turns"] == 4
    finally:
        env.close()


def test_an_infrastructure_failure_raises_or_is_marked(rows, client):
    env = _make(rows[0])
    try:
        env.init(rows[0]["prompt"])
        client.containers.get(env._text.episode.env.sandbox.name).remove(force=True)
        with pytest.raises(InfraError, match="not the agent's"):
            env.step("```bash\necho hi\n```")
    finally:
        env.close()
    env = _make(rows[0], on_infra_error="zero")
    try:
        env.init(rows[0]["prompt"])
        client.containers.get(env._text.episode.env.sandbox.name).remove(force=True)
        out = env.step("```bash\necho hi\n```")
        assert out["done"] and out["reward"] == 0.0 and out["metadata"]["masked"]
        assert env.get_metrics()["masked"] == 1.0
    finally:
        env.close()


def test_bad_input_is_named(rows, tmp_path):
    with pytest.raises(ConfigError, match="no 'task'"):
        skyrl_gym.make("terminal-env", env_config={}, extras={"prompt": []})
    with pytest.raises(ConfigError, match="unknown key"):
        _make(rows[0], rewards="binary")
    with pytest.raises(ConfigError, match="on_infra_error"):
        _make(rows[0], on_infra_error="ignore")
    with pytest.raises(ConfigError, match="unknown reward"):
        _make(rows[0], reward="bogus")
    with pytest.raises(ConfigError, match="reads the model's tool calls"):
        _make(rows[0], harness="tool-calling")
    env = skyrl_gym.make("terminal-env", env_config={}, extras={"task": str(tmp_path)})
    with pytest.raises(ConfigError, match="is not a task directory"):
        env.init([])
    with pytest.raises(ConfigError, match="init"):
        _make(rows[0]).step("```bash\ntrue\n```")
