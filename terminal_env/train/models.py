"""The actor and the critic, and checkpoints that never lose which actor pairs with which critic.

* The **actor** is a causal language model in Hugging Face format (what the local backend
  serves and the rollouts sample from).
* The **critic** is a value model: the same transformer body with a per-token linear value head
  (:class:`Critic`), initialised from the actor's weights with a zero head (every value 0 until
  the critic is recalibrated).

A checkpoint is a directory holding both::

    pair.json        the pair: ids of the actor and the critic, the stage that made it, the pair
                     it came from, and the stage's measurements (e.g. the critic's calibration)
    actor/           a Hugging Face checkpoint (safetensors, tokenizer): the local backend serves
                     it as it is (``TransformersBackend("DIR/actor")``)
    critic/          the critic's body as a Hugging Face checkpoint, and value_head.safetensors

An id is a digest of the weights' files, and each half also records its own id and its
partner's (``terminal_env_checkpoint.json``), so a half copied elsewhere still names its
partner, and loading a directory whose halves do not belong together fails.

**A calibration record names the critic it measured.** PPO trusts a critic only as far as its
last measurement (:func:`terminal_env.train.ppo.check_calibration`), and a measurement holds for
the weights measured, not for whatever critic later sits in the pair. So the critic's weights
carry their ids (:attr:`Critic.ids`): the one they were loaded or saved under, or, once a stage
changed them in memory (:meth:`Pair.critic_changed`, called by recalibration and by every PPO
update that trains the critic), a new unsaved id. Recalibration's report records the id of the
critic it measured (``"critic"``); :meth:`Pair.save` rewrites it to the saved critic's id when
the record it is given measured these very weights, and leaves any other record as it is (a
parent's record copied forward keeps naming the parent's critic, and the gate refuses it).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..errors import ConfigError
from ..fileio import write_atomic
from .distributed import barrier, full_state, rank
from .layouts import load_causal_lm
from .lora import ADAPTER_DIR, save_adapter, served_state, trainable_parameters
from .losses import token_logprobs

PAIR_FILE = "pair.json"
HALF_FILE = "terminal_env_checkpoint.json"
HEAD_FILE = "value_head.safetensors"
#: how the id of weights a stage changed in memory, not saved since, starts
UNSAVED = "unsaved-"


class Critic(torch.nn.Module):
    """A value model: a causal LM's transformer body and a linear head giving one value per
    token (the value of the state after that token)."""

    def __init__(self, model: Any, head: torch.nn.Linear | None = None):
        super().__init__()
        #: the whole causal LM (so that it saves as one); its output layer goes unused
        self.model = model
        hidden = model.config.get_text_config().hidden_size
        self.head = head if head is not None else torch.nn.Linear(hidden, 1)
        if head is None:
            torch.nn.init.zeros_(self.head.weight)
            torch.nn.init.zeros_(self.head.bias)
        self.head.to(device=next(model.parameters()).device, dtype=torch.float32)
        #: the ids of these weights as they are now (the saved or loaded id, or the unsaved id the
        #: last stage that changed them gave them, then the id they were saved under); empty: unknown
        self.ids: list[str] = []
        #: the stage that last changed the weights in memory (None: as loaded or saved)
        self.changed_by: str | None = None

    @classmethod
    def from_actor(cls, actor: Any) -> "Critic":
        """A critic initialised from the actor's weights (a copy: the two then train apart)."""
        return cls(copy.deepcopy(actor))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Values ``[batch, tokens]`` (float32)."""
        body = getattr(self.model, self.model.base_model_prefix)  # the transformer without the LM head
        hidden = body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        # the head's own dtype: float32, or bf16 where FSDP's mixed precision gathered it so
        with torch.autocast(hidden.device.type, enabled=False):  # values in the head's precision
            return self.head(hidden.to(self.head.weight.dtype))[..., 0].float()


@dataclass
class Pair:
    """An actor, its critic, their tokenizer, and where they came from."""

    actor: Any
    critic: Critic
    tokenizer: Any
    #: what pair.json says (ids, stage, parent, measurements); empty for a pair never saved
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.critic.ids and self.meta.get("critic"):  # a loaded (or hand-made) pair: its saved critic
            self.critic.ids = [self.meta["critic"]]

    @property
    def critic_id(self) -> str | None:
        """The id of the critic's weights as they are now: the id they were saved or loaded
        under, or the unsaved id of the stage that last changed them in memory (None: a critic
        never saved nor changed, e.g. of :meth:`start`)."""
        return self.critic.ids[-1] if self.critic.ids else self.meta.get("critic")

    def is_critic(self, critic_id: str | None) -> bool:
        """Whether ``critic_id`` names the critic's weights as they are now (any of their ids:
        the unsaved one a stage gave them and the one they were then saved under)."""
        return critic_id is not None and critic_id in (self.critic.ids or [self.meta.get("critic")])

    def critic_changed(self, stage: str) -> str:
        """Record that ``stage`` changed the critic's weights in memory; returns their new,
        unsaved id. A calibration record of the weights before no longer names this critic."""
        new = f"{UNSAVED}{stage}-{uuid.uuid4().hex[:12]}"
        self.critic.ids, self.critic.changed_by = [new], stage
        return new

    @property
    def critic_changed_by(self) -> str | None:
        """The stage that made the critic's weights as they are now: the one that changed them in
        memory, else the one that saved them."""
        return self.critic.changed_by or self.meta.get("stage")

    @classmethod
    def start(cls, actor: Any, tokenizer: Any = None) -> "Pair":
        """The first pair of a run: an actor (a directory or a loaded causal LM) and a critic
        initialised from it."""
        if isinstance(actor, (str, os.PathLike)):
            path = os.fspath(actor)
            actor = _load_causal_lm(path)
            tokenizer = tokenizer if tokenizer is not None else _load_tokenizer(path)
        if tokenizer is None:
            raise ConfigError("pass the tokenizer with an in-memory actor (it has no directory to load one from)")
        return cls(actor, Critic.from_actor(actor), tokenizer, {"stage": "base"})

    def save(self, directory: str | os.PathLike[str], *, stage: str, metrics: dict[str, Any] | None = None) -> Path:
        """Write the pair to ``directory`` (which must not hold another pair) and return it;
        ``meta`` becomes what was written, the parent being the pair it was loaded as. On a pair
        sharded under torchrun every rank calls it: the whole weights are gathered and rank 0
        writes them; the others wait, then read what it wrote.

        ``metrics["critic"]``, a calibration record (:func:`~terminal_env.train.critic.recalibrate`'s
        report), is written with the saved critic's id as its ``"critic"`` when it names the
        critic's weights as they are (the module docstring); any other record is written as given."""
        out = Path(directory)
        if (out / PAIR_FILE).exists():
            raise ConfigError(f"{out} already holds a checkpoint; choose a new directory (checkpoints "
                              f"are never overwritten)")
        actor_state, critic_state = full_state(self.actor), full_state(self.critic)
        names = list(self.critic.ids or [self.meta.get("critic")])  # what the weights are called now
        if rank() != 0:
            barrier()  # rank 0 writes
            self.meta = json.loads((out / PAIR_FILE).read_text())
            saved = self.meta["critic"]
            self.critic.ids, self.critic.changed_by = _still_named(names, saved) + [saved], None
            return out
        out.mkdir(parents=True, exist_ok=True)
        # LoRA adapters: the merged weights under the models' own names, the adapters beside them (lora.py)
        adapters = {half: found for half, found in (
            ("actor", save_adapter(self.actor, out / "actor" / ADAPTER_DIR, actor_state)),
            ("critic", save_adapter(self.critic.model, out / "critic" / ADAPTER_DIR, critic_state, "model."))) if found}
        actor_state, critic_state = served_state(self.actor, actor_state), served_state(self.critic, critic_state)
        body = {k.removeprefix("model."): v for k, v in critic_state.items() if k.startswith("model.")}
        head = {k.removeprefix("head."): v for k, v in critic_state.items() if k.startswith("head.")}
        self.actor.save_pretrained(out / "actor", state_dict=actor_state, safe_serialization=True)
        self.tokenizer.save_pretrained(out / "actor")
        self.critic.model.save_pretrained(out / "critic", state_dict=body, safe_serialization=True)
        self.tokenizer.save_pretrained(out / "critic")
        save_file({k: v.detach().cpu().contiguous() for k, v in head.items()}, str(out / "critic" / HEAD_FILE))
        actor_id, critic_id = _digest(out / "actor"), _digest(out / "critic")
        for half, own, partner in (("actor", actor_id, critic_id), ("critic", critic_id, actor_id)):
            write_atomic(out / half / HALF_FILE, json.dumps({"role": half, "id": own, "pair": partner}, indent=1))
        names = _still_named(names, critic_id)
        metrics = dict(metrics or {})
        record = metrics.get("critic")
        if isinstance(record, dict) and record.get("critic") is not None and record["critic"] in names:
            metrics["critic"] = {**record, "critic": critic_id}  # it measured these weights: name them as saved
        meta = {"actor": actor_id, "critic": critic_id, "stage": stage,
                "parent": self.meta.get("id"), "id": f"{actor_id}+{critic_id}",
                "created": time.time(), "metrics": metrics, **({"adapters": adapters} if adapters else {})}
        write_atomic(out / PAIR_FILE, json.dumps(meta, indent=1))
        self.meta = meta
        self.critic.ids, self.critic.changed_by = names + [critic_id], None
        barrier()  # the other ranks read it now
        return out

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> "Pair":
        """The pair saved in ``directory``; fails if its halves do not belong together."""
        root = Path(directory)
        try:
            meta = json.loads((root / PAIR_FILE).read_text())
        except FileNotFoundError:
            raise ConfigError(f"{root} is not a checkpoint of an actor and a critic (no {PAIR_FILE}); "
                              f"make one with Pair.start(...).save(...) or 'terminal-env train'") from None
        except ValueError as e:
            raise ConfigError(f"{root / PAIR_FILE}: not valid JSON ({e})") from None
        for half, partner in (("actor", "critic"), ("critic", "actor")):
            try:
                own = json.loads((root / half / HALF_FILE).read_text())
            except (FileNotFoundError, ValueError):
                raise ConfigError(f"{root / half} has no readable {HALF_FILE}: not a half of this pair") from None
            if own.get("id") != meta.get(half) or own.get("pair") != meta.get(partner):
                raise ConfigError(
                    f"{root / half} is the {half} {own.get('id')!r}, paired with {own.get('pair')!r}, but "
                    f"{root / PAIR_FILE} pairs the {half} {meta.get(half)!r} with the {partner} "
                    f"{meta.get(partner)!r}: the halves of this checkpoint do not belong together")
            if _digest(root / half) != own["id"]:
                raise ConfigError(f"the weights in {root / half} changed after they were saved "
                                  f"(their digest is not {own['id']!r})")
        actor = _load_causal_lm(str(root / "actor"))
        body = _load_causal_lm(str(root / "critic"))
        head_state = load_file(str(root / "critic" / HEAD_FILE))
        head = torch.nn.Linear(head_state["weight"].shape[1], 1)
        head.load_state_dict(head_state)
        return cls(actor, Critic(body, head), _load_tokenizer(str(root / "actor")), meta)


