"""TransformersBackend on a tiny model and tokenizer built in-process (no downloads)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

import tiny_lm  # noqa: E402 - after the importorskips
from tiny_lm import CORPUS, make_model, make_tokenizer  # noqa: E402

from terminal_env.models.base import ContextOverflowError, SamplingParams, parse_tool_call_blocks
from terminal_env.models.hf_backend import TransformersBackend
from terminal_env.models.registry import make_backend

USER = [{"role": "user", "content": "list the files in /app"}]


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return make_model(tokenizer)


@pytest.fixture(scope="module")
def backend(model, tokenizer):
    return TransformersBackend(model, tokenizer, name="tiny")


def rescore(model, prompt_ids, token_ids):
    return tiny_lm.rescore(model, prompt_ids + token_ids)[len(prompt_ids) - 1:]


def test_completion_tokens_text_and_logprobs(backend, model, tokenizer):
    c = backend.complete(USER, params=SamplingParams(max_new_tokens=24, seed=1))
    assert c.model == "tiny" and c.finish_reason in ("stop", "length")
    assert c.token_ids and 1 <= len(c.token_ids) <= 24
    assert tokenizer.decode(c.token_ids, skip_special_tokens=True) == c.text
    assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids)
    assert all(x <= 0 for x in c.logprobs)
    assert c.prompt_token_ids == backend.prompt_ids(USER)
    assert tokenizer.decode(c.prompt_token_ids).endswith("<|im_start|>assistant\n<think></think>")
    assert c.usage.prompt_tokens == len(c.prompt_token_ids)
    assert c.usage.completion_tokens == len(c.token_ids)
    # the log-probs are the raw model's (temperature 1), so a forward pass reproduces them
    again = rescore(model, c.prompt_token_ids, c.token_ids)
    assert torch.allclose(again, torch.tensor(c.logprobs), atol=1e-4)


def test_seed_reproduces_and_differs(backend):
    p = SamplingParams(max_new_tokens=20, seed=123, temperature=1.0)
    a = backend.complete(USER, params=p)
    b = backend.complete(USER, params=p)
    other = backend.complete(USER, params=p.model_copy(update={"seed": 124}))
    assert a.token_ids == b.token_ids and a.logprobs == b.logprobs
    assert other.token_ids != a.token_ids


def test_seed_leaves_the_global_rng_alone(backend):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    backend.complete(USER, params=SamplingParams(max_new_tokens=4, seed=9))
    assert torch.equal(torch.rand(3), expected)


def test_greedy_is_deterministic_and_stop_strings_cut(backend, model):
    greedy = SamplingParams(max_new_tokens=30, temperature=0)
    a = backend.complete(USER, params=greedy)
    assert backend.complete(USER, params=greedy).token_ids == a.token_ids
    assert a.logprobs is not None
    assert torch.allclose(rescore(model, a.prompt_token_ids, a.token_ids),
                          torch.tensor(a.logprobs), atol=1e-4)
    if len(a.text) < 6:
        pytest.skip("the tiny model's greedy text is too short to cut")
    stop = a.text[3:5]
    cut = backend.complete(USER, params=greedy.model_copy(update={"stop": [stop]}))
    assert cut.finish_reason == "stop"
    assert cut.text == a.text[: a.text.index(stop)]
    assert cut.token_ids == a.token_ids[: len(cut.token_ids)]
    assert len(cut.token_ids) < len(a.token_ids)


def test_max_new_tokens_bounds_output(backend):
    c = backend.complete(USER, params=SamplingParams(max_new_tokens=3, seed=0))
    assert len(c.token_ids) <= 3
    if len(c.token_ids) == 3 and c.token_ids[-1] not in backend.eos_token_ids:
        assert c.finish_reason == "length"


def test_overlong_prompt_is_a_context_overflow(backend):
    long = [{"role": "user", "content": " ".join(CORPUS) * 20}]
    with pytest.raises(ContextOverflowError, match="max_input_tokens"):
        backend.complete(long, params=SamplingParams(max_input_tokens=256, max_new_tokens=4))
    # beyond the model's own context (512 positions) even with a large budget
    with pytest.raises(ContextOverflowError, match="context"):
        backend.complete(long * 3, params=SamplingParams(max_new_tokens=4))


def test_template_gets_tools_and_thinking(backend, tokenizer):
    plain = tokenizer.decode(backend.prompt_ids(USER))
    with_tools = tokenizer.decode(backend.prompt_ids(USER, [{"type": "function", "function": {
        "name": "run_shell", "parameters": {"type": "object"}}}]))
    thinking = tokenizer.decode(backend.prompt_ids(USER, thinking=True))
    assert "tools: run_shell" in with_tools and "tools:" not in plain
    assert plain.endswith("<think></think>") and not thinking.endswith("<think></think>")


def test_tool_call_blocks_are_parsed():
    text, calls = parse_tool_call_blocks(
        'Let me look.\n<tool_call>\n{"name": "run", "arguments": {"cmd": "ls"}}\n</tool_call>')
    assert text == "Let me look."
    assert [(c.name, c.arguments) for c in calls] == [("run", '{"cmd": "ls"}')]
    assert parse_tool_call_blocks("<tool_call>not json</tool_call>")[1] == []


def test_threads_share_one_backend(backend):
    import threading

    p = SamplingParams(max_new_tokens=8, seed=42)
    expected = backend.complete(USER, params=p).token_ids
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(backend.complete(USER, params=p).token_ids))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert got == [expected] * 3


def test_loads_from_a_directory_through_the_registry(model, tokenizer, tmp_path):
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    b = make_backend(f"hf:{tmp_path / 'tiny'}", dtype="float32")
    assert b.name == "tiny"
    p = SamplingParams(max_new_tokens=10, seed=7)
    in_memory = TransformersBackend(model, tokenizer).complete(USER, params=p)
    assert b.complete(USER, params=p).token_ids == in_memory.token_ids


def test_missing_directory_is_a_config_error(tmp_path):
    from terminal_env.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot load"):
        TransformersBackend(str(tmp_path / "nothing-here"))
