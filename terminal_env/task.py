"""The minimal task the environment needs: an image and an instruction.

The full task format (Harbor's ``task.toml`` with tests and solution, and the Terminal-Bench 1.x
import) is loaded elsewhere and produces a :class:`TaskSpec`; the environment only sees this.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError
from .sandbox import SandboxConfig, SandboxLimits
from .sandbox.stack import StackSpec

DEFAULT_IMAGE = "terminal-env/base:bookworm-1"


class Healthcheck(BaseModel):
    """Harbor's ``healthcheck`` (of ``[environment]`` or of a step), with Docker's meaning: the
    command runs until it succeeds before the agent starts; failures in the first
    ``start_period_sec`` do not count, after it ``retries`` failures in a row fail the episode
    (an infrastructure failure: masked, retried)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1)
    interval_sec: float = Field(5.0, ge=0)
    timeout_sec: float = Field(30.0, gt=0)
    start_period_sec: float = Field(0.0, ge=0)
    start_interval_sec: float = Field(5.0, ge=0)
    retries: int = Field(3, ge=1)


class TaskSpec(SandboxLimits):
    """What an episode runs: the sandbox to start (its limits are
    :class:`~terminal_env.sandbox.SandboxLimits`, declared once) and what to tell the agent."""

    name: str = Field(min_length=1, max_length=200)
    instruction: str
    image: str = DEFAULT_IMAGE
    workdir: str | None = "/app"
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = None
    #: files written into the sandbox before the episode, {absolute path: content}
    files: dict[str, str] = Field(default_factory=dict)
    #: shell commands run as root before the episode starts (not shown to the agent)
    setup: list[str] = Field(default_factory=list)
    setup_timeout: float = Field(300, gt=0)
    #: run until it succeeds after the setup, before the agent's first command
    healthcheck: Healthcheck | None = None
    #: the task's other services (a multi-container task), started around the agent's container
    services: StackSpec | None = None
    #: anything else a loader wants to carry along (category, difficulty, split, paths, ...)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def sandbox_config(
        self, *, run_id: str = "adhoc", runtime: str | None = None, first_shell: str | None = None
    ) -> SandboxConfig:
        extra = {} if first_shell is None else {"first_shell": first_shell}
        return SandboxConfig(
            **extra,
            **{**self.limits(), "runtime": runtime or self.runtime},
            image=self.image,
            workdir=self.workdir,
            env=dict(self.env),
            user=self.user,
            run_id=run_id,
            task=self.name,
            services=self.services,
        )

    @classmethod
    def coerce(cls, value: Any) -> "TaskSpec":
        """A TaskSpec from a TaskSpec or a dict. A loaded task directory is not converted here (it
        needs its image built first): give it to ``TerminalEnv`` or :func:`terminal_env.prepare.prepare_task`."""
        if isinstance(value, TaskSpec):
            return value
        if hasattr(value, "to_spec"):
            raise ConfigError(
                f"task {getattr(value, 'name', '?')!r} is a loaded task directory: its image must be built "
                "first; give it to TerminalEnv or to terminal_env.prepare.prepare_task (which build it)"
            )
        if isinstance(value, dict):
            try:
                return cls.model_validate(value)
            except ValidationError as exc:
                raise ConfigError(f"invalid task: {exc}") from None
        raise ConfigError(
            f"a task must be a TaskSpec, a dict or a loaded task, got {type(value).__name__}"
        )


def hello_task() -> TaskSpec:
    """The bundled default for smoke runs: small, quick, and checkable."""
    return TaskSpec(
        name="hello-world",
        instruction=(
            "Create a file /app/hello.txt whose only line is `Hello, world!`, "
            "then submit."
        ),
        metadata={"category": "smoke", "difficulty": "easy"},
    )
