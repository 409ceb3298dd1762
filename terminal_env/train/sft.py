"""Supervised fine-tuning of the actor, the critic frozen (the self-rewrite stage).

The loss is the mean negative log-likelihood of the trained tokens (an assistant's tokens of a
chat record, the sampled tokens of a token-exact episode), token-averaged over each batch. The
critic takes no part: it is neither in the optimizer nor run, and its weights come out bit for
bit as they went in (tested), so the checkpoint pairs the new actor with the same critic.

Under torchrun with a sharded actor each rank trains on its share of each batch, its loss scaled
so that the averaged gradient is the single-process one (:mod:`~terminal_env.train.distributed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .data import Sequence, pad, pad_id
from .distributed import mean_over_ranks, require_sharded
from .losses import masked_mean
from .memory import action_logprobs, check_precision, checkpoint_layers, compute, keep_fp32, micro_batches, token_scale
from .lora import mark_trainable, trainable_parameters
from .models import Pair


@dataclass
class SFTConfig:
    epochs: int = 1
    lr: float = 1e-4
    batch_size: int = 4
    max_grad_norm: float = 1.0
    seed: int = 0
    #: "bf16": forward passes under bf16 autocast (the weights stay float32); "fp32"
    precision: str = "fp32"
    #: recompute each decoder layer in the backward pass instead of keeping its activations
    activation_checkpointing: bool = False
    #: cut each batch into micro-batches of at most this many padded tokens (gradients accumulate)
    max_tokens_per_micro_batch: int | None = None
    #: the LM head and log-softmax run on this many trained tokens at a time
    logprob_chunk: int = 1024


def sft(pair: Pair, samples: list[Sequence], config: SFTConfig | None = None) -> dict[str, Any]:
    """Train ``pair.actor`` on ``samples`` in place; returns the mean loss of each epoch."""
    config = config or SFTConfig()
    if not samples:
        raise ConfigError("no supervised samples to train on")
    check_precision(config.precision, "SFTConfig.precision")
    actor, device = pair.actor, next(pair.actor.parameters()).device
    require_sharded(actor)
    keep_fp32(actor)  # the master weights: updates of lr 1e-6 vanish on bf16 weights
    checkpoint_layers(actor, config.activation_checkpointing)
    pair.critic.requires_grad_(False)  # frozen: not trained, not even run
    mark_trainable(actor)  # every weight, or its LoRA adapter alone where it has one (lora.py)
    optimizer = torch.optim.AdamW(trainable_parameters(actor), lr=config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    fill = pad_id(pair.tokenizer)
    lengths, trained = [len(s.token_ids) for s in samples], [sum(s.mask) for s in samples]
    losses = []
    actor.train()
    for _ in range(config.epochs):
        order = torch.randperm(len(samples), generator=generator).tolist()
        total, count = 0.0, 0
        for micro in micro_batches(order, config.batch_size, lengths, trained, config.max_tokens_per_micro_batch):
            batch = pad([samples[i] for i in micro.items], fill, device)
            if not micro.real:
                batch["mask"].zero_()
            with compute(config.precision, device):
                logprobs, _ = action_logprobs(actor, batch, chunk=config.logprob_chunk)
            loss = -masked_mean(logprobs, batch["mask"]) * token_scale(batch["mask"], micro.tokens)
            if micro.first:
                optimizer.zero_grad(set_to_none=True)
                step_loss = 0.0
            loss.backward()
            step_loss += float(mean_over_ranks(loss.detach()))
            if micro.last:
                torch.nn.utils.clip_grad_norm_(actor.parameters(), config.max_grad_norm)
                optimizer.step()
                total, count = total + step_loss, count + 1
        losses.append(total / count)
    actor.eval()
    return {"loss": losses, "samples": len(samples), "tokens": sum(sum(s.mask) for s in samples)}

