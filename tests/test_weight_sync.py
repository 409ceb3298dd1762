"""The trainer's vLLM path against the project's loopback server (terminal_env/train/loopback.py),
which speaks vLLM's completions with token ids and its weight-transfer routes over gloo: rollouts
with token ids in and out through the OpenAI-compatible backend, new weights pushed after each
PPO update (terminal_env/train/weight_sync.py). Not run against vLLM itself (no GPU here)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("openai")

from tiny_lm import make_model, make_tokenizer, rescore  # noqa: E402 - after the importorskips

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.models.base import SamplingParams  # noqa: E402
from terminal_env.models.hf_backend import HFChatTokenizer, TransformersBackend  # noqa: E402
from terminal_env.models.openai_backend import OpenAIBackend  # noqa: E402
from terminal_env.models.scripted_server import ScriptedServer  # noqa: E402
from terminal_env.train.loopback import LoopbackVLLM  # noqa: E402
from terminal_env.train.models import Pair  # noqa: E402
from terminal_env.train.weight_sync import VLLMWeightSync  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


@pytest.fixture
def served(tokenizer):
    """A pair to train, a server holding a copy of its actor, and a client of that server."""
    pair = Pair.start(make_model(tokenizer, context=1024), tokenizer)
    local = TransformersBackend(copy.deepcopy(pair.actor), tokenizer, name="served")
    server = LoopbackVLLM(local)
    client = OpenAIBackend("loopback", base_url=server.base_url, api_key="none", token_ids=True,
                           chat_tokenizer=HFChatTokenizer(tokenizer), weights_version="v0")
    yield pair, server, client
    client.close()
    server.close()
    local.close()


def test_pushed_weights_are_the_ones_the_server_samples_from(served):
    pair, server, client = served
    with torch.no_grad():  # the trainer's actor moves away from the served copy
        for p in pair.actor.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    prompt = pair.tokenizer.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    params = SamplingParams(max_new_tokens=8, seed=7, temperature=1.0)

    def trainer_scores(c) -> list[float]:
        return rescore(pair.actor, prompt + c.token_ids)[len(prompt) - 1:].tolist()

    before = client.complete_tokens(prompt, params=params)
    assert max(abs(a - b) for a, b in zip(trainer_scores(before), before.logprobs)) > 1e-3  # not yet
    with VLLMWeightSync(server.base_url, transport="gloo", backends=[client]) as sync:
        sync.push(pair.actor, "v1")
    after = client.complete_tokens(prompt, params=params)
    assert after.weights == "v1"
    assert max(abs(a - b) for a, b in zip(trainer_scores(after), after.logprobs)) < 1e-4
    served_state = server.backend.model.state_dict()
    assert all(torch.equal(served_state[k], v) for k, v in pair.actor.state_dict().items())  # bit for bit
    routes = [route for route, _ in server.calls if not route.startswith("/v1/")]
    assert routes == ["/get_world_size", "/init_weight_transfer_engine", "/pause", "/start_weight_update",
                      "/update_weights", "/finish_weight_update", "/resume"]
    info = dict(server.calls)["/update_weights"]["update_info"]
    assert info["names"] == list(pair.actor.state_dict()) and info["dtype_names"][0] == "float32"


# PPO through the server (collect -> episodes -> update, old log-probs recomputed): tests/test_vllm_path.py


def test_a_server_without_the_weight_transfer_routes_is_named_with_the_fix():
    with ScriptedServer([]) as server:
        sync = VLLMWeightSync(server.base_url, transport="gloo", timeout=10)
        with pytest.raises(ConfigError, match="VLLM_SERVER_DEV_MODE=1"):
            sync.init()
    with pytest.raises(ConfigError, match="unknown weight transport 'rdma'"):
        VLLMWeightSync("http://127.0.0.1:9/v1", transport="rdma")


def test_the_nccl_transport_says_what_it_needs():
    from terminal_env.train.weight_sync import NcclTransport

    with pytest.raises(ConfigError, match="needs vLLM installed|needs a CUDA GPU"):
        NcclTransport().connect("127.0.0.1", 1, 2, 1.0)
