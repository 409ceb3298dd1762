"""The reference trainer (terminal_env/train/) on the tiny in-process model: GAE over action tokens
against plain GAE on the action tokens alone, the loss terms against hand-computed values, freezing
bit for bit, checkpoints that keep their actor/critic pairing and that the local backend serves,
episodes from token-exact trajectories, and PPO that raises the reward of a toy task."""

from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tiny_lm import make_model, make_tokenizer, pair, rescore, state, tokenizer  # noqa: E402,F401 (fixtures)

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.models.base import SamplingParams  # noqa: E402
from terminal_env.models.hf_backend import HFChatTokenizer, TransformersBackend  # noqa: E402
from terminal_env.models.tokens import EpisodeTokens, TokenSegment, TurnSpan  # noqa: E402
from terminal_env.train import losses  # noqa: E402
from terminal_env.train.critic import CriticConfig, recalibrate  # noqa: E402
from terminal_env.train.data import Episode, Sequence, episodes, pad, pad_id, sft_samples  # noqa: E402
from terminal_env.train.models import Critic, Pair, action_values  # noqa: E402
from terminal_env.train.ppo import PPO, PPOConfig, check_calibration  # noqa: E402
from terminal_env.train.sft import SFTConfig, sft  # noqa: E402
from terminal_env.trajectory import ModelRef, TaskRef, Trajectory  # noqa: E402
from terminal_env.verify import VerifierResult  # noqa: E402


def unchanged(module, before: dict) -> bool:
    return all(torch.equal(v, before[k]) for k, v in module.state_dict().items())


# -- the arithmetic ------------------------------------------------------------------------------


def plain_gae(rewards: list[float], values: list[float], gamma: float, lam: float) -> list[float]:
    """Textbook GAE on one sequence whose every step is an action; the value after it is 0."""
    out, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        after = values[t + 1] if t + 1 < len(values) else 0.0
        running = rewards[t] + gamma * after - values[t] + gamma * lam * running
        out[t] = running
    return out


@settings(max_examples=200, deadline=None)
@given(st.data(), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_gae_over_action_tokens_is_gae_on_the_action_tokens_alone(data, gamma, lam):
    rows, length = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 12))
    mask = torch.tensor(data.draw(st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=length,
                                                    max_size=length), min_size=rows, max_size=rows)))
    number = st.floats(-2.0, 2.0, allow_nan=False)
    rewards = torch.tensor(data.draw(st.lists(st.lists(number, min_size=length, max_size=length),
                                              min_size=rows, max_size=rows))) * mask
    values = torch.tensor(data.draw(st.lists(st.lists(number, min_size=length, max_size=length),
                                             min_size=rows, max_size=rows)))
    advantages, returns = losses.gae(rewards, values, mask, gamma, lam)
    for i in range(rows):
        at = [t for t in range(length) if mask[i, t] > 0]
        expected = plain_gae([float(rewards[i, t]) for t in at], [float(values[i, t]) for t in at], gamma, lam)
        assert advantages[i, at].tolist() == pytest.approx(expected, abs=1e-4)
        assert returns[i, at].tolist() == pytest.approx([a + float(values[i, t]) for a, t in zip(expected, at)],
                                                        abs=1e-4)
        off = [t for t in range(length) if mask[i, t] == 0]
        assert advantages[i, off].abs().sum() == 0 and returns[i, off].abs().sum() == 0


