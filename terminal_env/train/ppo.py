"""PPO on the actor and the critic over multi-turn episodes (one file, top to bottom).

One :meth:`PPO.update` on a batch of episodes sampled by the current actor:

1. **Targets.** The critic's values of every sequence (no gradient); advantages and returns by
   GAE over each episode's action tokens alone, the episode's reward on its last action token
   (:func:`terminal_env.train.losses.gae`). The **old log-probs** of the ratio
   (``old_logprobs``): ``"rollout"``, the ones recorded when the tokens were sampled (at the
   sampling temperature), or ``"recompute"``, the trainer's current weights scoring the sampled
   tokens (one no-grad pass at the sampling temperature), right for any generator whose kernels
   differ from the trainer's (vLLM); ``"auto"`` recomputes for served episodes. With ``tis_cap``
   each token's policy loss is also weighted by ``min(exp(trainer_old - generator), tis_cap)``
   (truncated importance sampling against the generator's log-probs). Never a re-scoring of text.
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

from dataclasses import dataclass, replace
from typing import Any

import torch

from ..errors import ConfigError
from .data import Episode, Sequence, episode_targets, pad, pad_id, pad_rows
from .distributed import max_over_ranks, mean_over_ranks, require_sharded
from .losses import kl_penalty, masked_mean, policy_loss, value_loss, whiten
from .memory import action_logprobs, check_precision, checkpoint_layers, compute, keep_fp32, micro_batches, token_scale
from .lora import mark_trainable, trainable_parameters
from .models import Pair, action_values, critic_optimizer


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
    #: the ratio's old log-probs: "rollout" (the sampler's), "recompute" (the trainer's weights before
    #: the update), "auto" (recompute where an episode was served, e.g. by vLLM; else rollout)
    old_logprobs: str = "auto"
    #: truncated importance sampling: each token's policy loss times min(exp(old - generator), tis_cap)
    tis_cap: float | None = None
    min_explained_variance: float = 0.2
    seed: int = 0
    #: "bf16": forward passes under bf16 autocast (the weights stay float32); "fp32"
    precision: str = "fp32"
    #: recompute each decoder layer in the backward pass instead of keeping its activations
    activation_checkpointing: bool = False
    #: cut each minibatch into micro-batches of at most this many padded tokens (gradients accumulate)
    max_tokens_per_micro_batch: int | None = None
    #: the LM head and log-softmax run on this many action tokens at a time
    logprob_chunk: int = 1024


@dataclass
class _Row:
    sequence: Sequence
    advantages: torch.Tensor
    returns: torch.Tensor
    old_values: torch.Tensor
    #: the truncated importance weights of the action tokens (``tis_cap``), else None
    tis: torch.Tensor | None = None


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
        check_precision(self.config.precision, "PPOConfig.precision")
        keep_fp32(pair.actor, pair.critic)  # the master weights, before the optimizers see them
        checkpoint_layers(pair.actor, self.config.activation_checkpointing)
        checkpoint_layers(pair.critic, self.config.activation_checkpointing)
        self.device = next(pair.actor.parameters()).device
        self.fill = pad_id(pair.tokenizer)
        # what the actor trains: its LoRA adapter where it has one, else every weight
        self.actor_optimizer = torch.optim.AdamW(trainable_parameters(pair.actor), lr=self.config.actor_lr)
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
        mark_trainable(actor)  # its adapter alone where it has one (lora.py)
        mark_trainable(critic.model, keep=[critic.head])  # the value head always
        if c.critic_lr == 0:  # the body is frozen: no gradients to compute
            critic.model.requires_grad_(False)
        actor.train()  # activation checkpointing acts in train mode
        critic.train()
        rows = self._targets(episodes)
        old_report = self._old_logprobs(rows, episodes, temperature)
        if c.whiten:
            _whiten([r.advantages for r in rows], [torch.tensor(r.sequence.mask, dtype=torch.float32) for r in rows])
        references = self._reference_logprobs(rows, temperature) if c.kl_coef > 0 else None
        sums: dict[str, float] = {}
        steps = 0
        first_gap = None
        lengths, trained = [len(r.sequence.token_ids) for r in rows], [sum(r.sequence.mask) for r in rows]
        for _ in range(c.epochs):
            order = torch.randperm(len(rows), generator=self.generator).tolist()
            for micro in micro_batches(order, c.batch_size, lengths, trained, c.max_tokens_per_micro_batch):
                picked = micro.items  # this rank's part of a minibatch (the whole one, or a micro-batch of it)
                batch = pad([rows[i].sequence for i in picked], self.fill, self.device)
                if not micro.real:
                    batch["mask"].zero_()
                width, mask = batch["mask"].shape[1], batch["mask"]
                advantages = pad_rows([rows[i].advantages for i in picked], width, self.device)
                if c.tis_cap is not None:  # a positive weight per token scales its policy loss (clip and all)
                    advantages = advantages * pad_rows([rows[i].tis for i in picked], width, self.device)
                returns = pad_rows([rows[i].returns for i in picked], width, self.device)
                old_values = pad_rows([rows[i].old_values for i in picked], width, self.device)
                with compute(c.precision, self.device):
                    logprobs, token_entropy = action_logprobs(actor, batch, temperature, c.logprob_chunk)
                if steps == 0:  # before any step (each micro-batch of the first minibatch): the sampling policy
                    gap = ((logprobs.detach() - batch["old_logprobs"]).abs() * mask).max()
                    first_gap = max(first_gap or 0.0, float(max_over_ranks(gap)))
                terms = {"policy_loss": policy_loss(logprobs, batch["old_logprobs"], advantages, mask,
                                                    c.clip, c.dual_clip),
                         "entropy": masked_mean(token_entropy, mask)}
                actor_loss = terms["policy_loss"] - c.entropy_coef * terms["entropy"]
                if references is not None:
                    terms["kl"] = kl_penalty(logprobs, pad_rows([references[i] for i in picked], width, self.device),
                                             mask)
                    actor_loss = actor_loss + c.kl_coef * terms["kl"]
                with compute(c.precision, self.device):
                    values = action_values(critic, batch)
                terms["value_loss"] = value_loss(values, old_values, returns, mask, c.value_clip)
                ratio = torch.exp(logprobs - batch["old_logprobs"])
                terms["clip_fraction"] = masked_mean(((ratio - 1).abs() > c.clip).float(), mask)
                terms["approx_kl"] = masked_mean(batch["old_logprobs"] - logprobs, mask)
                if micro.first:
                    self.actor_optimizer.zero_grad(set_to_none=True)
                    self.critic_optimizer.zero_grad(set_to_none=True)
                scale = token_scale(mask, micro.tokens)  # this micro-batch's share of the minibatch's tokens
                ((actor_loss + terms["value_loss"]) * scale).backward()
                if micro.last:
                    torch.nn.utils.clip_grad_norm_(actor.parameters(), c.max_grad_norm)
                    torch.nn.utils.clip_grad_norm_(critic.parameters(), c.max_grad_norm)
                    self.actor_optimizer.step()
                    self.critic_optimizer.step()
                    steps += 1
                means = mean_over_ranks(torch.stack([v.detach() for v in terms.values()]) * scale)
                for k, v in zip(terms, means.tolist()):
                    sums[k] = sums.get(k, 0.0) + v
        actor.eval()
        critic.eval()
        return {**{k: v / steps for k, v in sums.items()}, "steps": steps, "episodes": len(episodes),
                "mean_reward": sum(e.reward for e in episodes) / len(episodes),
                "first_logprob_gap": first_gap, **old_report}

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
    def _old_logprobs(self, rows: list[_Row], episodes: list[Episode], temperature: float) -> dict[str, Any]:
        """Set each row's old log-probs as ``old_logprobs`` says (recomputed: the actor's, scored as
        the update will score them), the truncated importance weights with ``tis_cap``, and report
        the gap between the generator's log-probs and the trainer's."""
        c = self.config
        if c.old_logprobs not in ("auto", "recompute", "rollout"):
            raise ConfigError(f"PPOConfig.old_logprobs must be auto, recompute or rollout, not {c.old_logprobs!r}")
        if c.tis_cap is not None and c.tis_cap <= 0:
            raise ConfigError(f"PPOConfig.tis_cap must be above 0 (e.g. 2.0), or None for no importance weights")
        mode = c.old_logprobs
        if mode == "auto":
            mode = "recompute" if any(e.served for e in episodes) else "rollout"
        missing = sum(not r.sequence.old_logprobs for r in rows)
        if missing and (mode == "rollout" or c.tis_cap is not None):
            raise ConfigError(f"{missing} sequences have no generator log-probs at the sampling temperature (a server "
                              f"gives them at temperature 1 only): use PPOConfig(old_logprobs='recompute', "
                              f"tis_cap=None), or sample at temperature 1")
        report: dict[str, Any] = {"old_logprobs": mode}
        if mode == "rollout":
            return report
        gaps, weights = [], []
        for row in rows:
            mask = torch.tensor(row.sequence.mask, dtype=torch.float32)
            with compute(c.precision, self.device):
                ours = action_logprobs(self.pair.actor, pad([row.sequence], self.fill, self.device), temperature,
                                       c.logprob_chunk)[0][0].float().cpu() * mask
            if row.sequence.old_logprobs:
                generator = torch.tensor(row.sequence.old_logprobs, dtype=torch.float32) * mask
                gaps.append((ours - generator).abs()[mask > 0])
                if c.tis_cap is not None:
                    row.tis = torch.exp(ours - generator).clamp(max=c.tis_cap) * mask
                    weights.append(row.tis[mask > 0])
            row.sequence = replace(row.sequence, old_logprobs=ours.tolist())
        if gaps:
            gap = torch.cat(gaps)
            report.update(generator_gap_max=float(gap.max()), generator_gap_mean=float(gap.mean()))
        if weights:
            w = torch.cat(weights)
            report.update(tis_weight_mean=float(w.mean()), tis_truncated=float((w >= c.tis_cap).float().mean()))
        return report

    @torch.no_grad()
    def _reference_logprobs(self, rows: list[_Row], temperature: float) -> list[torch.Tensor]:
        return [action_logprobs(self.reference, pad([r.sequence], self.fill, self.device), temperature,
                                self.config.logprob_chunk)[0][0] for r in rows]


def _whiten(advantages: list[torch.Tensor], masks: list[torch.Tensor]) -> None:
    """Whiten in place over every action token of the batch (:func:`~terminal_env.train.losses.whiten`)."""
    flat = whiten(torch.cat(advantages)[None], torch.cat(masks)[None])[0]
    for a, w in zip(advantages, flat.split([len(a) for a in advantages])):
        a.copy_(w)
