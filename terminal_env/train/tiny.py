"""A tiny causal LM and tokenizer made in-process, with no download: for smoke tests, examples and
CI, where no model can be fetched (``examples/trl_grpo.py`` trains it with TRL; the test suite
uses it throughout). Its tokenizer is a byte-level BPE of 320 tokens trained on a few shell lines,
with ChatML-style special tokens; its model a Llama of a chosen width and depth.
"""

from __future__ import annotations

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
    """The tiny tokenizer, with ``template`` as its chat template (the default renders messages and
    the names of tools; pass a template that renders tool calls for TRL's tool loop)."""
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


def teach(model: transformers.PreTrainedModel, tokenizer: transformers.PreTrainedTokenizerBase,
          pairs: list[tuple[str, str]], *, steps: int = 60, lr: float = 3e-3) -> float:
    """``steps`` passes of teacher-forced training on (prompt text, completion text) pairs, the
    loss on the completion only: enough for the tiny model to answer in a chosen format (a tool
    call, say) often but not always, so that a smoke test of an RL trainer sees mixed rewards.
    Leaves the model in eval mode; returns the last loss."""
    encoded = [(tokenizer(p, add_special_tokens=False).input_ids, tokenizer(c, add_special_tokens=False).input_ids)
               for p, c in pairs]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        for p_ids, c_ids in encoded:
            labels = torch.tensor([[-100] * len(p_ids) + c_ids])
            loss = model(input_ids=torch.tensor([p_ids + c_ids]), labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return float(loss.detach())