def test_the_reward_lands_on_the_last_action_token_even_after_an_observation():
    mask = torch.tensor([[0., 1., 1., 0., 0.], [1., 0., 0., 0., 0.], [0., 0., 0., 0., 0.]])
    rewards = losses.last_action_reward(mask, torch.tensor([0.5, 1.0, 1.0]))
    assert rewards.tolist() == [[0, 0, 0.5, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]


def test_the_loss_terms_against_hand_computed_values():
    mask = torch.tensor([[1., 1., 0., 1.]])
    old = torch.zeros(1, 4)
    new = torch.log(torch.tensor([[1.5, 0.5, 9.0, 5.0]]))  # ratios; the third is not an action
    adv = torch.tensor([[1.0, -1.0, 7.0, -2.0]])
    # token 1: max(-1.5, -1.2) = -1.2; token 2: max(0.5, 0.8) = 0.8;
    # token 4: max(10, 2.4) = 10, dual clip min(10, 3 * 2) = 6
    assert losses.policy_loss(new, old, adv, mask, clip=0.2, dual_clip=3.0).item() == pytest.approx((-1.2 + 0.8 + 6) / 3)
    assert losses.policy_loss(new, old, adv, mask, clip=0.2, dual_clip=None).item() == pytest.approx((-1.2 + 0.8 + 10) / 3)
    values, old_values = torch.tensor([[1.0, 0.0, 5.0, 0.5]]), torch.tensor([[0.0, 0.0, 0.0, 0.4]])
    returns = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    # token 1: max(0, (0.2 - 1)^2) = 0.64; token 2: max(1, 1) = 1; token 4: max(0.25, 0.25) = 0.25
    assert losses.value_loss(values, old_values, returns, mask, clip=0.2).item() == pytest.approx(0.5 * (0.64 + 1 + 0.25) / 3)
    with pytest.raises(ValueError, match="dual_clip"):
        losses.policy_loss(new, old, adv, mask, dual_clip=0.5)


def test_the_kl_term_follows_the_reverse_kl_and_k3_would_follow_the_forward_one():
    """On an exact distribution over 6 tokens (each sampled with the policy's probability), the
    expected gradient of the KL term is that of KL(policy || reference). The k3 form as a loss
    would give the gradient of KL(reference || policy) instead: the check that tells them apart."""
    generator = torch.Generator().manual_seed(0)
    reference = torch.log_softmax(torch.randn(6, generator=generator), -1)
    theta = torch.randn(6, generator=generator).requires_grad_(True)

    def expected_gradient(term) -> torch.Tensor:
        logprobs = torch.log_softmax(theta, -1)
        weights = logprobs.exp().detach()  # the sampling probabilities: no gradient through them
        loss = sum(weights[x] * term(logprobs[x].view(1, 1), reference[x].view(1, 1)) for x in range(6))
        return torch.autograd.grad(loss, theta)[0]

    logprobs = torch.log_softmax(theta, -1)
    reverse = torch.autograd.grad((logprobs.exp() * (logprobs - reference)).sum(), theta, retain_graph=True)[0]
    forward = torch.autograd.grad((reference.exp() * (reference - logprobs)).sum(), theta)[0]
    assert not torch.allclose(reverse, forward, atol=1e-3)  # the two are told apart here
    ones = torch.ones(1, 1)
    assert torch.allclose(expected_gradient(lambda lp, ref: losses.kl_penalty(lp, ref, ones)), reverse, atol=1e-6)

    def k3(lp, ref):
        return losses.masked_mean(torch.exp(ref - lp) - (ref - lp) - 1, ones)

    assert torch.allclose(expected_gradient(k3), forward, atol=1e-6)


# -- models and checkpoints ----------------------------------------------------------------------


def test_the_critic_starts_from_the_actor_with_values_zero(pair, tokenizer):
    actor_body = pair.actor.model.state_dict()
    critic_body = pair.critic.model.model.state_dict()
    assert all(torch.equal(v, critic_body[k]) for k, v in actor_body.items())
    assert pair.critic.model is not pair.actor  # a copy: they train apart
    ids = torch.tensor([tokenizer.encode("hello there")])
    assert torch.count_nonzero(pair.critic(ids)) == 0


def test_a_checkpoint_keeps_its_pairing_and_the_local_backend_serves_its_actor(pair, tokenizer, tmp_path):
    with torch.no_grad():
        pair.critic.head.bias.fill_(0.25)
    pair.save(tmp_path / "base", stage="base", metrics={"critic": {"explained_variance": 0.5}})
    loaded = Pair.load(tmp_path / "base")
    assert unchanged(loaded.actor, state(pair.actor)) and unchanged(loaded.critic, state(pair.critic))
    meta = json.loads((tmp_path / "base" / "pair.json").read_text())
    assert loaded.meta == meta and meta["metrics"]["critic"]["explained_variance"] == 0.5
    for half, partner in (("actor", "critic"), ("critic", "actor")):
        own = json.loads((tmp_path / "base" / half / "terminal_env_checkpoint.json").read_text())
        assert own == {"role": half, "id": meta[half], "pair": meta[partner]}
    with pytest.raises(ConfigError, match="already holds a checkpoint"):
        pair.save(tmp_path / "base", stage="again")

    backend = TransformersBackend(str(tmp_path / "base" / "actor"))
    try:
        c = backend.complete_tokens(tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n"),
                                    params=SamplingParams(max_new_tokens=8, seed=3, temperature=1.0))
    finally:
        backend.close()
    raw = rescore(pair.actor, c.prompt_token_ids + c.token_ids)[len(c.prompt_token_ids) - 1:]
    assert torch.allclose(raw, torch.tensor(c.logprobs), atol=1e-4)

    # a child pair records its parent; halves of two different pairs are refused together
    with torch.no_grad():
        loaded.critic.head.bias.fill_(0.5)
    loaded.save(tmp_path / "child", stage="critic")
    child = json.loads((tmp_path / "child" / "pair.json").read_text())
    assert child["parent"] == meta["id"] and child["actor"] == meta["actor"] and child["critic"] != meta["critic"]
    import shutil

    shutil.rmtree(tmp_path / "child" / "critic")
    shutil.copytree(tmp_path / "base" / "critic", tmp_path / "child" / "critic")
    with pytest.raises(ConfigError, match="do not belong together"):
        Pair.load(tmp_path / "child")
    with pytest.raises(ConfigError, match="no pair.json"):
        Pair.load(tmp_path / "child" / "actor")


# -- data ----------------------------------------------------------------------------------------


def trajectory(segments: list[TokenSegment] | None, *, outcome: str = "passed", masked: bool = False,
               temperature: float = 1.0) -> Trajectory:
    result = VerifierResult.infra_error("engine gone") if masked else VerifierResult(outcome=outcome)
    return Trajectory(task=TaskRef(name="toy"), harness="generic",
                      model=ModelRef(name="tiny", backend="TransformersBackend", params={"temperature": temperature}),
                      tokens=EpisodeTokens(segments=segments) if segments is not None else None,
                      verification=result.model_dump(mode="json"), masked=masked)


def segment(reason: str = "first", weights: str = "w1") -> TokenSegment:
    return TokenSegment(reason=reason, token_ids=[5, 6, 7, 8], action_mask=[0, 1, 1, 0],
                        logprobs=[0, -1, -2, 0], sampling_logprobs=[0, -0.5, -1.5, 0],
                        turns=[TurnSpan(turn=0, prompt_start=0, start=1, end=3, weights=weights)])


def test_episodes_come_from_token_records_and_leave_out_what_must_not_train():
    passed = trajectory([segment()])
    (episode,), skipped = episodes([passed, trajectory([segment()], masked=True)], reward="binary")
    assert skipped == {"masked": 1} and episode.reward == 1.0
    assert episode.sequences[0].old_logprobs == [0, -0.5, -1.5, 0]  # the sampling log-probs, as recorded
    failed = trajectory([segment()], outcome="failed")
    assert episodes([failed], reward="binary")[0][0].reward == 0.0
    with pytest.raises(ConfigError, match="no token record"):
        episodes([trajectory(None)])
    assert episodes([trajectory([])])[1] == {"no_turns": 1}  # sampled nothing: nothing to train
    two = trajectory([segment(), segment("context_trimmed")])
    with pytest.raises(ConfigError, match="2 token segments"):
        episodes([two])
    assert episodes([two], multi_segment="drop")[1] == {"multi_segment": 1}
    assert len(episodes([two], multi_segment="accept")[0][0].sequences) == 2
    with pytest.raises(ConfigError, match="sampled by the weights 'w1', not 'w2'"):
        episodes([passed], weights="w2")
    with pytest.raises(ConfigError, match="greedily"):
        episodes([trajectory([segment()], temperature=0.0)])


def test_sft_samples_train_on_the_assistants_tokens_only(tokenizer):
    ct = HFChatTokenizer(tokenizer, "tiny")
    record = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                           {"role": "assistant", "content": "ls -la"}, {"role": "user", "content": "ok"},
                           {"role": "assistant", "content": "done"}]}
    (sample,) = sft_samples([record], ct)
    # as at inference: each generation prompt (with its empty think block), then the answer
    first = ct.chat_text(record["messages"][:2], add_generation_prompt=True)
    assert first.endswith("<|im_start|>assistant\n<think></think>")
    assert ct.decode(sample.token_ids).startswith(first + "ls -la<|im_end|>\n<|im_start|>user\nok")
    trained = [t for t, m in zip(sample.token_ids, sample.mask) if m]
    assert ct.decode(trained) == "ls -la<|im_end|>done<|im_end|>"  # the answers and their end-of-turn tokens
    assert ct.decode(sample.token_ids).endswith("<|im_start|>assistant\n<think></think>done<|im_end|>")
    with pytest.raises(ConfigError, match="no assistant message"):
        sft_samples([{"messages": [{"role": "user", "content": "hi"}]}], ct)


