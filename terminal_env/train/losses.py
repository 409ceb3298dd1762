"""The trainer's arithmetic, as small pure functions over ``[batch, tokens]`` tensors.

Every function takes an ``action_mask`` (1 on tokens the policy sampled, 0 on prompt,
observation, template and padding tokens) and reads nothing else of the episode, so each can be
checked by hand (the doctests) and against a plain reference (``tests/test_train.py``).

Means are token means over every action token of the batch (:func:`masked_mean`): a long answer
weighs as much as its tokens, the usual choice for language-model PPO (the policy loss's other
aggregations, per sequence: :func:`terminal_env.train.estimators.aggregate`).

>>> import torch
>>> mask = torch.tensor([[0., 1., 1., 0., 1.]])
>>> last_action_reward(mask, torch.tensor([1.0]))
tensor([[0., 0., 0., 0., 1.]])
"""

from __future__ import annotations

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of ``x`` over the positions where ``mask`` is 1 (0 when there is none).

    >>> masked_mean(torch.tensor([[1., 5., 3.]]), torch.tensor([[1., 0., 1.]]))
    tensor(2.)
    """
    return (x * mask).sum() / mask.sum().clamp(min=1)


def last_action_reward(mask: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """Per-token rewards: each episode's ``reward`` on its last action token, 0 elsewhere (an
    episode that ends on an observation still pays its last action). A row without action tokens
    gets nothing."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).max(dim=1).values
    out = torch.zeros(mask.shape, dtype=reward.dtype, device=mask.device)
    rows = torch.nonzero(last >= 0)[:, 0]
    out[rows, last[rows]] = reward[rows]
    return out


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the action tokens alone: the recursion links each
    action token to the next action token of its row, skipping (not zeroing) the observation and
    template tokens between them, and the value after a row's last action token is 0 (the episode
    is over). Returns ``(advantages, returns)``, 0 off the mask; ``returns = advantages + values``.

    Equal to ordinary GAE on each row with its non-action tokens removed, for any gamma and lambda
    (a property test checks it). Rewards off the mask are ignored.

    Two actions, an observation between them, reward 1 on the last one, gamma 0.5, lambda 1:

    >>> r = torch.tensor([[0., 0., 1.]]); v = torch.tensor([[0.2, 9.0, 0.4]]); m = torch.tensor([[1., 0., 1.]])
    >>> adv, ret = gae(r, v, m, gamma=0.5, lam=1.0)
    >>> adv  # last: 1 - 0.4; first: 0 + 0.5 * 0.4 - 0.2 + 0.5 * 0.6
    tensor([[0.3000, 0.0000, 0.6000]])
    >>> ret
    tensor([[0.5000, 0.0000, 1.0000]])
    """
    batch, length = mask.shape
    advantages = torch.zeros_like(values)
    next_value = torch.zeros(batch, dtype=values.dtype, device=values.device)
    next_advantage = torch.zeros_like(next_value)
    for t in reversed(range(length)):
        act = mask[:, t] > 0
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = delta + gamma * lam * next_advantage
        advantages[:, t] = torch.where(act, advantage, torch.zeros_like(advantage))
        next_value = torch.where(act, values[:, t], next_value)  # carried over skipped tokens
        next_advantage = torch.where(act, advantage, next_advantage)
    returns = (advantages + values) * mask
    return advantages, returns


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``x`` shifted and scaled to mean 0 and variance 1 over the mask (0 off it).

    >>> whiten(torch.tensor([[1., 7., 3.]]), torch.tensor([[1., 0., 1.]]))
    tensor([[-1.,  0.,  1.]])
    """
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + eps) * mask


#: the log-ratio is clamped to this before ``exp``: e^20 is about 5e8, finite in float32 and far
#: past any clip, so one token whose log-probs are far apart (or -inf, off the mask) cannot make
#: the ratio inf and, through ``0 * inf`` on a masked-out token, the loss NaN
LOG_RATIO_LIMIT = 20.0


