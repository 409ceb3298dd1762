"""A trainer with state: the actor plays, PPO updates, the new weights reach the generator,
validation scores checkpoints, and a run killed at any point resumes where it was saved.

One PPO run (:class:`PPORun`) in a directory::

    run.json            what the run is (its settings) and how far it got (the last saved step)
    metrics.jsonl       one line per iteration: loss terms, KL, entropy, clip fraction, grad norms,
                        explained variance, value/return/advantage statistics, response and turn
                        lengths, the rollout/trainer log-prob gap, phase timings
    validation.jsonl    one line per validated step: Mean@k on the validation split
    steps/step-NNNN/    a checkpoint (:meth:`Pair.save`) and ``trainer_state.pt``: both optimizers,
                        the schedulers, the minibatch generator, the step, the RNG states
    tb/                 TensorBoard event files, where ``tensorboard`` is installed

Each iteration: ``episodes_per_iteration`` rollouts of the current actor on the train tasks
(the generator serves its weights; every turn records the version it was sampled by, and
:func:`~terminal_env.train.data.episodes` refuses turns of other weights), one
:meth:`PPO.update`, the new weights pushed to the generator as ``<actor id>@<step>``
(:func:`~terminal_env.train.weight_sync.pair_version`), and every ``validate_every`` steps a
validation. Episode seeds never overlap across iterations: iteration ``i``'s ``j``-th episode has
seed ``seed * 10**6 + i * episodes + j`` (:func:`rollout_seed`).

**Resuming.** A step's checkpoint is written first, then ``run.json`` names it: a kill before
``run.json`` is rewritten leaves the previous step as the resume point, and a resumed run redoes
the steps after it, with the same seeds, weights and optimizer state, so it ends as an
uninterrupted run would (tested with one episode at a time, where the sampler batches alike;
concurrent episodes share the local sampler's batches, and their float sums may then differ in
the last bits). Checkpoints that are only resume points are removed once a later one is saved;
validated ones stay (the loop chooses among them).
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import ConfigError
from ..fileio import write_atomic
from ..models.base import SamplingParams
from ..rewards import get_reward
from ..verify.result import VerifierResult
from .data import episodes as to_episodes
from .evaluation import score, task_scores
from .generators import LocalGenerator
from .models import Pair
from .ppo import PPO, PPOConfig
from .rollouts import collect
from .weight_sync import pair_version

STATE_FILE = "trainer_state.pt"
RUN_FILE = "run.json"
SCHEDULES = ("constant", "linear", "cosine")


# ---------------------------------------------------------------------------- state on disk
def rng_state() -> dict[str, Any]:
    """The process's random states (torch's CPU generator, Python's)."""
    return {"torch": torch.get_rng_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])


def save_state(directory: str | Path, state: dict[str, Any]) -> Path:
    """``state`` (optimizer state dicts, counters, RNG states) as ``directory/trainer_state.pt``,
    written whole or not at all."""
    path = Path(directory) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)
    return path