# -- the steps -----------------------------------------------------------------------------------


def test_sft_trains_the_actor_and_leaves_the_critic_bit_for_bit(pair, tokenizer):
    ct = HFChatTokenizer(tokenizer, "tiny")
    records = [{"messages": [{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": "echo ok"}]}
               for i in range(6)]
    samples = sft_samples(records, ct)
    actor_before, critic_before = state(pair.actor), state(pair.critic)
    report = sft(pair, samples, SFTConfig(epochs=5, lr=3e-3, batch_size=3))
    assert unchanged(pair.critic, critic_before)
    assert not unchanged(pair.actor, actor_before)
    assert report["loss"][-1] < report["loss"][0]  # it learned the answer


def sampled_episodes(pair: Pair, backend: TransformersBackend, n: int, seed: int, reward) -> list[Episode]:
    """Episodes of one turn: a prompt, then 6 tokens sampled at temperature 1 by the backend."""
    out = []
    for i in range(n):
        prompt = pair.tokenizer.encode(f"<|im_start|>user\npick {i % 4}<|im_end|>\n<|im_start|>assistant\n")
        c = backend.complete_tokens(prompt, params=SamplingParams(max_new_tokens=6, seed=seed * 1000 + i,
                                                                  temperature=1.0))
        ids = prompt + c.token_ids
        out.append(Episode(f"e{i}", "toy", [Sequence(ids, [0] * len(prompt) + [1] * len(c.token_ids),
                                                     [0.0] * len(prompt) + c.sampling_logprobs)],
                           reward(i, c.token_ids), 1.0))
    return out


def even_share(_: int, tokens: list[int]) -> float:
    return sum(1 for t in tokens if t % 2 == 0) / len(tokens)


def test_critic_recalibration_raises_explained_variance_and_leaves_the_actor_bit_for_bit(pair):
    backend = TransformersBackend(pair.actor, pair.tokenizer, name="tiny")
    try:
        # a return the critic can learn: it follows from the prompt ("pick 0" .. "pick 3")
        batch = sampled_episodes(pair, backend, 32, 0, lambda i, _: (i % 4) / 3)
    finally:
        backend.close()
    actor_before = state(pair.actor)
    report = recalibrate(pair, batch, CriticConfig(epochs=40, lr=1e-2, target_explained_variance=0.7))
    assert unchanged(pair.actor, actor_before)
    first, last = report["epochs"][0], report["epochs"][-1]
    assert last["explained_variance"] > first["explained_variance"] + 0.5, report["epochs"]
    assert set(last) >= {"epoch", "train_loss", "explained_variance", "correlation"}


def prompt_episodes(pair: Pair, n: int, reward) -> list[Episode]:
    """Episodes of one fixed 3-token answer after the prompt "pick i % 4" (no sampling)."""
    out = []
    for i in range(n):
        prompt = pair.tokenizer.encode(f"<|im_start|>user\npick {i % 4}<|im_end|>\n<|im_start|>assistant\n")
        answer = pair.tokenizer.encode("echo ok")[:3]
        out.append(Episode(f"e{i}", "toy", [Sequence(prompt + answer, [0] * len(prompt) + [1] * len(answer),
                                                     [0.0] * (len(prompt) + len(answer)))], reward(i), 1.0))
    return out


def test_the_value_head_learns_at_its_own_rate_and_a_body_rate_of_0_freezes_the_body(pair):
    batch = prompt_episodes(pair, 8, lambda i: float(i % 4))
    body_before, head_before = state(pair.critic.model), state(pair.critic.head)
    # half held out: 4 episodes whose returns vary (a quarter, 2 here, would both have return 0)
    report = recalibrate(pair, batch, CriticConfig(epochs=2, lr=0.0, head_lr=1e-2, batch_size=4, holdout=0.5))
    assert unchanged(pair.critic.model, body_before)  # lr 0: the body is not trained
    assert not unchanged(pair.critic.head, head_before)
    assert len(report["epochs"]) == 3
    with pytest.raises(ConfigError, match="head_lr"):
        recalibrate(pair, batch, CriticConfig(epochs=1, head_lr=0.0))
    with pytest.raises(ConfigError, match="holdout .* not 1.5"):  # nothing would be left to train on
        recalibrate(pair, batch, CriticConfig(epochs=1, holdout=1.5))


def test_normalised_returns_give_values_in_reward_units(pair):
    """Returns far from 0 (10 to 13): the critic fits them standardised, and its values, as PPO
    reads them, come out in reward units (near the returns, not near 0: explained variance alone
    would not tell, a constant shift leaves it unchanged)."""
    batch = prompt_episodes(pair, 16, lambda i: 10.0 + i % 4)
    report = recalibrate(pair, batch, CriticConfig(epochs=30, lr=0.0, head_lr=3e-2, batch_size=4,
                                                   normalize_returns=True, target_explained_variance=0.9))
    assert report["return_mean"] == pytest.approx(11.5, abs=0.5) and report["return_std"] > 0.5
    assert report["explained_variance"] > report["initial_explained_variance"] + 0.1, report["epochs"]
    with torch.no_grad():
        values = action_values(pair.critic, pad([s for e in batch for s in e.sequences], pad_id(pair.tokenizer)))
    mask = pad([s for e in batch for s in e.sequences], pad_id(pair.tokenizer))["mask"] > 0
    assert 9.0 < float(values[mask].mean()) < 14.0  # reward units: the standardisation is folded in


def test_ppo_gives_the_value_head_its_own_rate_and_a_critic_rate_of_0_freezes_the_body(pair):
    batch = prompt_episodes(pair, 8, lambda i: float(i % 4))
    actor_before, body_before, head_before = state(pair.actor), state(pair.critic.model), state(pair.critic.head)
    trainer = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=1e-3, critic_lr=0.0, critic_head_lr=1e-2),
                  force=True)
    trainer.update(batch)
    assert unchanged(pair.critic.model, body_before)
    assert not unchanged(pair.critic.head, head_before) and not unchanged(pair.actor, actor_before)
    with pytest.raises(ConfigError, match="PPOConfig.critic_head_lr must be above 0"):
        PPO(pair, PPOConfig(critic_lr=1e-3, critic_head_lr=0.0), force=True)
    pair.critic.requires_grad_(False)  # as SFT leaves it: PPO, made now, still trains the whole critic
    body_before = state(pair.critic.model)
    PPO(pair, PPOConfig(epochs=1, batch_size=4, critic_lr=1e-2), force=True).update(batch)
    assert not unchanged(pair.critic.model, body_before)


def test_ppo_refuses_an_uncalibrated_critic(pair):
    with pytest.raises(ConfigError, match="never recalibrated"):
        PPO(pair)
    pair.meta = {"critic": "c1", "metrics": {"critic": {"critic": "c1", "explained_variance": 0.05}}}
    with pytest.raises(ConfigError, match="explains 0.05"):
        PPO(pair)
    pair.meta["metrics"]["critic"]["explained_variance"] = None  # measured on returns that did not vary
    with pytest.raises(ConfigError, match="has no explained variance"):
        PPO(pair)
    pair.meta = {"critic": "c1", "metrics": {"critic": {"explained_variance": 0.9}}}  # a record of before
    with pytest.raises(ConfigError, match="names no critic"):
        PPO(pair)
    PPO(pair, force=True)  # told to
    PPO(pair, PPOConfig(estimator="rloo"))  # a critic-free estimator needs no critic


# -- the fixes of issue #34 ------------------------------------------------------------------------


def test_the_calibration_record_names_the_critic_it_measured_and_ppo_refuses_another(pair, tmp_path):
    """In memory (never saved) the report is the record; saved, it names the saved critic; a PPO
    update gives the critic a new id, and a record of the critic before, passed in memory or
    copied into the child's pair.json (what 'train ppo' did), is refused."""
    batch = prompt_episodes(pair, 8, lambda i: float(i % 4))
    fit = CriticConfig(epochs=3, lr=0.0, head_lr=3e-2, batch_size=4, holdout=0.5)
    config = PPOConfig(epochs=1, batch_size=4, actor_lr=1e-3, critic_lr=0.0, critic_head_lr=1e-2,
                       min_explained_variance=-100.0)  # the gate's id check alone, whatever was measured
    report = recalibrate(pair, batch, fit)
    assert report["critic"] == pair.critic_id and report["critic"].startswith("unsaved-critic-")
    assert report["epochs"][0]["correlation"] is None  # the zero head's values do not vary: undefined, not 0
    assert report["epochs"][1]["critic_grad_norm"] > 0 and report["epochs"][1]["critic_grad_norm_max"] > 0
    assert not pair.meta.get("critic")
    with pytest.raises(ConfigError, match="never recalibrated"):
        PPO(pair, config)  # pair.json has no record: the report must be passed
    PPO(pair, config, calibration=report).update(batch)  # trains the critic: its id changes
    with pytest.raises(ConfigError, match=r"the calibration record is of critic unsaved-critic-\w+, this pair's "
                                          r"critic is unsaved-ppo-\w+ \(changed by stage ppo\): recalibrate"):
        PPO(pair, config, calibration=report)
    assert check_calibration(pair, 0.2, force=True) is None  # forced: not checked

    report = recalibrate(pair, batch, fit)
    pair.save(tmp_path / "critic", stage="critic", metrics={"critic": report})
    saved = json.loads((tmp_path / "critic" / "pair.json").read_text())
    assert saved["metrics"]["critic"]["critic"] == saved["critic"]  # named by the saved critic's id
    assert check_calibration(pair, -100.0, calibration=report) == report  # the in-memory report still holds
    loaded = Pair.load(tmp_path / "critic")
    assert check_calibration(loaded, -100.0)["critic"] == loaded.critic_id
    PPO(loaded, config).update(batch)
    loaded.save(tmp_path / "ppo", stage="ppo", metrics={"critic": saved["metrics"]["critic"]})  # copied forward
    child = Pair.load(tmp_path / "ppo")
    assert child.meta["metrics"]["critic"]["critic"] == saved["critic"] != child.meta["critic"]
    with pytest.raises(ConfigError, match=f"the calibration record is of critic {saved['critic']}, this pair's "
                                          f"critic is {child.meta['critic']} \\(changed by stage ppo\\)"):
        PPO(child, config)

    # weights changed without a stage saying so: a saved record of them is not renamed either
    again = Pair.load(tmp_path / "critic")
    with torch.no_grad():
        again.critic.head.bias.add_(1.0)
    again.save(tmp_path / "edited", stage="edited", metrics={"critic": saved["metrics"]["critic"]})
    with pytest.raises(ConfigError, match="the calibration record is of critic"):
        PPO(Pair.load(tmp_path / "edited"), config)


def test_explained_variance_and_correlation_are_none_where_undefined():
    assert losses.explained_variance(torch.tensor([1., 2., 3.]), torch.tensor([2., 2., 2.])) is None
    assert losses.explained_variance(torch.zeros(0), torch.zeros(0)) is None
    assert losses.explained_variance(torch.tensor([2., 2.]), torch.tensor([1., 3.])) == 0.0  # predicts the mean
    assert losses.correlation(torch.zeros(3), torch.tensor([1., 2., 3.])) is None


def test_recalibration_refuses_a_held_out_part_that_cannot_measure(pair):
    """4 episodes, a quarter held out: one episode, whose returns (gamma 1: its reward on every
    action token) do not vary, so explained variance is undefined there."""
    batch = prompt_episodes(pair, 4, lambda i: float(i % 4))
    critic_before = state(pair.critic)
    with pytest.raises(ConfigError, match=r"held-out part \(1 of 4 episodes.*do not vary \(all 0\).*requires a "
                                          r"held-out set that can measure: hold out more episodes"):
        recalibrate(pair, batch, CriticConfig(epochs=1, lr=0.0, head_lr=1e-2))
    assert unchanged(pair.critic, critic_before) and pair.critic_id is None  # refused before any change
    same = [Episode(e.id, e.task, e.sequences, 1.0, 1.0) for e in prompt_episodes(pair, 8, lambda i: 0.0)]
    with pytest.raises(ConfigError, match="do not vary \\(all 1\\)"):
        recalibrate(pair, same, CriticConfig(epochs=1, lr=0.0, head_lr=1e-2, holdout=0.5))
    report = recalibrate(pair, batch, CriticConfig(epochs=1, lr=0.0, head_lr=1e-2, holdout=0.5))  # 0 and 1
    assert report["held_out"] == 2 and report["explained_variance"] is not None


def test_every_ppo_update_measures_its_batch_before_training(pair):
    """The old values against the new returns over the batch's action tokens (gamma 1, critic
    lambda 1: each token's return is its episode's reward), and statistics of the batch."""
    batch = prompt_episodes(pair, 8, lambda i: float(i % 4))
    with torch.no_grad():
        pair.critic.head.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
        pair.critic.head.bias.fill_(1.0)
        padded = pad([e.sequences[0] for e in batch], pad_id(pair.tokenizer))
        values = action_values(pair.critic, padded)[padded["mask"] > 0]
    returns = torch.tensor([e.reward for e in batch]).repeat_interleave(3)  # 3 action tokens each
    report = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=1e-3, critic_lr=1e-3, max_grad_norm=1e-6),
                 force=True).update(batch)
    assert report["explained_variance"] == pytest.approx(losses.explained_variance(values, returns), abs=1e-4)
    assert report["explained_variance"] != 0.0
    stats = {"value": values, "return": returns, "advantage": returns - values}  # actor lambda 1: R - V
    for name, x in stats.items():
        assert report[f"{name}_mean"] == pytest.approx(float(x.mean()), abs=1e-4), name
        assert report[f"{name}_std"] == pytest.approx(float(x.std(unbiased=False)), abs=1e-4), name
        assert report[f"{name}_min"] == pytest.approx(float(x.min()), abs=1e-4), name
        assert report[f"{name}_max"] == pytest.approx(float(x.max()), abs=1e-4), name
    assert [report["return_mean"], report["return_min"], report["return_max"]] == pytest.approx([1.5, 0, 3], abs=1e-6)
    assert report["response_length_mean"] == report["response_length_max"] == 3
    assert report["turns_mean"] == report["turns_max"] == 1
    assert report["groups"] == 1 and report["groups_without_signal"] == 0
    # the gradient norms before clipping (max_grad_norm 1e-6: far above it), mean and max over the steps
    for half in ("actor", "critic"):
        assert 1e-4 < report[f"{half}_grad_norm"] <= report[f"{half}_grad_norm_max"], report


