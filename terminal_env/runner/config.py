"""The configuration of a run, and which tasks it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from ..models.base import SamplingParams
from ..tasks import load_task
from ..tasks.load import find_tasks, is_task_dir
from ..tasks.generate import ensure_default_pool
from ..tasks.pool import SPLITS, load_pool, pool_dir

#: fields that may differ when a run is resumed (they do not change what a trial means)
RESUMABLE_FIELDS = {"concurrency", "infra_retries", "progress", "ca_bundle"}


class RunConfig(BaseModel):
    """Everything that decides what a run measures. Saved in run.json; a resumed run must match."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[str] = Field(
        description="Task directories, folders of tasks, names of bundled tasks, or "
        "'pool' / 'pool:train' / 'pool:validation' / 'pool:test', or the generated pool: "
        "'pool:generated' / 'pool:generated:train' (and so on)."
    )
    dataset: str | None = Field(
        None, description="NAME@VERSION of a registry dataset whose tasks these are (--dataset)."
    )
    harness: str = "generic"
    harness_options: dict[str, Any] = Field(default_factory=dict)
    model: str = Field(description="Model spec, e.g. openai:NAME, hf:PATH, oracle, nop, replay:FILE.")
    model_options: dict[str, Any] = Field(default_factory=dict)
    attempts: int = Field(3, ge=1, le=1000)
    concurrency: int = Field(1, ge=1, le=256)
    n_tasks: int | None = Field(
        None, ge=1, description="Only the first N tasks by name (Harbor's --n-tasks); default all."
    )
    timeout_multiplier: float = Field(
        1.0, gt=0, le=100, description="Scales each task's agent and verifier timeouts (Harbor's --timeout-multiplier)."
    )
    params: SamplingParams = Field(default_factory=SamplingParams)
    max_turns: int = Field(100, ge=1)
    max_steps: int = Field(200, ge=1, description="Environment steps (generic actions) per episode.")
    command_timeout: float = Field(180.0, gt=0, description="Per command, s.")
    episode_timeout: float | None = Field(None, gt=0, description="Per episode, s (default: the task's).")
    verify_timeout: float | None = Field(None, gt=0, description="Per verification, s (default: the task's).")
    reward: str = "binary"
    runtime: str | None = Field(
        None, description="OCI runtime of every sandbox, e.g. 'runsc' (default: each task's, else the engine's)."
    )
    base_map: dict[str, str] | None = Field(
        None, description="FROM images to local ones for task builds (default: $TERMINAL_ENV_BASE_MAP)."
    )
    ca_bundle: str | None = Field(
        None, description="CA bundle injected into task builds (default: $TERMINAL_ENV_CA_BUNDLE)."
    )
    infra_retries: int = Field(2, ge=0, le=20)
    allow_test: bool = False
    leaderboard: bool = Field(
        False, description="Scores for a leaderboard: a pinned dataset, the tasks' own timeouts, the environment recorded."
    )
    seed: int = 0
    progress: bool = True

    def fingerprint(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude=RESUMABLE_FIELDS)


#: what a leaderboard run may not change: options whose non-default values alter what is measured
LEADERBOARD_FIXED = {
    "timeout_multiplier": ("--timeout-multiplier", 1.0),
    "episode_timeout": ("--episode-timeout", None),
    "verify_timeout": ("--verify-timeout", None),
    "command_timeout": ("--command-timeout", 180.0),
}


def leaderboard_problems(config: RunConfig) -> list[str]:
    """Why ``config`` cannot be a leaderboard run (empty when it can)."""
    if not config.leaderboard:
        return []
    out = [f"{flag} {getattr(config, name)} (a leaderboard run keeps the tasks' own timeouts)"
           for name, (flag, default) in LEADERBOARD_FIXED.items() if getattr(config, name) != default]
    if config.dataset is None:
        out.append("no --dataset (a leaderboard run takes a dataset pinned by name and version)")
    return out


def resolve_tasks(specs: list[str], *, allow_test: bool = False) -> list[Any]:
    """Load the tasks named by ``specs`` (see :attr:`RunConfig.tasks`); sorted, no duplicates."""
    found: dict[str, Any] = {}
    for spec in specs:
        if spec == "pool" or spec.startswith("pool:"):
            parts = spec.split(":")
            root = None
            if len(parts) > 1 and parts[1] == "generated":  # pool:generated[:splits]
                root = ensure_default_pool()
                parts = parts[1:]
            if len(parts) > 2:
                raise ConfigError(f"--tasks {spec!r}: use pool[:SPLITS] or pool:generated[:SPLITS], "
                                  "SPLITS being train, validation and test, comma-separated")
            splits = parts[1].split(",") if len(parts) > 1 else ["train", "validation"]
            for t in load_pool(root, splits=splits, allow_test=allow_test):
                found.setdefault(t.name, t)
            continue
        path = Path(spec)
        if not path.exists() and (pool_dir() / spec).is_dir():
            path = pool_dir() / spec  # a bundled task by name
        if not path.exists():
            raise ConfigError(
                f"--tasks {spec!r}: no such task directory, folder of tasks or bundled task. Use a path, "
                f"a bundled task's name (see docs/pool.md), or pool[:{'|'.join(SPLITS)}]"
            )
        paths = [path] if is_task_dir(path) else find_tasks([path])
        if not paths:
            raise ConfigError(f"--tasks {spec!r}: no task directories found under {path}")
        for p in paths:
            t = load_task(p)
            if t.split == "test" and not allow_test:
                raise ConfigError(
                    f"task {t.name!r} ({p}) is in the protected test split; evaluating on it needs "
                    "--allow-test (never select checkpoints on it)"
                )
            if t.name in found and Path(found[t.name].path).resolve() != Path(t.path).resolve():
                raise ConfigError(f"two tasks are named {t.name!r}: {found[t.name].path} and {t.path}")
            found[t.name] = t
    if not found:
        raise ConfigError(f"--tasks {specs}: no tasks selected")
    return [found[n] for n in sorted(found)]
