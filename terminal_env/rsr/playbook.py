"""What the self-rewrite stages hand each other: playbooks and the reviewer's verdicts.

A playbook is harness-neutral: the ordered shell steps that solved a task, each with the short
reasoning a reader needs, and where it came from (the task, its digest, the source trajectory and
its harness). It never holds what the verifier said about the source run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..fileio import write_atomic


class PlaybookStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: a command for the generic harness (one fenced ``bash`` block), may span several lines
    command: str
    #: why, in a sentence or two (from the source's own reasoning, or the planner model's)
    why: str = ""
    #: seconds the command may take (the source's own timeout, when it gave one)
    timeout: float | None = None


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trajectory_id: str
    harness: str
    attempt: int
    policy: str
    weights: str | None = None
    path: str


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    task_path: str
    #: the task's tests and environment digests when the source ran
    task_digest: str
    instruction: str
    source: Source
    steps: list[PlaybookStep]
    planner: str = "deterministic"
    #: what the planner left out of the source, and why (refused actions, reads, control keys)
    dropped: list[str] = Field(default_factory=list)

    @property
    def key(self) -> str:
        """Identity of the steps' commands: equal playbooks from two harnesses or attempts
        share it (the dataset keeps one of them)."""
        blob = json.dumps([self.task, [s.command.strip() for s in self.steps]])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def commands(self) -> list[str]:
        return [s.command for s in self.steps]

    def save(self, path: str | Path) -> Path:
        return write_atomic(path, self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "Playbook":
        return cls.model_validate_json(Path(path).read_text())


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accepted: bool
    #: why it was rejected: one entry per finding, each ``kind: detail``
    reasons: list[str] = Field(default_factory=list)
    #: which reviewers looked: ``leak-checks`` always, then ``model:NAME`` when one is given
    reviewers: list[str] = Field(default_factory=list)
    kind: Literal["verdict"] = "verdict"

    def save(self, path: str | Path) -> Path:
        return write_atomic(path, self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "Verdict":
        return cls.model_validate_json(Path(path).read_text())


def reason_kinds(reasons: list[str]) -> list[str]:
    """``["leaked-value: 42", ...] -> ["leaked-value", ...]`` (the funnel counts by kind)."""
    return [r.split(":", 1)[0] for r in reasons]


def as_record(obj: BaseModel) -> dict[str, Any]:
    return json.loads(obj.model_dump_json())