def test_the_actor_and_the_critic_have_their_own_lambdas(tokenizer):
    """A fresh critic (values 0), gamma 1, rewards 0..3 on the last of 3 action tokens: lambda 1
    gives each token the reward, lambda 0 the next token's value plus its reward (0, 0, reward)."""
    rewards = [0.0, 1.0, 2.0, 3.0]
    for actor_lam, critic_lam, advantage_mean, return_mean in ((1.0, 0.0, 1.5, 0.5), (0.0, 1.0, 0.5, 1.5)):
        pair = Pair.start(make_model(tokenizer, context=1024), tokenizer)
        report = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=0.0, critic_lr=0.0, critic_head_lr=1e-3,
                                     actor_lam=actor_lam, critic_lam=critic_lam), force=True).update(
            prompt_episodes(pair, 4, lambda i: rewards[i]))
        assert report["advantage_mean"] == pytest.approx(advantage_mean)
        assert report["return_mean"] == pytest.approx(return_mean)
    assert (PPOConfig().actor_lam, PPOConfig().critic_lam) == (1.0, 1.0)  # what the benchmarks ran
    with pytest.raises(TypeError):
        PPOConfig(lam=0.95)  # the one lambda is gone: say which
    with pytest.raises(ConfigError, match=r"PPOConfig.critic_lam \(--critic-lam\) must be between 0 and 1"):
        PPO(pair, PPOConfig(critic_lam=1.5), force=True)


