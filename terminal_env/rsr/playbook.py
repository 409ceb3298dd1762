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

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..actions import Keys, action_to_text
from ..fileio import write_atomic


class PlaybookStep(BaseModel):
    """One step: a shell command, or keystrokes for a program that is reading the terminal (an
    editor, a REPL, a prompt), which survive as the generic harness's ``#!keys``."""

    model_config = ConfigDict(extra="forbid")

    #: a command for the generic harness (one fenced ``bash`` block), may span several lines
    command: str = ""
    #: keystrokes instead of a command: key names (``C-c``, ``Enter``) and literal text
    keys: list[str] = Field(default_factory=list)
    #: why, in a sentence or two (from the source's own reasoning, or the planner model's)
    why: str = ""
    #: seconds the command may take (the source's own timeout, when it gave one)
    timeout: float | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "PlaybookStep":
        if self.keys and self.command:
            raise ValueError("a step is a command or keystrokes, not both")
        return self

    def text(self) -> str:
        """The step as the generic harness writes it (``#!keys ...`` for keystrokes)."""
        if self.keys:
            return action_to_text(Keys(keys=list(self.keys)))
        return self.command

    @property
    def empty(self) -> bool:
        return not self.keys and not self.command.strip()


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
    #: what the planner left out of the source, and why (refused actions, reads, a reply it could not use)
    dropped: list[str] = Field(default_factory=list)
    #: tokens a planner model used (prompt, completion), when it says
    usage: dict[str, int] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """Identity of the steps (commands, keystrokes and reasons): two harnesses or attempts
        that gave equal playbooks share it, and a re-run or verdict names the playbook it is of."""
        blob = json.dumps([self.task, [[s.command.strip(), s.keys, s.why] for s in self.steps]])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def commands(self) -> list[str]:
        return [s.text() for s in self.steps]

    def save(self, path: str | Path) -> Path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
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
    #: the key of the playbook it is a verdict on (:attr:`Playbook.key`)
    playbook_key: str | None = None
    #: tokens a reviewer model used, when it says
    usage: dict[str, int] = Field(default_factory=dict)
    kind: Literal["verdict"] = "verdict"

    def save(self, path: str | Path) -> Path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return write_atomic(path, self.model_dump_json(indent=1))

    @classmethod
    def load(cls, path: str | Path) -> "Verdict":
        return cls.model_validate_json(Path(path).read_text())


def reason_kinds(reasons: list[str]) -> list[str]:
    """``["leaked-value: 42", ...] -> ["leaked-value", ...]`` (the funnel counts by kind)."""
    return [r.split(":", 1)[0] for r in reasons]


def as_record(obj: BaseModel) -> dict[str, Any]:
    return json.loads(obj.model_dump_json())
