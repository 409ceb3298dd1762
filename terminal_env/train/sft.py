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


class SFT:
    """SFT of ``pair.actor`` on ``samples`` one epoch at a time (:meth:`epoch`), with its state
    (optimizer, shuffling generator, epochs done) saved and restored by :meth:`state_dict` and
    :meth:`load_state_dict`: the loop validates a candidate after each epoch and resumes a killed
    stage from the last one saved, with the same result as a run that was never stopped."""

    def __init__(self, pair: Pair, samples: list[Sequence], config: SFTConfig | None = None):
        self.pair, self.samples, self.config = pair, samples, config or SFTConfig()
        if not samples:
            raise ConfigError("no supervised samples to train on")
        check_precision(self.config.precision, "SFTConfig.precision")
        actor = pair.actor
        self.device = next(actor.parameters()).device
        require_sharded(actor)
        keep_fp32(actor)  # the master weights: updates of lr 1e-6 vanish on bf16 weights
        checkpoint_layers(actor, self.config.activation_checkpointing)
        pair.critic.requires_grad_(False)  # frozen: not trained, not even run
        mark_trainable(actor)  # every weight, or its LoRA adapter alone where it has one (lora.py)
        self.optimizer = torch.optim.AdamW(trainable_parameters(actor), lr=self.config.lr)
        self.generator = torch.Generator().manual_seed(self.config.seed)
        self.fill = pad_id(pair.tokenizer)
        self.epochs_done = 0
        self.losses: list[float] = []

    def epoch(self) -> float:
        """One pass over the samples in a fresh order; returns its mean loss."""
        c, actor, samples = self.config, self.pair.actor, self.samples
        lengths, trained = [len(s.token_ids) for s in samples], [sum(s.mask) for s in samples]
        actor.train()
        order = torch.randperm(len(samples), generator=self.generator).tolist()
        total, count = 0.0, 0
        for micro in micro_batches(order, c.batch_size, lengths, trained, c.max_tokens_per_micro_batch):
            batch = pad([samples[i] for i in micro.items], self.fill, self.device)
            if not micro.real:
                batch["mask"].zero_()
            with compute(c.precision, self.device):
                logprobs, _ = action_logprobs(actor, batch, chunk=c.logprob_chunk)
            loss = -masked_mean(logprobs, batch["mask"]) * token_scale(batch["mask"], micro.tokens)
            if micro.first:
                self.optimizer.zero_grad(set_to_none=True)
                step_loss = 0.0
            loss.backward()
            step_loss += float(mean_over_ranks(loss.detach()))
            if micro.last:
                torch.nn.utils.clip_grad_norm_(actor.parameters(), c.max_grad_norm)
                self.optimizer.step()
                total, count = total + step_loss, count + 1
        actor.eval()
        self.epochs_done += 1
        self.losses.append(total / count)
        return self.losses[-1]

    def report(self) -> dict[str, Any]:
        return {"loss": list(self.losses), "samples": len(self.samples),
                "tokens": sum(sum(s.mask) for s in self.samples)}

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state(),
                "epochs_done": self.epochs_done, "losses": list(self.losses)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.epochs_done, self.losses = state["epochs_done"], list(state["losses"])


def sft(pair: Pair, samples: list[Sequence], config: SFTConfig | None = None) -> dict[str, Any]:
    """Train ``pair.actor`` on ``samples`` in place for ``config.epochs``; returns the mean loss of
    each epoch."""
    trainer = SFT(pair, samples, config)
    for _ in range(trainer.config.epochs):
        trainer.epoch()
    return trainer.report()
