"""The critic-free estimators (terminal_env/train/estimators.py) against hand-computed values, the
loss aggregations against hand-computed values, the degenerate groups, and PPO updates with them
on the tiny in-process model: the actor trains, the critic is left bit for bit."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tiny_lm import make_model, make_tokenizer, pair, state, tokenizer  # noqa: E402,F401 (fixtures)

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.train import estimators, ppo as ppo_module  # noqa: E402
from terminal_env.train.data import Episode, Sequence  # noqa: E402
from terminal_env.train.models import Pair  # noqa: E402
from terminal_env.train.ppo import PPO, PPOConfig  # noqa: E402

# four tasks: a (4 episodes), b (3), c (alone), d (2, equal rewards)
REWARDS = [1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 1.0, 0.3, 1.0, 1.0]
TASKS = ["a", "a", "a", "a", "b", "b", "b", "c", "d", "d"]


# -- the estimators, by hand ------------------------------------------------------------------------


def test_grpo_by_hand():
    # a: mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735: +-0.5 / 0.57735 = +-0.866025
    # b: mean 1, sample std sqrt((1 + 1 + 0) / 2) = 1: 1, -1, 0; c: alone, d: equal: 0
    got = estimators.group_advantages(REWARDS, TASKS, "grpo")
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    b = 1 / (1 + 1e-6)
    assert got == pytest.approx([a, -a, -a, a, b, -b, 0.0, 0.0, 0.0, 0.0], abs=1e-9)


def test_dr_grpo_by_hand():
    got = estimators.group_advantages(REWARDS, TASKS, "dr_grpo")  # r - mean(group), no std
    assert got == pytest.approx([0.5, -0.5, -0.5, 0.5, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0], abs=1e-12)


def test_rloo_by_hand():
    # a: 1 - (0 + 0 + 1) / 3 = 2/3, 0 - (1 + 0 + 1) / 3 = -2/3; b: 2 - (0 + 1) / 2 = 1.5,
    # 0 - (2 + 1) / 2 = -1.5, 1 - (2 + 0) / 2 = 0
    got = estimators.group_advantages(REWARDS, TASKS, "rloo")
    assert got == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3, 1.5, -1.5, 0.0, 0.0, 0.0, 0.0], abs=1e-12)


def test_reinforce_pp_by_hand():
    mask = torch.tensor([[0., 1., 1., 0., 1.]])
    kl = torch.tensor([[5.0, 0.2, 0.4, 5.0, -0.2]])  # off the mask: ignored
    # token rewards: -0.5 * 0.2 = -0.1, -0.5 * 0.4 = -0.2, 2 + 0.5 * 0.2 = 2.1; summed from each to the end
    got = estimators.reinforce_pp_advantages(mask, 2.0, kl, kl_coef=0.5)
    assert got[0].tolist() == pytest.approx([0.0, 1.8, 1.9, 0.0, 2.1], abs=1e-6)
    assert estimators.reinforce_pp_advantages(mask, 2.0)[0].tolist() == [0.0, 2.0, 2.0, 0.0, 2.0]  # no KL


def test_degenerate_groups_give_zero_and_are_counted():
    for estimator in estimators.GROUPED:
        assert estimators.group_advantages([0.7], ["x"], estimator) == [0.0]  # a group of one
        assert estimators.group_advantages([1.0, 1.0, 1.0], ["x"] * 3, estimator) == [0.0, 0.0, 0.0]
    assert estimators.group_report(REWARDS, TASKS) == {"groups": 4, "groups_without_signal": 2}
    assert estimators.group_report([0.0, 0.0], ["x", "y"]) == {"groups": 2, "groups_without_signal": 2}


def test_settings_are_checked_by_name_with_their_allowed_values(tokenizer):
    with pytest.raises(ConfigError, match=r"PPOConfig.estimator \(--estimator\) must be one of gae, grpo, dr_grpo, "
                                          r"rloo, reinforce_pp, not 'ppo'"):
        estimators.check("ppo", "token_mean")
    with pytest.raises(ConfigError, match="PPOConfig.loss_agg .* token_mean, seq_mean_token_mean, "
                                          "seq_mean_token_sum_norm, not 'sum'"):
        estimators.check("grpo", "sum")
    with pytest.raises(ConfigError, match="loss_agg_norm"):
        estimators.check("dr_grpo", "seq_mean_token_sum_norm", 0)
    pair = Pair.start(make_model(tokenizer), tokenizer)
    with pytest.raises(ConfigError, match="PPOConfig.estimator"):
        PPO(pair, PPOConfig(estimator="GRPO"))


# -- the loss aggregations, by hand ------------------------------------------------------------------


LOSS = torch.tensor([[2., 4., 9., 0.], [1., 0., 0., 0.], [3., 3., 3., 3.]])
MASK = torch.tensor([[1., 1., 0., 0.], [1., 0., 0., 0.], [1., 1., 1., 1.]])


def test_token_mean_by_hand():
    # every action token alike: (2 + 4 + 1 + 3 * 4) / 7
    assert estimators.aggregate(LOSS, MASK, "token_mean").item() == pytest.approx(19 / 7)


def test_seq_mean_token_mean_by_hand():
    # each sequence's mean (3, 1, 3), then their mean
    assert estimators.aggregate(LOSS, MASK, "seq_mean_token_mean").item() == pytest.approx(7 / 3)


def test_seq_mean_token_sum_norm_by_hand():
    # each sequence's sum (6, 1, 12) over the constant 8, then their mean: (0.75 + 0.125 + 1.5) / 3
    assert estimators.aggregate(LOSS, MASK, "seq_mean_token_sum_norm", norm=8).item() == pytest.approx(2.375 / 3)
    with pytest.raises(ConfigError, match="loss_agg_norm"):
        estimators.aggregate(LOSS, MASK, "seq_mean_token_sum_norm")


# -- PPO with them, on the tiny model ----------------------------------------------------------------


def unchanged(module, before: dict) -> bool:
    return all(torch.equal(v, before[k]) for k, v in module.state_dict().items())


def grouped_episodes(pair: Pair, rewards: list[float], tasks: list[str], answer: str = "echo ok") -> list[Episode]:
    """One episode per reward: the prompt of its task, then a fixed answer of 3 tokens (its old
    log-probs the actor's own, so that the first ratios are 1)."""
    out = []
    for n, (reward, task) in enumerate(zip(rewards, tasks)):
        prompt = pair.tokenizer.encode(f"<|im_start|>user\ntask {task}<|im_end|>\n<|im_start|>assistant\n")
        ids = prompt + pair.tokenizer.encode(answer)[:3]
        with torch.no_grad():
            logits = pair.actor(torch.tensor([ids])).logits[0].float()
        lp = [0.0] + logits[:-1].log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0].tolist()
        mask = [0] * len(prompt) + [1] * (len(ids) - len(prompt))
        out.append(Episode(f"e{n}", task, [Sequence(ids, mask, [x * m for x, m in zip(lp, mask)])], reward, 1.0))
    return out