def test_the_log_ratio_is_clamped_so_nothing_infinite_comes_through_the_mask(pair):
    mask = torch.tensor([[0., 1., 1.]])
    old = torch.tensor([[-float("inf"), -1000.0, -1.0]])  # -inf off the mask; a gap of 999.5 on an action
    new = torch.tensor([[0.0, -0.5, -1.2]], requires_grad=True)
    for advantages in (torch.tensor([[0., 1., -1.]]), torch.tensor([[0., -1., 1.]])):
        for dual_clip in (3.0, None):
            loss = losses.policy_loss(new, old, advantages, mask, clip=0.2, dual_clip=dual_clip)
            loss.backward()
            assert torch.isfinite(loss) and torch.isfinite(new.grad).all(), (advantages, dual_clip, loss, new.grad)
            new.grad = None
    assert losses.log_ratio(new, old, mask).tolist()[0] == pytest.approx([0.0, 20.0, -0.2])

    # through a whole update: -inf old log-probs on prompt tokens, a huge gap on an action token
    batch = prompt_episodes(pair, 4, lambda i: float(i % 4))
    for e in batch:
        seq = e.sequences[0]
        seq.old_logprobs = [-float("inf")] * seq.mask.index(1) + [-1000.0] + [-1.0] * (sum(seq.mask) - 1)
    report = PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=1e-3, critic_lr=1e-3, old_logprobs="rollout"),
                 force=True).update(batch)
    for k in ("policy_loss", "approx_kl", "clip_fraction", "value_loss", "actor_grad_norm"):
        assert report[k] is not None and torch.isfinite(torch.tensor(report[k])), (k, report[k])
    assert all(torch.isfinite(p).all() for p in pair.actor.parameters())


