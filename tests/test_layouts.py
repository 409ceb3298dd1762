"""Models as they are shipped: decoder layers found through the model's own decoder on tiny
composite vision-language models (Gemma-3, Qwen2-VL and LLaVA configurations, built in-process
with ``from_config``: nothing downloaded) and plain decoders (Llama, Qwen3); what FSDP2 shards
on them (a one-process gloo group); composite checkpoints on disk trained as text models
through ``Pair.start`` -> SFT -> ``Pair.save`` -> ``Pair.load``, the saved actor served by the
local backend."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from tiny_lm import make_model, make_tokenizer, rescore  # noqa: E402

from terminal_env.models.base import SamplingParams  # noqa: E402
from terminal_env.models.hf_backend import TransformersBackend  # noqa: E402
from terminal_env.train import distributed  # noqa: E402
from terminal_env.train.data import Sequence  # noqa: E402
from terminal_env.train.models import Critic, Pair  # noqa: E402
from terminal_env.train.sft import SFTConfig, sft  # noqa: E402

TEXT = dict(vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, max_position_embeddings=512)


def composite_config(kind: str, tokenizer=None):
    """A tiny vision-language configuration whose vision tower comes first in the module tree."""
    ids = {} if tokenizer is None else dict(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                                            bos_token_id=None)
    if kind == "gemma3":
        return transformers.Gemma3Config(
            text_config=dict(TEXT, sliding_window=16, **ids), mm_tokens_per_image=4,
            vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=2,
                               image_size=28, patch_size=14))
    if kind == "qwen2_vl":
        return transformers.Qwen2VLConfig(
            text_config=dict(TEXT, rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}, **ids),
            vision_config=dict(depth=3, embed_dim=16, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                               spatial_merge_size=2))
    assert kind == "llava"
    return transformers.LlavaConfig(
        text_config=transformers.LlamaConfig(**TEXT, **ids),
        vision_config=transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                                                    num_attention_heads=2, image_size=28, patch_size=14))


def composite(kind: str, tokenizer=None, seed: int = 0):
    torch.manual_seed(seed)
    return transformers.AutoModelForImageTextToText.from_config(composite_config(kind, tokenizer)).eval()


def language_layers(model) -> list:
    return list(model.model.language_model.layers)


@pytest.mark.parametrize("kind", ["gemma3", "qwen2_vl", "llava"])
def test_the_decoder_layers_of_a_composite_model_are_its_language_models_not_its_vision_towers(kind):
    model = composite(kind)
    vision = [m for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and "language_model" not in n]
    assert vision and len(vision[0]) == 3  # a vision tower's layers come first in the tree
    found = distributed.decoder_layers(model)
    assert [id(m) for m in found] == [id(m) for m in language_layers(model)]
    # a critic around it finds the same layers of its body
    critic = Critic(model)
    assert [id(m) for m in distributed.decoder_layers(critic)] == [id(m) for m in language_layers(model)]


def test_the_decoder_layers_of_plain_decoders():
    tokenizer = make_tokenizer()
    llama = make_model(tokenizer)
    assert distributed.decoder_layers(llama) == list(llama.model.layers)
    qwen3 = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**TEXT))
    assert distributed.decoder_layers(qwen3) == list(qwen3.model.layers)
    assert all(type(m).__name__ == "Qwen3DecoderLayer" for m in distributed.decoder_layers(qwen3))


def test_fsdp2_shards_the_language_models_layers_and_leaves_the_vision_tower_to_the_root(tmp_path):
    """A one-process gloo group: which modules ``shard()`` makes FSDP units."""
    from torch.distributed.fsdp import FSDPModule

    model = composite("gemma3")
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        distributed.shard(model)
        units = sorted(n for n, m in model.named_modules() if isinstance(m, FSDPModule))
    finally:
        torch.distributed.destroy_process_group()
    assert units == ["", "model.language_model.layers.0", "model.language_model.layers.1"]


@pytest.mark.parametrize("kind", ["gemma3", "llava"])
def test_a_composite_checkpoint_trains_as_its_text_model_and_the_saved_actor_is_served(kind, tmp_path):
    tokenizer = make_tokenizer()
    model = composite(kind, tokenizer)
    model.save_pretrained(tmp_path / "vlm")
    tokenizer.save_pretrained(tmp_path / "vlm")
    ids = torch.tensor([tokenizer.encode("ls -la /app")])
    with torch.no_grad():
        expected = model(input_ids=ids).logits

    pair = Pair.start(tmp_path / "vlm")
    text_class = {"gemma3": "Gemma3ForCausalLM", "llava": "LlamaForCausalLM"}[kind]
    assert type(pair.actor).__name__ == text_class and type(pair.critic.model).__name__ == text_class
    assert not [n for n, _ in pair.actor.named_parameters() if "vision" in n or "projector" in n]
    with torch.no_grad():
        assert torch.allclose(pair.actor(input_ids=ids).logits, expected, atol=1e-5)  # the same text model
    assert distributed.decoder_layers(pair.actor) == list(pair.actor.model.layers)

    samples = [Sequence(tokenizer.encode(f"task {i} echo done > /tmp/out.txt"), [0] * 3 + [1] * 9) for i in range(2)]
    before = {k: v.clone() for k, v in pair.actor.state_dict().items()}
    sft(pair, [Sequence(s.token_ids[:12], s.mask[:12]) for s in samples], SFTConfig(lr=1e-2, batch_size=2))
    assert any(not torch.equal(v, before[k]) for k, v in pair.actor.state_dict().items())
    pair.save(tmp_path / "ckpt", stage="sft")
    loaded = Pair.load(tmp_path / "ckpt")
    assert all(torch.equal(v, pair.actor.state_dict()[k]) for k, v in loaded.actor.state_dict().items())
    config = json.loads((tmp_path / "ckpt" / "actor" / "config.json").read_text())
    assert config["architectures"] == [text_class]  # a text checkpoint: AutoModelForCausalLM loads it

    backend = TransformersBackend(str(tmp_path / "ckpt" / "actor"))
    try:
        c = backend.complete_tokens(tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n"),
                                    params=SamplingParams(max_new_tokens=6, seed=1, temperature=1.0))
    finally:
        backend.close()
    raw = rescore(loaded.actor, c.prompt_token_ids + c.token_ids)[len(c.prompt_token_ids) - 1:]
    assert torch.allclose(raw, torch.tensor(c.logprobs), atol=1e-4)


def test_a_composite_without_a_text_model_class_trains_whole_on_text_only_inputs(tmp_path):
    """Qwen2-VL: transformers has no causal LM of its text model, so the composite itself is
    loaded and trained in train mode on input_ids alone (its vision tower untouched)."""
    tokenizer = make_tokenizer()
    composite("qwen2_vl", tokenizer).save_pretrained(tmp_path / "vlm")
    tokenizer.save_pretrained(tmp_path / "vlm")
    pair = Pair.start(tmp_path / "vlm")
    assert type(pair.actor).__name__ == "Qwen2VLForConditionalGeneration"
    vision = {k: v.clone() for k, v in pair.actor.state_dict().items() if ".visual." in k}
    text = {k: v.clone() for k, v in pair.actor.state_dict().items() if ".language_model." in k}
    samples = [Sequence(tokenizer.encode(f"task {i} echo done > /tmp/out.txt")[:12], [0] * 3 + [1] * 9)
               for i in range(2)]
    sft(pair, samples, SFTConfig(lr=1e-2, batch_size=2))
    state = pair.actor.state_dict()
    assert all(torch.equal(state[k], v) for k, v in vision.items())
    assert any(not torch.equal(state[k], v) for k, v in text.items())
    pair.save(tmp_path / "ckpt", stage="sft")
    loaded = Pair.load(tmp_path / "ckpt")
    assert all(torch.equal(v, state[k]) for k, v in loaded.actor.state_dict().items())
    with torch.no_grad():
        assert loaded.critic(torch.tensor([samples[0].token_ids])).shape == (1, 12)