def test_a_grpo_update_trains_the_actor_and_leaves_the_critic_bit_for_bit(pair):
    """No calibration and no force: a critic-free estimator needs no critic, and never touches it."""
    batch = grouped_episodes(pair, [1.0, 0.0, 0.0, 1.0, 0.5, 0.5], ["a", "a", "a", "a", "b", "b"])
    actor_before, critic_before = state(pair.actor), state(pair.critic)
    trainer = PPO(pair, PPOConfig(epochs=1, batch_size=3, actor_lr=1e-3, estimator="grpo"))
    assert trainer.critic_optimizer is None
    report = trainer.update(batch)
    assert not unchanged(pair.actor, actor_before)
    assert unchanged(pair.critic, critic_before)
    assert "value_loss" not in report and report["critic_grad_norm"] is None and report["actor_grad_norm"] > 0
    assert report["groups"] == 2 and report["groups_without_signal"] == 1  # b: two equal rewards
    assert report["explained_variance"] is None and report["value_mean"] is None
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)  # task a's +-; task b's 0, on 3 action tokens each
    assert report["advantage_max"] == pytest.approx(a, abs=1e-6) and report["advantage_min"] == pytest.approx(-a, abs=1e-6)
    assert report["advantage_mean"] == pytest.approx(0.0, abs=1e-6)
    assert report["estimator"] == "grpo" and report["steps"] == 2
    assert pair.critic_id is None  # nothing changed it: it keeps its (lack of an) id


