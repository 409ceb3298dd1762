"""The vLLM path into PPO, against the project's loopback server (terminal_env/train/loopback.py):
served rollouts that episodes() accepts, old log-probs recomputed by the trainer (with truncated
importance sampling as an option), neutral sampling settings, truncation refused, pushed versions
named after the pair, and the weight sync's refusals, timeouts and pause modes."""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("openai")

from tiny_lm import make_model, make_tokenizer  # noqa: E402 - after the importorskips

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.models.base import ModelConfigError, ModelError, SamplingParams  # noqa: E402
from terminal_env.models.hf_backend import HFChatTokenizer, TransformersBackend  # noqa: E402
from terminal_env.models.openai_backend import OpenAIBackend  # noqa: E402
from terminal_env.models.tokens import EpisodeTokens, TokenSegment, TurnSpan  # noqa: E402
from terminal_env.train.data import episodes  # noqa: E402
from terminal_env.train.loopback import LoopbackVLLM  # noqa: E402
from terminal_env.train.models import Pair  # noqa: E402
from terminal_env.train.ppo import PPO, PPOConfig  # noqa: E402
from terminal_env.train.rollouts import collect  # noqa: E402
from terminal_env.train.weight_sync import VLLMWeightSync, WeightSyncTimeout, pair_version  # noqa: E402
from terminal_env.trajectory import ModelRef, TaskRef, Trajectory  # noqa: E402
from terminal_env.verify import VerifierResult  # noqa: E402

PROMPT = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


class Gated:
    """The served backend, holding each answer until ``release`` is set (so that a test can pause
    the server while a request is in flight); everything else is the backend's own."""

    def __init__(self, inner):
        self.inner = inner
        self.started = threading.Event()
        self.release = threading.Event()

    def complete_tokens(self, *args, **kwargs):
        completion = self.inner.complete_tokens(*args, **kwargs)
        self.started.set()
        assert self.release.wait(30)
        return completion

    def __getattr__(self, name):
        return getattr(self.inner, name)


def serve(model, tokenizer, gated: bool = False, **client_options):
    local = TransformersBackend(copy.deepcopy(model), tokenizer, name="served")
    server = LoopbackVLLM(Gated(local) if gated else local)
    client_options.setdefault("weights_version", "v0")
    client = OpenAIBackend("loopback", base_url=server.base_url, api_key="none", token_ids=True,
                           chat_tokenizer=HFChatTokenizer(tokenizer), backoff=0.05, **client_options)
    return local, server, client


# -- the OpenAI backend against the loopback server ---------------------------------------------------


def test_token_requests_send_neutral_sampling_so_generation_config_defaults_do_not_apply(tokenizer):
    """vLLM applies what the model's generation_config sets to a request that leaves it out; the
    loopback server does the same (and cannot apply top_k, so it refuses it)."""
    model = make_model(tokenizer)
    model.generation_config.top_k = 20
    model.generation_config.top_p = 0.5
    local, server, client = serve(model, tokenizer)
    try:
        prompt = tokenizer.encode(PROMPT)
        c = client.complete_tokens(prompt, params=SamplingParams(temperature=1.0, max_new_tokens=6, seed=1))
        (body,) = [b for route, b in server.calls if route == "/v1/completions"]
        assert (body["top_p"], body["top_k"], body["min_p"], body["repetition_penalty"]) == (1.0, -1, 0.0, 1.0)
        assert server.applied[-1]["top_p"] == 1.0 and server.applied[-1]["top_k"] == -1
        assert c.sampling_logprobs == c.logprobs  # temperature 1, nothing reshaping: the raw ones are sampled
        assert client.reshaping(SamplingParams(temperature=1.0)) == []
        warm = client.complete_tokens(prompt, params=SamplingParams(temperature=0.7, max_new_tokens=6, seed=1))
        assert warm.sampling_logprobs is None  # vLLM's raw log-probs are not the distribution at 0.7
    finally:
        client.close(), server.close(), local.close()


def test_training_rollouts_refuse_top_p_and_top_k(tokenizer):
    local, server, client = serve(make_model(tokenizer), tokenizer, extra_body={"top_k": 20})
    try:
        assert client.reshaping(SamplingParams(top_p=0.9)) == ["top_p=0.9", "top_k=20"]
        with pytest.raises(ConfigError, match=r"top_k=20.*no top_k/min_p/penalties in the backend's extra_body"):
            collect(client, [], params=SamplingParams(temperature=1.0))
        client.extra_body = {}
        with pytest.raises(ConfigError, match=r"top_p=0.9.*SamplingParams\(top_p=None\)"):
            collect(client, [], params=SamplingParams(temperature=1.0, top_p=0.9))
    finally:
        client.close(), server.close(), local.close()
    with pytest.raises(ConfigError, match=r"sampled with top_p=0.9.*untruncated"):
        episodes([served_trajectory(top_p=0.9)])


# -- episodes from served trajectories --------------------------------------------------------------


