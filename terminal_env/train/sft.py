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
from .distributed import loss_scale, mean_over_ranks, rank_share, require_sharded
from .losses import masked_mean
from .models import Pair, sampled_logprobs


@dataclass
class SFTConfig:
    epochs: int = 1
    lr: float = 1e-4
    batch_size: int = 4
    max_grad_norm: float = 1.0
    seed: int = 0


def sft(pair: Pair, samples: list[Sequence], config: SFTConfig | None = None) -> dict[str, Any]:
    """Train ``pair.actor`` on ``samples`` in place; returns the mean loss of each epoch."""
    config = config or SFTConfig()
    if not samples:
        raise ConfigError("no supervised samples to train on")
    actor, device = pair.actor, next(pair.actor.parameters()).device
    require_sharded(actor)
    pair.critic.requires_grad_(False)  # frozen: not trained, not even run
    optimizer = torch.optim.AdamW([p for p in actor.parameters() if p.requires_grad], lr=config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    fill = pad_id(pair.tokenizer)
    losses = []
    actor.train()
    for _ in range(config.epochs):
        order = torch.randperm(len(samples), generator=generator).tolist()
        total, count = 0.0, 0
        for start in range(0, len(order), config.batch_size):
            share, real = rank_share(order[start:start + config.batch_size])
            batch = pad([samples[i] for i in share], fill, device)
            if not real:
                batch["mask"].zero_()
            loss = -masked_mean(sampled_logprobs(actor, batch), batch["mask"]) * loss_scale(batch["mask"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(actor.parameters(), config.max_grad_norm)
            optimizer.step()
            total, count = total + mean_over_ranks(loss.detach()).item(), count + 1
        losses.append(total / count)
    actor.eval()
    return {"loss": losses, "samples": len(samples), "tokens": sum(sum(s.mask) for s in samples)}

