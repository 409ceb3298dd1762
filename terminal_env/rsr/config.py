"""What a self-rewrite run is (``OUT/rsr.json``): its tasks, its four roles, and how to build.

A run has four roles: the **collector** (the policy that plays the tasks), the **planner**, the
**reviewer** and the **executor**. Each is a model backend spec with its own options (where the
model is served: ``base_url``, ``api_key``, ...), its own sampling parameters and its own prompt,
or ``None`` for the role's model-free stand-in (the deterministic planner, the leak checks alone,
the playbook's steps replayed as they are). ``--self`` makes the policy play all four: the
recipe's *self*-rewrite, and what the five-stage loop uses.

Settings fall in three groups, which is what a resumed run may change:

* **what was produced**: a role's spec, sampling parameters and prompt, and for the collector the
  tasks, harnesses, attempts, turn limit and seed. Once a stage has written files, the settings
  that made them cannot change (the files would mix two runs); before that, they can.
* **where and how fast**: a role's options (a server's URL, a key, a timeout), the concurrency, a
  Ray address. They may change on any command.
* **how the dataset is built** (``build``): caps, near-duplicate removal, mixing with earlier
  rounds. ``build`` rewrites the dataset every time, so these change freely too.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from ..models.base import SamplingParams
from ..models.registry import parse_spec

ROLES = ("collector", "planner", "reviewer", "executor")
HARNESSES = ("generic", "terminus", "tool-calling")
#: backend kinds that use no model: a run collected or rewritten with them is not *self*-rewrite
MODEL_FREE_KINDS = frozenset({"oracle", "typed-oracle", "nop", "human", "scripted", "replay"})
#: what each role does when it has no model
STAND_INS = {
    "collector": "needs a policy",
    "planner": "deterministic (the commands extracted and normalised)",
    "reviewer": "leak checks alone",
    "executor": "replay (the playbook's steps as they are)",
}
#: sampling settings of the roles that answer once (planner, reviewer) unless given
ANSWER_PARAMS = {"temperature": 0.0, "max_new_tokens": 2048}


class Role(BaseModel):
    """One role: a backend spec (``None``: the stand-in), its options, sampling and prompt."""

    model_config = ConfigDict(extra="forbid")

    spec: str | None = None
    #: where and how to reach the model (``base_url``, ``api_key``, ``timeout``, ...): operational
    options: dict[str, Any] = Field(default_factory=dict)
    #: :class:`~terminal_env.models.base.SamplingParams` fields (temperature, top_p, max_new_tokens, ...)
    params: dict[str, Any] = Field(default_factory=dict)
    #: the role's prompt file (planner, reviewer, executor; default: the bundled one)
    prompt: str | None = None

    def identity(self) -> tuple[Any, ...]:
        return self.spec, sorted(self.params.items()), self.prompt

    def sampling(self, defaults: dict[str, Any] | None = None) -> SamplingParams:
        return SamplingParams(**{**(defaults or {}), **self.params})

    @property
    def model_free(self) -> bool:
        """No model plays this role (a stand-in, or a kind such as typed-oracle)."""
        return self.spec is None or parse_spec(self.spec)[0] in MODEL_FREE_KINDS

    def describe(self, role: str) -> str:
        if self.spec is None:
            return f"stand-in: {STAND_INS[role]}"
        return self.spec + (" (model-free)" if self.model_free else "")


class BuildConfig(BaseModel):
    """How verified re-runs become the dataset (``build`` applies it afresh every time)."""

    model_config = ConfigDict(extra="forbid")

    #: at most this many records per task (the most diverse are kept); None: no cap
    max_per_task: int | None = Field(4, ge=1)
    #: records of one task whose normalised commands are at least this similar are near
    #: duplicates and one is kept (1.0: only identical commands after normalisation)
    near_duplicate: float = Field(0.9, gt=0, le=1)
    #: the playbook's reasons are written before each replayed command (the replay executor)
    with_reasons: bool = False
    #: earlier rounds' datasets and how many of their records to take per record of this round
    #: (``{"rsr/r1/dataset/train.jsonl": 0.5}``: half as many as this round has)
    mix: dict[str, float] = Field(default_factory=dict)
    #: seed of every sampled choice (which earlier records are mixed in)
    seed: int = 0


class RSRConfig(BaseModel):
    """What a run is; saved as ``rsr.json``. See the module's notes for what a resume may change."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[str]
    harnesses: list[str] = Field(default_factory=lambda: list(HARNESSES))
    collector: Role = Field(default_factory=lambda: Role(spec="typed-oracle"))
    planner: Role = Field(default_factory=Role)
    reviewer: Role = Field(default_factory=Role)
    executor: Role = Field(default_factory=Role)
    attempts: int = Field(1, ge=1)
    max_turns: int = Field(50, ge=1)
    #: mixed with the task, harness and attempt into each episode's seed
    seed: int = 0
    #: a label every record carries (the loop writes ``rsr-1``, ``rsr-2``)
    round: str = ""
    build: BuildConfig = Field(default_factory=BuildConfig)
    concurrency: int = Field(2, ge=1)
    ray_address: str | None = None

    def role(self, name: str) -> Role:
        return getattr(self, name)

    def stand_ins(self) -> list[str]:
        """The roles no model played, each with what played it (empty: every role a model)."""
        return [f"{r}: {self.role(r).describe(r)}" for r in ROLES if self.role(r).model_free]

    def mode(self) -> str:
        """``self`` (the policy, a model, plays every role), ``model-free`` (no role has a model)
        or ``mixed``."""
        c = self.collector
        if not c.model_free and all(self.role(r).spec == c.spec for r in ROLES):
            return "self"
        return "model-free" if len(self.stand_ins()) == len(ROLES) else "mixed"

    def with_self(self) -> "RSRConfig":
        """Every role played by the collecting policy, with its options (a role's own options
        win where both set one; planner and reviewer keep their own sampling: they answer once,
        greedily, unless told otherwise)."""
        if self.collector.model_free:
            raise ConfigError(f"--self needs a model as the policy (--model hf:DIR or openai:NAME), "
                              f"not {self.collector.spec!r}: a model-free policy cannot plan, review or execute")
        c = self.collector
        update = {r: self.role(r).model_copy(update={"spec": c.spec, "options": {**c.options, **self.role(r).options}})
                  for r in ("planner", "reviewer", "executor")}
        update["executor"] = update["executor"].model_copy(update={"params": {**c.params, **self.executor.params}})
        return self.model_copy(update=update)


