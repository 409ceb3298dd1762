"""Models as they are shipped: where a checkpoint keeps its decoder layers, and how a composite
(vision-language) checkpoint is loaded as the text-only causal LM the trainer trains.

**Decoder layers.** FSDP2 shards each decoder layer as its own unit. They are found through the
model's own description of itself, never by a module name: the decoder is what Hugging Face's
``get_decoder()`` returns (``model.model`` of a causal LM, ``model.model.language_model`` of a
Gemma-3, LLaVA or Qwen2-VL checkpoint), and its layers are the module list inside it whose
items are of a class the model names in ``_no_split_modules`` (the classes Hugging Face never
splits across devices: ``Gemma3DecoderLayer``, ``Qwen2VLDecoderLayer``, ...), as many as the
text configuration's ``num_hidden_layers``. A vision tower's layers (``SiglipEncoderLayer`` in
``vision_tower.encoder.layers``, ``Qwen2VLVisionBlock`` in ``visual.blocks``) are also "no split"
classes, but they live outside the decoder, so they are never taken for it.

**Composite checkpoints.** A terminal agent reads and writes text, so the trainer trains the
text model alone. Given a checkpoint whose configuration nests a text configuration
(``Gemma3Config.text_config``, ``LlavaConfig.text_config``) and for which transformers has a
causal-LM class of that text configuration (``Gemma3ForCausalLM``, ``LlamaForCausalLM``), the
text model is loaded as that class: the language model's weights under their causal-LM names,
the vision tower and projector left on disk. The result is an ordinary causal LM: the actor and
the critic's body hold no vision weights, and the saved actor is a text checkpoint that
``AutoModelForCausalLM`` (the local backend) and vLLM serve as they are. Where transformers has
no causal-LM class for the text model (Qwen2-VL's uses M-RoPE and exists only inside the
composite), the composite itself is loaded and trained on text-only inputs (transformers 5 runs
these models in train mode on ``input_ids`` alone); saving keeps it a composite checkpoint,
which ``AutoModelForCausalLM`` cannot load.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ConfigError

#: where a composite checkpoint keeps its language model's weights (the layout transformers
#: saves, ``language_model.model.*``, and the one it loads into, ``model.language_model.*``),
#: renamed to a causal LM's names
TEXT_KEYS = {
    r"^language_model\.model\.": "model.",
    r"^model\.language_model\.": "model.",
    r"^language_model\.lm_head\.": "lm_head.",
}


def hf_model(module: torch.nn.Module) -> Any:
    """The Hugging Face model in ``module``: itself, a critic's body, or the model a wrapper
    holds (the first submodule with a ``config`` and ``get_decoder``)."""
    for m in module.modules():
        if hasattr(m, "config") and hasattr(m, "get_decoder"):
            return m
    raise ConfigError(f"{type(module).__name__} holds no Hugging Face model (no module with a config and "
                      f"get_decoder()): pass layers= to shard()")


def text_config(config: Any) -> Any:
    """The text model's configuration (``config`` itself when it is not composite)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def is_composite(config: Any) -> bool:
    """Whether ``config`` nests its text model's configuration (a vision-language model)."""
    return text_config(config) is not config


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers of ``model`` (a causal LM, a composite model, a critic around either):
    the module list inside ``get_decoder()`` whose items are of a class in the model's
    ``_no_split_modules`` (the module docstring); without that list, the one as long as the text
    configuration's ``num_hidden_layers``."""
    hf = hf_model(model)
    decoder = hf.get_decoder()
    no_split = set(getattr(hf, "_no_split_modules", None) or ())
    count = getattr(text_config(hf.config), "num_hidden_layers", None)
    lists = [m for m in decoder.modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
    for found in lists:
        if no_split and all(type(layer).__name__ in no_split for layer in found):
            return list(found)
    for found in lists:
        if not no_split and count is not None and len(found) == count:
            return list(found)
    raise ConfigError(
        f"cannot find the decoder layers of {type(hf).__name__}: its decoder ({type(decoder).__name__}) holds no "
        f"module list of {' or '.join(sorted(no_split)) or f'{count} layers'}; pass layers= to shard()")


def load_causal_lm(path: str, **kwargs: Any) -> Any:
    """A causal LM from the checkpoint at ``path`` (``kwargs`` go to ``from_pretrained``): as it
    is, or the text model of a composite checkpoint (the module docstring)."""
    import transformers  # the optional extra [train]

    config = transformers.AutoConfig.from_pretrained(path)
    if not is_composite(config):
        return transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)
    text = text_config(config)
    text_class = causal_lm_class(text)
    if text_class is None:  # no text-only class: the composite, trained on text-only inputs
        return transformers.AutoModelForImageTextToText.from_pretrained(path, **kwargs)
    model, info = text_class.from_pretrained(path, config=text, key_mapping=TEXT_KEYS, output_loading_info=True,
                                             **kwargs)
    forget_key_mapping(model)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    missing = sorted(set(info.get("missing_keys") or ()) - tied)
    if missing:
        raise ConfigError(f"{path!r} is a {config.model_type} checkpoint whose language model could not be read as a "
                          f"{text_class.__name__}: {len(missing)} weights missing (e.g. {missing[0]}); its weights "
                          f"are not under {' or '.join(TEXT_KEYS)}")
    return model


def forget_key_mapping(model: Any) -> None:
    """Make ``save_pretrained`` write ``model`` under its own names: transformers 5 keeps the
    renamings a model was loaded with and reverses them on saving, which would write the text
    model back under the composite's names (``language_model.model.*``), where no causal LM
    finds them. The renamings kept are those a plain ``from_pretrained`` would have kept."""
    from transformers.conversion_mapping import get_model_conversion_mapping  # the optional extra [train]

    if hasattr(model, "_weight_conversions"):
        model._weight_conversions = get_model_conversion_mapping(model)


def causal_lm_class(config: Any) -> Any:
    """The causal-LM class transformers has for ``config``'s type, or None."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING  # the optional extra [train]

    try:
        found = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        return None
    # a composite's own type may map to the composite (gemma3 -> Gemma3ForConditionalGeneration)
    return None if found.__name__.endswith("ForConditionalGeneration") else found
