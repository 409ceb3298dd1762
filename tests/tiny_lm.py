"""A tiny causal LM and tokenizer built in-process (no downloads), for the tests of the local
backend and of token-exact rollouts. Import it after ``pytest.importorskip("transformers")``."""

from __future__ import annotations

import pytest
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

TEMPLATE = (
    "{% if tools %}<|im_start|>system\ntools: {% for t in tools %}{{ t.function.name }} "
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
    "{% endif %}"
)
CORPUS = [
    "ls -la /app", "cat README.md | head", "the quick brown fox jumps over the lazy dog",
    "grep -rn hello src/", "python -m pytest -q", "echo done > /tmp/out.txt",
]


def make_tokenizer(template: str = TEMPLATE) -> transformers.PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = template
    return fast


def make_model(tokenizer, seed: int = 0, context: int = 512, hidden: int = 32,
               layers: int = 2) -> transformers.LlamaForCausalLM:
    """The tests' model: 2 layers of width 32 (``hidden``, ``layers``: larger, for benchmarks)."""
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None)
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval()


def rescore(model, ids: list[int], temperature: float = 1.0) -> torch.Tensor:
    """log p(ids[i] | ids[:i]) for every i >= 1 (index i-1 of the result), logits / temperature."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    logp = (logits / temperature).log_softmax(-1)
    return logp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def state(module) -> dict:
    """A copy of ``module``'s weights (to compare with after training)."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.fixture(scope="module")
def tokenizer():
    """The tiny tokenizer, as a fixture (test modules import it with the model helpers)."""
    return make_tokenizer()


@pytest.fixture
def pair(tokenizer):
    """A fresh actor/critic pair of the tiny model (1,024-token context)."""
    from terminal_env.train.models import Pair

    return Pair.start(make_model(tokenizer, context=1024), tokenizer)