def test_the_cli_defaults_are_the_configs_defaults():
    """One source of truth: every flag of 'train critic' and 'train ppo' that names a config field
    leaves it to the dataclass, and the config the command builds from no flags is the default."""
    from terminal_env.cli import build_parser
    from terminal_env.train import cli as train_cli

    for step, build, config in (("critic", train_cli._critic_config, CriticConfig),
                                ("ppo", train_cli._ppo_config, PPOConfig)):
        args = build_parser().parse_args(["train", step, "--pair", "p", "--trajectories", "t", "--out", "o"])
        args.precision = "fp32"  # what the command picks on CPU (bf16 on CUDA, the one default of its own)
        assert build(args) == config(), step
        for field in dataclasses.fields(config):
            value = getattr(args, field.name, None)
            assert value is None or value == field.default, (step, field.name, value, field.default)
    args = build_parser().parse_args(["train", "ppo", "--pair", "p", "--trajectories", "t", "--out", "o",
                                      "--actor-lam", "0.5", "--critic-lam", "0.25", "--gamma", "0.9", "--estimator",
                                      "rloo", "--loss-agg", "seq_mean_token_mean", "--actor-lr", "3e-6"])
    args.precision = "fp32"
    assert train_cli._ppo_config(args) == PPOConfig(actor_lam=0.5, critic_lam=0.25, gamma=0.9, estimator="rloo",
                                                    loss_agg="seq_mean_token_mean", actor_lr=3e-6)


