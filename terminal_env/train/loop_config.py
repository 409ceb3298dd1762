"""The loop's config: one pydantic model read from TOML, each error naming its key
(:mod:`terminal_env.train.loop` runs it).

A minimal config (every other key has the recipe's default; ``examples/loop/toy.toml`` sets
them all)::

    start = "ckpt/base"                       # terminal-env train init --actor MODEL --out ckpt/base
    [tasks]
    train = ["tasks/train"]
    validation = ["tasks/validation"]
    test = ["tasks/test"]

Refused: ``select_on`` other than ``"validation"``, stage names used twice (or ``base``), and a PPO
estimator or setting :class:`~terminal_env.train.ppo.PPOConfig` does not take.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError
from ..rewards import get_reward
from .estimators import check as check_estimator
from .ppo import PPOConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Tasks(_Strict):
    """Task folders of each split (every task's ``split`` in its task.toml must agree), or
    ``pool`` / ``pool:generated``: the bundled or the generated pool's tasks of that split."""

    train: list[str]
    validation: list[str]
    test: list[str]


class Play(_Strict):
    """How every episode is played (rollouts, validation and the final evaluation)."""

    harness: str = "generic"
    max_turns: int = Field(20, ge=1)
    max_new_tokens: int = Field(8192, ge=1)
    max_input_tokens: int = Field(96_000, ge=256)
    reward: str = "partial_progress"
    concurrency: int = Field(2, ge=1)
    command_timeout: float | None = Field(None, gt=0)
    #: the temperature training rollouts sample at (the policy PPO and the critic see)
    rollout_temperature: float = Field(1.0, gt=0)

    @field_validator("reward")
    @classmethod
    def _known_reward(cls, value: str) -> str:
        get_reward(value)  # a name, metric:NAME or metrics:NAME=W,...; else an error naming it
        return value


class Scoring(_Strict):
    """Mean@k at a temperature, with fixed episode seeds (the same for every checkpoint)."""

    k: int = Field(3, ge=1)
    temperature: float = Field(0.6, ge=0)
    seed: int = 7_000_000


class SFTSettings(_Strict):
    epochs: int = Field(2, ge=1)
    lr: float = Field(1e-5, gt=0)
    batch_size: int = Field(4, ge=1)


class RSRStage(_Strict):
    kind: Literal["rsr"]
    name: str
    harnesses: list[str] = Field(default_factory=lambda: ["generic", "tool-calling"])
    attempts: int = Field(2, ge=1)
    #: the policy plays planner, reviewer and executor too (the recipe); False: the stand-ins
    #: (the deterministic planner, the leak checks, replay), which every record then names
    self_roles: bool = Field(True, alias="self")
    #: per-role overrides (spec/options/params/prompt), as ``terminal-env rsr`` takes them
    roles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    max_per_task: int | None = Field(None, ge=1)
    #: mix the previous RSR stage's records into this one's dataset, this many per record of
    #: this round (RSR's ``build.mix``; the previous dataset holds its own mix, so with a ratio
    #: that takes them all the data grows round by round, as in expert iteration); 0: none
    mix_previous: float = Field(0.0, ge=0)
    sft: SFTSettings = Field(default_factory=SFTSettings)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CriticSettings(_Strict):
    attempts: int = Field(4, ge=1)
    epochs: int = Field(16, ge=1)
    lr: float = Field(1e-4, ge=0)
    head_lr: float | None = Field(None, gt=0)
    normalize_returns: bool = True
    holdout: float = Field(0.33, gt=0, lt=1)
    target_explained_variance: float = 0.5
    batch_size: int = Field(8, ge=1)


class PPOSettings(_Strict):
    iterations: int = Field(4, ge=1)
    tasks_per_iteration: int = Field(8, ge=1)
    attempts: int = Field(2, ge=1)
    validate_every: int = Field(2, ge=1)
    epochs: int = Field(2, ge=1)
    batch_size: int = Field(4, ge=1)
    actor_lr: float = Field(1e-5, ge=0)
    critic_lr: float = Field(1e-4, ge=0)
    critic_head_lr: float | None = Field(None, gt=0)
    kl_coef: float = Field(0.0, ge=0)
    entropy_coef: float = Field(0.0, ge=0)
    clip: float = Field(0.2, gt=0)
    estimator: str = "gae"
    min_explained_variance: float = 0.2
    schedule: str = "constant"
    warmup: int = Field(0, ge=0)
    #: "gae" needs a critic that passed the gate; where it did not, train with this critic-free
    #: estimator instead (None: the stage keeps its starting point)
    fallback_estimator: str | None = None
    #: any other PPOConfig field (e.g. actor_lam, critic_lam, loss_agg, precision)
    extra: dict[str, Any] = Field(default_factory=dict)


class RPRStage(_Strict):
    kind: Literal["rpr"]
    name: str
    critic: CriticSettings = Field(default_factory=CriticSettings)
    ppo: PPOSettings = Field(default_factory=PPOSettings)


class Generator(_Strict):
    """Where the actor plays (rollouts, RSR's roles, validation, the final evaluation).

    ``local``: a copy of the actor in this process (the default). ``vllm``: a vLLM server started
    with the weight-transfer engine (``VLLM_SERVER_DEV_MODE=1 vllm serve BASE --weight-transfer-config
    '{"backend": "nccl"}'``); before a checkpoint plays, its actor's weights are pushed into the server
    (:class:`~terminal_env.train.weight_sync.VLLMWeightSync`), and PPO pushes each step's."""

    kind: Literal["local", "vllm"] = "local"
    #: the server's OpenAI base URL, e.g. http://127.0.0.1:8000/v1
    url: str | None = None
    #: the model name the server serves (``--served-model-name``)
    model: str | None = None
    api_key: str = "none"
    #: "nccl" (vLLM's engine, a GPU beside the trainer) or "gloo" (the project's loopback server)
    transport: Literal["nccl", "gloo"] = "nccl"
    master_address: str = "127.0.0.1"
    timeout: float = Field(300.0, gt=0)
    pause_mode: Literal["abort", "wait", "keep"] = "abort"

    @model_validator(mode="after")
    def _where(self) -> "Generator":
        if self.kind == "vllm" and not (self.url and self.model):
            raise ValueError("kind = \"vllm\" needs url (the server's /v1 address) and model (the name it serves)")
        if self.kind == "local" and (self.url or self.model):
            raise ValueError("url and model are for kind = \"vllm\"; a local generator plays in this process")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} is not an http(s) address, e.g. http://127.0.0.1:8000/v1")
        return self


