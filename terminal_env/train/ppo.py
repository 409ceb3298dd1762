"""PPO on the actor and the critic over multi-turn episodes (one file, top to bottom).

One :meth:`PPO.update` on a batch of episodes sampled by the current actor:

1. **Targets.** With ``estimator="gae"``: the critic's values of every sequence (no gradient);
   the actor's advantages by GAE with ``actor_lam`` and the critic's targets (returns: GAE with
   ``critic_lam`` plus the values) over each episode's action tokens alone, the episode's reward on
   its last action token (:func:`terminal_env.train.losses.gae`). With a critic-free estimator
   (``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_pp``: :mod:`~terminal_env.train.estimators`) the
   advantages come from the episodes' rewards grouped by task, or from REINFORCE++'s rewards-to-go,
   and the critic is neither read nor trained (no gate, no value loss, no optimizer of its own).
   The **old log-probs** of the ratio (``old_logprobs``): ``"rollout"``, the ones recorded when
   the tokens were sampled (at the sampling temperature), or ``"recompute"``, the trainer's
   current weights scoring the sampled tokens (one no-grad pass at the sampling temperature),
   right for any generator whose kernels differ from the trainer's (vLLM); ``"auto"`` recomputes
   for served episodes. With ``tis_cap`` each token's policy loss is also weighted by
   ``min(exp(trainer_old - generator), tis_cap)`` (truncated importance sampling against the
   generator's log-probs). Never a re-scoring of text.
2. **The batch, measured before any step** (in the report): the critic's explained variance of
   these episodes' returns, out of sample (it has not trained on them) and free (the values are
   the ones GAE used); mean, std, min and max of the values, the returns and the advantages
   before whitening; action tokens (response length) and turns (runs of action tokens) per
   episode; how many task groups the batch has and how many carry no signal for a group baseline.
3. **Whitening** as each estimator defines it: GAE's advantages when ``whiten``, REINFORCE++'s
   always (over the global batch), the group estimators' never (their group already centres and,
   for GRPO, scales them).
4. **Epochs.** ``epochs`` passes over the sequences in minibatches: on the actor the clipped
   policy loss with dual clip (aggregated over tokens as ``loss_agg`` says), plus ``kl_coef``
   times the KL to a reference model (for REINFORCE++ the KL is in the reward instead), minus
   ``entropy_coef`` times the entropy; on the critic the clipped value loss. Each model has its
   own optimizer, kept from one update to the next; the log-ratio is clamped before ``exp``
   (:func:`~terminal_env.train.losses.log_ratio`), so no inf or NaN comes through the mask. The
   gradient norms before clipping are reported (mean and max over the steps).

PPO with GAE starts only from a calibrated critic (:func:`check_calibration`, run by
``PPO.__init__``; a multi-iteration trainer calls it once at the start of its run): a calibration
record (:func:`terminal_env.train.critic.recalibrate`'s report, from pair.json or passed as
``calibration=``) that names this very critic and whose explained variance reaches
``min_explained_variance``, unless ``force``. Every update that trains the critic gives it a new
id, so a record of the critic before no longer passes.

:meth:`PPO.state_dict` and :meth:`PPO.load_state_dict` carry what a resumed run needs besides the
pair's weights: both optimizers' state, the minibatch order's generator, the steps done.

Under torchrun with a sharded actor and critic every rank computes the targets of every episode
(so the whitening and the minibatches are the same everywhere), then trains on its share of each
minibatch, its loss scaled so that the averaged gradients are the single-process ones
(:mod:`~terminal_env.train.distributed`); the reported terms are the minibatch's token means
(the policy loss: its aggregation).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from ..errors import ConfigError
from .critic import grad_norm
from .data import Episode, Sequence, episode_targets, pad, pad_id, pad_rows
from .distributed import max_over_ranks, mean_over_ranks, require_sharded, world_size
from .estimators import (CRITIC_FREE, GROUPED, aggregate, check as check_estimator, group_advantages,
                         group_report, reinforce_pp_advantages)
from .losses import clipped_surrogate, explained_variance, kl_penalty, log_ratio, masked_mean, value_loss, whiten
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
    #: the KL to the reference: a loss term, or with ``estimator="reinforce_pp"`` a penalty in the reward
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    gamma: float = 1.0
    #: GAE's lambda for the actor's advantages. 1.0, what the toy benchmark and every learning test
    #: ran: GAE here is token-level, so an early turn of a long episode sits hundreds of action tokens
    #: before the reward, and 0.95 ** 100 is about 0.006: at 0.95 the reward barely reaches it
    actor_lam: float = 1.0
    #: GAE's lambda for the critic's targets (returns = GAE(critic_lam) advantages + values); 1.0:
    #: Monte-Carlo returns, the targets recalibration fits (below 1 they lean on the critic's own values)
    critic_lam: float = 1.0
    #: whiten GAE's advantages over the batch (the other estimators follow their own definitions)
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
    #: the advantages: "gae" (the critic), or critic-free "grpo", "dr_grpo", "rloo", "reinforce_pp" (estimators.py)
    estimator: str = "gae"
    #: the policy loss over tokens: "token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm" (estimators.py)
    loss_agg: str = "token_mean"
    #: seq_mean_token_sum_norm's constant (best the generation budget); None: the batch's longest sequence
    loss_agg_norm: float | None = None


@dataclass
class _Row:
    sequence: Sequence
    advantages: torch.Tensor
    #: the critic's targets and its values before the update (GAE only; None without a critic)
    returns: torch.Tensor | None
    old_values: torch.Tensor | None
    #: the index of its episode in the batch
    episode: int = 0
    #: the truncated importance weights of the action tokens (``tis_cap``), else None
    tis: torch.Tensor | None = None


def check_calibration(pair: Pair, min_explained_variance: float, force: bool = False,
                      calibration: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """PPO's gate on the critic: the calibration record (``calibration``, a
    :func:`~terminal_env.train.critic.recalibrate` report kept in memory, else pair.json's
    ``metrics["critic"]``) must name the pair's critic as it is now
    (:meth:`~terminal_env.train.models.Pair.is_critic`), and its held-out explained variance must be
    defined and reach ``min_explained_variance``. Returns the record accepted; ``force``: no check
    (None). Raises :class:`ConfigError` saying what to do otherwise."""
    if force:
        return None
    record = calibration if calibration is not None else (pair.meta.get("metrics") or {}).get("critic")
    fix = ("recalibrate it ('terminal-env train critic', or critic.recalibrate() then PPO(..., "
           "calibration=report)), or force")
    if not record or "explained_variance" not in record:
        raise ConfigError(f"the critic of this pair was never recalibrated (pair.json records no explained "
                          f"variance, and no calibration was passed): {fix}")
    measured = record.get("critic")
    if measured is None:
        raise ConfigError(f"the calibration record names no critic (it was written before records named the "
                          f"critic they measured), so it cannot vouch for this pair's critic {pair.critic_id!r}: "
                          f"{fix}")
    if not pair.is_critic(measured):
        raise ConfigError(f"the calibration record is of critic {measured}, this pair's critic is {pair.critic_id} "
                          f"(changed by stage {pair.critic_changed_by}): recalibrate it ('terminal-env train "
                          f"critic', critic.recalibrate), or force")
    ev = record["explained_variance"]
    if ev is None:
        raise ConfigError(f"the calibration record of critic {measured} has no explained variance (its held-out "
                          f"returns did not vary, so nothing was measured): {fix}")
    if ev < min_explained_variance:
        raise ConfigError(f"the critic explains {ev} of the returns' variance, below min_explained_variance="
                          f"{min_explained_variance}: recalibrate it on more episodes, or force")
    return record


class PPO:
    """PPO updates of ``pair`` (in place), with an optional frozen ``reference`` actor for the KL
    term. ``calibration``: a :func:`~terminal_env.train.critic.recalibrate` report of this pair's
    critic, for a pair recalibrated in memory and not saved since (else pair.json's record is
    read); ``force``: start without a calibrated critic (:func:`check_calibration`). A critic-free
    ``config.estimator`` needs neither."""

    def __init__(self, pair: Pair, config: PPOConfig | None = None, *, reference: Any = None,
                 force: bool = False, calibration: dict[str, Any] | None = None):
        self.pair = pair
        self.config = c = config or PPOConfig()
        self.reference = reference
        check_estimator(c.estimator, c.loss_agg, c.loss_agg_norm)
        for name, value in (("gamma", c.gamma), ("actor_lam", c.actor_lam), ("critic_lam", c.critic_lam)):
            if not 0 <= value <= 1:
                raise ConfigError(f"PPOConfig.{name} (--{name.replace('_', '-')}) must be between 0 and 1, "
                                  f"not {value}")
        if c.kl_coef > 0 and reference is None:
            raise ConfigError("kl_coef > 0 needs a reference model (e.g. the actor this stage started from)")
        #: GAE reads and trains the critic; the critic-free estimators leave it alone, bit for bit
        self.uses_critic = c.estimator not in CRITIC_FREE
        #: the calibration record the gate accepted (None: forced, or no critic needed)
        self.calibration = (check_calibration(pair, c.min_explained_variance, force, calibration)
                            if self.uses_critic else None)
        trained = (pair.actor, pair.critic) if self.uses_critic else (pair.actor,)
        require_sharded(*trained)
        check_precision(c.precision, "PPOConfig.precision")
        keep_fp32(*trained)  # the master weights, before the optimizers see them
        for model in trained:
            checkpoint_layers(model, c.activation_checkpointing)
        self.device = next(pair.actor.parameters()).device
        self.fill = pad_id(pair.tokenizer)
        # what the actor trains: its LoRA adapter where it has one, else every weight
        self.actor_optimizer = torch.optim.AdamW(trainable_parameters(pair.actor), lr=c.actor_lr)
        self.critic_optimizer = (critic_optimizer(pair.critic, c.critic_lr, c.critic_head_lr,
                                                  ("PPOConfig.critic_lr", "PPOConfig.critic_head_lr"))
                                 if self.uses_critic else None)
        self.generator = torch.Generator().manual_seed(c.seed)
        #: optimizer steps taken over every update (restored by load_state_dict)
        self.steps_done = 0

    def update(self, episodes: list[Episode]) -> dict[str, Any]:
        """One PPO update on ``episodes``; returns the means of the loss terms and diagnostics
        (the module docstring; ``None`` where a measure is undefined or does not apply)."""
        c, actor, critic = self.config, self.pair.actor, self.pair.critic
        if not episodes:
            raise ConfigError("no episodes to train on")
        temperatures = {e.temperature for e in episodes}
        if len(temperatures) > 1:
            raise ConfigError(f"the episodes were sampled at different temperatures {sorted(temperatures)}: "
                              f"update on one temperature at a time")
        temperature = temperatures.pop()
        mark_trainable(actor)  # its adapter alone where it has one (lora.py)
        if self.uses_critic:
            mark_trainable(critic.model, keep=[critic.head])  # the value head always
            if c.critic_lr == 0:  # the body is frozen: no gradients to compute
                critic.model.requires_grad_(False)
            critic.train()
        actor.train()  # activation checkpointing acts in train mode
        rows = self._targets(episodes)
        old_report = self._old_logprobs(rows, episodes, temperature)
        references = self._reference_logprobs(rows, temperature) if c.kl_coef > 0 else None
        reward_kl = None
        if c.estimator == "reinforce_pp":  # the KL goes into the reward, not into the loss
            reward_kl = self._reinforce_pp(rows, episodes, references)
            references = None
        measured = self._measure(rows, episodes)
        if (c.estimator == "gae" and c.whiten) or c.estimator == "reinforce_pp":
            _whiten([r.advantages for r in rows], [torch.tensor(r.sequence.mask, dtype=torch.float32) for r in rows])
        norm = c.loss_agg_norm or max(sum(r.sequence.mask) for r in rows)
        if self.uses_critic:
            self.pair.critic_changed("ppo")  # its weights change now: a record of them before no longer holds
        sums: dict[str, float] = {}
        steps = 0
        first_gap = None
        actor_norms: list[float] = []
        critic_norms: list[float] = []
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
                with compute(c.precision, self.device):
                    logprobs, token_entropy = action_logprobs(actor, batch, temperature, c.logprob_chunk)
                if steps == 0:  # before any step (each micro-batch of the first minibatch): the sampling policy
                    gap = ((logprobs.detach() - batch["old_logprobs"]).abs() * mask).max()
                    first_gap = max(first_gap or 0.0, float(max_over_ranks(gap)))
                # each term's factor: this micro-batch's share of the minibatch's token mean (or, for a
                # sequence aggregation of the policy loss, of its sequence mean)
                scale = token_scale(mask, micro.tokens)
                per_token = clipped_surrogate(logprobs, batch["old_logprobs"], advantages, mask, c.clip, c.dual_clip)
                if c.loss_agg == "token_mean":
                    terms, scales = {"policy_loss": masked_mean(per_token, mask)}, {"policy_loss": scale}
                else:
                    share = world_size() * len(picked) / micro.size if micro.real else 0.0
                    terms = {"policy_loss": aggregate(per_token, mask, c.loss_agg, norm)}
                    scales = {"policy_loss": share}
                terms["entropy"], scales["entropy"] = masked_mean(token_entropy, mask), scale
                loss = terms["policy_loss"] * scales["policy_loss"] - c.entropy_coef * terms["entropy"] * scale
                if references is not None:
                    terms["kl"] = kl_penalty(logprobs, pad_rows([references[i] for i in picked], width, self.device),
                                             mask)
                    scales["kl"] = scale
                    loss = loss + c.kl_coef * terms["kl"] * scale
                if self.uses_critic:
                    returns = pad_rows([rows[i].returns for i in picked], width, self.device)
                    old_values = pad_rows([rows[i].old_values for i in picked], width, self.device)
                    with compute(c.precision, self.device):
                        values = action_values(critic, batch)
                    terms["value_loss"], scales["value_loss"] = value_loss(values, old_values, returns, mask,
                                                                           c.value_clip), scale
                    loss = loss + terms["value_loss"] * scale
                ratio_log = log_ratio(logprobs.detach(), batch["old_logprobs"], mask)  # clamped: never inf
                terms["clip_fraction"] = masked_mean(((torch.exp(ratio_log) - 1).abs() > c.clip).float(), mask)
                terms["approx_kl"] = masked_mean(-ratio_log, mask)
                scales["clip_fraction"] = scales["approx_kl"] = scale
                if micro.first:
                    self.actor_optimizer.zero_grad(set_to_none=True)
                    if self.critic_optimizer is not None:
                        self.critic_optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if micro.last:  # clip_grad_norm_ gives the norm before clipping
                    actor_norms.append(grad_norm(torch.nn.utils.clip_grad_norm_(actor.parameters(), c.max_grad_norm)))
                    self.actor_optimizer.step()
                    if self.critic_optimizer is not None:
                        critic_norms.append(grad_norm(torch.nn.utils.clip_grad_norm_(critic.parameters(),
                                                                                     c.max_grad_norm)))
                        self.critic_optimizer.step()
                    steps += 1
                means = mean_over_ranks(torch.stack([terms[k].detach().float() * scales[k] for k in terms]))
                for k, v in zip(terms, means.tolist()):
                    sums[k] = sums.get(k, 0.0) + v
        actor.eval()
        if self.uses_critic:
            critic.eval()
        self.steps_done += steps
        return {**{k: v / max(steps, 1) for k, v in sums.items()}, "steps": steps, "episodes": len(episodes),
                "mean_reward": sum(e.reward for e in episodes) / len(episodes),
                "first_logprob_gap": first_gap, "estimator": c.estimator, "loss_agg": c.loss_agg,
                **_mean_max("actor_grad_norm", actor_norms), **_mean_max("critic_grad_norm", critic_norms),
                **({"reward_kl_mean": reward_kl} if c.estimator == "reinforce_pp" else {}),
                **measured, **old_report}

    def state_dict(self) -> dict[str, Any]:
        """What resumes this PPO where it stopped, besides the pair's weights (``Pair.save``): both
        optimizers' state (the critic's None with a critic-free estimator), the minibatch order's
        generator and the steps done; ``torch.save`` writes it. Under torchrun each rank's
        optimizer state holds its own shards: each rank saves and loads its own."""
        return {"actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": None if self.critic_optimizer is None else self.critic_optimizer.state_dict(),
                "generator": self.generator.get_state(), "steps_done": self.steps_done,
                "estimator": self.config.estimator}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s state into this PPO, made on the pair as it was saved (the
        same weights, the same trainable parameters: the optimizers' state follows their order)."""
        if (state.get("critic_optimizer") is None) != (self.critic_optimizer is None):
            raise ConfigError(f"this PPO state is of estimator {state.get('estimator')!r}, this PPO's is "
                              f"{self.config.estimator!r}: one trains the critic and the other does not; resume "
                              f"with the estimator the state was saved with")
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        if self.critic_optimizer is not None:
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.generator.set_state(state["generator"])
        self.steps_done = int(state["steps_done"])

    @torch.no_grad()
    def _targets(self, episodes: list[Episode]) -> list[_Row]:
        """Each sequence with its advantages (and, with GAE, the critic's values and targets)."""
        c = self.config
        rows: list[_Row] = []
        grouped = (group_advantages([e.reward for e in episodes], [e.task for e in episodes], c.estimator)
                   if c.estimator in GROUPED else None)
        for n, episode in enumerate(episodes):
            if not self.uses_critic:  # one advantage for every action token (REINFORCE++'s come later)
                a = grouped[n] if grouped is not None else 0.0
                rows.extend(_Row(s, torch.tensor(s.mask, dtype=torch.float32) * a, None, None, n)
                            for s in episode.sequences)
                continue
            values = [action_values(self.pair.critic, pad([s], self.fill, self.device))[0].float().cpu()
                      for s in episode.sequences]
            advantages, returns = episode_targets(episode, values, c.gamma, c.actor_lam)
            if c.critic_lam != c.actor_lam:
                _, returns = episode_targets(episode, values, c.gamma, c.critic_lam)
            rows.extend(_Row(s, a, r, v, n) for s, a, r, v in zip(episode.sequences, advantages, returns, values))
        return rows

    @torch.no_grad()
    def _reinforce_pp(self, rows: list[_Row], episodes: list[Episode],
                      references: list[torch.Tensor] | None) -> float | None:
        """REINFORCE++'s advantages before whitening, in place (estimators.reinforce_pp_advantages):
        per episode over all its sequences, the KL of the old log-probs to the reference's in the
        reward with ``kl_coef``. Returns the mean per-token KL of the batch (None without one)."""
        c = self.config
        kls: list[torch.Tensor] = []
        for n, episode in enumerate(episodes):
            own = [i for i, r in enumerate(rows) if r.episode == n]
            mask = torch.cat([torch.tensor(rows[i].sequence.mask, dtype=torch.float32) for i in own])[None]
            kl = None
            if references is not None:
                kl = torch.cat([(torch.tensor(rows[i].sequence.old_logprobs, dtype=torch.float32)
                                 - references[i].float().cpu()) for i in own])[None] * mask
                kls.append(kl[mask > 0])
            advantages = reinforce_pp_advantages(mask, episode.reward, kl, c.kl_coef)[0]
            for i, a in zip(own, advantages.split([len(rows[i].sequence.token_ids) for i in own])):
                rows[i].advantages = a
        kl = torch.cat(kls) if kls else torch.zeros(0)
        return float(kl.mean()) if kl.numel() else None

    def _measure(self, rows: list[_Row], episodes: list[Episode]) -> dict[str, Any]:
        """The batch before any step: the critic's explained variance of its returns (out of
        sample), statistics of values, returns and advantages (before whitening) over the action
        tokens, response lengths and turns per episode, and the task groups."""
        keep = [torch.tensor(r.sequence.mask) > 0 for r in rows]
        out: dict[str, Any] = {}
        if self.uses_critic:
            values = torch.cat([r.old_values[k] for r, k in zip(rows, keep)])
            returns = torch.cat([r.returns[k] for r, k in zip(rows, keep)])
            ev = explained_variance(values, returns)
            out["explained_variance"] = None if ev is None else round(ev, 4)
        else:
            values = returns = None
            out["explained_variance"] = None
        out.update(_stats("value", values))
        out.update(_stats("return", returns))
        out.update(_stats("advantage", torch.cat([r.advantages[k] for r, k in zip(rows, keep)])))
        lengths, turns = [0] * len(episodes), [0] * len(episodes)
        for row in rows:
            lengths[row.episode] += sum(row.sequence.mask)
            turns[row.episode] += _runs(row.sequence.mask)
        out.update(response_length_mean=sum(lengths) / len(lengths), response_length_max=max(lengths),
                   turns_mean=sum(turns) / len(turns), turns_max=max(turns))
        out.update(group_report([e.reward for e in episodes], [e.task for e in episodes]))
        return out

    @torch.no_grad()
    def _old_logprobs(self, rows: list[_Row], episodes: list[Episode], temperature: float) -> dict[str, Any]:
        """Set each row's old log-probs as ``old_logprobs`` says (recomputed: the actor's, scored as
        the update will score them), the truncated importance weights with ``tis_cap``, and report
        the gap between the generator's log-probs and the trainer's."""
        c = self.config
        if c.old_logprobs not in ("auto", "recompute", "rollout"):
            raise ConfigError(f"PPOConfig.old_logprobs must be auto, recompute or rollout, not {c.old_logprobs!r}")
        if c.tis_cap is not None and c.tis_cap <= 0:
            raise ConfigError("PPOConfig.tis_cap must be above 0 (e.g. 2.0), or None for no importance weights")
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


