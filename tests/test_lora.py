"""LoRA through PEFT on the tiny in-process model: what trains (the adapters, the critic's value
head), what the optimizers hold, a PPO update that moves nothing else, checkpoints that hold the
merged weights (served as they are) and the adapter in PEFT's format, and the merged weights
pushed to a served generator."""

from __future__ import annotations

import copy
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from tiny_lm import make_model, make_tokenizer, pair, rescore, state, tokenizer  # noqa: E402,F401 (fixtures)

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.models.base import SamplingParams  # noqa: E402
from terminal_env.models.hf_backend import TransformersBackend  # noqa: E402
from terminal_env.train.data import Episode, Sequence  # noqa: E402
from terminal_env.train.lora import LoraSettings, add_lora, served_state, trainable_parameters  # noqa: E402
from terminal_env.train.models import Pair  # noqa: E402
from terminal_env.train.ppo import PPO, PPOConfig  # noqa: E402
from terminal_env.train.sft import SFTConfig, sft  # noqa: E402

RANK = 4


def episodes(pair: Pair, n: int = 8) -> list[Episode]:
    out = []
    for i in range(n):
        prompt = pair.tokenizer.encode(f"<|im_start|>user\npick {i % 4}<|im_end|>\n<|im_start|>assistant\n")
        answer = pair.tokenizer.encode("echo ok")[:3]
        out.append(Episode(f"e{i}", "toy", [Sequence(prompt + answer, [0] * len(prompt) + [1] * len(answer),
                                                     [0.0] * (len(prompt) + len(answer)))], float(i % 4), 1.0))
    return out


