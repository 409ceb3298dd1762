"""TRL's GRPOTrainer over terminal tasks (terminal_env.integrations.trl).

The adapter's own behaviour (tools through the session, one verification, a masked episode, bad
input) needs only Docker; the end-to-end run needs TRL (``pip install 'terminal-env[trl]'``,
which CI installs) and trains the tests' tiny model for two optimizer steps on generated toy
tasks, then replays every episode it played and checks the rewards TRL got are the verifier's.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
from functools import partial
from pathlib import Path

import pytest

from terminal_env.errors import ConfigError
from terminal_env.integrations.episode import OVER, replay
from terminal_env.integrations.trl import HOW, TerminalToolEnv, task_rows
from terminal_env.tasks.toy import write_toy_family

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def toy_tasks(tmp_path_factory, base_image) -> list[Path]:
    return write_toy_family(tmp_path_factory.mktemp("toy") / "fam", n_train=2, n_validation=0, seed=3)


def _answer(task: Path) -> str:
    """The toy task's right answer, from its oracle (``echo V > /app/answer.txt``)."""
    return (task / "solution" / "solve.sh").read_text().splitlines()[-1]


def test_rows_hold_the_instruction_and_reset_adds_only_the_shell(toy_tasks):
    rows = task_rows([str(p) for p in toy_tasks])
    assert [r["task"] for r in rows] == sorted(str(p) for p in toy_tasks)
    assert all(r["split"] == "train" and r["prompt"][0]["role"] == "user" for r in rows)
    records = []
    with TerminalToolEnv(reward="partial_progress", on_episode=records.append) as env:
        tail = env.reset(**rows[0])
        assert rows[0]["prompt"][0]["content"] not in tail  # not said twice
        assert "a bash shell is ready in /app" in tail and tail.endswith(HOW)
        # Without the instruction in the prompt (no dataset), reset gives it.
        assert env.reset(task=rows[0]["task"]).startswith(rows[0]["prompt"][0]["content"])
        assert "hello" in env.bash("echo hello")
        assert "[exit code 3]" in env.bash("(exit 3)")
        assert env.get_reward() == 0.0  # nothing written
        assert env.get_reward() == 0.0 and len(records) == 1  # verified once
        assert env.bash("echo again") == OVER
        # The right answer, through the tool: the verifier's reward.
        env.reset(**rows[1])
        env.bash(_answer(Path(rows[1]["task"])))
        assert env.get_reward() == 1.0
        assert records[-1].actions == [_answer(Path(rows[1]["task"])), "#!submit"]
        assert records[-1].outcome == "passed" and not records[-1].masked


def test_only_bash_and_keys_are_tools():
    public = {n for n, _ in inspect.getmembers(TerminalToolEnv, predicate=inspect.isfunction)
              if not n.startswith("_")}
    # TRL turns every public method but reset and get_reward into a tool.
    assert public - {"reset", "get_reward"} == {"bash", "keys"}
    transformers = pytest.importorskip("transformers")
    env = TerminalToolEnv()
    schema = transformers.utils.get_json_schema(env.bash)
    assert schema["function"]["parameters"]["required"] == ["command"]
    schema = transformers.utils.get_json_schema(env.keys)
    assert schema["function"]["parameters"]["properties"]["keys"]["type"] == "array"


