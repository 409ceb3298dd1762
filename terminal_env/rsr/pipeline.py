"""Recursive Self-Rewrite, stage by stage, in one run directory (each stage resumable).

::

    collect   one policy on the train split under several harnesses, k attempts each; only strict
              successes of the protected verifier are kept     -> collect/<task>/<harness>-<k>.json
    plan      each kept trajectory -> a harness-neutral playbook -> playbooks/<task>/<harness>-<k>.json
    review    leak checks, then a model reviewer if given         -> reviews/<task>/<harness>-<k>.json
    execute   each accepted playbook re-run from scratch under the generic harness; only strict
              successes are kept                                  -> execute/<task>/<harness>-<k>.json
    build     verified re-runs -> chat JSONL with an assistant-only loss mask and provenance,
              deduplicated                                        -> dataset/train.jsonl, funnel.json

Every stage skips what it already wrote, so a killed run goes on where it stopped; ``all`` runs them
in order. The validation and test splits are refused as input: checkpoints are chosen on the
validation split and scored on the test split, so their solutions must never become training data.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from ..actions import Command
from ..errors import ConfigError
from ..fileio import write_atomic
from ..harness import harness_class
from ..models.registry import make_backend
from ..models.simple import ScriptedBackend
from ..models.typed import UntypeableSolution
from ..report.rsr import rsr_page
from ..scale.rollout import RolloutPool
from ..tasks import Task, load_task
from ..tasks.load import find_tasks
from ..trajectory import Trajectory
from .plan import PROMPTS, DeterministicPlanner, ModelPlanner
from .playbook import Playbook, Verdict, reason_kinds
from .review import LeakChecks, ModelReviewer, review

STAGES = ("collect", "plan", "review", "execute", "build")
HARNESSES = ("generic", "terminus", "tool-calling")
#: what every dataset record says it is: text rendered by the generic harness, not tokens a policy sampled
RECORD_KIND = "rsr-rendered"


class RSRConfig(BaseModel):
    """What a run is; saved as ``rsr.json``. A resumed run must be the same run."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[str]
    harnesses: list[str] = Field(default_factory=lambda: list(HARNESSES))
    model: str = "typed-oracle"
    backend_options: dict[str, Any] = Field(default_factory=dict)
    attempts: int = Field(1, ge=1)
    concurrency: int = Field(2, ge=1)
    max_turns: int = Field(50, ge=1)
    ray_address: str | None = None
    planner: str | None = None  # a model spec; None: the deterministic planner alone
    planner_prompt: str | None = None
    reviewer: str | None = None  # a model spec; None: the leak checks alone
    reviewer_prompt: str | None = None
    executor: str | None = None  # a model spec; None: the steps are replayed as they are
    executor_prompt: str | None = None


def _key(harness: str, attempt: int) -> str:
    return f"{harness}-{attempt}"


class GuidedBackend:
    """The executor as a model: the playbook is added to what the model is sent (never to the
    trajectory, whose conversation stays the task's own), and it plays under the generic harness."""

    def __init__(self, inner: Any, playbook: Playbook, prompt: str | Path | None = None):
        self.inner = inner
        path = Path(prompt) if prompt else PROMPTS / "executor.md"
        if not path.is_file():
            raise ConfigError(f"executor prompt {path} does not exist")
        steps = "\n".join(f"{i}. {s.why + chr(10) if s.why else ''}```bash\n{s.command}\n```"
                          for i, s in enumerate(playbook.steps, 1))
        self.note = path.read_text().replace("{steps}", steps)
        self.name = f"executor:{getattr(inner, 'name', type(inner).__name__)}"

    def start_episode(self, env: Any, harness: Any) -> None:
        if hasattr(self.inner, "start_episode"):
            self.inner.start_episode(env, harness)

    def complete(self, messages: list[dict[str, Any]], **kw: Any) -> Any:
        sent = [dict(m) for m in messages]
        first = next((m for m in sent if m.get("role") == "user"), None)
        if first is not None:
            first["content"] = f"{first.get('content') or ''}\n\n{self.note}"
        return self.inner.complete(sent, **kw)