def log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``logprobs - old_logprobs`` on the action tokens, 0 off them, clamped to
    ``[-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT]``: what every ratio term exponentiates. Off the mask the
    difference is dropped before anything is computed from it (``torch.where``, not a product),
    so an ``-inf`` there reaches neither the loss nor the gradient.

    >>> log_ratio(torch.tensor([[0., 0., -1.]]), torch.tensor([[-float("inf"), -100., -1.5]]),
    ...           torch.tensor([[0., 1., 1.]]))
    tensor([[ 0.0000, 20.0000,  0.5000]])
    """
    difference = torch.where(mask > 0, logprobs - old_logprobs, torch.zeros_like(logprobs))
    return difference.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)


def clipped_surrogate(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                      mask: torch.Tensor, clip: float = 0.2, dual_clip: float | None = 3.0) -> torch.Tensor:
    """Each token's term of :func:`policy_loss` (``[batch, tokens]``, 0 off the mask), for the
    loss aggregations that weigh tokens otherwise than the token mean
    (:func:`terminal_env.train.estimators.aggregate`)."""
    ratio = torch.exp(log_ratio(logprobs, old_logprobs, mask))
    advantages = torch.where(mask > 0, advantages, torch.zeros_like(advantages))
    clipped = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip))
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be above 1, not {dual_clip}")
        clipped = torch.where(advantages < 0, torch.minimum(clipped, -advantages * dual_clip), clipped)
    return clipped * mask


def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                mask: torch.Tensor, clip: float = 0.2, dual_clip: float | None = 3.0) -> torch.Tensor:
    """PPO's clipped surrogate, with the dual clip of Ye et al. (2020): where the advantage is
    negative the loss is also capped at ``-dual_clip * advantage``, so one token whose ratio has
    run away cannot dominate the update (``None``: no dual clip). The token mean of
    :func:`clipped_surrogate`; the log-ratio is clamped (:func:`log_ratio`).

    >>> one = torch.ones(1, 1)
    >>> lp = lambda ratio: torch.log(torch.tensor([[ratio]]))
    >>> policy_loss(lp(1.5), lp(1.0), one, one)  # gain capped at 1 + clip
    tensor(-1.2000)
    >>> policy_loss(lp(0.5), lp(1.0), one, one)  # a loss is never capped
    tensor(-0.5000)
    >>> policy_loss(lp(5.0), lp(1.0), -one, one)  # ratio 5 on a negative advantage: dual clip 3
    tensor(3.)
    >>> policy_loss(lp(5.0), lp(1.0), -one, one, dual_clip=None)
    tensor(5.)
    """
    return masked_mean(clipped_surrogate(logprobs, old_logprobs, advantages, mask, clip, dual_clip), mask)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip: float | None = 0.2) -> torch.Tensor:
    """Half the squared error of the values against the returns, on action tokens only, with
    PPO's value clipping: the worse of the new value and the old value moved by at most ``clip``
    (``None``: no clipping).

    >>> one = torch.ones(1, 1)
    >>> value_loss(torch.tensor([[1.0]]), torch.tensor([[0.0]]), torch.tensor([[1.0]]), one)
    tensor(0.3200)
    >>> value_loss(torch.tensor([[1.0]]), torch.tensor([[0.0]]), torch.tensor([[1.0]]), one, clip=None)
    tensor(0.)
    """
    error = (values - returns) ** 2
    if clip is not None:
        moved = old_values + (values - old_values).clamp(-clip, clip)
        error = torch.maximum(error, (moved - returns) ** 2)
    return 0.5 * masked_mean(error, mask)


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The KL term of the actor's loss, for tokens sampled by the policy: the ``k2`` form
    ``(lp - ref) ** 2 / 2``, whose gradient ``(lp - ref) * grad(lp)`` has as its expectation over
    the policy's samples the gradient of KL(policy || reference), the reverse KL of the objective.

    Not ``k3`` (``exp(ref - lp) - (ref - lp) - 1``), though it is the unbiased estimate of the KL's
    value: as a loss its gradient ``(1 - exp(ref - lp)) * grad(lp)`` has as its expectation the
    gradient of the forward KL(reference || policy). That charges the policy for every token the
    reference gives mass to, pulling back up, with the unbounded weight ``exp(ref - lp)``, a token
    the policy has learned to avoid (at temperature 1 the reference's slips of the pen): it undoes
    the sharpening that PPO is there to do. ``tests/test_train.py`` checks both expectations on an
    exact distribution.

    >>> kl_penalty(torch.tensor([[-1.0]]), torch.tensor([[-1.0]]), torch.ones(1, 1))
    tensor(0.)
    >>> kl_penalty(torch.tensor([[0.0, -3.0]]), torch.tensor([[-1.0, -1.0]]), torch.ones(1, 2))  # (0.5 + 2) / 2
    tensor(1.2500)
    """
    return masked_mean(0.5 * (logprobs - ref_logprobs) ** 2, mask)


def entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean entropy of the next-token distributions at the masked positions.

    >>> round(entropy(torch.zeros(1, 1, 4), torch.ones(1, 1)).item(), 4)  # uniform over 4: ln 4
    1.3863
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    return masked_mean(-(logp.exp() * logp).sum(-1), mask)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """The log-prob of each of ``tokens`` under ``logits / temperature``; ``logits[:, t]`` is
    the distribution of ``tokens[:, t]`` (shift the model's outputs before calling).

    >>> token_logprobs(torch.zeros(1, 2, 4), torch.tensor([[0, 3]]))
    tensor([[-1.3863, -1.3863]])
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, tokens[..., None])[..., 0]


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float | None:
    """``1 - Var(returns - values) / Var(returns)``: 1 for a perfect critic, 0 for one that
    predicts the mean, negative for worse; None when the returns do not vary (nothing to
    explain: the measure is undefined there, and a 0 would pass for a measured critic that
    predicts the mean).

    >>> explained_variance(torch.tensor([1., 2., 3.]), torch.tensor([1., 2., 3.]))
    1.0
    >>> explained_variance(torch.tensor([2., 2., 2.]), torch.tensor([1., 2., 3.]))
    0.0
    >>> explained_variance(torch.tensor([1., 2., 3.]), torch.tensor([1., 1., 1.])) is None
    True
    """
    if returns.numel() == 0:
        return None
    var = returns.float().var(unbiased=False)
    if var <= 0:
        return None
    return float(1 - (returns.float() - values.float()).var(unbiased=False) / var)


def correlation(values: torch.Tensor, returns: torch.Tensor) -> float | None:
    """Pearson's correlation of the values with the returns (None when either does not vary, as
    a fresh critic's zero values do: undefined, not 0).

    >>> round(correlation(torch.tensor([1., 2., 3.]), torch.tensor([2., 4., 7.])), 4)
    0.9934
    >>> correlation(torch.tensor([0., 0., 0.]), torch.tensor([2., 4., 7.])) is None
    True
    """
    v, r = values.float() - values.float().mean(), returns.float() - returns.float().mean()
    denominator = torch.sqrt((v ** 2).sum() * (r ** 2).sum())
    if not denominator > 0:
        return None
    return float((v * r).sum() / denominator)