def _still_named(names: list[str | None], digest: str) -> list[str]:
    """The names of the critic's weights that still hold now that their digest is ``digest``: all
    of them, unless a saved id (a digest) among them differs, which means the weights changed since
    without a stage saying so (:meth:`Pair.critic_changed`): then none."""
    names = [n for n in names if n]
    return names if all(n == digest for n in names if not n.startswith(UNSAVED)) else []


def _digest(directory: Path) -> str:
    """A digest of a half's weights (its safetensors files, by name and content)."""
    h = hashlib.sha256()
    for f in sorted(directory.glob("*.safetensors")):
        h.update(f.name.encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def _load_causal_lm(path: str) -> Any:
    try:
        # float32 whatever the checkpoint holds: the trainer's master weights (bf16 compute is autocast's);
        # a composite (vision-language) checkpoint gives its text model (layouts.load_causal_lm)
        return load_causal_lm(path, dtype=torch.float32)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot load a causal LM from {path!r}: {e}") from e


def _load_tokenizer(path: str) -> Any:
    import transformers  # the optional extra [train]

    try:
        return transformers.AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot load the tokenizer of {path!r}: {e}") from e


def critic_optimizer(critic: Critic, lr: float, head_lr: float | None,
                     fields: tuple[str, str]) -> torch.optim.Optimizer:
    """AdamW over ``critic``: the body at ``lr`` (0 freezes it), the value head at ``head_lr``
    (``lr`` if None). ``fields`` names the two settings in errors (``"CriticConfig.lr"``, ...)."""
    head = {id(p) for p in critic.head.parameters()}
    # whatever requires_grad says now; of a body with a LoRA adapter, the adapter alone
    body = [p for p in trainable_parameters(critic.model) if id(p) not in head]
    head_lr = lr if head_lr is None else head_lr
    if head_lr <= 0 or lr < 0:
        raise ConfigError(f"{fields[1]} must be above 0 (it is {head_lr}) and {fields[0]} at least 0 (it is "
                          f"{lr}; 0 freezes the critic's body)")
    groups = [{"params": list(critic.head.parameters()), "lr": head_lr}]
    if body and lr > 0:
        groups.append({"params": body, "lr": lr})
    return torch.optim.AdamW(groups, lr=head_lr)


def sampled_logprobs(actor: Any, batch: dict[str, torch.Tensor], temperature: float = 1.0,
                     with_logits: bool = False) -> Any:
    """The log-prob of every token given the ones before it, under ``logits / temperature``
    (``[batch, tokens]``; 0 for the first token, which nothing predicts), and the logits that
    predicted each token when ``with_logits``."""
    logits = actor(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    lp = token_logprobs(logits[:, :-1], batch["input_ids"][:, 1:], temperature)
    lp = torch.nn.functional.pad(lp, (1, 0))
    if not with_logits:
        return lp
    return lp, torch.nn.functional.pad(logits[:, :-1], (0, 0, 1, 0))


def action_values(critic: Critic, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The critic's value of the state each token is sampled in: its output at the token before
    (``[batch, tokens]``; 0 for the first token)."""
    values = critic(batch["input_ids"], batch["attention_mask"])
    return torch.nn.functional.pad(values[:, :-1], (1, 0))