class RSRRun:
    """One self-rewrite run in ``out``."""

    def __init__(self, out: str | Path, config: RSRConfig | None = None, *,
                 log: Callable[[str], None] = lambda m: None, client: Any = None):
        self.out = Path(out)
        self.log = log
        self.client = client
        saved = self.out / "rsr.json"
        if saved.is_file():
            old = RSRConfig.model_validate_json(saved.read_text())
            if config is not None and config != old:
                changed = sorted(k for k in RSRConfig.model_fields if getattr(config, k) != getattr(old, k))
                raise ConfigError(f"{saved}: this run was made with other settings ({', '.join(changed)} "
                                  "differ); resume it with the same ones, or use another --out")
            config = old
        if config is None:
            raise ConfigError(f"{self.out} holds no RSR run (no rsr.json); give the tasks to start one")
        self.config = config
        self.tasks = self._load_tasks()
        self.out.mkdir(parents=True, exist_ok=True)
        write_atomic(saved, config.model_dump_json(indent=1))

    # ------------------------------------------------------------------ tasks
    def _load_tasks(self) -> dict[str, Task]:
        if not self.config.harnesses:
            raise ConfigError("give at least one harness (the recipe collects under three)")
        for name in self.config.harnesses:
            harness_class(name)  # an unknown harness is refused before anything runs
        paths = find_tasks(self.config.tasks)
        if not paths:
            raise ConfigError(f"no task directories in {', '.join(self.config.tasks)}")
        tasks = {p.name: load_task(p) for p in paths}
        held = [f"{t.name} ({t.split or 'no split'})" for t in tasks.values() if t.split != "train"]
        if held:
            raise ConfigError(
                "self-rewrite data comes from the train split only, and these tasks are not in it: "
                + ", ".join(held[:10]) + (" ..." if len(held) > 10 else "")
                + ". Checkpoints are chosen on the validation split and scored on the test split, so "
                "their solutions must never become training data; give only train tasks, or add "
                "--only-train to take the train tasks of the folders given")
        return tasks

    def path(self, stage: str, task: str, key: str) -> Path:
        return self.out / stage / task / f"{key}.json"

    def _items(self, stage: str) -> list[tuple[str, str, Path]]:
        """(task, key, path) of a stage's files, in a stable order."""
        base = self.out / stage
        if not base.is_dir():
            return []
        return [(p.parent.name, p.stem, p) for p in sorted(base.glob("*/*.json"))]

    # ------------------------------------------------------------------ stages
    def _pool(self) -> RolloutPool:
        return RolloutPool(max_concurrency=self.config.concurrency, client=self.client,
                           ray_address=self.config.ray_address)

    def collect(self) -> None:
        cfg = self.config
        jobs = [(name, h, k) for name in self.tasks for h in cfg.harnesses for k in range(1, cfg.attempts + 1)
                if not self.path("collect", name, _key(h, k)).is_file()
                and not self.path("collect", name, _key(h, k)).with_suffix(".error").is_file()]
        self.log(f"collect: {len(jobs)} episode(s) to play ({cfg.model}, {', '.join(cfg.harnesses)})")

        async def one(pool: RolloutPool, name: str, harness: str, k: int) -> None:
            path = self.path("collect", name, _key(harness, k))
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                traj = await pool.rollout(cfg.model, self.tasks[name].path, harness, seed=k,
                                          max_turns=cfg.max_turns, **cfg.backend_options)
            except UntypeableSolution as exc:  # this task cannot be played by this policy
                write_atomic(path.with_suffix(".error"), str(exc))
                return
            traj.save(path)

        async def main() -> None:
            async with self._pool() as pool:
                await asyncio.gather(*(one(pool, *j) for j in jobs))

        asyncio.run(main())

    def kept(self) -> list[tuple[str, str, Trajectory]]:
        """The collected strict successes (never a masked episode)."""
        out = []
        for task, key, path in self._items("collect"):
            traj = Trajectory.load(path)
            if traj.strict_success and not traj.masked:
                out.append((task, key, traj))
        return out

    def plan(self) -> None:
        cfg = self.config
        planner: DeterministicPlanner = DeterministicPlanner()
        if cfg.planner:
            planner = ModelPlanner(make_backend(cfg.planner), cfg.planner_prompt)
        for task, key, traj in self.kept():
            path = self.path("playbooks", task, key)
            if path.is_file():
                continue
            t = self.tasks[task]
            playbook = planner.plan(
                traj, instruction=t.instruction, task_path=str(t.path),
                task_digest=f"{t.tests_digest}:{t.environment_digest}",
                attempt=int(key.rsplit("-", 1)[1]), source_path=str(self.path("collect", task, key)))
            path.parent.mkdir(parents=True, exist_ok=True)
            playbook.save(path)

    def review(self) -> None:
        cfg = self.config
        model = ModelReviewer(make_backend(cfg.reviewer), cfg.reviewer_prompt) if cfg.reviewer else None
        checks: dict[str, LeakChecks] = {}
        for task, key, path in self._items("playbooks"):
            out = self.path("reviews", task, key)
            if out.is_file():
                continue
            t = self.tasks[task]
            if task not in checks:
                checks[task] = LeakChecks(t.path, tests_dir=t.tests_dir, environment_dir=t.environment_dir,
                                          instruction=t.instruction)
            verdict = review(Playbook.load(path), checks[task], model)
            out.parent.mkdir(parents=True, exist_ok=True)
            verdict.save(out)

    def accepted(self) -> list[tuple[str, str, Playbook]]:
        out = []
        for task, key, path in self._items("reviews"):
            if Verdict.load(path).accepted:
                out.append((task, key, Playbook.load(self.path("playbooks", task, key))))
        return out

    def execute(self) -> None:
        todo = []
        for task, key, playbook in self.accepted():
            path = self.path("execute", task, key)
            if path.is_file() and not Trajectory.load(path).masked:  # a masked re-run is tried again
                continue
            todo.append((task, key, playbook))
        self.log(f"execute: {len(todo)} playbook(s) to re-run under the generic harness")

        cfg = self.config

        def backend_for(playbook: Playbook, limit: float) -> Callable[[], Any]:
            if cfg.executor:
                return lambda: GuidedBackend(make_backend(cfg.executor, **cfg.backend_options), playbook,
                                             cfg.executor_prompt)
            actions = [Command(command=s.command, timeout=s.timeout or limit) for s in playbook.steps]
            return lambda: ScriptedBackend.of_actions(actions, name="rsr-executor")

        async def one(pool: RolloutPool, task: str, key: str, playbook: Playbook) -> None:
            t = self.tasks[task]
            path = self.path("execute", task, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            turns = cfg.max_turns if cfg.executor else len(playbook.steps) + 2
            traj = await pool.rollout(backend_for(playbook, t.agent_timeout), t.path, "generic", max_turns=turns)
            traj.extra["rsr"] = {"playbook": str(self.path("playbooks", task, key)), "key": playbook.key}
            traj.save(path)

        async def main() -> None:
            async with self._pool() as pool:
                await asyncio.gather(*(one(pool, *item) for item in todo))

        asyncio.run(main())

    def build(self) -> dict[str, Any]:
        """The dataset (``dataset/train.jsonl``) and the funnel (``dataset/funnel.json``)."""
        records, seen = [], set()
        order = {h: i for i, h in enumerate(self.config.harnesses)}
        verified = []
        for task, key, path in self._items("execute"):
            traj = Trajectory.load(path)
            if traj.strict_success and not traj.masked:
                verified.append((task, key, traj))
        verified.sort(key=lambda x: (x[0], order.get(x[1].rsplit("-", 1)[0], 99), int(x[1].rsplit("-", 1)[1])))
        for task, key, traj in verified:
            playbook = Playbook.load(self.path("playbooks", task, key))
            if (task, playbook.key) in seen:
                continue  # the same steps from another harness or attempt
            seen.add((task, playbook.key))
            verdict = Verdict.load(self.path("reviews", task, key))
            chat = traj.to_chat()
            records.append({
                "messages": chat["messages"],
                "loss_mask": [m.get("role") == "assistant" for m in chat["messages"]],
                "kind": RECORD_KIND,
                "sampled_tokens": False,
                "task": task,
                "task_digest": playbook.task_digest,
                "source_harness": playbook.source.harness,
                "source_trajectory_id": playbook.source.trajectory_id,
                "source_attempt": playbook.source.attempt,
                "policy": playbook.source.policy,
                "weights": playbook.source.weights,
                "playbook": [s.model_dump() for s in playbook.steps],
                "planner": playbook.planner,
                "review": verdict.model_dump(),
                "verifier": traj.verification,
                "rerun_trajectory_id": traj.id,
            })
        out = self.out / "dataset"
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "train.jsonl", "".join(json.dumps(r) + "\n" for r in records))
        funnel = self.funnel(records=len(records))
        write_atomic(out / "funnel.json", json.dumps(funnel, indent=1))
        self.report()
        return funnel

    def report(self) -> Path:
        """``OUT/report/rsr.html``: the funnel, and each playbook beside its source and re-run."""
        def load(path: Path, cls: Any) -> Any:
            return cls.load(path) if path.is_file() else None

        entries = [{"task": task, "key": key, "playbook": Playbook.load(path),
                    "verdict": load(self.path("reviews", task, key), Verdict),
                    "source": load(self.path("collect", task, key), Trajectory),
                    "rerun": load(self.path("execute", task, key), Trajectory)}
                   for task, key, path in self._items("playbooks")]
        (self.out / "report").mkdir(parents=True, exist_ok=True)
        return write_atomic(self.out / "report" / "rsr.html", rsr_page(entries, self.funnel()))

    # ------------------------------------------------------------------ the funnel
    def funnel(self, records: int | None = None) -> dict[str, Any]:
        cfg = self.config
        attempts = {h: 0 for h in cfg.harnesses}
        successes = {h: 0 for h in cfg.harnesses}
        solved_by: dict[str, set[str]] = {}
        unplayable = sum(1 for _ in (self.out / "collect").glob("*/*.error")) if (self.out / "collect").is_dir() else 0
        masked = 0
        for task, key, path in self._items("collect"):
            harness = key.rsplit("-", 1)[0]
            traj = Trajectory.load(path)
            attempts[harness] = attempts.get(harness, 0) + 1
            masked += traj.masked
            if traj.strict_success and not traj.masked:
                successes[harness] = successes.get(harness, 0) + 1
                solved_by.setdefault(task, set()).add(harness)
        rejected: dict[str, int] = {}
        for _, _, path in self._items("reviews"):
            for kind in set(reason_kinds(Verdict.load(path).reasons)):
                rejected[kind] = rejected.get(kind, 0) + 1
        reruns = [Trajectory.load(p) for _, _, p in self._items("execute")]
        only_other = sorted(t for t, hs in solved_by.items() if "generic" not in hs)
        in_records: set[str] = set()
        written = 0
        if (self.out / "dataset" / "train.jsonl").is_file():
            for line in (self.out / "dataset" / "train.jsonl").open():
                in_records.add(json.loads(line)["task"])
                written += 1
        return {
            "tasks": len(self.tasks),
            "attempts": attempts,
            "unplayable": unplayable,
            "masked": masked,
            "strict_successes": successes,
            "unique_tasks_solved": len(solved_by),
            "playbooks": len(self._items("playbooks")),
            "reviewed": len(self._items("reviews")),
            "rejected": rejected,
            "reruns": len(reruns),
            "reruns_verified": sum(t.strict_success and not t.masked for t in reruns),
            "reruns_masked": sum(t.masked for t in reruns),
            "records": records if records is not None else written,
            "tasks_in_records": len(in_records),
            "solved_only_under_other_harnesses": len(only_other),
            "solved_only_under_other_harnesses_in_records": len(set(only_other) & in_records),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def run(self, stages: tuple[str, ...] = STAGES) -> dict[str, Any]:
        for stage in stages:
            t0 = time.monotonic()
            getattr(self, stage)()
            self.log(f"{stage}: done in {time.monotonic() - t0:.1f} s")
        return self.funnel()