def load_state(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        raise ConfigError(f"{directory} holds no trainer state ({STATE_FILE}): not a step a run can resume from")
    return torch.load(path, weights_only=False)


def lr_factor(schedule: str, step: int, total: int, warmup: int = 0) -> float:
    """The learning rate's factor at ``step`` (0-based) of ``total``: a linear warm-up over
    ``warmup`` steps, then constant, linear decay to 0, or a cosine to 0.

    >>> [round(lr_factor("linear", s, 4), 2) for s in range(4)]
    [1.0, 0.75, 0.5, 0.25]
    >>> [round(lr_factor("cosine", s, 4, warmup=2), 2) for s in range(4)]
    [0.5, 1.0, 1.0, 0.5]
    """
    if schedule not in SCHEDULES:
        raise ConfigError(f"unknown learning-rate schedule {schedule!r}: use one of {', '.join(SCHEDULES)}")
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return 1.0
    progress = (step - warmup) / (total - warmup)
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def rollout_seed(seed: int, iteration: int, episodes: int) -> int:
    """The first episode seed of ``iteration`` (its episodes take the next ``episodes`` seeds):
    iterations never share a seed, and runs of different seeds do not either (below a million
    episodes).

    >>> rollout_seed(0, 2, 16), rollout_seed(1, 0, 16)
    (32, 1000000)
    """
    return seed * 1_000_000 + iteration * episodes


# ---------------------------------------------------------------------------- playing
@dataclass
class PlaySettings:
    """How episodes are played: harness, turns, tokens, temperature, and the environment."""

    harness: str = "generic"
    max_turns: int = 20
    temperature: float = 1.0
    max_new_tokens: int = 8192
    max_input_tokens: int = 96_000
    reward: str = "partial_progress"
    concurrency: int = 2
    #: seconds one command may run (None: the environment's default)
    command_timeout: float | None = None

    def params(self, temperature: float | None = None) -> SamplingParams:
        return SamplingParams(temperature=self.temperature if temperature is None else temperature,
                              max_new_tokens=self.max_new_tokens, max_input_tokens=self.max_input_tokens)

    def pool_options(self) -> dict[str, Any]:
        env = {"command_timeout": self.command_timeout} if self.command_timeout is not None else {}
        return {"max_concurrency": self.concurrency, **({"env_config": env} if env else {})}


def play(backend: Any, tasks: list[Any], settings: PlaySettings, *, attempts: int, seed: int,
         temperature: float | None = None) -> list[Any]:
    """``attempts`` episodes of each task (task by task), seeds ``seed``, ``seed + 1``, ..."""
    return collect(backend, list(tasks), attempts=attempts, harness=settings.harness,
                   params=settings.params(temperature), max_turns=settings.max_turns, reward=settings.reward,
                   seed=seed, **settings.pool_options())


def episode_rows(trajectories: list[Any], reward: str, seed: int) -> list[dict[str, Any]]:
    """What :func:`~terminal_env.train.evaluation.task_scores` reads, one row per episode."""
    rows = []
    fn = get_reward(reward)
    for i, t in enumerate(trajectories):
        masked = bool(t.masked)
        if masked:
            value = None
        elif reward in t.rewards:
            value = float(t.rewards[reward])
        else:  # a reward with options (a task's metric): from the verdict itself
            value = float(fn(VerifierResult.model_validate(t.verification))) if t.verification else 0.0
        rows.append({"task": t.task.name, "seed": seed + i, "masked": masked,
                     "strict_success": None if masked else bool(t.strict_success), "reward": value})
    return rows


def evaluate(backend: Any, tasks: list[Any], settings: PlaySettings, *, k: int, temperature: float,
             seed: int) -> dict[str, Any]:
    """Mean@k of ``tasks`` at ``temperature`` (a task's score: the mean strict success of its
    ``k`` episodes), with a bootstrap interval over tasks, the mean reward, and each task's
    numbers (for paired comparisons: the same tasks and seeds give the same pairs)."""
    if not tasks:
        raise ConfigError("nothing to evaluate on: the split has no tasks")
    rows = episode_rows(play(backend, tasks, settings, attempts=k, seed=seed, temperature=temperature),
                        settings.reward, seed)
    per_task = task_scores(rows)
    strict = {t: s["strict_success"] for t, s in per_task.items()}
    rewards = {t: s["reward"] for t, s in per_task.items()}
    return {**score(strict), "reward_mean": score(rewards)["mean"], "k": k, "temperature": temperature,
            "episodes": len(rows), "masked": sum(r["masked"] for r in rows),
            "per_task": {t: {"strict_success": round(s["strict_success"], 4), "reward": round(s["reward"], 4)}
                         for t, s in sorted(per_task.items())}}


# ---------------------------------------------------------------------------- a PPO run
@dataclass
class RunSettings:
    """What a PPO run does besides the update itself (:class:`PPOConfig`)."""

    iterations: int = 4
    #: train tasks per iteration; each is played ``attempts`` times (a group for GRPO and RLOO)
    tasks_per_iteration: int = 8
    attempts: int = 2
    #: validate after every this many steps (and after the last; 0: never)
    validate_every: int = 2
    #: the step 0 candidate (the starting point) is validated too
    validate_start: bool = True
    schedule: str = "constant"
    warmup: int = 0
    seed: int = 0
    play: PlaySettings = field(default_factory=PlaySettings)
    #: validation: Mean@k at this temperature
    validation_k: int = 2
    validation_temperature: float = 0.6
    validation_seed: int = 7_000_000

    def __post_init__(self) -> None:
        if isinstance(self.play, dict):
            self.play = PlaySettings(**self.play)
        for name in ("iterations", "tasks_per_iteration", "attempts", "validation_k"):
            if getattr(self, name) < 1:
                raise ConfigError(f"RunSettings.{name} must be at least 1, not {getattr(self, name)}")
        if self.validate_every < 0:
            raise ConfigError(f"RunSettings.validate_every must be 0 (never) or more, not {self.validate_every}")
        lr_factor(self.schedule, 0, 1)  # an unknown schedule is refused here


def _step_dir(out: Path, step: int) -> Path:
    return out / "steps" / f"step-{step:04d}"


class PPORun:
    """Iterations of rollouts and PPO updates from ``pair``, in ``out`` (module docstring).

    ``backend``: something with ``push(pair, version)`` and ``backend`` (the served model), such as
    :class:`LocalGenerator`; ``train_tasks`` and ``validation_tasks``: task directories or loaded
    tasks. A fresh run calls the calibration gate of :class:`PPO` (``force`` skips it); a resumed
    run does not (its critic has been trained by PPO since; its start was gated)."""

    def __init__(self, out: str | Path, pair: Pair, ppo: PPOConfig, settings: RunSettings, *,
                 train_tasks: list[Any], validation_tasks: list[Any] | None = None, generator: Any = None,
                 reference: Any = None, force: bool = False, log: Callable[[str], None] = lambda m: None,
                 kill: Callable[[str], None] = lambda point: None):
        self.out, self.pair, self.ppo_config, self.settings = Path(out), pair, ppo, settings
        self.train_tasks, self.validation_tasks = list(train_tasks), list(validation_tasks or [])
        if not self.train_tasks:
            raise ConfigError("a PPO run needs train tasks to play")
        self.log, self.reference, self.force = log, reference, force
        self.kill = kill  # the resume tests: called at named points (step-N: saved, not yet recorded)
        self.generator = generator
        self._own_generator = generator is None
        self._tb: Any = None

    # -- files
    def _run_file(self) -> dict[str, Any]:
        path = self.out / RUN_FILE
        return json.loads(path.read_text()) if path.is_file() else {}

    def _identity(self) -> dict[str, Any]:
        return {"start": self.pair.meta.get("id"), "ppo": asdict(self.ppo_config),
                "settings": json.loads(json.dumps(asdict(self.settings), default=str))}

    def _append(self, name: str, row: dict[str, Any]) -> None:
        with (self.out / name).open("a") as f:
            f.write(json.dumps(row, default=float) + "\n")

    def _truncate(self, name: str, last_step: int) -> None:
        """Keep the lines of steps up to ``last_step`` (a resumed run writes the later ones again)."""
        path = self.out / name
        if path.is_file():
            keep = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= last_step]
            write_atomic(path, "".join(line + "\n" for line in keep))

    def _tracker(self, row: dict[str, Any]) -> None:
        if self._tb is None:
            try:
                from torch.utils.tensorboard import SummaryWriter  # optional extra: tensorboard, where installed
            except ImportError:
                self._tb = False
            else:
                self._tb = SummaryWriter(str(self.out / "tb"))
        if self._tb:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step":
                    self._tb.add_scalar(key, value, row["step"])

    # -- the run
    def run(self) -> dict[str, Any]:
        """Run (or resume) to ``settings.iterations`` steps; returns the run's summary:
        ``candidates`` (each validated step: its checkpoint and validation) and ``last``."""
        s = self.settings
        self.out.mkdir(parents=True, exist_ok=True)
        saved = self._run_file()
        identity = self._identity()
        if saved and saved.get("identity") != identity:
            raise ConfigError(f"{self.out / RUN_FILE}: this run was started with other settings or from another "
                              f"checkpoint; resume it with the same ones, or give another directory")
        start_version = self.pair.meta.get("actor")
        if not start_version:
            raise ConfigError("a PPO run starts from a saved checkpoint (Pair.save): its actor id names the "
                              "weights the generator serves")
        step = saved.get("step", 0)
        if step:  # resume: the pair, the optimizers and the RNG of the last saved step
            directory = _step_dir(self.out, step)
            self.log(f"ppo: resuming after step {step} from {directory}")
            loaded = Pair.load(directory)
            device = next(self.pair.actor.parameters()).device
            self.pair.actor.load_state_dict(loaded.actor.state_dict())
            self.pair.critic.load_state_dict(loaded.critic.state_dict())
            self.pair.actor.to(device)
            self.pair.critic.to(device)
            self.pair.meta = {**loaded.meta, "resumed_from": str(directory)}
            self._truncate("metrics.jsonl", step)
            self._truncate("validation.jsonl", step)
        trainer = PPO(self.pair, self.ppo_config, reference=self.reference, force=self.force or bool(step))
        schedulers = [torch.optim.lr_scheduler.LambdaLR(
            o, lambda i: lr_factor(s.schedule, i, s.iterations, s.warmup)) for o in _optimizers(trainer)]
        if step:
            state = load_state(_step_dir(self.out, step))
            trainer.load_state_dict(state["ppo"])
            for sched, st in zip(schedulers, state["schedulers"]):
                sched.load_state_dict(st)
            set_rng_state(state["rng"])
        else:  # a fresh start (or a run killed before its first step): nothing of it counts
            for name in ("metrics.jsonl", "validation.jsonl"):
                (self.out / name).unlink(missing_ok=True)
            write_atomic(self.out / RUN_FILE, json.dumps({"identity": identity, "step": 0, "start_version":
                                                           start_version}, indent=1))
        if self.generator is None:
            self.generator = LocalGenerator(self.pair, pair_version(start_version, step),
                                            max_batch=max(1, s.play.concurrency))
        elif step:
            self.generator.push(self.pair, pair_version(start_version, step))
        try:
            if step == 0 and s.validate_start and s.validate_every and self.validation_tasks:
                self._validate(0, start_dir=None)
            while step < s.iterations:
                step = self._iteration(trainer, schedulers, step, start_version)
        finally:
            if self._tb:
                self._tb.close()
            if self._own_generator and self.generator is not None:
                self.generator.close()
                self.generator = None
        return self.summary()

    def _iteration(self, trainer: PPO, schedulers: list[Any], step: int, start_version: str) -> int:
        s, t0 = self.settings, time.perf_counter()
        n = s.tasks_per_iteration
        tasks = [self.train_tasks[(step * n + i) % len(self.train_tasks)] for i in range(n)]
        version = pair_version(start_version, step)
        trajectories = play(self.generator.backend, tasks, s.play, attempts=s.attempts,
                            seed=rollout_seed(s.seed, step, n * s.attempts))
        t_rollout = time.perf_counter() - t0
        batch, skipped = to_episodes(trajectories, reward=s.play.reward, multi_segment="drop", weights=version)
        if not batch:
            raise ConfigError(f"step {step + 1}: every episode was left out ({dict(skipped)}): nothing to train on")
        t1 = time.perf_counter()
        report = trainer.update(batch)
        for sched in schedulers:
            sched.step()
        t_update = time.perf_counter() - t1
        step += 1
        self.generator.push(self.pair, pair_version(start_version, step))
        row = {"step": step, **_scalars(report), "skipped": dict(skipped),
               "rollout_strict_success": round(sum(bool(t.strict_success) for t in trajectories)
                                               / max(1, len(trajectories)), 4),
               "actor_lr": _optimizers(trainer)[0].param_groups[0]["lr"],
               "seconds_rollout": round(t_rollout, 3), "seconds_update": round(t_update, 3)}
        self.log(f"ppo step {step}: mean reward {row.get('mean_reward')}, strict {row['rollout_strict_success']}, "
                 f"({t_rollout:.0f} s rollout, {t_update:.0f} s update)")
        validate = bool(s.validate_every) and self.validation_tasks and (
            step % s.validate_every == 0 or step == s.iterations)
        directory = _step_dir(self.out, step)
        if directory.exists():  # a half-written step of a killed run
            shutil.rmtree(directory)
        self.pair.save(directory, stage="ppo", metrics={"ppo": {"step": step, **_scalars(report)}})
        save_state(directory, {"ppo": trainer.state_dict(), "schedulers": [x.state_dict() for x in schedulers],
                               "rng": rng_state(), "step": step})
        self.kill(f"step-{step}")
        if validate:
            t2 = time.perf_counter()
            self._validate(step, start_dir=directory)
            row["seconds_validation"] = round(time.perf_counter() - t2, 3)
        self._append("metrics.jsonl", row)
        self._tracker(row)
        previous = self._run_file().get("step", 0)
        write_atomic(self.out / RUN_FILE, json.dumps({**self._run_file(), "step": step}, indent=1))
        if previous and previous != step and not self._validated(previous):  # a resume point only
            shutil.rmtree(_step_dir(self.out, previous), ignore_errors=True)
        return step

    def _validated(self, step: int) -> bool:
        path = self.out / "validation.jsonl"
        return path.is_file() and any(json.loads(x)["step"] == step for x in path.read_text().splitlines() if x)

    def _validate(self, step: int, start_dir: Path | None) -> None:
        s = self.settings
        result = evaluate(self.generator.backend, self.validation_tasks, s.play, k=s.validation_k,
                          temperature=s.validation_temperature, seed=s.validation_seed)
        self.log(f"ppo validation at step {step}: Mean@{s.validation_k} {result['mean']}")
        self._append("validation.jsonl", {"step": step, **result, "id": self.pair.meta.get("id")})

    def summary(self) -> dict[str, Any]:
        def read(name: str) -> list[dict[str, Any]]:
            path = self.out / name
            return [json.loads(x) for x in path.read_text().splitlines() if x] if path.is_file() else []

        return {"steps": self._run_file().get("step", 0), "metrics": read("metrics.jsonl"),
                "validation": read("validation.jsonl")}


def _optimizers(trainer: PPO) -> list[torch.optim.Optimizer]:
    return [o for o in (trainer.actor_optimizer, getattr(trainer, "critic_optimizer", None)) if o is not None]


def _scalars(report: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in report.items()
            if isinstance(v, (int, float, str, type(None))) and not isinstance(v, bool)}