#: which stage's files freeze which settings
FROZEN_BY = {
    "collect": ("tasks", "harnesses", "attempts", "max_turns", "seed", "collector"),
    "playbooks": ("planner",),
    "reviews": ("reviewer",),
    "execute": ("executor",),
}


def changed_settings(old: RSRConfig, new: RSRConfig, produced: set[str]) -> list[str]:
    """Settings that differ between ``old`` and ``new`` and that files already written depend on
    (``produced``: the stage folders that hold files)."""
    out = []
    for stage, names in FROZEN_BY.items():
        if stage not in produced:
            continue
        for name in names:
            a, b = getattr(old, name), getattr(new, name)
            if isinstance(a, Role):
                if a.identity() != b.identity():
                    out.append(f"{name} ({a.describe(name)} -> {b.describe(name)})" if a.spec != b.spec
                               else f"{name}'s sampling or prompt")
            elif a != b:
                out.append(name)
    return out


def role_option(item: str) -> tuple[str, str, Any]:
    """``"planner.base_url=http://h:8000/v1"`` -> ``("planner", "base_url", "http://...")``. The
    value is read as JSON when it parses (numbers, true/false), else kept as text. ``all`` as the
    role sets it on every role; keys of :class:`SamplingParams` set the role's sampling.

    >>> role_option("executor.temperature=0.6")
    ('executor', 'temperature', 0.6)
    >>> role_option("all.api_key=abc")
    ('all', 'api_key', 'abc')
    """
    head, eq, value = item.partition("=")
    role, dot, key = head.partition(".")
    if not eq or not dot or not key or role not in (*ROLES, "all"):
        raise ConfigError(f"--option {item!r}: write ROLE.KEY=VALUE with ROLE one of "
                          f"{', '.join(ROLES)}, all (e.g. planner.base_url=http://localhost:8000/v1)")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    return role, key, parsed


def apply_option(config: RSRConfig, role: str, key: str, value: Any) -> RSRConfig:
    """Set one option or sampling parameter on one role (or all); an unknown sampling value is
    refused here, an unknown backend option when the backend is built."""
    update = {}
    for name in ROLES if role == "all" else (role,):
        r = config.role(name)
        if key in SamplingParams.model_fields:
            params = {**r.params, key: value}
            try:
                SamplingParams(**params)
            except ValueError as exc:
                raise ConfigError(f"--option {name}.{key}={value!r}: {str(exc).splitlines()[-1].strip()}") from None
            update[name] = r.model_copy(update={"params": params})
        else:
            update[name] = r.model_copy(update={"options": {**r.options, key: value}})
    return config.model_copy(update=update)


__all__ = ["ANSWER_PARAMS", "BuildConfig", "HARNESSES", "MODEL_FREE_KINDS", "ROLES", "RSRConfig",
           "Role", "apply_option", "changed_settings", "role_option"]