def test_bad_input_is_named(toy_tasks, tmp_path):
    with pytest.raises(ConfigError, match="invalid episode config: max_steps"):
        TerminalToolEnv(config={"max_steps": 0})
    with pytest.raises(ConfigError, match="invalid episode config: colour"):
        TerminalToolEnv(config={"colour": "red"})
    with pytest.raises(ConfigError, match="unknown reward"):
        TerminalToolEnv(reward="bogus")
    env = TerminalToolEnv()
    with pytest.raises(ConfigError, match="needs a 'task' column"):
        env.reset(prompt=[{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigError, match="is not a task directory"):
        env.reset(task=str(tmp_path))
    with pytest.raises(ConfigError, match="no episode has started"):
        env.get_reward()
    with env:
        env.reset(task=str(toy_tasks[0]))
        with pytest.raises(ConfigError, match="non-empty string"):
            env.bash("")
        with pytest.raises(ConfigError, match="non-empty list"):
            env.keys([])


def test_a_sandbox_that_dies_is_dropped_never_scored_zero(toy_tasks, client):
    records = []
    with TerminalToolEnv(on_episode=records.append) as env:
        env.reset(task=str(toy_tasks[0]))
        container = env._episode.env.sandbox.name
        client.containers.get(container).remove(force=True)  # the engine loses it
        out = env.bash("echo hi")
        assert out.startswith("[terminal-env]") and "failed" in out
        assert env.get_reward() is None  # TRL: unscorable, no advantage
        assert records[-1].masked and records[-1].reward is None and records[-1].error
        # The next rollout is a new episode.
        env.reset(task=str(toy_tasks[0]))
        assert "hi" in env.bash("echo hi")


# ---------------------------------------------------------------------- TRL itself
def _tiny_policy(rows: list[dict]):
    """The tiny in-process model as examples/trl_grpo.py makes it (Qwen 2.5's chat template, which
    renders tool calls, and a few supervised steps towards the oracle's bash tool call), so that
    sampling at temperature 1 gives a mix of right, wrong and malformed calls."""
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("trl_grpo_example", ROOT / "examples" / "trl_grpo.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example.tiny_policy(rows, 60)


def test_grpo_trains_two_steps_and_its_rewards_are_the_verifiers(toy_tasks, tmp_path, monkeypatch):
    trl = pytest.importorskip("trl", reason="the TRL adapter's end-to-end test needs: pip install 'terminal-env[trl]'")
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    rows = task_rows([str(p) for p in toy_tasks])
    model, tok = _tiny_policy(rows)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    records = []
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
        max_steps=2, per_device_train_batch_size=4, num_generations=4, gradient_accumulation_steps=1,
        max_completion_length=96, max_tool_calling_iterations=2, temperature=1.0, learning_rate=1e-3,
        seed=0, bf16=False, fp16=False, dataloader_num_workers=0,
    )
    trainer = trl.GRPOTrainer(
        model=model, processing_class=tok, args=args,
        train_dataset=datasets.Dataset.from_list(rows),
        environment_factory=partial(TerminalToolEnv, reward="partial_progress", on_episode=records.append),
    )
    trainer.train()
    assert trainer.state.global_step == 2
    assert any(not torch_equal(before[k], v) for k, v in model.state_dict().items()), "no weight moved"

    # TRL's logged reward per step is the mean of what our environments returned.
    logged = [h[f"rewards/{TerminalToolEnv.__name__}/mean"] for h in trainer.state.log_history
              if f"rewards/{TerminalToolEnv.__name__}/mean" in h]
    assert len(records) == 8 and len(logged) == 2
    for step, mean in enumerate(logged):
        got = [r.reward for r in records[4 * step: 4 * step + 4] if r.reward is not None]
        assert math.isclose(mean, sum(got) / len(got), abs_tol=1e-6)
    # Some episodes called the tool; the rewards differ, so the check above is not about zeros.
    assert any(len(r.actions) > 1 for r in records)
    assert len({r.reward for r in records}) > 1, [r.reward for r in records]

    # Every episode, replayed in a fresh sandbox: the verifier gives what TRL was given.
    for r in records:
        assert not r.masked, r.error
        assert replay(r, reward="partial_progress") == r.reward, r.actions


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def test_an_action_the_environment_refuses_is_told_and_not_recorded(toy_tasks):
    records = []
    with TerminalToolEnv(config={"max_action_chars": 20}, on_episode=records.append) as env:
        env.reset(task=str(toy_tasks[0]))
        out = env.bash("echo " + "x" * 40)
        assert out.startswith("[terminal-env] action refused") and "max_action_chars=20" in out
        assert "ok" in env.bash("echo ok")
        env.get_reward()
    assert records[-1].actions == ["echo ok", "#!submit"]


def test_the_keys_tool_drives_an_interactive_program(toy_tasks):
    with TerminalToolEnv() as env:
        env.reset(task=str(toy_tasks[0]))
        env.keys(["python3 -q", "Enter"])
        out = env.keys(["print(6 * 7)", "Enter"])
        assert "42" in out
        env.keys(["C-d"])
        assert "back" in env.bash("echo back")  # the shell has its prompt again
        records = env.record
    assert records.actions[:2] == ["#!keys 'python3 -q' Enter", "#!keys 'print(6 * 7)' Enter"]
