"""LoRA adapters (through PEFT) on the actor and on the critic's body, and what training,
saving and serving make of them.

**In place.** :func:`add_lora` injects PEFT's LoRA layers into the model itself
(``peft.inject_adapter_in_model``): the actor stays a Hugging Face causal LM (its ``forward``,
``get_output_embeddings``, ``save_pretrained``, the local backend and the layer discovery of
:mod:`~terminal_env.train.layouts` see what they saw), only its adapted linear layers now
hold a frozen ``base_layer`` and the trainable ``lora_A``/``lora_B``. The critic's value head
is always trained; its body may carry its own adapter.

**What trains.** :func:`mark_trainable` sets ``requires_grad`` on what a model trains: its
adapters where it has any, otherwise every weight (plus what is named in ``keep``, the critic's
head); :func:`trainable_parameters` is what the optimizers hold.

**In a checkpoint** (``Pair.save``): ``actor/`` holds the *merged* weights, ``W + (alpha / r)
B A``, under the model's own names, so ``TransformersBackend("DIR/actor")`` and vLLM serve it
as they are; beside them ``actor/adapter/`` holds the adapter in PEFT's format
(``adapter_config.json``, ``adapter_model.safetensors``: ``PeftModel.from_pretrained(parent's
actor, "DIR/actor/adapter")`` gives the same model), the record of what the stage trained.
``pair.json`` names the adapters (``"adapters": {"actor": {...}, "critic": {...}}``). A pair is
loaded merged: the next stage starts its own adapter on top (:func:`add_lora` again).

**To the generator** the merged state (:func:`served_state`) goes, under the model's own names:
``backend.load_weights(served_state(actor))`` or ``VLLMWeightSync.push(actor, ...)``.

peft is the optional extra [lora].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch
from safetensors.torch import save_file

from ..errors import ConfigError

ADAPTER = "default"  # PEFT's name of the one adapter
ADAPTER_DIR = "adapter"


@dataclass
class LoraSettings:
    """A LoRA adapter: rank ``rank``, scale ``alpha / rank``, on the linear layers named in
    ``targets`` (``["all-linear"]``: every linear layer but the output layer)."""

    rank: int = 16
    alpha: float | None = None  # None: 2 * rank
    targets: list[str] = field(default_factory=lambda: ["all-linear"])

    def peft_config(self) -> Any:
        import peft  # the optional extra [lora]

        if self.rank < 1:
            raise ConfigError(f"a LoRA rank is at least 1, not {self.rank}")
        targets: Any = "all-linear" if self.targets == ["all-linear"] else list(self.targets)
        return peft.LoraConfig(r=self.rank, lora_alpha=self.alpha if self.alpha is not None else 2 * self.rank,
                               target_modules=targets, lora_dropout=0.0, bias="none")


def add_lora(model: torch.nn.Module, settings: LoraSettings) -> torch.nn.Module:
    """Inject a fresh LoRA adapter into ``model`` (a causal LM, or a critic's body) in place
    and return it; only the adapter requires grad afterwards. Its ``B`` starts at 0, so the
    model computes what it computed before."""
    try:
        import peft  # the optional extra [lora]
    except ImportError:
        raise ConfigError("LoRA needs peft: pip install 'terminal-env[lora]'") from None
    if has_adapters(model):
        raise ConfigError(f"{type(model).__name__} already carries a LoRA adapter: save the pair (the adapter is "
                          f"merged into the saved weights) and add the next one to the loaded pair")
    try:
        peft.inject_adapter_in_model(settings.peft_config(), model, adapter_name=ADAPTER)
    except ValueError as e:
        raise ConfigError(f"cannot put a LoRA adapter on {type(model).__name__} with targets "
                          f"{settings.targets}: {e}") from None
    model._terminal_env_lora = asdict(settings)  # what the pair records
    mark_trainable(model)
    return model


def has_adapters(model: torch.nn.Module) -> bool:
    return any(_is_adapter(n) for n, _ in model.named_parameters())


def settings_of(model: torch.nn.Module) -> dict[str, Any] | None:
    """The settings of the adapter :func:`add_lora` put on ``model`` (or in it), else None."""
    for m in model.modules():
        if hasattr(m, "_terminal_env_lora"):
            return dict(m._terminal_env_lora)
    return None


def _is_adapter(name: str) -> bool:
    return ".lora_A." in name or ".lora_B." in name


def mark_trainable(model: torch.nn.Module, keep: Iterable[torch.nn.Module] = ()) -> None:
    """``requires_grad`` on what ``model`` trains: its adapters where it has any, otherwise every
    weight; and every weight of the modules in ``keep`` (the critic's value head)."""
    adapters = has_adapters(model)
    for name, p in model.named_parameters():
        p.requires_grad_(not adapters or _is_adapter(name))
    for m in keep:
        m.requires_grad_(True)


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """What an optimizer of ``model`` holds: its adapters where it has any, otherwise every weight
    (whatever ``requires_grad`` says now: a stage that froze the model does not empty the next
    stage's optimizer)."""
    adapters = has_adapters(model)
    return [p for n, p in model.named_parameters() if not adapters or _is_adapter(n)]


def served_state(model: torch.nn.Module, state: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """``model``'s weights as a model without adapters holds them: each adapted layer's weight
    merged (``W + scale * B @ A``) under the layer's own name, the adapters left out. ``state``:
    the whole state dict to merge (``distributed.full_state(model)`` of a sharded model), by
    default ``model.state_dict()``. Without adapters, the state itself."""
    state = model.state_dict() if state is None else state
    if not any(_is_adapter(k) for k in state):
        return state
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        if _is_adapter(name):
            continue
        if ".base_layer." not in name:
            out[name] = value
            continue
        layer, _, leaf = name.rpartition(".base_layer.")
        if leaf == "weight" and f"{layer}.lora_A.{ADAPTER}.weight" in state:
            module = model.get_submodule(layer)
            a, b = state[f"{layer}.lora_A.{ADAPTER}.weight"], state[f"{layer}.lora_B.{ADAPTER}.weight"]
            delta = (b.float() @ a.float()) * module.scaling[ADAPTER]
            if getattr(module, "fan_in_fan_out", False):  # GPT-2's Conv1D keeps its weight transposed
                delta = delta.T
            value = (value.float() + delta).to(value.dtype)
        out[f"{layer}.{leaf}"] = value
    return out


def adapter_state(model: torch.nn.Module, state: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """The adapter's weights under PEFT's saved names (``base_model.model.<layer>.lora_A.weight``)."""
    state = model.state_dict() if state is None else state
    return {f"base_model.model.{k.replace(f'.{ADAPTER}.', '.')}": v.detach().cpu().contiguous()
            for k, v in state.items() if _is_adapter(k)}


def save_adapter(model: torch.nn.Module, directory: Path, state: dict[str, torch.Tensor] | None = None,
                 prefix: str = "") -> dict[str, Any] | None:
    """Write ``model``'s adapter to ``directory`` in PEFT's format (None, nothing written, when it
    has none); ``state``: its whole state dict (default ``model.state_dict()``), whose keys start
    with ``prefix`` (``"model."`` for a critic's body in the critic's state). Returns the record
    for ``pair.json``."""
    state = model.state_dict() if state is None else state
    state = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
    weights = adapter_state(model, state)
    if not weights:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    config = getattr(model, "peft_config", {}).get(ADAPTER)
    if config is not None:
        config.save_pretrained(str(directory))
    save_file(weights, str(directory / "adapter_model.safetensors"))
    return {**(settings_of(model) or {}), "parameters": sum(v.numel() for v in weights.values())}