def served_trajectory(*, temperature: float = 1.0, top_p: float | None = None, weights: str = "w",
                      sampling: bool = True) -> Trajectory:
    seg = TokenSegment(reason="first", token_ids=[5, 6, 7, 8], action_mask=[0, 1, 1, 0], logprobs=[0, -1, -2, 0],
                       sampling_logprobs=[0, -1, -2, 0] if sampling else None,
                       turns=[TurnSpan(turn=0, prompt_start=0, start=1, end=3, weights=weights)])
    return Trajectory(task=TaskRef(name="toy"), harness="generic",
                      model=ModelRef(name="loopback", backend="OpenAIBackend",
                                     params={"temperature": temperature, "top_p": top_p}),
                      tokens=EpisodeTokens(segments=[seg]),
                      verification=VerifierResult(outcome="passed").model_dump(mode="json"))


def test_served_episodes_are_marked_and_pushed_versions_of_the_pair_are_its_weights():
    (e,), _ = episodes([served_trajectory()])
    assert e.served and e.sequences[0].old_logprobs == [0, -1, -2, 0]
    (warm,), _ = episodes([served_trajectory(temperature=0.7, sampling=False)])  # a server at T != 1
    assert warm.served and warm.sequences[0].old_logprobs == []  # PPO recomputes them
    actor = "0123456789abcdef"
    assert pair_version(actor, 3) == "0123456789abcdef@3"
    for version in (actor, pair_version(actor)):
        assert episodes([served_trajectory(weights=version)], weights=actor)[0]
    with pytest.raises(ConfigError, match="must come from the weights being trained"):
        episodes([served_trajectory(weights=pair_version(actor, 1))], weights=actor)  # trained since
    with pytest.raises(ConfigError, match="actor id"):
        pair_version("a@1")


# -- the weight sync -----------------------------------------------------------------------------


def test_a_sharded_state_dict_is_refused_with_the_gather_named(tmp_path):
    script = """
import torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from terminal_env.errors import ConfigError
from terminal_env.train.weight_sync import VLLMWeightSync
dist.init_process_group("gloo", init_method="file://%s", rank=0, world_size=1)
mesh = init_device_mesh("cpu", (1,))
state = {"w": DTensor.from_local(torch.ones(4, 2), mesh, [Shard(0)])}
try:
    VLLMWeightSync("http://127.0.0.1:9", transport="gloo", timeout=2).push(state, "v1")
except ConfigError as e:
    print(e)
dist.destroy_process_group()
""" % (tmp_path / "rendezvous")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "sharded (1 DTensors" in out.stdout and "distributed.full_state(actor)" in out.stdout, out.stderr


def test_vllm_pause_aborts_in_flight_requests_and_the_backend_retries_them(tokenizer):
    model = make_model(tokenizer)
    local, server, client = serve(model, tokenizer, gated=True)
    try:
        result = {}
        request = threading.Thread(target=lambda: result.update(c=client.complete_tokens(
            tokenizer.encode(PROMPT), params=SamplingParams(temperature=1.0, max_new_tokens=6, seed=2))))
        request.start()
        assert server.backend.started.wait(30)  # generating when the pause comes
        with VLLMWeightSync(server.base_url, transport="gloo", backends=[client], timeout=30) as sync:
            sync.push(model, "v1")  # vLLM's default /pause?mode=abort
        server.backend.release.set()
        request.join(30)
        assert server.aborted == 1  # the request in flight was answered with finish_reason "abort"
        c = result["c"]
        assert c.retries == 1 and c.weights == "v1" and c.finish_reason != "abort"  # served again, by v1
        assert ("/pause", None) not in server.calls and any(r == "/pause" for r, _ in server.calls)
    finally:
        server.backend.release.set()
        client.close(), server.close(), local.close()


def test_pause_in_wait_mode_lets_in_flight_requests_finish_and_every_wait_has_a_timeout(tokenizer):
    model = make_model(tokenizer)
    local, server, client = serve(model, tokenizer, gated=True, max_retries=0)
    try:
        result = {}
        request = threading.Thread(target=lambda: result.update(c=client.complete_tokens(
            tokenizer.encode(PROMPT), params=SamplingParams(temperature=1.0, max_new_tokens=6, seed=2))))
        request.start()
        assert server.backend.started.wait(30)
        sync = VLLMWeightSync(server.base_url, transport="gloo", backends=[client], timeout=1, pause_mode="wait")
        t0 = time.monotonic()
        with pytest.raises(WeightSyncTimeout, match=r"pause\?mode=wait: no answer within .* timeout of 1 s"):
            sync.push(model, "v1")  # the pause waits for the request, held by the gate
        assert time.monotonic() - t0 < 20
        server.backend.release.set()
        request.join(30)
        c = result["c"]
        assert server.aborted == 0 and c.retries == 0 and c.weights == "v0"  # finished, by the old weights
        client.weights_version = "v0"
        sync.timeout = 30
        sync.push(model, "v1")  # nothing in flight now: the pause returns, the push goes through
        assert client.weights_version == "v1"
        sync.close()
    finally:
        server.backend.release.set()
        client.close(), server.close(), local.close()
    with pytest.raises(ConfigError, match="unknown pause mode"):
        VLLMWeightSync("http://127.0.0.1:9", transport="gloo", pause_mode="later")