def test_whitening_follows_each_estimator(pair, monkeypatch):
    whitened = []
    real = ppo_module._whiten
    monkeypatch.setattr(ppo_module, "_whiten", lambda a, m: (whitened.append(True), real(a, m)))
    batch = grouped_episodes(pair, [1.0, 0.0, 3.0, 0.0], ["a", "a", "b", "b"])
    expected = {"grpo": False, "dr_grpo": False, "rloo": False, "reinforce_pp": True}
    for estimator, whitens in expected.items():
        whitened.clear()
        report = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=0.0, estimator=estimator)).update(batch)
        assert bool(whitened) == whitens, estimator
        if estimator == "rloo":  # before whitening (none here): a: +-1, b: +-3
            assert (report["advantage_min"], report["advantage_max"]) == (-3.0, 3.0)
        if estimator == "reinforce_pp":  # before whitening: the rewards-to-go, each episode's reward
            assert report["advantage_mean"] == pytest.approx(1.0) and report["advantage_max"] == 3.0
            assert report["advantage_std"] == pytest.approx(math.sqrt((1 + 0 + 9 + 0) / 4 - 1))
    whitened.clear()
    PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=0.0, critic_lr=0.0, critic_head_lr=1e-3),
        force=True).update(batch)
    assert whitened  # GAE, whiten=True


def test_reinforce_pp_puts_the_kl_in_the_reward(pair, tokenizer):
    """With kl_coef the reference's KL lowers the rewards-to-go (no KL loss term); a reference
    equal to the actor gives a KL of 0."""
    reference = make_model(tokenizer, seed=1, context=1024).requires_grad_(False)
    batch = grouped_episodes(pair, [1.0, 0.0, 1.0, 0.0], ["a", "a", "b", "b"])
    report = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=0.0, estimator="reinforce_pp", kl_coef=0.1),
                 reference=reference).update(batch)
    assert "kl" not in report and report["reward_kl_mean"] is not None
    old = torch.tensor([lp for e in batch for lp, m in zip(e.sequences[0].old_logprobs, e.sequences[0].mask) if m])
    with torch.no_grad():
        ref = torch.cat([reference(torch.tensor([e.sequences[0].token_ids])).logits[0, :-1].float().log_softmax(-1)
                         .gather(1, torch.tensor(e.sequences[0].token_ids[1:])[:, None])[:, 0][-3:] for e in batch])
    assert report["reward_kl_mean"] == pytest.approx(float((old - ref).mean()), abs=1e-4)
    same = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=0.0, estimator="reinforce_pp", kl_coef=0.1),
               reference=pair.actor).update(batch)
    assert same["reward_kl_mean"] == pytest.approx(0.0, abs=1e-5)
    assert same["advantage_mean"] == pytest.approx(0.5, abs=1e-5)  # the rewards alone


@pytest.mark.parametrize("loss_agg", ["seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_sequence_aggregations_are_exact_across_micro_batches(tokenizer, loss_agg):
    """The same step with and without micro-batches (one sequence each): the same gradients, so
    each micro-batch's share of the sequence mean is right (and not the token mean's)."""
    grads = []
    for budget, loss_agg_here in ((None, loss_agg), (1, loss_agg), (None, "token_mean")):
        pair = Pair.start(make_model(tokenizer, context=1024), tokenizer)  # the same weights each time (seed 0)
        batch = grouped_episodes(pair, [1.0, 0.0, 0.0, 2.0], ["a", "a", "b", "b"], answer="ls -la /app")
        batch[1].sequences[0].mask[-1] = 0  # sequences of unequal lengths: 3 and 2 action tokens
        PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=1e-3, estimator="dr_grpo", loss_agg=loss_agg_here,
                            loss_agg_norm=8 if loss_agg_here.endswith("norm") else None, max_grad_norm=1e9,
                            max_tokens_per_micro_batch=budget)).update(batch)  # one minibatch: one step
        grads.append({n: p.grad.clone() for n, p in pair.actor.named_parameters() if p.grad is not None})
    whole, split, token_mean = grads
    assert whole and all(torch.allclose(whole[k], split[k], atol=1e-7) for k in whole)
    assert any(whole[k].abs().max() > 1e-6 for k in whole)  # a gradient to compare
    assert not all(torch.allclose(whole[k], token_mean[k], atol=1e-7) for k in whole)  # another aggregation