Stage = Annotated[Union[RSRStage, RPRStage], Field(discriminator="kind")]


def default_stages() -> list[Any]:
    """The recipe's four stages after Base; RPR-2's actor learning rate a fifth of RPR-1's."""
    return [RSRStage(kind="rsr", name="rsr-1"), RPRStage(kind="rpr", name="rpr-1"),
            RSRStage(kind="rsr", name="rsr-2"),
            RPRStage(kind="rpr", name="rpr-2", ppo=PPOSettings(actor_lr=PPOSettings().actor_lr / 5))]


class LoopConfig(_Strict):
    name: str = "loop"
    seed: int = 0
    #: the starting checkpoint (``terminal-env train init``): Base
    start: str
    tasks: Tasks
    #: the split candidates are chosen on; anything but "validation" is refused
    select_on: str = "validation"
    play: Play = Field(default_factory=Play)
    generator: Generator = Field(default_factory=Generator)
    validation: Scoring = Field(default_factory=lambda: Scoring(k=3, temperature=0.6))
    evaluation: Scoring = Field(default_factory=lambda: Scoring(k=3, temperature=0.6, seed=9_000_000))
    stages: list[Stage] = Field(default_factory=default_stages)
    #: where relative paths in this config are read from (the config file's folder)
    base_dir: str = "."

    def path(self, p: str) -> Path:
        q = Path(p).expanduser()
        return q if q.is_absolute() else Path(self.base_dir) / q

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.public(), sort_keys=True).encode()).hexdigest()[:16]

    def public(self) -> dict[str, Any]:
        """The config as saved and compared on resume (``base_dir`` is where it was read, not what it is)."""
        return self.model_dump(mode="json", by_alias=True, exclude={"base_dir"})


def load_config(path: str | Path) -> LoopConfig:
    """A loop config from TOML; an error names the file and the key."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such loop config") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    return parse_config(raw, where=str(path), base_dir=str(path.parent))


def parse_config(raw: dict[str, Any], *, where: str = "the loop config", base_dir: str = ".") -> LoopConfig:
    try:
        config = LoopConfig(**{**raw, "base_dir": base_dir})
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"{where}: {problems}") from None
    _check(config, where)
    return config


def _check(config: LoopConfig, where: str) -> None:
    if config.select_on != "validation":
        raise ConfigError(f"{where}: select_on = {config.select_on!r}: checkpoints are chosen on the validation "
                          f"split only (choosing on test makes its score a selection, not an evaluation); "
                          f"set select_on = \"validation\"")
    names = [s.name for s in config.stages]
    if "base" in names or len(set(names)) != len(names):
        raise ConfigError(f"{where}: stages.name: each stage needs its own name, and 'base' is the start's "
                          f"(got {names})")
    for i, stage in enumerate(config.stages):
        if stage.kind == "rpr":
            for est in {stage.ppo.estimator, stage.ppo.fallback_estimator} - {None}:
                try:
                    ppo = PPOConfig(estimator=est, **stage.ppo.extra)
                    check_estimator(ppo.estimator, ppo.loss_agg, ppo.loss_agg_norm)
                except (TypeError, ConfigError) as e:
                    raise ConfigError(f"{where}: stages[{i}].ppo: {e}") from None
