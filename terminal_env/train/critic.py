"""Critic recalibration, the actor frozen: fit the critic to the returns of the current actor's
episodes, and end on a measured criterion.

The targets are Monte-Carlo returns over the action tokens (GAE with lambda 1 and no critic:
with gamma 1, every action token's target is its episode's reward), which do not move while the
critic learns. Episodes are split once into a training part and a held-out part; after each epoch
the critic's explained variance and value/return correlation on the held-out action tokens are
measured and reported, and training ends as soon as the explained variance reaches
``target_explained_variance`` (or after ``epochs``). PPO reads the final measurement from the
checkpoint and refuses a critic below its threshold unless told to.

Under torchrun with a sharded critic each rank trains on its share of each batch (its loss scaled,
:mod:`~terminal_env.train.distributed`); every rank measures the whole held-out part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .data import Episode, Sequence, episode_targets, pad, pad_id, pad_rows
from .distributed import loss_scale, mean_over_ranks, rank_share, require_sharded
from .losses import correlation, explained_variance, value_loss
from .models import Pair, action_values


@dataclass
class CriticConfig:
    epochs: int = 20
    lr: float = 3e-4
    batch_size: int = 8
    gamma: float = 1.0
    holdout: float = 0.25
    target_explained_variance: float = 0.5
    max_grad_norm: float = 1.0
    seed: int = 0


def recalibrate(pair: Pair, episodes: list[Episode], config: CriticConfig | None = None) -> dict[str, Any]:
    """Fit ``pair.critic`` in place; returns the held-out measurements before training and after
    each epoch, and whether the target was reached."""
    config = config or CriticConfig()
    if len(episodes) < 4:
        raise ConfigError(f"critic recalibration needs at least 4 episodes (a held-out part to measure "
                          f"on), not {len(episodes)}")
    pair.actor.requires_grad_(False)  # frozen: not trained, not run
    critic, device = pair.critic, next(pair.critic.parameters()).device
    require_sharded(critic)
    critic.requires_grad_(True)
    generator = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(len(episodes), generator=generator).tolist()
    held = max(1, round(len(episodes) * config.holdout))
    rows = _rows(pair, [episodes[i] for i in order[held:]], config)
    held_out = _rows(pair, [episodes[i] for i in order[:held]], config)
    optimizer = torch.optim.AdamW([p for p in critic.parameters() if p.requires_grad], lr=config.lr)
    fill = pad_id(pair.tokenizer)
    history = [{"epoch": 0, **_measure(critic, held_out, fill, device, config)}]
    for epoch in range(1, config.epochs + 1):
        critic.train()
        shuffled = torch.randperm(len(rows), generator=generator).tolist()
        total = 0.0
        for start in range(0, len(shuffled), config.batch_size):
            picked = shuffled[start:start + config.batch_size]
            share, real = rank_share(picked)
            part = [rows[i] for i in share]
            batch = pad([s for s, _ in part], fill, device)
            if not real:
                batch["mask"].zero_()
            returns = pad_rows([r for _, r in part], batch["mask"].shape[1], device)
            values = action_values(critic, batch)
            loss = value_loss(values, values.detach(), returns, batch["mask"], clip=None)
            loss = loss * loss_scale(batch["mask"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), config.max_grad_norm)
            optimizer.step()
            total += mean_over_ranks(loss.detach()).item() * len(picked)
        history.append({"epoch": epoch, "train_loss": total / len(rows),
                        **_measure(critic, held_out, fill, device, config)})
        if history[-1]["explained_variance"] >= config.target_explained_variance:
            break
    critic.eval()
    final = history[-1]
    return {"epochs": history, "explained_variance": final["explained_variance"],
            "correlation": final["correlation"], "initial_explained_variance": history[0]["explained_variance"],
            "target_explained_variance": config.target_explained_variance,
            "reached": final["explained_variance"] >= config.target_explained_variance,
            "episodes": len(episodes), "held_out": held}


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
             config: CriticConfig) -> dict[str, float]:
    """Explained variance and correlation of the values with the returns, over every held-out
    action token."""
    critic.eval()
    values, returns = [], []
    for start in range(0, len(rows), config.batch_size):
        part = rows[start:start + config.batch_size]
        batch = pad([s for s, _ in part], fill, device)
        v = action_values(critic, batch)
        r = pad_rows([r for _, r in part], batch["mask"].shape[1], device)
        keep = batch["mask"] > 0
        values.append(v[keep].float().cpu())
        returns.append(r[keep].float().cpu())
    v, r = torch.cat(values), torch.cat(returns)
    return {"explained_variance": round(explained_variance(v, r), 4), "correlation": round(correlation(v, r), 4)}