def nudge_adapters(model, seed: int = 0) -> None:
    """B starts at 0 (an adapter that changes nothing): give it values, as training would."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)


def test_lora_trains_the_adapters_alone_and_the_optimizers_hold_nothing_else(pair):
    full = sum(p.numel() for p in pair.actor.parameters())
    linears = [m for n, m in pair.actor.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head"]
    add_lora(pair.actor, LoraSettings(rank=RANK))
    add_lora(pair.critic.model, LoraSettings(rank=RANK, targets=["q_proj", "v_proj"]))
    expected = sum(RANK * (m.in_features + m.out_features) for m in linears)  # A: r x in, B: out x r
    trainable = [p for p in pair.actor.parameters() if p.requires_grad]
    assert sum(p.numel() for p in trainable) == expected == 4096 and full == 39072
    trainer = PPO(pair, PPOConfig(critic_lr=1e-3), force=True)
    held = [p for g in trainer.actor_optimizer.param_groups for p in g["params"]]
    assert {id(p) for p in held} == {id(p) for p in trainable}
    critic_held = {id(p) for g in trainer.critic_optimizer.param_groups for p in g["params"]}
    body_adapter = [p for n, p in pair.critic.model.named_parameters() if ".lora_" in n]
    assert critic_held == {id(p) for p in [*pair.critic.head.parameters(), *body_adapter]}
    assert len(body_adapter) == 2 * 2 * 2  # q and v of 2 layers, A and B each
    with pytest.raises(ConfigError, match="already carries"):
        add_lora(pair.actor, LoraSettings(rank=RANK))


def test_a_ppo_update_with_lora_moves_only_the_adapters_and_the_value_head(pair):
    add_lora(pair.actor, LoraSettings(rank=RANK))
    add_lora(pair.critic.model, LoraSettings(rank=RANK))
    pair.actor.requires_grad_(True)  # as a critic stage or old code leaves it: PPO decides again
    actor_before, critic_before = state(pair.actor), state(pair.critic)
    PPO(pair, PPOConfig(epochs=1, batch_size=4, actor_lr=1e-2, critic_lr=1e-2), force=True).update(episodes(pair))
    moved = {f"actor.{k}" for k, v in pair.actor.state_dict().items() if not torch.equal(v, actor_before[k])}
    moved |= {f"critic.{k}" for k, v in pair.critic.state_dict().items() if not torch.equal(v, critic_before[k])}
    assert moved and all(".lora_" in k or k.startswith("critic.head.") for k in moved), sorted(moved)
    assert any(k.startswith("actor.") and ".lora_B." in k for k in moved)
    assert any(k.startswith("critic.model.") for k in moved) and "critic.head.weight" in moved


def test_a_pair_with_lora_saves_merged_weights_and_its_adapter_and_loads_and_serves(pair, tokenizer, tmp_path):
    parent = copy.deepcopy(pair.actor)
    add_lora(pair.actor, LoraSettings(rank=RANK, alpha=8))
    add_lora(pair.critic.model, LoraSettings(rank=2, targets=["q_proj"]))
    samples = [Sequence(tokenizer.encode(f"task {i} echo done > /tmp/out.txt")[:12], [0] * 3 + [1] * 9)
               for i in range(4)]
    sft(pair, samples, SFTConfig(epochs=2, lr=1e-2, batch_size=2))
    nudge_adapters(pair.critic.model)
    ids = torch.tensor([samples[0].token_ids])
    with torch.no_grad():
        logits, values = pair.actor(input_ids=ids).logits, pair.critic(ids)
    pair.save(tmp_path / "ckpt", stage="sft")

    meta = json.loads((tmp_path / "ckpt" / "pair.json").read_text())
    assert meta["adapters"]["actor"]["rank"] == RANK and meta["adapters"]["actor"]["alpha"] == 8
    assert meta["adapters"]["critic"]["targets"] == ["q_proj"]
    assert meta["adapters"]["actor"]["parameters"] == 4096
    loaded = Pair.load(tmp_path / "ckpt")
    assert not [n for n, _ in loaded.actor.named_parameters() if "lora" in n]  # merged: a plain model
    assert set(loaded.actor.state_dict()) == set(parent.state_dict())
    with torch.no_grad():
        assert torch.allclose(loaded.actor(input_ids=ids).logits, logits, atol=1e-5)
        assert torch.allclose(loaded.critic(ids), values, atol=1e-5)
        # the adapter, in PEFT's format, on the parent's actor gives the same model
        adapted = peft.PeftModel.from_pretrained(parent, str(tmp_path / "ckpt" / "actor" / "adapter"))
        assert torch.allclose(adapted(input_ids=ids).logits, logits, atol=1e-5)

    backend = TransformersBackend(str(tmp_path / "ckpt" / "actor"))
    try:
        c = backend.complete_tokens(tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n"),
                                    params=SamplingParams(max_new_tokens=6, seed=2, temperature=1.0))
    finally:
        backend.close()
    with torch.no_grad():
        raw = rescore(pair.actor, c.prompt_token_ids + c.token_ids)[len(c.prompt_token_ids) - 1:]
    assert torch.allclose(raw, torch.tensor(c.logprobs), atol=1e-4)


def test_the_served_weights_after_a_push_are_the_merged_weights(pair, tokenizer):
    pytest.importorskip("openai")
    from terminal_env.models.hf_backend import HFChatTokenizer
    from terminal_env.models.openai_backend import OpenAIBackend
    from terminal_env.train.loopback import LoopbackVLLM
    from terminal_env.train.weight_sync import VLLMWeightSync

    local = TransformersBackend(copy.deepcopy(pair.actor), tokenizer, name="served")
    add_lora(pair.actor, LoraSettings(rank=RANK))
    nudge_adapters(pair.actor)
    merged = served_state(pair.actor)
    assert set(merged) == set(local.model.state_dict())  # the served model's own names
    prompt = tokenizer.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    server = LoopbackVLLM(local)
    client = OpenAIBackend("loopback", base_url=server.base_url, api_key="none", token_ids=True,
                           chat_tokenizer=HFChatTokenizer(tokenizer), weights_version="v0")
    try:
        with VLLMWeightSync(server.base_url, transport="gloo", backends=[client]) as sync:
            sync.push(pair.actor, "v1")
        served = server.backend.model.state_dict()
        assert all(torch.equal(served[k], v) for k, v in merged.items())
        after = client.complete_tokens(prompt, params=SamplingParams(max_new_tokens=6, seed=3, temperature=1.0))
    finally:
        client.close()
        server.close()
        local.close()
    with torch.no_grad():
        trainer = rescore(pair.actor, prompt + after.token_ids)[len(prompt) - 1:]
    assert torch.allclose(trainer, torch.tensor(after.logprobs), atol=1e-4)

    # the local backend: load_weights of the merged state
    backend = TransformersBackend(copy.deepcopy(local.model), tokenizer, name="local")
    try:
        backend.load_weights(served_state(pair.actor), version="v1")
        assert all(torch.equal(backend.model.state_dict()[k], v) for k, v in merged.items())
    finally:
        backend.close()


def test_trainable_parameters_without_an_adapter_are_every_weight(pair):
    pair.actor.requires_grad_(False)  # e.g. after critic recalibration
    assert len(trainable_parameters(pair.actor)) == len(list(pair.actor.parameters()))
    with pytest.raises(ConfigError, match="rank is at least 1"):
        add_lora(pair.actor, LoraSettings(rank=0))


def test_train_sft_with_lora_on_the_command_line(tokenizer, tmp_path):
    from terminal_env.cli import main

    make_model(tokenizer, context=1024).save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    assert main(["train", "init", "--actor", str(tmp_path / "tiny"), "--out", str(tmp_path / "base")]) == 0
    chat = tmp_path / "rsr.jsonl"
    chat.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"task {i}"},
                                                       {"role": "assistant", "content": "echo ok"}]})
                              for i in range(4)) + "\n")
    assert main(["train", "sft", "--pair", str(tmp_path / "base"), "--data", str(chat), "--out", str(tmp_path / "sft"),
                 "--lr", "1e-2", "--lora", "2", "--lora-alpha", "4", "--lora-targets", "q_proj,v_proj"]) == 0
    meta = json.loads((tmp_path / "sft" / "pair.json").read_text())
    assert meta["adapters"] == {"actor": {"rank": 2, "alpha": 4.0, "targets": ["q_proj", "v_proj"],
                                          "parameters": 2 * (2 * (32 + 32) + 2 * (32 + 16))}}
    base, after = Pair.load(tmp_path / "base"), Pair.load(tmp_path / "sft")
    changed = {k for k, v in after.actor.state_dict().items() if not torch.equal(v, base.actor.state_dict()[k])}
    assert changed and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in changed), changed
