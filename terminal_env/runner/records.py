"""The records a run directory holds, and its layout.

::

    RUN_DIR/
      run.json                 the run's configuration and task list (RunManifest)
      trials/<task>/<attempt>/ one directory per trial (attempt counts from 1)
        trajectory.json        terminal_env.trajectory.Trajectory, saved as it goes and at the end
        recording.cast         asciinema v2 recording of the terminal
        verifier.json          the protected verifier's result (VerifierResult)
        verifier.log           the tail of the verifier's output
        result.json            TrialResult: written last, so its presence means "finished"
      summary.json             metrics (terminal_env.metrics.summarize) and per-task rows
      report/                  the HTML report (terminal-env report)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import ConfigError

RUN_SCHEMA = "terminal-env/run"
RUN_VERSION = 1


class TrialResult(BaseModel):
    """One attempt at one task, as scored."""

    model_config = ConfigDict(extra="forbid")

    task: str
    attempt: int = Field(ge=1)
    category: str | None = None
    difficulty: str | None = None
    split: str | None = None
    outcome: str | None = None  # verify.result.Outcome value; None when never verified
    strict_success: bool = False
    progress: float = Field(0.0, ge=0, le=1)
    reward: float = 0.0
    rewards: dict[str, float] = Field(default_factory=dict)
    #: the named metrics the task's verifier reported (reward.json; Harbor's several rewards)
    metrics: dict[str, float] = Field(default_factory=dict)
    #: a multi-step task's steps as verified: name, outcome, reward (the later steps that did not
    #: run are absent; the verifier's result says why)
    steps: list[dict[str, Any]] = Field(default_factory=list)
    termination: str = "running"
    #: an infrastructure failure (engine, sandbox, model server): excluded from scores
    masked: bool = False
    #: how many times the trial was started (infrastructure errors are retried)
    tries: int = 1
    error: str | None = None
    turns: int = 0
    commands: int = 0
    format_errors: int = 0
    duration: float = 0.0
    model_seconds: float = 0.0
    env_seconds: float = 0.0
    verify_seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: relative to the run directory
    trial_dir: str = ""
    #: unix times of the last try's start and of the end
    started: float | None = None
    finished: float | None = None


def trial_dir(run_dir: Path, task: str, attempt: int) -> Path:
    return run_dir / "trials" / task / str(attempt)


def read_trial_result(path: Path) -> TrialResult:
    try:
        return TrialResult.model_validate_json(path.read_text())
    except (ValueError, ValidationError) as exc:
        raise ConfigError(
            f"{path}: damaged trial result ({str(exc).splitlines()[0]}); delete this trial's "
            "directory to run it again"
        ) from None


def load_results(run_dir: Path) -> list[TrialResult]:
    """Every finished trial of a run directory, sorted by task and attempt."""
    run_dir = Path(run_dir)
    if not (run_dir / "trials").is_dir():
        return []
    out = []
    for p in sorted(run_dir.glob("trials/*/*/result.json")):
        r = read_trial_result(p)
        if (r.task, str(r.attempt)) != (p.parent.parent.name, p.parent.name):
            raise ConfigError(
                f"{p}: holds the result of {r.task!r} attempt {r.attempt}, not of the trial its "
                "directory names; the run directory was edited by hand. Move or delete the file."
            )
        out.append(r)
    return sorted(out, key=lambda r: (r.task, r.attempt))
