"""Token-exact rollouts (terminal_env/models/tokens.py) on the tiny in-process model: the episode
as one token sequence built by extension, its action mask and log-probs re-scored, new segments
where extension cannot hold, seeds that reach sampling, weight swaps, and schema versions."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tiny_lm import make_model, make_tokenizer, rescore  # noqa: E402 - after the importorskips

from terminal_env import TaskSpec, TerminalEnv  # noqa: E402
from terminal_env.agent import run_agent  # noqa: E402
from terminal_env.harness import get_harness  # noqa: E402
from terminal_env.models.base import Completion, SamplingParams  # noqa: E402
from terminal_env.models.hf_backend import HFChatTokenizer, TransformersBackend  # noqa: E402
from terminal_env.models.tokens import TokenRecorder, is_token_backend  # noqa: E402
from terminal_env.trajectory import Trajectory  # noqa: E402

SENT = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "list the files"}]


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return make_model(tokenizer, context=8192)  # the harness's system prompt is ~2,000 tokens here


@pytest.fixture
def backend(model, tokenizer):
    b = TransformersBackend(model, tokenizer, name="tiny", max_batch=4)
    yield b
    b.close()


def canonical(ct: HFChatTokenizer, text: str) -> Completion:
    """A completion as if the model had sampled ``text`` in its canonical tokens, then the end
    of its turn."""
    ids = ct.encode(text) + [ct.eos_token_ids[0]]
    return Completion(text=text, token_ids=ids, logprobs=[-1.0] * len(ids), sampling_logprobs=[-2.0] * len(ids))


def test_extension_matches_a_rerender_where_the_template_allows_it(tokenizer):
    ct = HFChatTokenizer(tokenizer, "tiny")
    rec = TokenRecorder(ct, thinking=True)  # this template then writes no <think></think>
    sent = list(SENT)
    for turn, reply in enumerate(["ls -la /app", "cat README.md | head", "echo done"]):
        prompt = rec.prompt(sent)
        assert prompt == ct.encode(ct.chat_text(sent, add_generation_prompt=True, thinking=True))
        completion = canonical(ct, reply)
        rec.record(turn, sent, completion)
        sent = sent + [completion.assistant_message(), {"role": "user", "content": f"output {turn}"}]
    (segment,) = rec.tokens.segments
    assert segment.reason == "first" and rec.tokens.num_segments == 1
    # the mask covers exactly the sampled tokens, the log-probs sit on them
    sampled = [t for t, m in zip(segment.token_ids, segment.action_mask) if m]
    assert sampled == [t for s in segment.turns for t in segment.token_ids[s.start:s.end]]
    assert len(sampled) == sum(len(ct.encode(r)) + 1 for r in ["ls -la /app", "cat README.md | head", "echo done"])
    assert [lp for lp, m in zip(segment.logprobs, segment.action_mask) if m] == [-1.0] * len(sampled)
    assert [lp for lp, m in zip(segment.sampling_logprobs, segment.action_mask) if not m] == [0.0] * (
        len(segment.token_ids) - len(sampled))


def test_the_sequence_keeps_what_a_rerender_would_lose(tokenizer):
    """With thinking off the template prompts with <think></think>, and a re-render of history
    drops it and the reasoning: the sequence keeps the tokens the model saw and sampled."""
    ct = HFChatTokenizer(tokenizer, "tiny")
    rec = TokenRecorder(ct, thinking=False)
    rec.prompt(SENT)
    first = Completion(text="ls", token_ids=ct.encode("<think>hmm</think>ls") + [ct.eos_token_ids[0]],
                       logprobs=[-1.0] * 9, sampling_logprobs=None)
    first.logprobs = [-1.0] * len(first.token_ids)
    rec.record(0, SENT, first)
    sent = SENT + [first.assistant_message(), {"role": "user", "content": "ok"}]
    prompt = rec.prompt(sent)
    text = ct.decode(prompt)
    assert "<think></think><think>hmm</think>ls<|im_end|>\n<|im_start|>user\nok<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n<think></think>")
    assert rec.tokens.num_segments == 1 and rec.tokens.segments[0].sampling_logprobs is None


def test_a_trimmed_context_or_a_rewriting_template_starts_a_counted_segment(tokenizer):
    ct = HFChatTokenizer(tokenizer, "tiny")
    rec = TokenRecorder(ct)
    rec.prompt(SENT)
    c = canonical(ct, "ls")
    rec.record(0, SENT, c)
    trimmed = [SENT[0], {"role": "user", "content": "[elided]"}, c.assistant_message(),
               {"role": "user", "content": "next"}]
    assert rec.prompt(trimmed) == ct.encode(ct.chat_text(trimmed, add_generation_prompt=True))
    rec.record(1, trimmed, canonical(ct, "pwd"))
    assert [s.reason for s in rec.tokens.segments] == ["first", "context_trimmed"]
    assert rec.tokens.segments[1].turns[0].turn == 1

    # a template that shows only the last assistant message rewrites history
    forgetful = make_tokenizer(
        "{% for m in messages %}{% if m.role != 'assistant' or loop.last %}<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    fct = HFChatTokenizer(forgetful, "forgetful")
    rec = TokenRecorder(fct)
    rec.prompt(SENT)
    c = canonical(fct, "ls")
    rec.record(0, SENT, c)
    sent = SENT + [c.assistant_message(), {"role": "user", "content": "next"}]
    rec.prompt(sent)
    rec.record(1, sent, canonical(fct, "pwd"))
    assert [s.reason for s in rec.tokens.segments] == ["first", "template_rewrites_history"]


def test_sampling_logprobs_and_raw_logprobs_rescore(backend, model):
    for temperature in (0.6, 1.3):
        c = backend.complete(SENT, params=SamplingParams(max_new_tokens=20, seed=5, temperature=temperature))
        ids = c.prompt_token_ids + c.token_ids
        n = len(c.prompt_token_ids)
        raw = rescore(model, ids)[n - 1:]
        warm = rescore(model, ids, temperature)[n - 1:]
        assert torch.allclose(raw, torch.tensor(c.logprobs), atol=1e-4)
        assert torch.allclose(warm, torch.tensor(c.sampling_logprobs), atol=1e-4)
        assert not torch.allclose(raw, warm, atol=1e-3)  # the two really are different
    greedy = backend.complete(SENT, params=SamplingParams(max_new_tokens=5, temperature=0))
    assert greedy.sampling_logprobs is None and greedy.logprobs is not None


def test_a_seeded_request_is_the_same_alone_or_in_a_batch(backend):
    import threading

    p = SamplingParams(max_new_tokens=16, seed=11, temperature=1.0)
    alone = backend.complete(SENT, params=p)
    others = [SamplingParams(max_new_tokens=16, seed=s, temperature=1.0) for s in (1, 2, 3)]
    got: dict[int, Completion] = {}
    gate = threading.Barrier(4)

    def ask(i: int, params: SamplingParams, messages) -> None:
        gate.wait()
        got[i] = backend.complete(messages, params=params)

    threads = [threading.Thread(target=ask, args=(0, p, SENT))] + [
        threading.Thread(target=ask, args=(i + 1, q, SENT[1:])) for i, q in enumerate(others)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert got[0].token_ids == alone.token_ids  # padded into a batch, the same draws
    assert torch.allclose(torch.tensor(got[0].logprobs), torch.tensor(alone.logprobs), atol=1e-4)


@pytest.mark.docker
def test_an_episode_is_one_rescorable_sequence_reproducible_by_seed(backend, model, base_image, tmp_path):
    assert is_token_backend(backend)
    spec = TaskSpec(name="tokens", instruction="list the files in /app", image=base_image)
    params = SamplingParams(max_new_tokens=24, temperature=0.8)
    env = TerminalEnv(spec, max_steps=20)
    try:
        traj = run_agent(env, get_harness("generic"), backend, params=params, max_turns=4, seed=3,
                         trajectory_path=tmp_path / "t.json")
        again = run_agent(env, get_harness("generic"), backend, params=params, max_turns=4, seed=3)
        other = run_agent(env, get_harness("generic"), backend, params=params, max_turns=4, seed=4)
    finally:
        env.close()
    tokens = traj.tokens
    assert tokens is not None and tokens.num_segments == 1 and len(traj.turns) == 4
    (segment,) = tokens.segments
    completions = [t.completion for t in traj.turns]
    for span, c in zip(segment.turns, completions):
        assert segment.token_ids[span.start:span.end] == c.token_ids  # the sampled tokens, in place
        assert segment.token_ids[:span.start] == c.prompt_token_ids  # the prompt was the sequence
        assert span.weights == backend.weights_version == c.weights
    assert sum(segment.action_mask) == sum(len(c.token_ids) for c in completions)
    # one forward pass over the whole episode reproduces every sampled log-prob
    raw = rescore(model, segment.token_ids)
    warm = rescore(model, segment.token_ids, params.temperature)
    picked = [i for i, m in enumerate(segment.action_mask) if m]
    assert torch.allclose(raw[[i - 1 for i in picked]], torch.tensor([segment.logprobs[i] for i in picked]), atol=1e-4)
    assert torch.allclose(warm[[i - 1 for i in picked]],
                          torch.tensor([segment.sampling_logprobs[i] for i in picked]), atol=1e-4)
    # each turn's prompt ran only its new tokens: the rest came from the previous turn's cache
    assert backend.stats()["reused_tokens"] >= sum(s.prompt_start for s in segment.turns) > 0
    # the same seed replays the episode; another seed does not
    assert again.tokens.segments[0].token_ids == segment.token_ids
    assert other.tokens.segments[0].token_ids != segment.token_ids
    # saved as schema version 2 with the tokens
    saved = Trajectory.load(tmp_path / "t.json")
    assert saved.version == 2 and saved.tokens == traj.tokens


@pytest.mark.docker
def test_a_weight_swap_changes_the_next_rollout_and_is_recorded(backend, model, tokenizer, base_image, tmp_path):
    spec = TaskSpec(name="tokens", instruction="list the files in /app", image=base_image)
    params = SamplingParams(max_new_tokens=12, temperature=0.8)
    env = TerminalEnv(spec, max_steps=10)
    original = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        before = run_agent(env, get_harness("generic"), backend, params=params, max_turns=1, seed=1)
        other = make_model(tokenizer, seed=1, context=8192)
        other.save_pretrained(tmp_path / "step-1")
        assert backend.load_weights(tmp_path / "step-1") == "step-1"
        assert backend._sampler._prefixes == {}  # keys and values of the old weights are gone
        after = run_agent(env, get_harness("generic"), backend, params=params, max_turns=1, seed=1)
        assert backend.load_weights(original, version="base") == "base"
        back = run_agent(env, get_harness("generic"), backend, params=params, max_turns=1, seed=1)
    finally:
        env.close()
        model.load_state_dict(original)
    assert [s.weights for s in after.tokens.segments[0].turns] == ["step-1"]
    assert after.turns[0].completion.weights == "step-1"
    assert after.turns[0].completion.logprobs != before.turns[0].completion.logprobs
    assert back.tokens.segments[0].token_ids == before.tokens.segments[0].token_ids
    assert back.turns[0].completion.weights == "base"


def test_load_weights_refuses_what_does_not_fit(backend):
    from terminal_env.errors import ConfigError

    with pytest.raises(ConfigError, match="do not fit"):
        backend.load_weights({"nonsense.weight": torch.zeros(2)})
    with pytest.raises(ConfigError, match="checkpoint directory or a state dict"):
        backend.load_weights(42)


def test_a_version_1_trajectory_file_still_loads(tmp_path):
    traj = Trajectory(task={"name": "t"}, harness="generic", model={"name": "m", "backend": "B"})
    data = json.loads(traj.model_dump_json(by_alias=True))
    data["version"] = 1
    del data["tokens"]
    (tmp_path / "v1.json").write_text(json.dumps(data))
    loaded = Trajectory.load(tmp_path / "v1.json")
    assert loaded.version == 1 and loaded.tokens is None
    # saving makes a missing directory (it raised FileNotFoundError naming a temporary file)
    saved = loaded.save(tmp_path / "runs" / "0001" / "trajectory.json")
    assert Trajectory.load(saved).task.name == "t"
    data["version"] = 3
    (tmp_path / "v3.json").write_text(json.dumps(data))
    from terminal_env.errors import ConfigError

    with pytest.raises(ConfigError, match="reads versions 1, 2"):
        Trajectory.load(tmp_path / "v3.json")


def test_the_prefix_cache_reuses_an_extended_prompt_and_keeps_its_token_budget(model, tokenizer):
    backend = TransformersBackend(model, tokenizer, name="tiny", prefix_cache_tokens=300)
    try:
        params = SamplingParams(max_new_tokens=8, seed=1, temperature=1.0)
        prompt = backend.prompt_ids(SENT)
        first = backend.complete_tokens(prompt, params=params)
        longer = prompt + first.token_ids + backend.chat_tokenizer.encode("\nnext turn")
        before = backend.stats()["reused_tokens"]
        again = backend.complete_tokens(longer, params=params)
        assert backend.stats()["reused_tokens"] - before == len(prompt) + len(first.token_ids) - 1
        kept = [ids for ids, _ in backend._sampler._prefixes.values()]
        assert len(kept) == 1 and kept[0] == longer + again.token_ids[:-1]  # the older turn was dropped
        backend.complete_tokens(backend.chat_tokenizer.encode("x" * 400), params=params)  # over budget
        assert sum(len(ids) for ids, _ in backend._sampler._prefixes.values()) <= 300
    finally:
        backend.close()
