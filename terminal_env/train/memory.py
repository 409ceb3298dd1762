"""Precision and memory: what lets the same SFT, critic and PPO code train a model larger than
the tests' (docs/training-scale.md works the numbers).

* **fp32 master weights.** The trainer keeps every weight in float32 whatever dtype the
  checkpoint holds (:func:`keep_fp32`; ``Pair.load`` loads in float32): AdamW on bf16 weights has
  no fp32 copy, and an update below half a bf16 step (about 0.4% of the weight) rounds away, which
  at lr 1e-6 is every update.
* **bf16 compute** (``precision="bf16"``): one process runs its forward passes under
  ``torch.autocast(bfloat16)`` (:func:`compute`) with the float32 weights; under FSDP2 the shards
  stay float32 and each layer is gathered in bf16 with gradients reduced in float32
  (``distributed.shard(..., mixed_precision=True)``). Log-probs, entropies, values and losses are
  float32 either way.
* **Activation checkpointing** (:func:`checkpoint_layers`): each decoder layer keeps only its
  input and is recomputed in the backward pass (Hugging Face's ``gradient_checkpointing_enable``,
  active in train mode).
* **Log-probs and entropy on action tokens, in chunks** (:func:`action_logprobs`): the body's
  hidden states, then the LM head, the log-softmax and the entropy over ``chunk`` trained
  positions at a time, each chunk recomputed in the backward pass: no ``[batch, tokens, vocab]``
  logits, at most ``[chunk, vocab]`` alive.
* **Token-budget micro-batches** (:func:`micro_batches`, :func:`token_scale`): a minibatch is cut
  into micro-batches of at most ``max_tokens`` padded tokens; their gradients accumulate, each
  loss scaled by its share of the minibatch's trained tokens, so the step is the un-split one.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch

from ..errors import ConfigError
from .distributed import is_distributed, is_sharded, max_over_ranks, rank_share, world_size

PRECISIONS = ("fp32", "bf16")
#: the name of the FSDP forward method :func:`action_logprobs` registers on a sharded actor
_FORWARD = "terminal_env_action_logprobs"


def check_precision(precision: str, field: str) -> None:
    if precision not in PRECISIONS:
        raise ConfigError(f"{field} is the compute precision, one of {', '.join(PRECISIONS)}, not {precision!r}")


def keep_fp32(*models: torch.nn.Module) -> None:
    """Cast ``models``' floating weights to float32 in place (the master weights the optimizer
    steps); a sharded model must have been float32 before it was sharded."""
    for model in models:
        low = [n for n, p in model.named_parameters() if p.is_floating_point() and p.dtype != torch.float32]
        if not low:
            continue
        if is_sharded(model):
            raise ConfigError(f"{type(model).__name__} was sharded with {len(low)} weights not in float32 (e.g. "
                              f"{low[0]}): load it in float32 (Pair.load does) before distributed.shard(); "
                              f"bf16 compute comes from shard(..., mixed_precision=True)")
        model.float()


def compute(precision: str, device: Any) -> contextlib.AbstractContextManager:
    """The context of a forward pass: bf16 autocast for ``precision="bf16"``, nothing for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def checkpoint_layers(model: Any, on: bool = True) -> None:
    """Activation checkpointing of each decoder layer of a Hugging Face model (or of a critic's
    body), recomputed in the backward pass; it acts in train mode only."""
    lm = model if hasattr(model, "gradient_checkpointing_enable") else getattr(model, "model", None)
    if not hasattr(lm, "gradient_checkpointing_enable"):
        raise ConfigError(f"{type(model).__name__} has no gradient_checkpointing_enable(): activation "
                          f"checkpointing needs a Hugging Face model (or a Critic around one)")
    if on:
        lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    elif getattr(lm, "is_gradient_checkpointing", False):
        lm.gradient_checkpointing_disable()


