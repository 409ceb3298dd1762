"""PPO on the actor and the critic over multi-turn episodes (one file, top to bottom).

One :meth:`PPO.update` on a batch of episodes sampled by the current actor:

1. **Targets.** The critic's values of every sequence (no gradient); advantages and returns by
   GAE over each episode's action tokens alone, the episode's reward on its last action token
   (:func:`terminal_env.train.losses.gae`). The old log-probs are the ones recorded when the
   tokens were sampled (at the sampling temperature), never a re-scoring of text.
2. **Whitening.** Advantages are shifted and scaled over every action token of the batch.
3. **Epochs.** ``epochs`` passes over the sequences in minibatches: on the actor the clipped
   policy loss with dual clip, plus ``kl_coef`` times the KL to a reference model, minus
   ``entropy_coef`` times the entropy; on the critic the clipped value loss. Each model has its
   own optimizer, kept from one update to the next.

PPO starts only from a calibrated critic: the critic's explained variance recorded in the
checkpoint (by :func:`terminal_env.train.critic.recalibrate`) must reach
``min_explained_variance``, unless ``force``.

Under torchrun with a sharded actor and critic every rank computes the targets of every episode
(so the whitening and the minibatches are the same everywhere), then trains on its share of each
minibatch, its loss scaled so that the averaged gradients are the single-process ones
(:mod:`~terminal_env.train.distributed`); the reported terms are the minibatch's token means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .data import Episode, Sequence, episode_targets, pad, pad_id, pad_rows
from .distributed import loss_scale, max_over_ranks, mean_over_ranks, rank_share, require_sharded
from .losses import entropy, kl_penalty, masked_mean, policy_loss, value_loss, whiten
from .models import Pair, action_values, critic_optimizer, sampled_logprobs


@dataclass
class PPOConfig:
    epochs: int = 2
    batch_size: int = 4
    actor_lr: float = 1e-5
    #: the critic body's learning rate (and its value head's when ``critic_head_lr`` is None; 0 freezes the body)
    critic_lr: float = 1e-4
    critic_head_lr: float | None = None
    clip: float = 0.2
    dual_clip: float | None = 3.0
    value_clip: float | None = 0.2
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    gamma: float = 1.0
    lam: float = 0.95
    whiten: bool = True
    max_grad_norm: float = 1.0
    min_explained_variance: float = 0.2
    seed: int = 0


@dataclass
class _Row:
    sequence: Sequence
    advantages: torch.Tensor
    returns: torch.Tensor
    old_values: torch.Tensor


class PPO:
    """PPO updates of ``pair`` (in place), with an optional frozen ``reference`` actor for the KL
    term."""

    def __init__(self, pair: Pair, config: PPOConfig | None = None, *, reference: Any = None,
                 force: bool = False):
        self.pair = pair
        self.config = config or PPOConfig()
        self.reference = reference
        if self.config.kl_coef > 0 and reference is None:
            raise ConfigError("kl_coef > 0 needs a reference model (e.g. the actor this stage started from)")
        calibration = (pair.meta.get("metrics") or {}).get("critic") or {}
        ev = calibration.get("explained_variance")
        if not force and ev is None:
            raise ConfigError("the critic of this pair was never recalibrated (pair.json records no explained "
                              "variance): recalibrate it first ('terminal-env train critic'), or force")
        if not force and ev < self.config.min_explained_variance:
            raise ConfigError(f"the critic explains {ev} of the returns' variance, below min_explained_variance="
                              f"{self.config.min_explained_variance}: recalibrate it on more episodes, or force")
        require_sharded(pair.actor, pair.critic)
        self.device = next(pair.actor.parameters()).device
        self.fill = pad_id(pair.tokenizer)
        self.actor_optimizer = torch.optim.AdamW(pair.actor.parameters(), lr=self.config.actor_lr)
        self.critic_optimizer = critic_optimizer(pair.critic, self.config.critic_lr, self.config.critic_head_lr,
                                                 ("PPOConfig.critic_lr", "PPOConfig.critic_head_lr"))
        self.generator = torch.Generator().manual_seed(self.config.seed)

    def update(self, episodes: list[Episode]) -> dict[str, Any]:
        """One PPO update on ``episodes``; returns the means of the loss terms and diagnostics."""
        c, actor, critic = self.config, self.pair.actor, self.pair.critic
        if not episodes:
            raise ConfigError("no episodes to train on")
        temperatures = {e.temperature for e in episodes}
        if len(temperatures) > 1:
            raise ConfigError(f"the episodes were sampled at different temperatures {sorted(temperatures)}: "
                              f"update on one temperature at a time")
        temperature = temperatures.pop()
        actor.requires_grad_(True)
        critic.requires_grad_(True)
        if c.critic_lr == 0:  # the body is frozen: no gradients to compute
            critic.model.requires_grad_(False)
        rows = self._targets(episodes)
        if c.whiten:
            _whiten([r.advantages for r in rows], [torch.tensor(r.sequence.mask, dtype=torch.float32) for r in rows])
        references = self._reference_logprobs(rows, temperature) if c.kl_coef > 0 else None
        sums: dict[str, float] = {}
        steps = 0
        first_gap = None
        for _ in range(c.epochs):
            order = torch.randperm(len(rows), generator=self.generator).tolist()
            for start in range(0, len(order), c.batch_size):
                picked, real = rank_share(order[start:start + c.batch_size])
                batch = pad([rows[i].sequence for i in picked], self.fill, self.device)
                if not real:
                    batch["mask"].zero_()
                width, mask = batch["mask"].shape[1], batch["mask"]
                advantages = pad_rows([rows[i].advantages for i in picked], width, self.device)
                returns = pad_rows([rows[i].returns for i in picked], width, self.device)
                old_values = pad_rows([rows[i].old_values for i in picked], width, self.device)
                logprobs, logits = sampled_logprobs(actor, batch, temperature, with_logits=True)
                if first_gap is None:  # before any step: the policy is the one that sampled
                    gap = ((logprobs.detach() - batch["old_logprobs"]).abs() * mask).max()
                    first_gap = float(max_over_ranks(gap))
                terms = {"policy_loss": policy_loss(logprobs, batch["old_logprobs"], advantages, mask,
                                                    c.clip, c.dual_clip),
                         "entropy": entropy(logits / temperature, mask)}
                actor_loss = terms["policy_loss"] - c.entropy_coef * terms["entropy"]
                if references is not None:
                    terms["kl"] = kl_penalty(logprobs, pad_rows([references[i] for i in picked], width, self.device),
                                             mask)
                    actor_loss = actor_loss + c.kl_coef * terms["kl"]
                values = action_values(critic, batch)
                terms["value_loss"] = value_loss(values, old_values, returns, mask, c.value_clip)
                ratio = torch.exp(logprobs - batch["old_logprobs"])
                terms["clip_fraction"] = masked_mean(((ratio - 1).abs() > c.clip).float(), mask)
                terms["approx_kl"] = masked_mean(batch["old_logprobs"] - logprobs, mask)
                self.actor_optimizer.zero_grad(set_to_none=True)
                self.critic_optimizer.zero_grad(set_to_none=True)
                scale = loss_scale(mask)
                ((actor_loss + terms["value_loss"]) * scale).backward()
                torch.nn.utils.clip_grad_norm_(actor.parameters(), c.max_grad_norm)
                torch.nn.utils.clip_grad_norm_(critic.parameters(), c.max_grad_norm)
                self.actor_optimizer.step()
                self.critic_optimizer.step()
                means = mean_over_ranks(torch.stack([v.detach() for v in terms.values()]) * scale)
                for k, v in zip(terms, means.tolist()):
                    sums[k] = sums.get(k, 0.0) + v
                steps += 1
        actor.eval()
        critic.eval()
        return {**{k: v / steps for k, v in sums.items()}, "steps": steps, "episodes": len(episodes),
                "mean_reward": sum(e.reward for e in episodes) / len(episodes),
                "first_logprob_gap": first_gap}

    @torch.no_grad()
    def _targets(self, episodes: list[Episode]) -> list[_Row]:
        rows = []
        for episode in episodes:
            values = [action_values(self.pair.critic, pad([s], self.fill, self.device))[0].float().cpu()
                      for s in episode.sequences]
            advantages, returns = episode_targets(episode, values, self.config.gamma, self.config.lam)
            rows.extend(_Row(s, a, r, v) for s, a, r, v in zip(episode.sequences, advantages, returns, values))
        return rows

    @torch.no_grad()
    def _reference_logprobs(self, rows: list[_Row], temperature: float) -> list[torch.Tensor]:
        return [sampled_logprobs(self.reference, pad([r.sequence], self.fill, self.device), temperature)[0]
                for r in rows]


def _whiten(advantages: list[torch.Tensor], masks: list[torch.Tensor]) -> None:
    """Whiten in place over every action token of the batch (:func:`~terminal_env.train.losses.whiten`)."""
    flat = whiten(torch.cat(advantages)[None], torch.cat(masks)[None])[0]
    for a, w in zip(advantages, flat.split([len(a) for a in advantages])):
        a.copy_(w)
