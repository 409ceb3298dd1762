"""mini-swe-agent, unmodified (its own agent class, model class and shipped text-based config),
plays a generated task in our sandbox through our session, its model calls answered by the tiny
in-process model through the gateway: every call token-exact, the episode scored by our verifier.

Needs mini-swe-agent (``pip install 'terminal-env[miniswe]'``, which CI installs), torch and
Docker. litellm is told to use its bundled cost map and mini-swe-agent a config folder of the
test's, so nothing leaves this machine and nothing is written to the user's home.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
if "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:
    import tempfile

    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = tempfile.mkdtemp(prefix="mswea-")
minisweagent = pytest.importorskip("minisweagent", reason="the mini-swe-agent test needs: pip install 'terminal-env[miniswe]'")
yaml = pytest.importorskip("yaml")

from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel  # noqa: E402
from tiny_lm import make_model, make_tokenizer, rescore  # noqa: E402

from terminal_env.integrations.episode import replay  # noqa: E402
from terminal_env.integrations.gateway import Gateway  # noqa: E402
from terminal_env.integrations.miniswe import SandboxEnvironment  # noqa: E402
from terminal_env.models.hf_backend import TransformersBackend  # noqa: E402
from terminal_env.tasks.toy import write_toy_family  # noqa: E402
from terminal_env.train.tiny import teach  # noqa: E402

pytestmark = pytest.mark.docker

#: the agent's sampling temperature (what the gateway records the log-probs at)
TEMPERATURE = 0.5
#: mini-swe-agent's own text-based configuration, as it ships
CONFIG = yaml.safe_load((Path(minisweagent.__file__).parent / "config" / "mini_textbased.yaml").read_text())


def _agent(gw: Gateway, env: SandboxEnvironment, steps: int) -> DefaultAgent:
    model = LitellmTextbasedModel(
        model_name=f"openai/{gw.model}", cost_tracking="ignore_errors",
        model_kwargs={**CONFIG["model"].get("model_kwargs", {}), "api_base": gw.url, "api_key": "unused",
                      "temperature": TEMPERATURE, "max_tokens": 96, "seed": 0},
        observation_template=CONFIG["model"]["observation_template"],
        format_error_template=CONFIG["model"]["format_error_template"],
    )
    agent_config = {k: v for k, v in CONFIG["agent"].items() if k != "mode"}
    return DefaultAgent(model, env, **{**agent_config, "step_limit": steps, "cost_limit": 0})


def test_mini_swe_agent_plays_a_task_token_exact_and_verified(tmp_path, base_image):
    task = write_toy_family(tmp_path / "toy", n_train=1, n_validation=0, seed=21)[0]
    answer = (task / "solution" / "solve.sh").read_text().splitlines()[-1]
    tok = make_tokenizer()
    model = make_model(tok, context=8192, hidden=64)
    backend = TransformersBackend(model, tok, name="tiny")
    with Gateway(backend) as gw:
        # A first run records the prompt the agent sends; the tiny model is then taught to answer
        # it with the task's command in mini-swe-agent's format (the agent is not told anything).
        with SandboxEnvironment(str(task)) as env:
            _agent(gw, env, steps=1).run(env.instruction)
        first = gw.calls[0]
        loss = teach(model, tok, [(tok.decode(first.prompt_token_ids),
                                   f"THOUGHT: write it.\n\n```mswea_bash_command\n{answer}\n```<|im_end|>")], steps=120)
        print(f"taught: loss {loss:.3f}")
        backend.load_weights(model.state_dict(), version="taught")
        gw.calls.clear()
        records = []
        with SandboxEnvironment(str(task), reward="partial_progress", on_episode=records.append) as env:
            agent = _agent(gw, env, steps=2)
            agent.run(env.instruction)
            reward = env.finish()  # the agent ran out of steps: the work so far is verified

    # Every call the agent made is recorded exact: the ids decode to the text it got, the prompt
    # ids are its messages through the template, and re-scoring gives the recorded log-probs.
    assert len(gw.calls) == 2 and all(c.exact for c in gw.calls)
    # what the agent received: its assistant messages, or the reply it refused for its format
    replies = [m["content"] if m["role"] == "assistant" else m["extra"]["model_response"]
               for m in agent.messages if m["role"] == "assistant" or "model_response" in m.get("extra", {})]
    assert replies == [c.text for c in gw.calls]
    for call in gw.calls:
        assert tok.decode(call.completion_token_ids, skip_special_tokens=True) == call.text
        assert call.prompt_token_ids == tok.apply_chat_template(
            call.messages, add_generation_prompt=True, tokenize=True, return_dict=False, enable_thinking=False)
        ids = call.prompt_token_ids + call.completion_token_ids
        again = rescore(model, ids, temperature=TEMPERATURE)[len(call.prompt_token_ids) - 1:]
        assert torch.allclose(again, torch.tensor(call.sampling_logprobs), atol=1e-4)

    # The commands the agent parsed from those replies ran in our sandbox, in order, and our
    # verifier scored the episode: a replay of the same actions agrees.
    record = records[-1]
    parsed = [m.group(1).strip() for r in replies
              if (m := re.search(CONFIG["model"].get("action_regex", r"```mswea_bash_command\s*\n(.*?)\n```"), r, re.S))]
    assert record.actions[:-1] == parsed
    assert record.actions[-1] == "#!submit" and not record.masked
    assert reward == record.reward
    assert replay(record, reward="partial_progress") == reward
    # The taught model's first command is the answer more often than not; whichever it was, the
    # reward above is the verifier's. Print what happened for the log.
    print(f"actions {record.actions}, reward {reward}")
