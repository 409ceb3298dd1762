"""Critic-free advantage estimators beside GAE, and how the policy loss is aggregated over tokens.

They read the same token-exact :class:`~terminal_env.train.data.Episode`\\ s as GAE and train
through the same clipped surrogate (:class:`~terminal_env.train.ppo.PPO` with
``PPOConfig.estimator``); only the advantage of each action token changes, and with it whether a
critic is needed. The baseline is the group: the episodes of one task (``Episode.task``) sampled
``k`` times (``collect(..., attempts=k)``) are compared with one another.

* ``gae``: the critic's values and generalised advantage estimation (:func:`~terminal_env.train.losses.gae`),
  whitened over the batch (``PPOConfig.whiten``). The one estimator that needs, and trains, the critic.
* ``grpo``: ``(r - mean(group)) / (std(group) + eps)``, the group's sample standard deviation
  (n - 1, as ``torch.std``), ``eps = 1e-6``; no further whitening.
  Shao et al. 2024, "DeepSeekMath", arXiv:2402.03300, section 4.1.2 (outcome supervision).
* ``dr_grpo``: ``r - mean(group)``, no division by the standard deviation (which weighs the
  groups whose rewards barely vary the most); meant with ``loss_agg="seq_mean_token_sum_norm"``.
  Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective", arXiv:2503.20783.
* ``rloo``: ``r - mean(the group's other k - 1 rewards)``, i.e. ``k / (k - 1) * (r - mean(group))``;
  no further whitening. Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style
  Optimization for Learning from Human Feedback in LLMs", arXiv:2402.14740 (after Kool et al. 2019).
* ``reinforce_pp``: REINFORCE++ as published: the token-level reward is the episode's reward on
  its last action token minus ``kl_coef * KL_t`` on every action token, with
  ``KL_t = log pi_old(a_t) - log pi_ref(a_t)`` (the sampling policy's log-prob, as the trainer
  scores it, against the reference's); the advantage of a token is the sum of the rewards from it
  to the end of the episode (gamma 1, no critic, no group baseline), then whitened over every
  action token of the batch. With ``kl_coef > 0`` the KL is in the reward, not a loss term.
  Hu 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models",
  arXiv:2501.03262, equations 8 to 10.

The group estimators give every action token of an episode the same advantage. A group of one
episode, or one whose rewards are all equal, has no baseline to beat: its advantage is 0 (the
report counts them: ``groups``, ``groups_without_signal``).

**Loss aggregation** (``PPOConfig.loss_agg``): how the policy loss's per-token terms
``l[i, t]`` (:func:`~terminal_env.train.losses.clipped_surrogate`) become one number.

* ``token_mean``: the sum over every action token of the minibatch over their count (a long
  answer weighs as much as its tokens; the default, and what PPO did before).
* ``seq_mean_token_mean``: each sequence's token mean, then the mean over sequences (GRPO's
  ``1/G sum_i 1/|o_i| sum_t``: a short answer's tokens weigh more).
* ``seq_mean_token_sum_norm``: each sequence's token sum over a constant ``norm``, then the mean
  over sequences (Dr. GRPO: no length bias). ``norm`` is ``PPOConfig.loss_agg_norm``, best the
  generation budget (max new tokens of an episode); None takes the longest sequence's action
  tokens in the update's batch, constant within one update but not across updates.

A sequence is a row of the batch: an episode of several segments counts each. The entropy, KL
and value terms stay token means.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence as Seq

import torch

from ..errors import ConfigError
from .losses import gae, last_action_reward

ESTIMATORS = ("gae", "grpo", "dr_grpo", "rloo", "reinforce_pp")
#: the estimators that need no critic: PPO neither reads nor trains it with these
CRITIC_FREE = ("grpo", "dr_grpo", "rloo", "reinforce_pp")
#: the estimators whose baseline is the group of a task's episodes
GROUPED = ("grpo", "dr_grpo", "rloo")
LOSS_AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")
#: GRPO's guard against a group whose rewards barely vary (as verl's)
GROUP_EPS = 1e-6


def check(estimator: str, loss_agg: str, loss_agg_norm: float | None = None) -> None:
    """Refuse an unknown estimator or aggregation, naming the setting and the allowed values."""
    if estimator not in ESTIMATORS:
        raise ConfigError(f"PPOConfig.estimator (--estimator) must be one of {', '.join(ESTIMATORS)}, "
                          f"not {estimator!r}")
    if loss_agg not in LOSS_AGGREGATIONS:
        raise ConfigError(f"PPOConfig.loss_agg (--loss-agg) must be one of {', '.join(LOSS_AGGREGATIONS)}, "
                          f"not {loss_agg!r}")
    if loss_agg_norm is not None and not loss_agg_norm > 0:
        raise ConfigError(f"PPOConfig.loss_agg_norm is a number of tokens above 0 (e.g. the generation budget), "
                          f"or None for the longest sequence of the batch, not {loss_agg_norm}")


def group_report(rewards: Seq[float], groups: Seq[str]) -> dict[str, int]:
    """How many groups (tasks) the batch has, and how many give a group baseline nothing to
    learn from: one episode, or rewards all equal.

    >>> group_report([1.0, 0.0, 1.0, 1.0, 0.5], ["a", "a", "b", "b", "c"])
    {'groups': 3, 'groups_without_signal': 2}
    """
    by_group: dict[str, list[float]] = defaultdict(list)
    for r, g in zip(rewards, groups):
        by_group[g].append(float(r))
    silent = sum(len(rs) < 2 or max(rs) == min(rs) for rs in by_group.values())
    return {"groups": len(by_group), "groups_without_signal": silent}


def group_advantages(rewards: Seq[float], groups: Seq[str], estimator: str) -> list[float]:
    """One advantage per episode from its group's rewards (``groups[i]``: episode i's task), for
    ``grpo``, ``dr_grpo`` or ``rloo``; 0 for a group of one or of equal rewards.

    >>> group_advantages([1.0, 0.0, 0.0, 5.0], ["a", "a", "a", "b"], "rloo")  # 1 - 0, 0 - 0.5, 0 - 0.5; alone
    [1.0, -0.5, -0.5, 0.0]
    >>> [round(a, 4) for a in group_advantages([1.0, 0.0, 0.0], ["a"] * 3, "dr_grpo")]
    [0.6667, -0.3333, -0.3333]
    """
    if estimator not in GROUPED:
        raise ConfigError(f"group advantages are for the estimators {', '.join(GROUPED)}, not {estimator!r}")
    members: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    out = [0.0] * len(rewards)
    for indices in members.values():
        r = torch.tensor([float(rewards[i]) for i in indices], dtype=torch.float64)
        k = len(indices)
        if k < 2 or bool((r == r[0]).all()):
            continue  # no baseline to beat: advantage 0
        if estimator == "grpo":
            a = (r - r.mean()) / (r.std(unbiased=True) + GROUP_EPS)
        elif estimator == "dr_grpo":
            a = r - r.mean()
        else:  # rloo: each against the mean of the others
            a = r - (r.sum() - r) / (k - 1)
        for i, value in zip(indices, a.tolist()):
            out[i] = value
    return out


def reinforce_pp_advantages(mask: torch.Tensor, reward: float, kl: torch.Tensor | None = None,
                            kl_coef: float = 0.0) -> torch.Tensor:
    """REINFORCE++'s advantages of one episode before the batch's whitening: over its action
    tokens (``mask``, ``[1, tokens]``, all its segments in order), the sum of the token rewards
    from each token to the end, the reward ``reward`` on the last action token minus
    ``kl_coef * kl`` on each (``kl``: ``log pi_old - log pi_ref`` per token). 0 off the mask.

    >>> m = torch.tensor([[0., 1., 1., 0., 1.]])
    >>> reinforce_pp_advantages(m, 1.0)
    tensor([[0., 1., 1., 0., 1.]])
    >>> reinforce_pp_advantages(m, 1.0, torch.tensor([[9., 0.5, 1.0, 9., 0.25]]), kl_coef=0.1)
    tensor([[0.0000, 0.8250, 0.8750, 0.0000, 0.9750]])
    """
    rewards = last_action_reward(mask, torch.tensor([float(reward)]))
    if kl is not None and kl_coef:
        rewards = rewards - kl_coef * kl.float() * mask
    advantages, _ = gae(rewards, torch.zeros_like(rewards), mask, gamma=1.0, lam=1.0)  # reward-to-go
    return advantages


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, norm: float | None = None) -> torch.Tensor:
    """The policy loss of a batch from its per-token terms under ``mode`` (the module docstring);
    ``norm`` is ``seq_mean_token_sum_norm``'s constant. Every row counts as a sequence in the
    sequence means (a row without action tokens adds 0).

    >>> l = torch.tensor([[1., 2., 3., 0.], [4., 0., 0., 0.]])
    >>> m = torch.tensor([[1., 1., 1., 0.], [1., 0., 0., 0.]])
    >>> aggregate(l, m, "token_mean")  # (1 + 2 + 3 + 4) / 4
    tensor(2.5000)
    >>> aggregate(l, m, "seq_mean_token_mean")  # (6 / 3 + 4 / 1) / 2
    tensor(3.)
    >>> aggregate(l, m, "seq_mean_token_sum_norm", norm=4)  # (6 / 4 + 4 / 4) / 2
    tensor(1.2500)
    """
    sums = (per_token * mask).sum(dim=1)
    if mode == "token_mean":
        return sums.sum() / mask.sum().clamp(min=1)
    if mode == "seq_mean_token_mean":
        return (sums / mask.sum(dim=1).clamp(min=1)).mean()
    if mode == "seq_mean_token_sum_norm":
        if norm is None or not norm > 0:
            raise ConfigError(f"seq_mean_token_sum_norm divides each sequence's sum by a constant above 0, "
                              f"not {norm}: set PPOConfig.loss_agg_norm (e.g. the generation budget)")
        return (sums / norm).mean()
    raise ConfigError(f"PPOConfig.loss_agg (--loss-agg) must be one of {', '.join(LOSS_AGGREGATIONS)}, not {mode!r}")