# -- PPO through the server: collect -> episodes -> update ------------------------------------------


@pytest.mark.docker
def test_ppo_through_the_server_collects_episodes_and_takes_its_ratio_against_recomputed_logprobs(
        tokenizer, tmp_path, base_image):
    from terminal_env.tasks.toy import write_toy_family

    pair = Pair.start(make_model(tokenizer, context=8192), tokenizer)  # the harness's prompt is ~2,000 tokens
    pair.meta["actor"] = "00aa11bb22cc33dd"  # as a saved pair's: versions are named after it
    tasks = write_toy_family(tmp_path / "toy", n_train=2, n_validation=0, seed=5)
    local, server, client = serve(pair.actor, tokenizer, weights_version=pair_version(pair.meta["actor"], 0))
    params = SamplingParams(temperature=1.0, max_new_tokens=16)
    try:
        with VLLMWeightSync(server.base_url, transport="gloo", backends=[client], timeout=120) as sync:
            trajectories = collect(client, tasks, attempts=2, max_turns=2, max_concurrency=4, seed=10, params=params)
            batch, skipped = episodes(trajectories, weights=pair.meta["actor"], reward="partial_progress")
            assert len(batch) == 4 and not skipped and all(e.served for e in batch)
            trainer = PPO(pair, PPOConfig(epochs=1, tis_cap=2.0), force=True)
            report = trainer.update(batch)
            assert report["old_logprobs"] == "recompute"  # the default for served episodes
            assert report["first_logprob_gap"] < 1e-5  # the ratio starts at 1: its old log-probs are the trainer's
            assert report["generator_gap_max"] < 1e-3  # the server's log-probs, measured against the trainer's
            assert abs(report["tis_weight_mean"] - 1) < 1e-3 and report["tis_truncated"] == 0
            sync.push(pair.actor, pair_version(pair.meta["actor"], 1))
            again = collect(client, tasks, attempts=1, max_turns=1, seed=20, params=params)
            fresh, _ = episodes(again, weights=sync.version, reward="partial_progress")
            assert {v for e in fresh for v in e.weights} == {"00aa11bb22cc33dd@1"}
            with pytest.raises(ConfigError, match="must come from the weights being trained"):
                episodes(again, weights=pair.meta["actor"])  # the pair as saved did not sample them
            print(f"trainer-vs-server gap: max {report['generator_gap_max']:.2e}, mean {report['generator_gap_mean']:.2e}")
    finally:
        client.close(), server.close(), local.close()


def test_recomputed_old_logprobs_and_truncated_importance_weights(tokenizer):
    """A generator whose log-probs are off by a known amount: the ratio still starts at 1 (the old
    log-probs are the trainer's), the gap is reported, and the importance weights are capped."""
    from tiny_lm import rescore

    from terminal_env.train.data import Episode, Sequence

    pair = Pair.start(make_model(tokenizer), tokenizer)
    prompt = tokenizer.encode(PROMPT)
    batch = []
    for i in range(4):
        ids = prompt + tokenizer.encode(f"ls -la /app {i}")
        n = len(ids) - len(prompt)
        ours = rescore(pair.actor, ids)[len(prompt) - 1:].tolist()
        offsets = [-1.0 if k % 2 else 0.25 for k in range(n)]  # exp(1) > 2: capped; exp(-0.25) < 1
        generator = [0.0] * len(prompt) + [x + o for x, o in zip(ours, offsets)]
        batch.append(Episode(f"e{i}", "toy", [Sequence(ids, [0] * len(prompt) + [1] * n, generator)],
                             float(i % 2), 1.0, served=True))
    report = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=0.0, critic_lr=0.0, critic_head_lr=1e-3,
                                 tis_cap=2.0), force=True).update(batch)
    assert report["old_logprobs"] == "recompute" and report["first_logprob_gap"] < 1e-5
    assert abs(report["generator_gap_max"] - 1.0) < 1e-4
    assert 0.45 < report["tis_truncated"] < 0.55 and report["tis_weight_mean"] < 2.0
    rollout = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=0.0, critic_lr=0.0, critic_head_lr=1e-3,
                                  old_logprobs="rollout"), force=True).update(batch)
    assert abs(rollout["first_logprob_gap"] - 1.0) < 1e-4  # the ratio against the generator's, off by 1
    with pytest.raises(ConfigError, match="old_logprobs='recompute', tis_cap=None"):
        PPO(pair, PPOConfig(tis_cap=2.0), force=True).update(
            [Episode("w", "toy", [Sequence(ids, [0] * len(prompt) + [1] * n, [])], 1.0, 0.7, served=True)])
