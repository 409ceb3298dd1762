"""Recursive Self-Rewrite, stage by stage, in one run directory (each stage resumable).

::

    collect   the policy on the train split under several harnesses, k attempts each; only strict
              successes of the protected verifier are kept    -> collect/<task>/<harness>-<k>.json
    plan      each kept trajectory -> a harness-neutral playbook -> playbooks/<task>/<harness>-<k>.json
    review    leak checks, then a model reviewer if given         -> reviews/<task>/<harness>-<k>.json
    execute   each accepted playbook re-run from scratch under the generic harness, by a model
              guided by the playbook or by replaying its steps -> execute/<task>/<harness>-<k>.json
    build     verified re-runs of the playbooks on disk -> chat JSONL, card, funnel (:mod:`.dataset`)

Every stage skips what it already wrote, so a killed run goes on where it stopped (masked
episodes, those an infrastructure failure ended, are played again; a planner or reviewer error is
recorded beside the file it would have written and retried); ``all`` runs them in order. The
validation and test splits are refused as input: checkpoints are chosen on the validation split
and scored on the test split, so their solutions must never become training data.

The roles and what a resume may change are in :mod:`.config`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable

from ..actions import Command, Keys, action_to_text
from ..errors import ConfigError
from ..fileio import write_atomic
from ..harness import harness_class
from ..models.base import EpisodeAware
from ..models.registry import make_backend
from ..models.simple import ScriptedBackend, fenced
from ..models.typed import UntypeableSolution, typed_commands
from ..report.rsr import rsr_page
from ..scale.rollout import RolloutPool
from ..tasks import Task, load_task
from ..tasks.load import find_tasks
from ..trajectory import Trajectory
from .config import ANSWER_PARAMS, FROZEN_BY, ROLES, RSRConfig, Role, changed_settings
from .dataset import build_dataset
from .funnel import funnel
from .plan import PROMPTS, DeterministicPlanner, ModelPlanner
from .playbook import Playbook, Verdict
from .review import LeakChecks, ModelReviewer, review

STAGES = ("collect", "plan", "review", "execute", "build")
#: what every dataset record says it is: text rendered by the generic harness, not tokens a policy sampled
RECORD_KIND = "rsr-rendered"


def _key(harness: str, attempt: int) -> str:
    return f"{harness}-{attempt}"


def episode_seed(base: int, task: str, harness: str, attempt: int) -> int:
    """A seed of its own for every episode, mixed from the run's seed, the task, the harness and
    the attempt (one seed for all would sample the same way across tasks and harnesses).

    >>> episode_seed(0, "a", "generic", 1) != episode_seed(0, "a", "generic", 2)
    True
    """
    blob = json.dumps([base, task, harness, attempt]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF


def task_keys(paths: list[Path]) -> dict[str, Path]:
    """A key per task that cannot collide: the directory's name, or where two tasks share a name,
    the name and a digest of the resolved path."""
    names: dict[str, int] = {}
    for p in paths:
        names[p.name] = names.get(p.name, 0) + 1
    out: dict[str, Path] = {}
    for p in paths:
        key = p.name if names[p.name] == 1 else f"{p.name}-{hashlib.sha256(str(p.resolve()).encode()).hexdigest()[:8]}"
        if key in out:
            raise ConfigError(f"the task {p} is given twice")
        out[key] = p
    return out


class GuidedBackend:
    """The executor as a model: the playbook is added to what the model is sent (never to the
    trajectory, whose conversation stays the task's own), and it plays under the generic harness.
    The inner backend is shared by every re-run (a local model is loaded once)."""

    def __init__(self, inner: Any, playbook: Playbook, prompt: str | Path | None = None):
        self.inner = inner
        path = Path(prompt) if prompt else PROMPTS / "executor.md"
        if not path.is_file():
            raise ConfigError(f"executor prompt {path} does not exist")
        steps = "\n".join(f"{i}. {s.why + chr(10) if s.why else ''}```bash\n{s.text()}\n```"
                          for i, s in enumerate(playbook.steps, 1))
        self.note = path.read_text().replace("{steps}", steps)
        self.name = f"executor:{getattr(inner, 'name', type(inner).__name__)}"
        self.weights_version = getattr(inner, "weights_version", None)

    def start_episode(self, env: Any, harness: Any) -> None:
        if hasattr(self.inner, "start_episode"):
            self.inner.start_episode(env, harness)

    def complete(self, messages: list[dict[str, Any]], **kw: Any) -> Any:
        sent = [dict(m) for m in messages]
        first = next((m for m in sent if m.get("role") == "user"), None)
        if first is not None:
            first["content"] = f"{first.get('content') or ''}\n\n{self.note}"
        return self.inner.complete(sent, **kw)


def replay_replies(playbook: Playbook, with_reasons: bool) -> list[str]:
    """The replay executor's replies: each step as the generic harness writes it (a command with
    the timeout its source gave, if any; keystrokes as ``#!keys``), its reason before it when asked."""
    replies = []
    for s in playbook.steps:
        action = Keys(keys=list(s.keys)) if s.keys else Command(command=s.command, timeout=s.timeout)
        block = fenced(action_to_text(action))
        replies.append(f"{s.why}\n\n{block}" if with_reasons and s.why else block)
    return [*replies, fenced("#!submit")]


class RSRRun:
    """One self-rewrite run in ``out``. ``config``: the run's settings (None: those saved in
    ``out``); a resumed run may change only what its files do not depend on (:mod:`.config`)."""

    def __init__(self, out: str | Path, config: RSRConfig | None = None, *,
                 log: Callable[[str], None] = lambda m: None, client: Any = None):
        self.out = Path(out)
        self.log = log
        self.client = client
        saved = self.out / "rsr.json"
        if saved.is_file():
            old = load_config(saved)
            if config is not None:
                produced = {s for s in FROZEN_BY if any((self.out / s).glob("*/*.json"))}
                changed = changed_settings(old, config, produced)
                if changed:
                    raise ConfigError(
                        f"{saved}: files of this run were made with other settings ({'; '.join(changed)}); "
                        "resume it with the same ones, or start another run with another --out")
            config = config or old
        if config is None:
            raise ConfigError(f"{self.out} holds no self-rewrite run (no rsr.json); give --tasks to start one")
        self.config = config
        self.tasks = self._load_tasks()
        self._backends: dict[str, Any] = {}
        self._checks: dict[str, LeakChecks] = {}
        self.out.mkdir(parents=True, exist_ok=True)
        write_atomic(saved, config.model_dump_json(indent=1))

    # ------------------------------------------------------------------ tasks and roles
    def _load_tasks(self) -> dict[str, Task]:
        if not self.config.harnesses:
            raise ConfigError("give at least one harness (the recipe collects under three)")
        for name in self.config.harnesses:
            harness_class(name)  # an unknown harness is refused before anything runs
        if self.config.collector.spec is None:
            raise ConfigError("the collector needs a policy: --model hf:DIR, openai:NAME or typed-oracle")
        paths = find_tasks(self.config.tasks)
        if not paths:
            raise ConfigError(f"no task directories in {', '.join(self.config.tasks)}")
        tasks = {key: load_task(p) for key, p in task_keys(paths).items()}
        held = [f"{t.name} ({t.split or 'no split'})" for t in tasks.values() if t.split != "train"]
        if held:
            raise ConfigError(
                "self-rewrite data comes from the train split only, and these tasks are not in it: "
                + ", ".join(held[:10]) + (" ..." if len(held) > 10 else "")
                + ". Checkpoints are chosen on the validation split and scored on the test split, so "
                "their solutions must never become training data; give only train tasks, or add "
                "--only-train to take the train tasks of the folders given")
        return tasks

    def backend(self, role: str) -> Any:
        """The role's backend, built once per run and shared by its uses (in self-rewrite one
        local model serves every role)."""
        r: Role = self.config.role(role)
        key = json.dumps([r.spec, r.options], sort_keys=True, default=str)
        if key not in self._backends:
            try:
                self._backends[key] = make_backend(r.spec or "", **r.options)
            except (ConfigError, OSError, ValueError) as exc:
                raise ConfigError(f"the {role} {r.spec!r} cannot be built: {exc}") from None
        return self._backends[key]

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

    def _untypeable(self, task: Task) -> str | None:
        """Why the typed oracle cannot play ``task`` (checked here, before any episode: under Ray
        the error would come back from a worker and stop the whole stage)."""
        main = task.solution_files().get("solve.sh") if task.has_solution else None
        if main is None:
            return f"task {task.name!r}: no solve.sh to type"
        try:
            typed_commands(main.decode() if isinstance(main, bytes) else Path(main).read_text(),
                           source=f"task {task.name!r} solve.sh")
        except UntypeableSolution as exc:
            return str(exc)
        return None

    def collect(self) -> None:
        cfg, c = self.config, self.config.collector
        jobs = []
        for name, task in self.tasks.items():
            why = self._untypeable(task) if c.spec == "typed-oracle" else None
            for h in cfg.harnesses:
                for k in range(1, cfg.attempts + 1):
                    path = self.path("collect", name, _key(h, k))
                    if why is not None:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        write_atomic(path.with_suffix(".error"), why)
                    elif not path.with_suffix(".error").is_file() and (
                            not path.is_file() or Trajectory.load(path).masked):  # masked: played again
                        jobs.append((name, h, k))
        self.log(f"collect: {len(jobs)} episode(s) to play ({c.spec}, {', '.join(cfg.harnesses)})")
        if not jobs:
            return
        # A model policy is built once here and shared with the other roles; a model-free one
        # (episode state) and anything under Ray go as the spec.
        shared = not c.model_free and cfg.ray_address is None
        policy = self.backend("collector") if shared else c.spec
        options = {} if shared else dict(c.options)
        params = c.sampling() if c.params else None

        async def one(pool: RolloutPool, name: str, harness: str, k: int) -> None:
            path = self.path("collect", name, _key(harness, k))
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                traj = await pool.rollout(policy, self.tasks[name].path, harness, params=params,
                                          seed=episode_seed(cfg.seed, name, harness, k),
                                          max_turns=cfg.max_turns, **options)
            except UntypeableSolution as exc:  # this task cannot be played by this policy
                write_atomic(path.with_suffix(".error"), str(exc))
                return
            traj.extra["rsr"] = {"task_key": name, "attempt": k, "round": cfg.round}
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
        if cfg.planner.spec:
            planner = ModelPlanner(self.backend("planner"), cfg.planner.prompt,
                                   params=cfg.planner.sampling(ANSWER_PARAMS))
        for task, key, traj in self.kept():
            path = self.path("playbooks", task, key)
            if path.is_file():
                continue
            t = self.tasks[task]
            try:
                playbook = planner.plan(
                    traj, instruction=t.instruction, task_path=str(t.path),
                    task_digest=f"{t.tests_digest}:{t.environment_digest}",
                    attempt=int(key.rsplit("-", 1)[1]), source_path=str(self.path("collect", task, key)))
            except Exception as exc:  # noqa: BLE001 - one reply must not stop the stage; recorded, retried
                _record_error(path, "plan", exc)
                self.log(f"plan: {task}/{key} failed ({type(exc).__name__}: {exc}); recorded, retried on resume")
                continue
            path.with_suffix(".error").unlink(missing_ok=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            playbook.save(path)

    def review(self) -> None:
        cfg = self.config
        model = None
        if cfg.reviewer.spec:
            model = ModelReviewer(self.backend("reviewer"), cfg.reviewer.prompt,
                                  params=cfg.reviewer.sampling(ANSWER_PARAMS))
        for task, key, path in self._items("playbooks"):
            out = self.path("reviews", task, key)
            if out.is_file():
                continue
            playbook = Playbook.load(path)
            try:
                verdict = review(playbook, self.leak_checks(task), model)
            except Exception as exc:  # noqa: BLE001 - recorded beside the verdict, retried on resume
                _record_error(out, "review", exc)
                self.log(f"review: {task}/{key} failed ({type(exc).__name__}: {exc}); recorded, retried on resume")
                continue
            out.with_suffix(".error").unlink(missing_ok=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            verdict.model_copy(update={"playbook_key": playbook.key}).save(out)

    def leak_checks(self, task: str) -> LeakChecks:
        if task not in self._checks:
            t = self.tasks[task]
            self._checks[task] = LeakChecks(t.path, tests_dir=t.tests_dir, environment_dir=t.environment_dir,
                                            instruction=t.instruction)
        return self._checks[task]

    def accepted(self) -> list[tuple[str, str, Playbook]]:
        """Playbooks whose verdict accepts them, and was given to the playbook now on disk."""
        out = []
        for task, key, path in self._items("reviews"):
            playbook = Playbook.load(self.path("playbooks", task, key))
            verdict = Verdict.load(path)
            if verdict.accepted and verdict.playbook_key == playbook.key:
                out.append((task, key, playbook))
        return out

    def execute(self) -> None:
        cfg, e = self.config, self.config.executor
        todo = []
        for task, key, playbook in self.accepted():
            path = self.path("execute", task, key)
            if path.is_file():
                done = Trajectory.load(path)
                meta = done.extra.get("rsr") or {}
                if not done.masked and meta.get("key") == playbook.key and meta.get("executor") == (e.spec or "replay") \
                        and (e.spec or meta.get("with_reasons") == cfg.build.with_reasons):
                    continue  # done, for this playbook (a masked or stale re-run is played again)
            todo.append((task, key, playbook))
        self.log(f"execute: {len(todo)} playbook(s) to re-run under the generic harness")
        if not todo:
            return
        inner = self.backend("executor") if e.spec else None
        params = e.sampling() if e.spec and e.params else None

        def backend_for(playbook: Playbook) -> Callable[[], Any]:
            if isinstance(inner, EpisodeAware):  # it keeps an episode's state: one per re-run
                return lambda: GuidedBackend(make_backend(e.spec or "", **e.options), playbook, e.prompt)
            if inner is not None:  # one model for every re-run (a local one is loaded once)
                return lambda: GuidedBackend(inner, playbook, e.prompt)
            replies = replay_replies(playbook, cfg.build.with_reasons)

            def replay() -> ScriptedBackend:
                b = ScriptedBackend(replies, name="rsr-replay")
                b.native_harness = "generic"
                return b
            return replay

        async def one(pool: RolloutPool, task: str, key: str, playbook: Playbook) -> None:
            t = self.tasks[task]
            path = self.path("execute", task, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            turns = cfg.max_turns if inner is not None else len(playbook.steps) + 2
            harness, attempt = key.rsplit("-", 1)
            traj = await pool.rollout(backend_for(playbook), t.path, "generic", max_turns=turns, params=params,
                                      seed=episode_seed(cfg.seed + 1, task, harness, int(attempt)))
            traj.extra["rsr"] = {"playbook": str(self.path("playbooks", task, key)), "key": playbook.key,
                                 "executor": e.spec or "replay", "with_reasons": cfg.build.with_reasons}
            traj.save(path)

        async def main() -> None:
            async with self._pool() as pool:
                await asyncio.gather(*(one(pool, *item) for item in todo))

        asyncio.run(main())

    def build(self) -> dict[str, Any]:
        """The dataset (``dataset/train.jsonl``, its card) and the funnel (``dataset/funnel.json``)."""
        build_dataset(self)
        self.report()
        return self._write_funnel()

    def _write_funnel(self) -> dict[str, Any]:
        funnel = self.funnel()
        write_atomic(self.out / "dataset" / "funnel.json", json.dumps(funnel, indent=1))
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

    def funnel(self) -> dict[str, Any]:
        return funnel(self)

    def run(self, stages: tuple[str, ...] = STAGES) -> dict[str, Any]:
        for stage in stages:
            t0 = time.monotonic()
            getattr(self, stage)()
            seconds = time.monotonic() - t0
            self._add_time(stage, seconds)
            self.log(f"{stage}: done in {seconds:.1f} s")
        if (self.out / "dataset").is_dir():
            return self._write_funnel()  # with this command's times
        return self.funnel()

    def _add_time(self, stage: str, seconds: float) -> None:
        """Wall time per stage, summed over every command that ran it (``OUT/stages.json``)."""
        path = self.out / "stages.json"
        times = json.loads(path.read_text()) if path.is_file() else {}
        entry = times.setdefault(stage, {"seconds": 0.0, "runs": 0})
        entry["seconds"] = round(entry["seconds"] + seconds, 3)
        entry["runs"] += 1
        write_atomic(path, json.dumps(times, indent=1))


def _record_error(path: Path, stage: str, exc: BaseException) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path.with_suffix(".error"), f"{stage}: {type(exc).__name__}: {exc}"[:2000])


def load_config(path: Path) -> RSRConfig:
    """``rsr.json``, read; a run written before the roles were settings of their own is read too."""
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}); is this a self-rewrite run directory?") from None
    if isinstance(data, dict) and "model" in data:  # the first layout: one model, roles as specs
        options = data.pop("backend_options", {}) or {}
        data["collector"] = {"spec": data.pop("model"), "options": options}
        for role in ROLES[1:]:
            spec, prompt = data.pop(role, None), data.pop(f"{role}_prompt", None)
            data[role] = {"spec": spec, "prompt": prompt,
                          "options": dict(options) if role == "executor" and spec else {}}
    try:
        return RSRConfig.model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: not a self-rewrite run's settings ({str(exc).splitlines()[0]})") from None