def test_ppo_state_round_trips_through_a_file(tokenizer, tmp_path):
    """Update on batch A, save the state, resume it in a fresh PPO on a copy of the pair, update
    on B: the weights of one PPO that did A then B, bit for bit."""
    config = PPOConfig(epochs=2, batch_size=2, actor_lr=1e-3, critic_lr=1e-3)

    def fresh() -> Pair:
        p = Pair.start(make_model(tokenizer, context=1024), tokenizer)
        with torch.no_grad():
            p.critic.head.bias.fill_(0.3)
        return p

    one = fresh()
    a = prompt_episodes(one, 4, lambda i: float(i % 4))
    b = prompt_episodes(one, 4, lambda i: float((i * 3) % 4))
    trainer = PPO(one, config, force=True)
    trainer.update(a)
    torch.save(trainer.state_dict(), tmp_path / "ppo.pt")
    copies = []
    for with_state in (True, False):
        two = fresh()
        two.actor.load_state_dict(one.actor.state_dict())
        two.critic.load_state_dict(one.critic.state_dict())
        resumed = PPO(two, config, force=True)
        if with_state:
            resumed.load_state_dict(torch.load(tmp_path / "ppo.pt", weights_only=True))
            assert resumed.steps_done == trainer.steps_done == 4
        resumed.update(b)
        copies.append(two)
    trainer.update(b)
    assert trainer.steps_done == 8
    for half in ("actor", "critic"):
        ours = getattr(one, half).state_dict()
        assert all(torch.equal(v, ours[k]) for k, v in getattr(copies[0], half).state_dict().items()), half
        assert not all(torch.equal(v, ours[k]) for k, v in getattr(copies[1], half).state_dict().items()), half
    with pytest.raises(ConfigError, match="one trains the critic and the other does not"):
        PPO(fresh(), PPOConfig(estimator="grpo")).load_state_dict(trainer.state_dict())


def test_ppo_raises_the_reward_of_a_toy_task_from_the_sampled_logprobs(pair):
    """Reward: the share of even token ids among 6 sampled tokens. Rollouts from the local
    backend, PPO updates, new weights pushed into the backend after each update."""
    backend = TransformersBackend(pair.actor, pair.tokenizer, name="tiny", weights_version="v0")
    trainer = PPO(pair, PPOConfig(epochs=2, batch_size=8, actor_lr=5e-3, critic_lr=5e-3,
                                  actor_lam=1.0, critic_lam=1.0), force=True)
    rewards, gaps = [], []
    try:
        base = sampled_episodes(pair, backend, 32, 99, even_share)
        for step in range(12):  # 8 gave +0.167 with today's packages (0.510 -> 0.677); 12 gives +0.375
            batch = sampled_episodes(pair, backend, 32, step, even_share)
            report = trainer.update(batch)
            gaps.append(report["first_logprob_gap"])
            backend.load_weights(state(pair.actor), version=f"v{step + 1}")
        after = sampled_episodes(pair, backend, 32, 99, even_share)
        rewards = [sum(e.reward for e in base) / 32, sum(e.reward for e in after) / 32]
    finally:
        backend.close()
    assert max(gaps) < 1e-3  # the trainer scores the rollouts' tokens as the sampler did
    assert rewards[1] > rewards[0] + 0.2, rewards


def test_critic_module_forward_shape(tokenizer):
    critic = Critic(make_model(tokenizer))
    assert critic(torch.tensor([[1, 2, 3]])).shape == (1, 3)


# -- the command line ----------------------------------------------------------------------------


