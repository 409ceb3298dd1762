"""The recipe end to end: Base, RSR-1, RPR-1, RSR-2, RPR-2, each stage from the kept checkpoint of
the one before, checkpoints chosen on the validation split, a final score on the test split.

    terminal-env train loop --config loop.toml --out runs/loop      # --resume to go on after a kill

One pydantic config (:class:`LoopConfig`, from TOML; an error names the key) says where the
policy starts, which task folders are the train, validation and test splits, how episodes are
played, and what each stage does:

* **base**: the starting checkpoint, validated (the first point of the curve).
* **rsr** (Recursive Self-Rewrite): the current actor collects on the train tasks under the
  stage's harnesses (at least two in the recipe), its verified successes are planned, reviewed and
  executed again (:mod:`terminal_env.rsr`; roles ``self`` or stand-ins, as the config says), and
  the records that pass become SFT data for the actor, the critic frozen. Candidates: the
  starting point and the checkpoint after each SFT epoch.
* **rpr** (Recursive Policy-Refine): the critic is recalibrated on the current actor's episodes,
  the actor frozen, until its held-out explained variance reaches the criterion; then PPO
  iterations (:class:`~terminal_env.train.trainer.PPORun`) validated every ``validate_every``
  steps. Candidates: the starting point and every validated step. Where the critic cannot pass
  the gate, ``fallback_estimator`` (e.g. ``grpo``) trains the actor without it, and the manifest
  says so; without a fallback the stage keeps its starting point and says why.

**Selection on validation only.** Each candidate is scored on the validation split (Mean@k at the
validation temperature; the same tasks and episode seeds for every candidate) and the best is kept
(ties go to the earlier candidate: fewer updates). A config that selects on anything but
validation, or whose validation and test splits share a task, is refused. Candidates not kept stay
in the manifest with the reason.

**Manifests.** ``loop.json`` (the loop) and ``NN-name/stage.json`` (each stage) hold the config,
the funnel, every candidate's checkpoint id and path and its validation score, which was kept and
why, the parent (id and path), the KL reference, hyperparameters (so that "RPR-2's actor learning
rate is a fifth of RPR-1's" can be checked: ``actor_lr_vs_previous_rpr``), data sources with their
digests, software versions and seeds. Paths are relative to the loop's directory. Wall times go to
``timings.json`` (they differ from run to run; the manifests do not).

**Final evaluation, once, at the end**: each stage's kept checkpoint plays the test split (Mean@k
at the evaluation temperature, the paper's k=3 at 0.6) with bootstrap intervals over tasks, and
paired intervals between consecutive stages and between Base and the last stage
(:func:`~terminal_env.train.evaluation.final_summary`); ``report.html`` draws the curve.

**Resume.** Each step of a stage (the RSR run, each SFT epoch, the critic, each PPO step) is saved
before the next starts; ``--resume`` skips what is complete and redoes the rest with the same
seeds, and ends with the same manifests as an uninterrupted run (tested with one episode at a
time). A resumed loop whose config differs from the saved one is refused, naming the keys.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform
import signal
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import torch
import transformers

from .. import __version__
from ..errors import ConfigError
from ..fileio import write_atomic
from ..models.hf_backend import HFChatTokenizer
from ..report.loop import write_loop_report
from ..rsr.config import Role, RSRConfig
from ..rsr.dataset import read_records
from ..rsr.pipeline import RSRRun
from ..tasks.generate import ensure_default_pool
from ..tasks.load import split_tasks
from ..tasks.pool import load_pool, pool_dir
from ..trajectory import Trajectory
from .critic import CriticConfig, recalibrate
from .data import episodes as to_episodes, sft_samples
from .evaluation import final_summary
from .loop_config import LoopConfig, RPRStage, RSRStage, Scoring, load_config, parse_config
from .models import Pair
from .ppo import PPOConfig
from .sft import SFT, SFTConfig
from .generators import Seat
from .trainer import PlaySettings, PPORun, RunSettings, evaluate, load_state, play, save_state
from .weight_sync import pair_version

__all__ = ["Loop", "LoopConfig", "load_config", "parse_config", "kill_point"]

MANIFEST = "loop.json"
STAGE_FILE = "stage.json"
#: an environment variable for tests: the loop kills itself (SIGKILL) at the point of this name
KILL_ENV = "TERMINAL_ENV_KILL_AT"


def kill_point(name: str) -> None:
    """Die here, as a kill would, when ``TERMINAL_ENV_KILL_AT`` names this point (the resume
    tests); a no-op otherwise."""
    if os.environ.get(KILL_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


# ---------------------------------------------------------------------------- the loop
def _software() -> dict[str, str]:
    return {"terminal_env": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__}


def _digest_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _tasks_digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        for f in sorted(q for q in p.rglob("*") if q.is_file()):
            h.update(str(f.relative_to(p.parent)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


class Loop:
    """The five-stage loop in ``out`` (module docstring)."""

    def __init__(self, config: LoopConfig, out: str | Path, *, resume: bool = False,
                 log: Callable[[str], None] = lambda m: None):
        self.config, self.out, self.log = config, Path(out), log
        saved = self.out / "config.json"
        if saved.is_file():
            if not resume:
                raise ConfigError(f"{self.out} holds a loop already: add --resume to go on with it, or give "
                                  f"another --out")
            old = json.loads(saved.read_text())
            new = config.public()
            changed = sorted(_diff(old, new))
            if changed:
                raise ConfigError(f"{saved}: this loop was started with another config (changed: "
                                  f"{', '.join(changed)}); resume it with the same config, or give another --out")
        elif resume and self.out.exists() and any(self.out.iterdir()):
            raise ConfigError(f"{self.out} holds no loop (no config.json) to resume")
        self.splits = {name: self._split(name) for name in ("train", "validation", "test")}
        overlap = ({p.name for p in self.splits["validation"]} & {p.name for p in self.splits["test"]}) | (
            {p.name for p in self.splits["train"]} & {p.name for p in self.splits["validation"] + self.splits["test"]})
        if overlap:
            raise ConfigError(f"tasks in two splits: {', '.join(sorted(overlap)[:5])}: train, validation and test "
                              f"must not share a task")
        self.out.mkdir(parents=True, exist_ok=True)
        write_atomic(saved, json.dumps(config.public(), indent=1, sort_keys=True))
        self.timings: dict[str, float] = json.loads((self.out / "timings.json").read_text()) \
            if (self.out / "timings.json").is_file() else {}
        self.play = PlaySettings(harness=config.play.harness, max_turns=config.play.max_turns,
                                 temperature=config.play.rollout_temperature,
                                 max_new_tokens=config.play.max_new_tokens,
                                 max_input_tokens=config.play.max_input_tokens, reward=config.play.reward,
                                 concurrency=config.play.concurrency, command_timeout=config.play.command_timeout)
        self.seat = Seat(config.generator, concurrency=config.play.concurrency)

    def _split(self, name: str) -> list[Path]:
        """Folders of tasks, or ``pool`` / ``pool:generated`` (that pool's tasks of this split)."""
        entries, pools = getattr(self.config.tasks, name), {"pool": pool_dir, "pool:generated": ensure_default_pool}
        pooled = [Path(t.path) for e in entries if e in pools for t in load_pool(pools[e](), splits=[name], allow_test=True)]
        folders = [self.config.path(e) for e in entries if e not in pools]
        found = list(dict.fromkeys((split_tasks(folders, name, f"tasks.{name}") if folders else []) + pooled))
        if not found:
            raise ConfigError(f"tasks.{name}: {', '.join(entries)} hold no {name} tasks")
        return found

    def rel(self, path: Path | str) -> str:
        try:
            return str(Path(path).resolve().relative_to(self.out.resolve()))
        except ValueError:
            return str(Path(path).resolve())

    def _time(self, key: str, seconds: float) -> None:
        self.timings[key] = round(self.timings.get(key, 0.0) + seconds, 1)
        write_atomic(self.out / "timings.json", json.dumps(self.timings, indent=1))

    def _stage_dir(self, index: int, name: str) -> Path:
        return self.out / f"{index:02d}-{name}"

    def _validate(self, checkpoint: Path) -> dict[str, Any]:
        """Mean@k of the checkpoint's actor on the validation split."""
        return self._score(checkpoint, self.splits["validation"], self.config.validation)

    def _score(self, checkpoint: Path, tasks: list[Path], scoring: Scoring) -> dict[str, Any]:
        with self.seat.playing(checkpoint) as backend:
            return evaluate(backend, tasks, self.play, k=scoring.k, temperature=scoring.temperature,
                            seed=scoring.seed)

    # -- the run
    def run(self) -> dict[str, Any]:
        try:
            return self._run()
        finally:
            self.seat.close()

    def _run(self) -> dict[str, Any]:
        start = self.config.path(self.config.start)
        base = Pair.load(start)  # a bad start fails before anything is played
        del base
        stages: list[dict[str, Any]] = []
        parent = self._base(start)
        stages.append(parent)
        self._write_manifest(stages, None)
        for i, stage in enumerate(self.config.stages, 1):
            directory = self._stage_dir(i, stage.name)
            done = directory / STAGE_FILE
            if done.is_file() and json.loads(done.read_text()).get("status") == "complete":
                record = json.loads(done.read_text())
            else:
                t0 = time.perf_counter()
                self.log(f"loop: stage {stage.name} ({stage.kind}) from {parent['kept']['path']}")
                record = (self._rsr if stage.kind == "rsr" else self._rpr)(i, stage, parent, directory, stages)
                write_atomic(done, json.dumps(record, indent=1, sort_keys=True))
                self._time(stage.name, time.perf_counter() - t0)
            stages.append(record)
            self._write_manifest(stages, None)
            kill_point(f"after-{stage.name}")
            parent = record
        final = self._final(stages)
        return self._write_manifest(stages, final)

    def _write_manifest(self, stages: list[dict[str, Any]], final: dict[str, Any] | None) -> dict[str, Any]:
        manifest = {"kind": "terminal-env-loop", "name": self.config.name,
                    "status": "complete" if final is not None else "running",
                    "config": self.config.public(), "config_digest": self.config.digest(),
                    "software": _software(), "seed": self.config.seed,
                    "data": {split: {"tasks": len(paths), "digest": _tasks_digest(paths)}
                             for split, paths in self.splits.items()},
                    "stages": stages, "final": final}
        write_atomic(self.out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
        write_loop_report(self.out, manifest)
        return manifest

    def _candidate(self, name: str, checkpoint: Path, validation: dict[str, Any]) -> dict[str, Any]:
        meta = json.loads((checkpoint / "pair.json").read_text())
        return {"name": name, "checkpoint": {"id": meta["id"], "path": self.rel(checkpoint)},
                "validation": {k: validation.get(k) for k in ("mean", "ci_low", "ci_high", "n_tasks", "reward_mean",
                                                               "episodes", "masked")},
                "per_task": validation.get("per_task", {}), "kept": False, "reason": ""}

    def _choose(self, candidates: list[dict[str, Any]]) -> dict[str, Any]:
        """The best candidate on validation (ties: the earlier); the others with their reason."""
        best = max(range(len(candidates)), key=lambda i: (candidates[i]["validation"]["mean"] or 0.0, -i))
        kept = candidates[best]
        kept["kept"], kept["reason"] = True, (
            f"best validation Mean@{self.config.validation.k} ({kept['validation']['mean']})"
            + (" (ties go to the earlier candidate)" if sum(c["validation"]["mean"] == kept["validation"]["mean"]
                                                             for c in candidates) > 1 else ""))
        for c in candidates:
            if not c["kept"]:
                c["reason"] = (f"validation {c['validation']['mean']} below the kept {kept['validation']['mean']}"
                               if (c["validation"]["mean"] or 0.0) < (kept["validation"]["mean"] or 0.0)
                               else f"ties with the kept {kept['name']}, which came earlier")
        return {"id": kept["checkpoint"]["id"], "path": kept["checkpoint"]["path"], "candidate": kept["name"],
                "reason": kept["reason"], "validation": kept["validation"]}

    def _stage_record(self, index: int, name: str, kind: str, parent: dict[str, Any] | None,
                      candidates: list[dict[str, Any]], hyperparameters: dict[str, Any],
                      **more: Any) -> dict[str, Any]:
        return {"name": name, "kind": kind, "index": index, "status": "complete",
                "parent": {"id": parent["kept"]["id"], "path": parent["kept"]["path"], "stage": parent["name"]}
                if parent else None,
                "candidates": candidates, "kept": self._choose(candidates), "hyperparameters": hyperparameters,
                **more}

    def _base(self, start: Path) -> dict[str, Any]:
        directory = self._stage_dir(0, "base")
        done = directory / STAGE_FILE
        if done.is_file():
            return json.loads(done.read_text())
        t0 = time.perf_counter()
        validation = self._validate(start)
        record = self._stage_record(0, "base", "base", None, [self._candidate("start", start, validation)],
                                    {"start": self.rel(start)})
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(done, json.dumps(record, indent=1, sort_keys=True))
        self._time("base", time.perf_counter() - t0)
        return record

    def _kept_path(self, record: dict[str, Any]) -> Path:
        p = Path(record["kept"]["path"])
        return p if p.is_absolute() else self.out / p

    def _start_candidate(self, parent: dict[str, Any], checkpoint: Path | None = None) -> dict[str, Any]:
        """The stage's starting point as its first candidate: the parent's kept checkpoint and its
        validation (the same actor, tasks and seeds: not played again)."""
        path = checkpoint or self._kept_path(parent)
        meta = json.loads((path / "pair.json").read_text())
        kept = next(c for c in parent["candidates"] if c["kept"])
        return {**copy.deepcopy(kept), "name": "start", "checkpoint": {"id": meta["id"], "path": self.rel(path)},
                "kept": False, "reason": ""}

    # -- RSR
    def _rsr(self, index: int, stage: RSRStage, parent: dict[str, Any], directory: Path,
             stages: list[dict[str, Any]]) -> dict[str, Any]:
        start = self._kept_path(parent)
        rsr = self.rsr_config(index, stage, start, stages)
        run = RSRRun(directory / "rsr", rsr, log=self.log)
        funnel = run.run()
        kill_point(f"{stage.name}-rsr")
        dataset = directory / "rsr" / "dataset" / "train.jsonl"
        records = read_records(dataset) if dataset.is_file() else []
        collected = _solved(directory / "rsr" / "collect")
        candidates = [self._start_candidate(parent)]
        hyper = {"sft": stage.sft.model_dump(), "harnesses": stage.harnesses, "attempts": stage.attempts,
                 "roles": {r: rsr.role(r).describe(r) for r in ("collector", "planner", "reviewer", "executor")},
                 "mode": rsr.mode(), "critic": "frozen (SFT trains the actor alone)",
                 "mix_previous": stage.mix_previous}
        before = [s for s in stages if s["kind"] == "rsr"]
        earlier = set(before[-1]["solved_train_tasks"]) if before else None
        more = {"funnel": _funnel_summary(funnel), "solved_train_tasks": collected,
                "newly_solved_vs_previous_rsr": sorted(set(collected) - earlier) if earlier is not None else None,
                # the digest of what SFT trains on (the file also holds run-specific ids and timings)
                "data": {"records": len(records), "path": self.rel(dataset),
                         "mixed_in": {self.rel(k): sum(r.get("mixed_from") == k for r in records)
                                      for k in rsr.build.mix},
                         "messages_digest": _digest_json([r.get("messages") for r in records])}}
        if records:
            candidates += self._sft(start, records, stage, directory)
        else:
            more["note"] = "RSR produced no SFT records: the stage keeps its starting point"
        return self._stage_record(index, stage.name, "rsr", parent, candidates, hyper, **more)

    def rsr_config(self, index: int, stage: RSRStage, start: Path, stages: list[dict[str, Any]]) -> RSRConfig:
        """The RSR run of stage ``index``: the actor at ``start`` collects (and plays the other roles
        with ``self``), the previous RSR stage's records mixed in with ``mix_previous``."""
        c = self.config
        collector = Role(**self.seat.collector(start, {
            "temperature": c.play.rollout_temperature, "max_new_tokens": c.play.max_new_tokens,
            "max_input_tokens": c.play.max_input_tokens}))
        rsr = RSRConfig(tasks=[str(p) for p in self.splits["train"]], harnesses=list(stage.harnesses),
                        collector=collector, attempts=stage.attempts, max_turns=c.play.max_turns,
                        seed=c.seed * 1000 + index, round=stage.name, concurrency=c.play.concurrency)
        if stage.self_roles:
            rsr = rsr.with_self()
        for role, override in stage.roles.items():
            rsr = rsr.model_copy(update={role: Role(**override)})
        build: dict[str, Any] = {}
        if stage.max_per_task:
            build["max_per_task"] = stage.max_per_task
        previous = [s for s in stages if s["kind"] == "rsr" and s["data"]["records"]]
        if stage.mix_previous and previous:
            build["mix"] = {str(self.out / previous[-1]["data"]["path"]): stage.mix_previous}
            build["seed"] = c.seed * 1000 + index
        if build:
            rsr = rsr.model_copy(update={"build": rsr.build.model_copy(update=build)})
        return rsr

    def _sft(self, start: Path, records: list[dict[str, Any]], stage: RSRStage, directory: Path) -> list[dict]:
        pair = Pair.load(start)
        samples = sft_samples(records, HFChatTokenizer(pair.tokenizer, "actor"))
        trainer = SFT(pair, samples, SFTConfig(epochs=stage.sft.epochs, lr=stage.sft.lr,
                                               batch_size=stage.sft.batch_size, seed=self.config.seed))
        epochs = [directory / "sft" / f"epoch-{e}" for e in range(1, stage.sft.epochs + 1)]
        done = [d for d in epochs if (d / "validation.json").is_file() and (d / "trainer_state.pt").is_file()]
        done = epochs[:len(done)] if done == epochs[:len(done)] else []
        if done:  # resume after the last complete epoch: its weights and optimizer state
            loaded = Pair.load(done[-1])
            pair.actor.load_state_dict(loaded.actor.state_dict())
            pair.meta = loaded.meta
            trainer.load_state_dict(load_state(done[-1])["sft"])
        candidates = [self._candidate(d.name, d, json.loads((d / "validation.json").read_text())) for d in done]
        for out in epochs[len(done):]:
            if out.exists():  # a half-written epoch of a killed run
                shutil.rmtree(out)
            loss = trainer.epoch()
            self.log(f"sft {out.name}: loss {loss:.4f}")
            pair.save(out, stage="sft", metrics={"sft": trainer.report()})
            save_state(out, {"sft": trainer.state_dict()})
            validation = self._validate(out)
            write_atomic(out / "validation.json", json.dumps(validation, indent=1, sort_keys=True))
            candidates.append(self._candidate(out.name, out, validation))
            kill_point(f"{stage.name}-{out.name}")
        return candidates

    # -- RPR
    def _rpr(self, index: int, stage: RPRStage, parent: dict[str, Any], directory: Path,
             stages: list[dict[str, Any]]) -> dict[str, Any]:
        c = self.config
        start = self._kept_path(parent)
        calibrated = directory / "critic"
        report_file = directory / "critic.json"
        if not (calibrated / "pair.json").is_file():
            pair = Pair.load(start)
            with self.seat.playing(start, pair) as backend:
                trajectories = play(backend, self.splits["train"], self.play,
                                    attempts=stage.critic.attempts, seed=c.seed * 1_000_000 + 500_000 + index)
            batch, skipped = to_episodes(trajectories, reward=c.play.reward, multi_segment="drop",
                                         weights=pair_version(pair.meta["actor"], 0))
            cc = stage.critic
            try:
                report = recalibrate(pair, batch, CriticConfig(
                    epochs=cc.epochs, lr=cc.lr, head_lr=cc.head_lr, normalize_returns=cc.normalize_returns,
                    holdout=cc.holdout, target_explained_variance=cc.target_explained_variance,
                    batch_size=cc.batch_size, seed=c.seed))
            except ConfigError as e:  # e.g. held-out returns that do not vary: nothing to measure
                report = {"refused": str(e), "explained_variance": None, "reached": False}
            report["skipped"] = dict(skipped)
            report["episodes"] = len(batch)
            if calibrated.exists():
                shutil.rmtree(calibrated)
            pair.save(calibrated, stage="critic", metrics={"critic": report})
            write_atomic(report_file, json.dumps(report, indent=1, sort_keys=True, default=str))
            kill_point(f"{stage.name}-critic")
        calibration = json.loads(report_file.read_text())
        p = stage.ppo
        estimator = p.estimator
        gate = None
        if estimator == "gae":
            ev = calibration.get("explained_variance")
            if ev is None or ev < p.min_explained_variance:
                gate = (f"the critic's held-out explained variance is {ev}, below min_explained_variance="
                        f"{p.min_explained_variance}")
                estimator = p.fallback_estimator
        hyper = {"critic": stage.critic.model_dump(), "ppo": p.model_dump(), "estimator_used": estimator,
                 "kl_reference": "the stage's starting actor" if p.kl_coef > 0 else None,
                 "actor_lr_vs_previous_rpr": _lr_ratio(stages, p.actor_lr)}
        candidates = [self._start_candidate(parent, calibrated)]
        more: dict[str, Any] = {"critic": {k: calibration.get(k) for k in (
            "explained_variance", "initial_explained_variance", "correlation", "reached", "episodes", "held_out",
            "refused", "skipped")}, "gate": gate}
        if estimator is None:
            more["note"] = f"PPO did not run: {gate}, and no fallback_estimator is set"
            return self._stage_record(index, stage.name, "rpr", parent, candidates, hyper, **more)
        pair = Pair.load(calibrated)
        reference = copy.deepcopy(pair.actor).requires_grad_(False).eval() if p.kl_coef > 0 else None
        config = PPOConfig(epochs=p.epochs, batch_size=p.batch_size, actor_lr=p.actor_lr, critic_lr=p.critic_lr,
                           critic_head_lr=p.critic_head_lr, kl_coef=p.kl_coef, entropy_coef=p.entropy_coef,
                           clip=p.clip, estimator=estimator, min_explained_variance=p.min_explained_variance,
                           seed=c.seed, **p.extra)
        settings = RunSettings(iterations=p.iterations, tasks_per_iteration=p.tasks_per_iteration,
                               attempts=p.attempts, validate_every=p.validate_every, validate_start=False,
                               schedule=p.schedule, warmup=p.warmup, seed=c.seed * 100 + index, play=self.play,
                               validation_k=c.validation.k, validation_temperature=c.validation.temperature,
                               validation_seed=c.validation.seed)
        run = PPORun(directory / "ppo", pair, config, settings, train_tasks=self.splits["train"],
                     validation_tasks=self.splits["validation"], reference=reference,
                     generator=self.seat.ppo_generator(pair),
                     force=estimator != "gae", log=self.log, kill=lambda point: kill_point(f"{stage.name}-{point}"))
        summary = run.run()
        for v in summary["validation"]:
            candidates.append(self._candidate(f"step-{v['step']}", directory / "ppo" / "steps" /
                                              f"step-{v['step']:04d}", v))
        # per-step metrics without their wall times (those stay in ppo/metrics.jsonl)
        more["ppo"] = {"steps": summary["steps"], "metrics": [
            {k: v for k, v in m.items() if not k.startswith("seconds")} for m in summary["metrics"]]}
        return self._stage_record(index, stage.name, "rpr", parent, candidates, hyper, **more)

    # -- the final evaluation
    def _final(self, stages: list[dict[str, Any]]) -> dict[str, Any]:
        """Each stage's kept checkpoint on the test split, once (an actor kept by two stages is
        played once: the critic takes no part in playing), then the summary with intervals."""
        c = self.config
        final_dir = self.out / "final"
        final_dir.mkdir(exist_ok=True)
        per_stage: dict[str, dict[str, dict[str, float]]] = {}
        for record in stages:
            path = self._kept_path(record)
            meta = json.loads((path / "pair.json").read_text())
            cache = final_dir / f"{meta['actor']}.json"
            if not cache.is_file():
                t0 = time.perf_counter()
                result = self._score(path, self.splits["test"], c.evaluation)
                write_atomic(cache, json.dumps(result, indent=1, sort_keys=True))
                self._time(f"test-{record['name']}", time.perf_counter() - t0)
                kill_point(f"final-{record['name']}")
            result = json.loads(cache.read_text())
            per_stage[record["name"]] = result["per_task"]
        names = [r["name"] for r in stages]
        summary = final_summary(names, per_stage, metric="strict_success", seed=c.seed)
        summary["reward"] = final_summary(names, per_stage, metric="reward", seed=c.seed)
        return {"split": "test", "k": c.evaluation.k, "temperature": c.evaluation.temperature, **summary}


def _diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The keys whose values differ between two JSON documents."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            out += _diff(old.get(k), new.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if old == new else [prefix or "(the whole config)"]


def _lr_ratio(stages: list[dict[str, Any]], lr: float) -> float | None:
    previous = [s for s in stages if s["kind"] == "rpr"]
    if not previous:
        return None
    before = previous[-1]["hyperparameters"]["ppo"]["actor_lr"]
    return round(lr / before, 6) if before else None


def _solved(collect_dir: Path) -> list[str]:
    """The train tasks with at least one verified success among the collected episodes."""
    return sorted({f.parent.name for f in collect_dir.glob("*/*.json")
                   if (t := Trajectory.load(f)).strict_success and not t.masked})


def _funnel_summary(funnel: dict[str, Any]) -> dict[str, Any]:
    """The RSR funnel without its wall times (those go to ``timings.json``)."""
    return {k: v for k, v in funnel.items() if k not in ("stages", "time")}