def _stats(name: str, x: torch.Tensor | None) -> dict[str, float | None]:
    """``name``'s mean, std (population), min and max over ``x`` (None for each without values)."""
    if x is None or x.numel() == 0:
        return {f"{name}_{k}": None for k in ("mean", "std", "min", "max")}
    x = x.float()
    return {f"{name}_mean": float(x.mean()), f"{name}_std": float(x.std(unbiased=False)),
            f"{name}_min": float(x.min()), f"{name}_max": float(x.max())}


def _runs(mask: list[int]) -> int:
    """The runs of action tokens in ``mask``: a turn's sampled tokens are one run, the observation
    and template tokens after them end it."""
    return sum(1 for t, m in enumerate(mask) if m and (t == 0 or not mask[t - 1]))


def _mean_max(name: str, norms: list[float]) -> dict[str, float | None]:
    return {name: sum(norms) / len(norms) if norms else None, f"{name}_max": max(norms) if norms else None}


def _whiten(advantages: list[torch.Tensor], masks: list[torch.Tensor]) -> None:
    """Whiten in place over every action token of the batch (:func:`~terminal_env.train.losses.whiten`)."""
    flat = whiten(torch.cat(advantages)[None], torch.cat(masks)[None])[0]
    for a, w in zip(advantages, flat.split([len(a) for a in advantages])):
        a.copy_(w)