def test_the_train_commands_chain_checkpoints_and_keep_the_critic_through_sft(tokenizer, tmp_path, capsys):
    from terminal_env.cli import main

    make_model(tokenizer, context=1024).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    assert main(["train", "init", "--actor", str(tmp_path / "tiny"), "--out", str(tmp_path / "base")]) == 0
    base = json.loads((tmp_path / "base" / "pair.json").read_text())

    chat = tmp_path / "rsr.jsonl"
    chat.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"task {i}"},
                                                       {"role": "assistant", "content": "echo ok"}]})
                              for i in range(4)) + "\n")
    assert main(["train", "sft", "--pair", str(tmp_path / "base"), "--data", str(chat), "--out",
                 str(tmp_path / "sft"), "--lr", "1e-3", "--epochs", "2"]) == 0
    after = json.loads((tmp_path / "sft" / "pair.json").read_text())
    assert after["critic"] == base["critic"] and after["actor"] != base["actor"]  # the critic, bit for bit
    assert after["parent"] == base["id"] and after["stage"] == "sft"

    # the actor, served from its checkpoint, names its weights by the checkpoint's id
    backend = TransformersBackend(str(tmp_path / "sft" / "actor"))
    assert backend.weights_version == after["actor"]
    pair = Pair.load(tmp_path / "sft")
    try:
        batch = sampled_episodes(pair, backend, 8, 0, lambda i, _: (i % 4) / 3)
    finally:
        backend.close()
    run = tmp_path / "run"
    for n, e in enumerate(batch):
        seq = e.sequences[0]
        start = seq.mask.index(1)
        seg = TokenSegment(reason="first", token_ids=seq.token_ids, action_mask=seq.mask,
                           logprobs=seq.old_logprobs, sampling_logprobs=seq.old_logprobs,
                           turns=[TurnSpan(turn=0, prompt_start=0, start=start, end=len(seq.token_ids),
                                           weights=after["actor"])])
        outcome = "passed" if e.reward == 1.0 else "partial"
        t = trajectory([seg], outcome=outcome)
        t.verification = VerifierResult(outcome=outcome, progress=e.reward).model_dump(mode="json")
        (run / "trials" / f"t{n}" / "0").mkdir(parents=True)
        t.save(run / "trials" / f"t{n}" / "0" / "trajectory.json")
    assert main(["train", "ppo", "--pair", str(tmp_path / "sft"), "--trajectories", str(run),
                 "--out", str(tmp_path / "ppo")]) == 2  # refused: the critic was never recalibrated
    assert "never recalibrated" in " ".join(capsys.readouterr().err.split())
    assert main(["train", "critic", "--pair", str(tmp_path / "sft"), "--trajectories", str(run), "--out",
                 str(tmp_path / "critic"), "--epochs", "3", "--json", "--lr", "0", "--head-lr", "1e-2",
                 "--normalize-returns", "--holdout", "0.5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stage"] == "critic" and len(report["epochs"]) >= 2
    assert report["held_out"] == 4 and report["return_mean"] is not None  # --holdout, --normalize-returns
    before, fitted = Pair.load(tmp_path / "sft").critic, Pair.load(tmp_path / "critic").critic
    assert unchanged(fitted.model, state(before.model)) and not unchanged(fitted.head, state(before.head))  # --lr 0
    calibrated = json.loads((tmp_path / "critic" / "pair.json").read_text())
    assert calibrated["metrics"]["critic"]["critic"] == calibrated["critic"]  # the record names the critic saved
    # the gate passes on the record of this very critic (its threshold lowered: 3 epochs measure little)
    assert main(["train", "ppo", "--pair", str(tmp_path / "critic"), "--trajectories", str(run),
                 "--out", str(tmp_path / "ppo"), "--min-explained-variance", "-100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["explained_variance"] is not None and report["actor_grad_norm"] > 0
    ppo = json.loads((tmp_path / "ppo" / "pair.json").read_text())
    assert ppo["parent"] == calibrated["id"] and "critic" not in ppo["metrics"]  # no record carried over
    assert main(["train", "ppo", "--pair", str(tmp_path / "ppo"), "--trajectories", str(run),
                 "--out", str(tmp_path / "ppo2"), "--min-explained-variance", "-100"]) == 2
    assert "never recalibrated" in " ".join(capsys.readouterr().err.split())  # PPO trained the critic since
    assert main(["train", "ppo", "--pair", str(tmp_path / "ppo"), "--trajectories", str(run),
                 "--out", str(tmp_path / "ppo2"), "--force"]) == 2  # sampled by other weights
    assert "must come from the weights being trained" in " ".join(capsys.readouterr().err.split())
    assert main(["train", "ppo", "--pair", str(tmp_path / "critic"), "--trajectories", str(run), "--out",
                 str(tmp_path / "grpo"), "--estimator", "grpo", "--loss-agg", "seq_mean_token_sum_norm",
                 "--loss-agg-norm", "16", "--actor-lr", "1e-3", "--json"]) == 0  # no gate, the critic untouched
    report = json.loads(capsys.readouterr().out)
    assert report["estimator"] == "grpo" and report["groups"] == 1 and report["groups_without_signal"] == 0  # "toy"
    assert json.loads((tmp_path / "grpo" / "pair.json").read_text())["critic"] == calibrated["critic"]


@pytest.mark.docker
def test_rollouts_through_the_pool_train_with_their_own_seeds_and_weights(tokenizer, tmp_path, base_image):
    from terminal_env.tasks.toy import write_toy_family
    from terminal_env.train.rollouts import collect

    pair = Pair.start(make_model(tokenizer, context=8192), tokenizer)  # the harness's prompt is ~2,000 tokens
    tasks = write_toy_family(tmp_path / "toy", n_train=2, n_validation=0, seed=5)
    backend = TransformersBackend(pair.actor, pair.tokenizer, name="tiny", weights_version="w0")
    try:
        trajectories = collect(backend, tasks, attempts=2, max_turns=2, max_concurrency=4, seed=10,
                               params=SamplingParams(temperature=1.0, max_new_tokens=16))
        batch, skipped = episodes(trajectories, weights="w0", reward="partial_progress")
        assert len(batch) == 4 and not skipped
        assert all(t.verification is not None and t.tokens.num_segments >= 1 for t in trajectories)
        first = [b.sequences[0] for b in batch]
        assert first[0].token_ids != first[1].token_ids  # two attempts, two seeds
        report = PPO(pair, PPOConfig(epochs=1), force=True).update(batch)
        assert report["first_logprob_gap"] < 1e-3 and report["steps"] >= 1
        with pytest.raises(ConfigError, match="no token record"):
            from terminal_env.models.simple import NopBackend

            collect(NopBackend(), tasks)
    finally:
        backend.close()