def action_logprobs(actor: Any, batch: dict[str, torch.Tensor], temperature: float = 1.0,
                    chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-prob of each trained token (``batch["mask"]`` 1) given the ones before it, under
    ``logits / temperature``, and the entropy of the distribution it was drawn from: two float32
    ``[batch, tokens]`` tensors, 0 wherever the mask is 0 (and at the first token, which nothing
    predicts). Equal to :func:`~terminal_env.train.models.sampled_logprobs` and
    :func:`~terminal_env.train.losses.entropy`'s terms at those positions, without the logits of
    the others: the LM head runs on ``chunk`` positions at a time. On a sharded actor it runs as
    an FSDP forward method (the root's weights, the LM head's among them, gathered for it)."""
    if chunk < 1:
        raise ConfigError(f"the log-prob chunk is a number of tokens, at least 1, not {chunk}")
    args = (batch["input_ids"], batch["attention_mask"], batch["mask"], temperature, chunk)
    if not is_sharded(actor):
        return _action_logprobs(actor, *args)
    if not hasattr(actor, _FORWARD):
        from torch.distributed.fsdp import register_fsdp_forward_method  # the optional extra [train] (torch)

        setattr(actor, _FORWARD, functools.partial(_action_logprobs, actor))
        register_fsdp_forward_method(actor, _FORWARD)
    return getattr(actor, _FORWARD)(*args)


def _action_logprobs(actor: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, mask: torch.Tensor,
                     temperature: float, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    body = getattr(actor, actor.base_model_prefix)  # the transformer without the LM head
    hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    trained = mask[:, 1:] > 0  # token t+1 is predicted by the hidden state at t
    states, targets = hidden[:, :-1][trained], input_ids[:, 1:][trained]
    idle = len(targets) == 0
    if idle:  # nothing trained (a rank's filler): score one token with weight 0, so that the backward
        states, targets = hidden[:1, 0], input_ids[:1, 0]  # still reaches every weight, as FSDP needs
    head = actor.get_output_embeddings()
    cap = getattr(actor.config.get_text_config(), "final_logit_softcapping", None)
    scores = functools.partial(_chunk_scores, head, temperature, cap)
    parts = []
    for start in range(0, len(targets), chunk):
        piece = (states[start:start + chunk], targets[start:start + chunk])
        if torch.is_grad_enabled():  # keep only the chunk's input; the backward recomputes its logits
            parts.append(torch.utils.checkpoint.checkpoint(scores, *piece, use_reentrant=False))
        else:
            parts.append(scores(*piece))
    lp, ent = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    zeros = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    if idle:
        return zeros + 0.0 * lp.sum(), zeros + 0.0 * ent.sum()
    where = torch.nn.functional.pad(trained, (1, 0))
    return zeros.masked_scatter(where, lp), zeros.masked_scatter(where, ent)


def _chunk_scores(head: torch.nn.Module, temperature: float, cap: float | None, states: torch.Tensor,
                  targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    logits = head(states).float()
    if cap:  # Gemma's final soft-capping, as its forward applies it
        logits = torch.tanh(logits / cap) * cap
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, targets[:, None])[:, 0], -(logp.exp() * logp).sum(-1)


@dataclass
class MicroBatch:
    """This rank's part of one micro-batch of a minibatch."""

    #: the items (indices of the caller's rows) to pad into one batch
    items: list[int]
    #: False for a filler (this rank has nothing left in the minibatch): zero its loss mask
    real: bool
    #: the minibatch's trained tokens and items over every rank (the denominator of its token mean)
    tokens: int
    size: int
    #: the micro-batch that starts a minibatch (zero the gradients) and the one that ends it (step)
    first: bool
    last: bool


def micro_batches(order: Sequence[int], batch_size: int, lengths: Sequence[int], trained: Sequence[int],
                  max_tokens: int | None = None) -> Iterator[MicroBatch]:
    """The minibatches of ``order`` (``batch_size`` items each), each cut into micro-batches of
    this rank's share whose padded size (rows times the longest row) stays within ``max_tokens``
    (None: one micro-batch). ``lengths`` and ``trained`` are each item's tokens and trained
    tokens. An item longer than the budget is a micro-batch alone. Under a process group every
    rank gets as many micro-batches (fillers make up the count), since FSDP needs every rank in
    every forward and backward.

    >>> [(m.items, m.first, m.last) for m in micro_batches([0, 1, 2], 3, [4, 4, 9], [2, 2, 5], 8)]
    [([0, 1], True, False), ([2], False, True)]
    """
    if max_tokens is not None and max_tokens < 1:
        raise ConfigError(f"max_tokens_per_micro_batch is a number of tokens, at least 1 (or None), not {max_tokens}")
    for start in range(0, len(order), batch_size):
        minibatch = list(order[start:start + batch_size])
        tokens = sum(trained[i] for i in minibatch)
        share, real = rank_share(minibatch)
        parts: list[list[int]] = []
        for i in share:
            if parts and (max_tokens is None or (len(parts[-1]) + 1) * max(lengths[j] for j in parts[-1] + [i])
                                                <= max_tokens):
                parts[-1].append(i)
            else:
                parts.append([i])
        count = len(parts)
        if is_distributed():
            count = int(max_over_ranks(torch.tensor(float(count))))
        fillers = count - len(parts)
        shaped = [(p, real) for p in parts] + [(share[:1], False)] * fillers
        for n, (items, is_real) in enumerate(shaped):
            yield MicroBatch(items, is_real, tokens, len(minibatch), n == 0, n == len(shaped) - 1)


def token_scale(mask: torch.Tensor, tokens: int) -> float:
    """The factor for a micro-batch's token-mean loss over ``mask`` that makes the accumulated,
    rank-averaged gradients the gradient of the token mean over the whole minibatch (``tokens``
    trained tokens over every rank): ``world * micro-batch tokens / tokens``."""
    return world_size() * float(mask.detach().sum()) / max(tokens, 1)
