"""Critic recalibration, the actor frozen: fit the critic to the returns of the current actor's
episodes, and end on a measured criterion.

The targets are Monte-Carlo returns over the action tokens (GAE with lambda 1 and no critic:
with gamma 1, every action token's target is its episode's reward), which do not move while the
critic learns. Episodes are split once into a training part and a held-out part; after each epoch
the critic's explained variance and value/return correlation on the held-out action tokens are
measured and reported, and training ends as soon as the explained variance reaches
``target_explained_variance`` (or after ``epochs``). PPO reads the final measurement from the
checkpoint (or from the report, passed as ``PPO(..., calibration=report)``) and refuses a critic
below its threshold unless told to.

The report names the critic it measured (``"critic"``: the unsaved id this stage gives the
weights, :meth:`~terminal_env.train.models.Pair.critic_changed`; ``Pair.save`` rewrites it to the
saved id), so that it vouches for these weights alone: once PPO trains the critic, the record no
longer names it and PPO's gate refuses it (:func:`terminal_env.train.ppo.check_calibration`).

The held-out part must be able to measure: explained variance is undefined where the returns do
not vary (one held-out episode with gamma 1, or held-out episodes of one reward), and
recalibration refuses such a part instead of reporting a 0 it did not measure.

Two mechanics for a critic whose body is a copy of a language model (zero head, a body that knows
nothing of values):

* ``head_lr``: the value head learns at its own rate, usually above the body's: one rate for
  both must be high enough to move the zero head and low enough not to wreck the body's
  features. ``lr=0`` freezes the body (no gradient runs through it), which fits a linear value
  of the body's features.
* ``normalize_returns``: the critic fits the returns standardised by the training part's mean and
  standard deviation (targets of variance 1, whatever the reward's scale; ``train_loss`` is then
  in those units); the two are folded into the head at the end (and applied in every
  measurement), so the values come out, and PPO reads them, in reward units.

Under torchrun with a sharded critic each rank trains on its share of each batch (its loss scaled,
:mod:`~terminal_env.train.distributed`); every rank measures the whole held-out part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .data import Episode, Sequence, episode_targets, pad, pad_id, pad_rows
from .distributed import mean_over_ranks, require_sharded
from .losses import correlation, explained_variance, value_loss
from .memory import check_precision, checkpoint_layers, compute, keep_fp32, micro_batches, token_scale
from .lora import mark_trainable
from .models import Pair, action_values, critic_optimizer


@dataclass
class CriticConfig:
    epochs: int = 20
    #: the learning rate of the critic's body (and of its head when ``head_lr`` is None)
    lr: float = 3e-4
    #: the value head's learning rate (None: ``lr``)
    head_lr: float | None = None
    batch_size: int = 8
    gamma: float = 1.0
    holdout: float = 0.25
    #: fit standardised returns; values still come out in reward units (the module docstring)
    normalize_returns: bool = False
    target_explained_variance: float = 0.5
    max_grad_norm: float = 1.0
    seed: int = 0
    #: "bf16": forward passes under bf16 autocast (the weights stay float32); "fp32"
    precision: str = "fp32"
    #: recompute each decoder layer in the backward pass instead of keeping its activations
    activation_checkpointing: bool = False
    #: cut each batch into micro-batches of at most this many padded tokens (gradients accumulate)
    max_tokens_per_micro_batch: int | None = None


def recalibrate(pair: Pair, episodes: list[Episode], config: CriticConfig | None = None) -> dict[str, Any]:
    """Fit ``pair.critic`` in place; returns the held-out measurements before training and after
    each epoch (with the critic's gradient norm before clipping, mean and max over the epoch's
    steps), whether the target was reached, and the id of the critic measured (``"critic"``):
    the calibration record that PPO's gate reads, from pair.json once saved with
    ``metrics={"critic": report}``, or passed in memory as ``PPO(pair, config, calibration=report)``."""
    config = config or CriticConfig()
    if not 0 < config.holdout < 1:
        raise ConfigError(f"CriticConfig.holdout is the share of episodes held out to measure the critic: "
                          f"between 0 and 1 (e.g. 0.25), not {config.holdout}")
    if len(episodes) < 4:
        raise ConfigError(f"critic recalibration needs at least 4 episodes (a held-out part to measure "
                          f"on), not {len(episodes)}")
    check_precision(config.precision, "CriticConfig.precision")
    pair.actor.requires_grad_(False)  # frozen: not trained, not run
    critic, device = pair.critic, next(pair.critic.parameters()).device
    require_sharded(critic)
    keep_fp32(critic)  # the master weights
    checkpoint_layers(critic, config.activation_checkpointing)
    mark_trainable(critic.model, keep=[critic.head])  # the body's LoRA adapter alone where it has one
    if config.lr == 0:  # a frozen body: no gradient through it at all
        critic.model.requires_grad_(False)
    generator = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(len(episodes), generator=generator).tolist()
    held = max(1, round(len(episodes) * config.holdout))
    if held >= len(episodes):
        raise ConfigError(f"CriticConfig.holdout={config.holdout} holds out all {len(episodes)} episodes: nothing "
                          f"is left to train on; hold out less, or give more episodes")
    rows = _rows(pair, [episodes[i] for i in order[held:]], config)
    held_out = _rows(pair, [episodes[i] for i in order[:held]], config)
    optimizer = critic_optimizer(critic, config.lr, config.head_lr, ("CriticConfig.lr", "CriticConfig.head_lr"))
    _require_measurable(held_out, held, len(episodes), config)
    fill = pad_id(pair.tokenizer)
    shift, scale = _return_scale(rows) if config.normalize_returns else (0.0, 1.0)
    measured = pair.critic_changed("critic")  # from here on the weights change: a new id
    _rescale_head(critic.head, shift, scale, into_units=False)  # values now in standard units
    history = [{"epoch": 0, **_measure(critic, held_out, fill, device, config, shift, scale)}]
    for epoch in range(1, config.epochs + 1):
        critic.train()
        shuffled = torch.randperm(len(rows), generator=generator).tolist()
        lengths, trained = [len(s.token_ids) for s, _ in rows], [sum(s.mask) for s, _ in rows]
        total, norms = 0.0, []
        for micro in micro_batches(shuffled, config.batch_size, lengths, trained, config.max_tokens_per_micro_batch):
            part = [rows[i] for i in micro.items]
            batch = pad([s for s, _ in part], fill, device)
            if not micro.real:
                batch["mask"].zero_()
            returns = (pad_rows([r for _, r in part], batch["mask"].shape[1], device) - shift) / scale
            with compute(config.precision, device):
                values = action_values(critic, batch)
            loss = value_loss(values.float(), values.detach().float(), returns, batch["mask"], clip=None)
            loss = loss * token_scale(batch["mask"], micro.tokens)
            if micro.first:
                optimizer.zero_grad(set_to_none=True)
                step_loss = 0.0
            loss.backward()
            step_loss += mean_over_ranks(loss.detach()).item()
            if micro.last:
                norms.append(grad_norm(torch.nn.utils.clip_grad_norm_(critic.parameters(), config.max_grad_norm)))
                optimizer.step()
                total += step_loss * micro.size
        history.append({"epoch": epoch, "train_loss": total / len(rows),
                        "critic_grad_norm": sum(norms) / len(norms), "critic_grad_norm_max": max(norms),
                        **_measure(critic, held_out, fill, device, config, shift, scale)})
        if _reached(history[-1]["explained_variance"], config):
            break
    critic.eval()
    _rescale_head(critic.head, shift, scale, into_units=True)  # values in reward units again
    final = history[-1]
    return {"critic": measured, "epochs": history, "explained_variance": final["explained_variance"],
            "correlation": final["correlation"], "initial_explained_variance": history[0]["explained_variance"],
            "target_explained_variance": config.target_explained_variance,
            "reached": _reached(final["explained_variance"], config),
            "episodes": len(episodes), "held_out": held,
            "return_mean": shift if config.normalize_returns else None,
            "return_std": scale if config.normalize_returns else None}


def _reached(ev: float | None, config: CriticConfig) -> bool:
    return ev is not None and ev >= config.target_explained_variance


def _require_measurable(held_out: list[tuple[Sequence, torch.Tensor]], held: int, total: int,
                        config: CriticConfig) -> None:
    """Refuse a held-out part whose returns do not vary over its action tokens: explained
    variance (and correlation) are undefined there, and no epoch could be measured."""
    returns = torch.cat([r[torch.tensor(s.mask) > 0].float() for s, r in held_out] or [torch.zeros(0)])
    if returns.numel() > 1 and float(returns.var(unbiased=False)) > 0:
        return
    value = f"all {float(returns[0]):g}" if returns.numel() else "no action tokens"
    raise ConfigError(f"the held-out part ({held} of {total} episodes, CriticConfig.holdout={config.holdout}) has "
                      f"returns that do not vary ({value}): explained variance is undefined there, so the critic "
                      f"cannot be measured. Recalibration requires a held-out set that can measure: hold out more "
                      f"episodes (CriticConfig.holdout, --holdout) or give more episodes, with rewards that differ")


def _return_scale(rows: list[tuple[Sequence, torch.Tensor]]) -> tuple[float, float]:
    """The mean and standard deviation of the returns over the action tokens of ``rows`` (a
    standard deviation of 1 when they do not vary: nothing to scale)."""
    returns = torch.cat([r[torch.tensor(s.mask) > 0].float() for s, r in rows])
    if returns.numel() == 0:
        return 0.0, 1.0
    std = float(returns.std(unbiased=False))
    return float(returns.mean()), std if std > 1e-8 else 1.0


@torch.no_grad()
def _rescale_head(head: torch.nn.Linear, shift: float, scale: float, *, into_units: bool) -> None:
    """Make the head give ``value * scale + shift`` (``into_units``: standard units to reward
    units) or ``(value - shift) / scale`` (the reverse) for the values it gave."""
    if shift == 0.0 and scale == 1.0:
        return
    if into_units:
        head.weight.mul_(scale)
        head.bias.mul_(scale).add_(shift)
    else:
        head.weight.div_(scale)
        head.bias.sub_(shift).div_(scale)


def _rows(pair: Pair, episodes: list[Episode], config: CriticConfig) -> list[tuple[Sequence, torch.Tensor]]:
    """Each sequence with its Monte-Carlo returns (no critic: values 0, lambda 1)."""
    out = []
    for episode in episodes:
        zeros = [torch.zeros(len(s.token_ids)) for s in episode.sequences]
        _, returns = episode_targets(episode, zeros, config.gamma, 1.0)
        out.extend(zip(episode.sequences, returns))
    return out


@torch.no_grad()
def _measure(critic: Any, rows: list[tuple[Sequence, torch.Tensor]], fill: int, device: Any,
             config: CriticConfig, shift: float = 0.0, scale: float = 1.0) -> dict[str, float]:
    """Explained variance and correlation of the values (in reward units: the head's output times
    ``scale`` plus ``shift``) with the returns, over every held-out action token (None where
    undefined: the correlation of a critic whose values do not vary, e.g. a fresh one)."""
    critic.eval()
    values, returns = [], []
    for start in range(0, len(rows), config.batch_size):
        part = rows[start:start + config.batch_size]
        batch = pad([s for s, _ in part], fill, device)
        v = action_values(critic, batch) * scale + shift
        r = pad_rows([r for _, r in part], batch["mask"].shape[1], device)
        keep = batch["mask"] > 0
        values.append(v[keep].float().cpu())
        returns.append(r[keep].float().cpu())
    v, r = torch.cat(values), torch.cat(returns)
    return {"explained_variance": _round(explained_variance(v, r)), "correlation": _round(correlation(v, r))}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def grad_norm(norm: torch.Tensor) -> float:
    """The float of a gradient norm from ``clip_grad_norm_`` (its total norm before clipping; of a
    sharded model's gradients a DTensor, made whole)."""
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
