"""Trajectories: the versioned record of one episode, harness-neutral at its core.

A trajectory keeps

* the whole conversation as sent and received (``messages``, OpenAI chat format, never trimmed:
  what was trimmed for one request is recorded in ``context_events``);
* per model turn (``turns``): the completion with token ids and log-probs when the backend gave
  them, the harness actions it parsed into, and for each action the *generic* commands actually run
  (``Command``/``Keys``/``Submit`` and their plain-text form) with what the terminal returned;
* for a token-level backend, the episode as token sequences (``tokens``, schema version 2): the
  ids, the action mask, the sampled log-probs and the turn spans, built by extension
  (:mod:`terminal_env.models.tokens`), never re-rendered;
* the end: why it ended, the protected verifier's result, the rewards, whether it is masked
  (an infrastructure failure, never the agent's).

Exports: :meth:`Trajectory.to_chat` (one JSONL line for SFT), :meth:`Trajectory.to_atif`
(Harbor's Agent Trajectory Interchange Format), :meth:`Trajectory.generic_commands` (the
harness-neutral action sequence the self-rewrite pipeline starts from).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError
from .fileio import write_atomic
from .harness.base import ActionResult
from .models.base import Completion
from .models.tokens import EpisodeTokens

SCHEMA = "terminal-env/trajectory"
SCHEMA_VERSION = 2
#: versions this terminal-env reads (1: before the episode's token record; its files load as
#: trajectories without ``tokens``)
READABLE_VERSIONS = (1, 2)
ATIF_VERSION = "ATIF-v1.8"
#: backends that dispatch without a language model (their agent steps say ``llm_call_count: 0``)
NO_LLM_BACKENDS = frozenset({"ScriptedBackend", "ReplayBackend", "NopBackend", "OracleBackend", "HumanBackend"})

Termination = Literal[
    "running",  # not finished (a trajectory saved mid-episode)
    "submitted",  # the agent submitted
    "max_steps",  # the environment's step budget
    "max_turns",  # the agent loop's model-turn budget
    "time_limit",  # the episode's wall-clock budget
    "context_overflow",  # the prompt could not be made to fit
    "model_error",  # the model backend failed after retries (infrastructure: masked)
    "infra_error",  # the sandbox or engine failed (masked)
]


class TaskRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    path: str | None = None
    category: str | None = None
    difficulty: str | None = None
    split: str | None = None
    tests_digest: str | None = None


class ModelRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    backend: str
    params: dict[str, Any] = Field(default_factory=dict)


class ContextEvent(BaseModel):
    """The conversation was cut to fit the input budget before turn ``turn``."""

    model_config = ConfigDict(extra="forbid")

    turn: int
    kind: Literal["elided", "dropped"]
    #: indices into ``Trajectory.messages`` whose content was elided or which were left out
    messages: list[int]
    tokens_before: int
    tokens_after: int


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int
    started: float = Field(description="Unix time.")
    #: index in ``messages`` of this turn's assistant message (None if the model failed)
    message_index: int | None = None
    prompt_messages: int = 0  # messages sent after trimming
    prompt_tokens_estimate: int = 0
    completion: Completion | None = None
    actions: list[ActionResult] = Field(default_factory=list)
    format_error: str | None = None
    model_seconds: float = 0.0
    env_seconds: float = 0.0


class Trajectory(BaseModel):

    schema_: str = Field(SCHEMA, alias="schema")
    version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created: float = Field(default_factory=time.time)
    terminal_env_version: str = ""
    task: TaskRef
    harness: str
    harness_options: dict[str, Any] = Field(default_factory=dict)
    model: ModelRef
    tools: list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    context_events: list[ContextEvent] = Field(default_factory=list)
    #: the episode as token sequences, for a token-level backend (None otherwise)
    tokens: EpisodeTokens | None = None
    termination: Termination = "running"
    verification: dict[str, Any] | None = None
    reward: float | None = None
    #: every registered reward of the same verification (binary, partial_progress, ...)
    rewards: dict[str, float] = Field(default_factory=dict)
    masked: bool = False
    error: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # -- derived ---------------------------------------------------------------------------
    @property
    def outcome(self) -> str | None:
        return (self.verification or {}).get("outcome")

    @property
    def strict_success(self) -> bool:
        return bool((self.verification or {}).get("strict_success"))

    @property
    def progress(self) -> float:
        return float((self.verification or {}).get("progress") or 0.0)

    def generic_commands(self) -> list[str]:
        """Every generic action run, in order, in the generic harness's text syntax."""
        return [c.text for t in self.turns for a in t.actions for c in a.commands]

    # -- files -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (a reader never sees half a file; a kill never leaves one), making
        the file's directory if it is missing."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return write_atomic(path, self.model_dump_json(by_alias=True, indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Trajectory":
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such trajectory file") from None
        except ValueError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc}); the file is damaged") from None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ConfigError(f"{path}: not a terminal-env trajectory (no schema {SCHEMA!r})")
        if data.get("version") not in READABLE_VERSIONS:
            raise ConfigError(
                f"{path}: trajectory version {data.get('version')!r} is not supported "
                f"(this terminal-env reads versions {', '.join(map(str, READABLE_VERSIONS))})"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"{path}: invalid trajectory: {exc}") from None

    # -- exports ---------------------------------------------------------------------------
    def to_chat(self) -> dict[str, Any]:
        """One record for chat-format JSONL (SFT): the conversation, the tools, the outcome."""
        record: dict[str, Any] = {"messages": self.messages}
        if self.tools:
            record["tools"] = self.tools
        record.update(
            task=self.task.name,
            harness=self.harness,
            model=self.model.name,
            reward=self.reward,
            strict_success=self.strict_success,
            progress=self.progress,
            masked=self.masked,
            trajectory_id=self.id,
        )
        return record

    def to_atif(self) -> dict[str, Any]:
        """Harbor's Agent Trajectory Interchange Format (ATIF-v1.8): system/user/agent steps; an
        agent step carries its tool calls (one per generic command) and their observations, the
        sampled token ids and log-probs where the backend gave them, and ``llm_call_count`` (0
        for the backends that use no model: oracle, nop, scripted, replay, human)."""
        llm = self.model.backend not in NO_LLM_BACKENDS
        steps: list[dict[str, Any]] = []
        by_index = {t.message_index: t for t in self.turns if t.message_index is not None}

        def ts(t: float) -> str:
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))

        covered = False  # the previous agent step already carries the observations
        for i, msg in enumerate(self.messages):
            role = msg.get("role")
            content = msg.get("content") or ""
            turn = by_index.get(i)
            if turn is None:
                if role == "tool" or (role == "user" and covered):
                    continue  # observations are attached to the agent step that caused them
                steps.append({"source": "agent" if role == "assistant" else role, "message": content})
                continue
            step: dict[str, Any] = {"source": "agent", "message": content, "model_name": self.model.name,
                                    "timestamp": ts(turn.started), "llm_call_count": 1 if llm else 0}
            comp = turn.completion if llm else None  # without a model: no metrics, no reasoning
            if comp is not None and comp.reasoning:
                step["reasoning_content"] = comp.reasoning
            calls, results = [], []
            for a_i, act in enumerate(turn.actions):
                for c_i, cmd in enumerate(act.commands):
                    call_id = f"t{turn.index}-a{a_i}-c{c_i}"
                    calls.append(
                        {"tool_call_id": call_id, "function_name": cmd.action.get("kind", "command"),
                         "arguments": {k: v for k, v in cmd.action.items() if k != "kind"}}
                    )
                    results.append({"source_call_id": call_id, "content": cmd.observation})
            covered = bool(calls)
            if calls:
                step["tool_calls"] = calls
                step["observation"] = {"results": results}
            extra: dict[str, Any] = {"harness_actions": [a.action.model_dump() for a in turn.actions]}
            if turn.format_error:
                extra["format_error"] = turn.format_error
            step["extra"] = extra
            if comp is not None:
                metrics: dict[str, Any] = {}
                if comp.usage.prompt_tokens is not None:
                    metrics["prompt_tokens"] = comp.usage.prompt_tokens
                if comp.usage.completion_tokens is not None:
                    metrics["completion_tokens"] = comp.usage.completion_tokens
                if comp.logprobs is not None:
                    metrics["logprobs"] = comp.logprobs
                if comp.token_ids is not None:
                    metrics["completion_token_ids"] = comp.token_ids
                if comp.prompt_token_ids is not None:
                    metrics["prompt_token_ids"] = comp.prompt_token_ids
                if metrics:
                    step["metrics"] = metrics
            steps.append(step)
        for n, step in enumerate(steps, 1):
            step["step_id"] = n
        prompt = sum((t.completion.usage.prompt_tokens or 0) for t in self.turns if t.completion)
        completion = sum((t.completion.usage.completion_tokens or 0) for t in self.turns if t.completion)
        return {
            "schema_version": ATIF_VERSION,
            "session_id": self.id,
            "trajectory_id": self.id,
            "agent": {"name": f"terminal-env/{self.harness}", "version": self.terminal_env_version or "0",
                      "model_name": self.model.name},
            "steps": steps,
            "final_metrics": {"total_prompt_tokens": prompt, "total_completion_tokens": completion,
                              "total_steps": len(steps)},
            "extra": {
                "task": self.task.model_dump(),
                "termination": self.termination,
                "reward": self.reward,
                "verification": self.verification,
                "masked": self.masked,
            },
        }
