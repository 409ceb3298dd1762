"""Soak test: many environments play full, verified episodes continuously for a wall time, on
loopback only. Never part of the default test run (``pytest`` does not collect ``benchmarks/``).

    python benchmarks/soak.py --envs 32 --minutes 10 [--out FILE.json]
    python benchmarks/soak.py --envs 4 --minutes 1              # a short smoke run

``--envs`` threads in one process share one Docker client and one warm pool (as
``benchmarks/scale.py throughput`` does) and play episodes of the protected ``word-stats`` task
(``tests/data/protected/word-stats``) until ``--minutes`` have passed; an episode in flight then
finishes. Each thread cycles through a mix of agents, so every environment sees each of them:

============  ========================================================  =================
agent         what it does                                              expected outcome
============  ========================================================  =================
oracle        the task's reference solution (``OracleBackend``)         passed
nop           submits at once                                           failed
timeout       ``sleep 60`` with a 2 s command timeout (Ctrl-C stops it)  failed
stubborn      ``sleep 60`` ignoring SIGINT, 2 s timeout (escalation)     failed
bigout        ``seq 1 1000000`` (~7 MB through the terminal)            failed
model         the generic harness and the official ``openai`` client    passed
              against a scripted OpenAI-compatible server on
              127.0.0.1 that solves the task; every 9th request
              answers HTTP 500 (the backend retries it)
============  ========================================================  =================

Counted: episodes completed (verified, not masked), verified outcomes by agent, errors by type
(``exception:T`` raised by the environment or the loop, ``infra:T`` infrastructure errors raised,
``masked:...`` masked episodes, ``unexpected_outcome:agent:outcome``, ``check:...`` when a
misbehaving agent's step did not report what it did: no timeout, no truncation), episode latency
percentiles (reset to verdict) overall and per agent, host memory sampled every ``--sample-every``
seconds (this process's RSS, open fds and threads; dockerd's and containerd's RSS; the engine's
shim processes; this run's live containers) with the growth over the soak and a least-squares
slope, and the containers of this process still present at the end (label
``terminal-env.managed=1`` and ``terminal-env.owner-pid`` = this process).

Memory is also traced (``--trace-frames``, 8 by default; 0 turns it off): every sample takes a
tracemalloc snapshot and splits the traced memory by owner, the library's (the most recent frame
of an allocation in ``terminal_env/``) against the soak's own bookkeeping (in ``benchmarks/``:
its records of every episode) and other (the interpreter, threading). The JSON gives each
owner's memory before and after the soak, its slopes, and the sites that grew most in each half.
``ok`` requires the library's slope over the second half of the soak to stay under
``--library-slope-bound`` (0.5 MB/min): per-episode state must be released and caches bounded,
so that a training run can play for hours in one process.

Baseline in the same run (like the other benchmarks): one environment alone plays each agent
``--baseline-rounds`` times after one untimed warm-up episode, with the same warm-pool settings,
so the per-agent latency under concurrency can be compared with the latency of one environment.

Ctrl-C (or SIGTERM) stops cleanly: no new episode starts, the live environments are closed (their
episodes are counted as ``interrupted``, not as errors), the warm pool is emptied, and any
container of this process that is still there is removed. The JSON is printed anyway, with
``"interrupted": true``.

One JSON object on stdout (also written to ``--out``); progress on stderr. Exit status: 0 when no
error and no leaked container, 1 otherwise, 130 when interrupted (1 wins if something leaked).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ (for _common.py)

from _common import log, stats  # the benchmarks' shared helpers

from terminal_env import TerminalEnv
from terminal_env.actions import Command
from terminal_env.agent import run_agent
from terminal_env.errors import InfraError
from terminal_env.harness import get_harness
from terminal_env.models.simple import NopBackend, OracleBackend, ScriptedBackend
from terminal_env.sandbox import LABEL_MANAGED, cleanup
from terminal_env.sandbox.engine import get_client
from terminal_env.scale.warm import WarmPool
from terminal_env.tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "data" / "protected" / "word-stats"

AGENTS = ["oracle", "nop", "timeout", "stubborn", "bigout", "model"]
EXPECTED = {"oracle": "passed", "nop": "failed", "timeout": "failed", "stubborn": "failed",
            "bigout": "failed", "model": "passed"}
BIG_OUTPUT = "seq 1 1000000"  # 6.9 MB
BIG_OUTPUT_BYTES = 6_000_000
FAIL_EVERY = 9  # every 9th model request answers HTTP 500
#: MB/min: the most the library's own traced memory may grow over the second half of the soak
LIBRARY_SLOPE_BOUND = 0.5


# ---------------------------------------------------------------------------- host probes
def _status_kb(pid: int | str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def daemons_rss_kb() -> dict[str, int]:
    """RSS of dockerd, containerd, and the sum over the engine's containerd-shim processes."""
    out = {"dockerd": 0, "containerd": 0, "shims": 0, "shim_count": 0}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            name = (d / "comm").read_text().strip()
        except OSError:
            continue
        if name in ("dockerd", "containerd"):
            out[name] += _status_kb(d.name, "VmRSS")
        elif name.startswith("containerd-shim"):
            out["shims"] += _status_kb(d.name, "VmRSS")
            out["shim_count"] += 1
    return out


def own_containers(client: Any) -> list[Any]:
    """The project's containers owned by this process, running or not."""
    labels = [f"{LABEL_MANAGED}=1", f"terminal-env.owner-pid={os.getpid()}"]
    found = client.containers.list(all=True, sparse=True, filters={"label": labels})
    start = cleanup.owner_labels()["terminal-env.owner-start"]
    return [c for c in found if (c.attrs.get("Labels") or {}).get("terminal-env.owner-start") == start]


class Sampler(threading.Thread):
    """Samples host memory every ``every`` seconds until stopped."""

    def __init__(self, client: Any, every: float, progress: Any, trace: bool = False):
        super().__init__(name="soak-sampler", daemon=True)
        self.client, self.every, self.progress = client, every, progress
        self.trace = trace
        #: classified tracemalloc snapshots by phase: (MB by owner, bytes by site)
        self.sites: dict[str, Counter] = {}
        self.samples: list[dict[str, Any]] = []
        self.halt = threading.Event()
        self.t0 = time.monotonic()

    def sample(self, phase: str) -> dict[str, Any]:
        d = daemons_rss_kb()
        try:
            live = len(own_containers(self.client))
        except Exception:  # noqa: BLE001 - the engine may be busy; the sample says so
            live = -1
        try:
            fds = len(os.listdir("/proc/self/fd"))
        except OSError:
            fds = -1
        s = {
            "t_s": round(time.monotonic() - self.t0, 1), "phase": phase,
            "wall": time.strftime("%H:%M:%S"),
            "rss_mb": round(_status_kb("self", "VmRSS") / 1024, 1),
            "fds": fds, "threads": threading.active_count(),
            "dockerd_rss_mb": round(d["dockerd"] / 1024, 1),
            "containerd_rss_mb": round(d["containerd"] / 1024, 1),
            "shims": d["shim_count"], "shims_rss_mb": round(d["shims"] / 1024, 1),
            "own_containers": live, "episodes": self.progress(),
        }
        if self.trace:
            import tracemalloc

            owners, sites = classify(tracemalloc.take_snapshot())
            s.update({f"{k}_mb": v for k, v in owners.items()})
            self.sites[phase if phase != "soak" else f"soak@{s['t_s']:.0f}"] = sites
        self.samples.append(s)
        return s

    def run(self) -> None:
        while not self.halt.wait(self.every):
            s = self.sample("soak")
            log(f"  t={s['t_s']:.0f}s episodes={s['episodes']} rss={s['rss_mb']} MB fds={s['fds']} "
                f"threads={s['threads']} dockerd={s['dockerd_rss_mb']} MB containers={s['own_containers']}"
                + (f" library={s['library_mb']} MB bookkeeping={s['bookkeeping_mb']} MB" if self.trace else ""))


def fd_kinds() -> dict[str, int]:
    """This process's open file descriptors by kind (socket, pipe, anon_inode, file)."""
    kinds: Counter = Counter()
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            kinds[target.split(":", 1)[0] if ":" in target and not target.startswith("/") else "file"] += 1
    except OSError:
        pass
    return dict(kinds)


def thread_names() -> dict[str, int]:
    """Live threads by name, digits folded (``warm-fill_0`` and ``warm-fill_1`` count together)."""
    import re

    return dict(Counter(re.sub(r"\d+", "N", t.name) for t in threading.enumerate()))


def slope_per_minute(samples: list[dict[str, Any]], key: str) -> float | None:
    """Least-squares slope of ``key`` over time, per minute (None with fewer than 3 samples)."""
    pts = [(s["t_s"], s[key]) for s in samples if s.get(key, -1) >= 0]
    if len(pts) < 3:
        return None
    mt = statistics.fmean(t for t, _ in pts)
    mv = statistics.fmean(v for _, v in pts)
    den = sum((t - mt) ** 2 for t, _ in pts)
    if den == 0:
        return None
    return round(60 * sum((t - mt) * (v - mv) for t, v in pts) / den, 3)


# ---------------------------------------------------------------------------- the model server
# ---------------------------------------------------------------------------- tracemalloc
LIBRARY = f"{os.sep}terminal_env{os.sep}"
BOOKKEEPING = f"{os.sep}benchmarks{os.sep}"


def attribute(traceback: Any) -> tuple[str, str]:
    """Whose allocation a traceback is: the most recent frame in terminal_env/ makes it the
    library's, in benchmarks/ the soak's own bookkeeping (whichever comes first, walking from
    the allocation outwards); anything else (threading, the interpreter) is "other". Returns
    (owner, site) with the site as file:line of that frame."""
    for frame in reversed(traceback):  # oldest first in the traceback: walk from the newest
        name = frame.filename
        if LIBRARY in name:
            return "library", f"{name.split(LIBRARY, 1)[1]}:{frame.lineno}"
        if BOOKKEEPING in name:
            return "bookkeeping", f"benchmarks/{name.split(BOOKKEEPING, 1)[1]}:{frame.lineno}"
    top = traceback[-1] if len(traceback) else None
    return "other", f"{top.filename}:{top.lineno}" if top else "?"


def classify(snapshot: Any) -> tuple[dict[str, float], Counter]:
    """Traced memory by owner (MB) and by site (bytes) in one snapshot (grouped by traceback
    first, so that each distinct traceback is attributed once)."""
    owners: Counter = Counter()
    sites: Counter = Counter()
    for stat in snapshot.statistics("traceback"):
        owner, site = attribute(stat.traceback)
        owners[owner] += stat.size
        sites[f"{owner}: {site}"] += stat.size
    return {k: round(owners[k] / 2**20, 2) for k in ("library", "bookkeeping", "other")}, sites


def top_growth(before: Counter, after: Counter, n: int = 12) -> list[dict[str, Any]]:
    """The sites whose traced memory grew most between two classified snapshots."""
    grown = Counter({site: after[site] - before.get(site, 0) for site in after})
    return [{"site": site, "growth_kb": round(b / 1024, 1)} for site, b in grown.most_common(n) if b > 0]


def solve_script() -> str:
    return (TASK / "solution" / "solve.sh").read_text()


class ModelServer:
    """The scripted OpenAI-compatible server on 127.0.0.1: turn 0 solves, turn 1 submits; every
    ``FAIL_EVERY``-th request is an HTTP 500 (the backend's retries must absorb it)."""

    def __init__(self) -> None:
        from terminal_env.models.registry import make_backend
        from terminal_env.models.scripted_server import Fail, ScriptedServer

        self._lock = threading.Lock()
        self.n = self.failed = 0
        solve = solve_script()

        def script(body: dict) -> Any:
            with self._lock:
                self.n += 1
                if self.n % FAIL_EVERY == 0:
                    self.failed += 1
                    return Fail(500, body="soak: scripted overload")
            turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
            if turn == 0:
                return f"I will write the script.\n```bash\n{solve}\n```"
            return "Done.\n```bash\n#!submit\n```"

        self.server = ScriptedServer(script)
        assert self.server.base_url.startswith("http://127.0.0.1:")  # loopback only
        # one backend shared by every thread (stateless client), as the runner does
        self.backend = make_backend("openai:scripted", base_url=self.server.base_url, timeout=60,
                                    max_retries=4, backoff=0.05)

    def close(self) -> None:
        self.server.close()


# ---------------------------------------------------------------------------- episodes
def backend_for(agent: str, model: ModelServer) -> Any:
    if agent == "oracle":
        return OracleBackend()
    if agent == "nop":
        return NopBackend()
    if agent == "timeout":
        return ScriptedBackend.of_actions([Command(command="sleep 60", timeout=2)])
    if agent == "stubborn":
        return ScriptedBackend.of_actions([Command(command="bash -c \"trap '' INT; sleep 60\"", timeout=2)])
    if agent == "bigout":
        return ScriptedBackend.of_actions([BIG_OUTPUT])
    if agent == "model":
        return model.backend
    raise ValueError(agent)


def play(env: TerminalEnv, agent: str, model: ModelServer) -> dict[str, Any]:
    """One episode of ``agent`` through the agent loop, with the environment's info of each step."""
    steps: list[dict[str, Any]] = []
    traj = run_agent(env, get_harness("generic"), backend_for(agent, model), max_turns=4,
                     on_step=lambda action, obs, info: steps.append(info))
    v = traj.verification or {}
    checks = [] if traj.termination == "submitted" or traj.masked else [f"termination-{traj.termination}"]
    if agent in ("timeout", "stubborn") and not any(s.get("timed_out") for s in steps):
        checks.append("timeout-not-reported")
    if agent == "bigout" and not any(s.get("truncated") and (s.get("output_bytes") or 0) >= BIG_OUTPUT_BYTES
                                     for s in steps):
        checks.append("big-output-not-truncated")
    return {"outcome": v.get("outcome"), "masked": traj.masked, "termination": traj.termination,
            "message": (traj.error or v.get("message") or "")[:300], "checks": checks}


class Phase:
    """``envs`` threads playing episodes until ``deadline`` (or ``rounds`` cycles of the agent mix
    each), recording every episode."""

    def __init__(self, name: str, *, envs: int, task: Any, client: Any, pool: WarmPool | None,
                 model: ModelServer, run_id: str, stop: threading.Event, interrupted: threading.Event,
                 deadline: float | None = None, rounds: int | None = None):
        self.name, self.envs, self.task, self.client, self.pool = name, envs, task, client, pool
        self.model, self.run_id, self.stop, self.interrupted = model, run_id, stop, interrupted
        self.deadline, self.rounds = deadline, rounds
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.live: dict[int, TerminalEnv] = {}
        self.threads: list[threading.Thread] = []
        self.wall = 0.0
        self._t0 = 0.0

    def count(self) -> int:
        with self.lock:
            return len(self.records)

    def _new_env(self, i: int) -> TerminalEnv:
        env = TerminalEnv(self.task, client=self.client, pool=self.pool, run_id=self.run_id,
                          max_steps=10, reward="binary")
        with self.lock:
            self.live[i] = env
        return env

    def _drop_env(self, i: int, env: TerminalEnv | None) -> None:
        with self.lock:
            self.live.pop(i, None)
        if env is not None:
            try:
                env.close()
            except Exception as exc:  # noqa: BLE001 - close() must not raise: it is counted
                if not self.interrupted.is_set():
                    self._record({"agent": "close", "error_type": f"exception:close:{type(exc).__name__}",
                                  "error": str(exc)[:300], "latency_s": 0.0})

    def _record(self, rec: dict[str, Any]) -> None:
        with self.lock:
            self.records.append(rec)

    def _more(self, n: int) -> bool:
        if self.stop.is_set():
            return False
        if self.rounds is not None:
            return n < self.rounds * len(AGENTS)
        return self.deadline is not None and time.monotonic() < self.deadline

    def worker(self, i: int) -> None:
        env: TerminalEnv | None = None
        n = 0
        while self._more(n):
            agent = AGENTS[(i + n) % len(AGENTS)]
            n += 1
            rec: dict[str, Any] = {"agent": agent, "env": i}
            t0 = time.perf_counter()
            try:
                if env is None:
                    env = self._new_env(i)
                res = play(env, agent, self.model)
                rec.update(res)
                if res["masked"]:
                    rec["error_type"] = f"masked:{res.get('termination') or res.get('outcome')}"
                elif res["outcome"] != EXPECTED[agent]:
                    rec["error_type"] = f"unexpected_outcome:{agent}:{res['outcome']}"
                elif res["checks"]:
                    rec["error_type"] = f"check:{agent}:{','.join(res['checks'])}"
            except Exception as exc:  # noqa: BLE001 - every error is counted and reported
                if self.interrupted.is_set():
                    rec["error_type"] = "interrupted"
                else:
                    kind = "infra" if isinstance(exc, InfraError) else "exception"
                    rec["error_type"] = f"{kind}:{type(exc).__name__}"
                    rec["error"] = f"{exc}"[:300]
                    rec["traceback"] = traceback.format_exc()[-1500:]
                self._drop_env(i, env)  # a fresh environment for the next episode
                env = None
            rec["latency_s"] = time.perf_counter() - t0
            if self.interrupted.is_set() and rec.get("error_type") not in (None, "interrupted"):
                rec["error_type"] = "interrupted"
            self._record(rec)
        self._drop_env(i, env)

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self.threads = [threading.Thread(target=self.worker, args=(i,), name=f"soak-{self.name}-{i}", daemon=True)
                        for i in range(self.envs)]
        for t in self.threads:
            t.start()

    def alive(self) -> bool:
        return any(t.is_alive() for t in self.threads)

    def close_live(self) -> None:
        """Ctrl-C: end the running episodes now (what the runner does on interrupt)."""
        with self.lock:
            envs = list(self.live.values())
        for env in envs:
            try:
                env.close()
            except Exception as exc:  # noqa: BLE001 - best effort; the final sweep removes leftovers
                log(f"soak: closing a live environment: {type(exc).__name__}: {exc}")

    def join(self, timeout: float) -> list[str]:
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        self.wall = time.perf_counter() - self._t0
        return [t.name for t in self.threads if t.is_alive()]

    # -------------------------------------------------------------- report
    def summary(self) -> dict[str, Any]:
        recs = [r for r in self.records if r["agent"] != "close"]
        errors = Counter(r["error_type"] for r in self.records
                         if r.get("error_type") and r["error_type"] != "interrupted")
        done = [r for r in recs if r.get("outcome") is not None and not r.get("masked")]
        outcomes: dict[str, dict[str, int]] = {}
        for r in recs:
            if r.get("outcome") is not None and not r.get("masked"):
                outcomes.setdefault(r["agent"], Counter())[r["outcome"]] += 1
        ok = [r["latency_s"] for r in recs if r.get("outcome") is not None]

        def lat(xs: list[float]) -> dict[str, Any]:
            if not xs:
                return {"n": 0}
            return stats(xs, ("n", "p50", "p90", "p99", "max", "mean"), digits=3)

        per_agent = {a: lat([r["latency_s"] for r in recs if r["agent"] == a and r.get("outcome") is not None])
                     for a in AGENTS}
        samples = [{k: r.get(k) for k in ("agent", "env", "error_type", "error", "outcome", "message")}
                   for r in self.records if r.get("error_type") and r["error_type"] != "interrupted"][:20]
        tracebacks = [r["traceback"] for r in self.records if r.get("traceback")][:3]
        return {
            "envs": self.envs, "wall_s": round(self.wall, 1),
            "episodes_started": len(recs),
            "episodes_completed": len(done),
            "episodes_per_minute": round(60 * len(done) / self.wall, 1) if self.wall else None,
            "interrupted_episodes": sum(1 for r in recs if r.get("error_type") == "interrupted"),
            "outcomes_by_agent": {a: dict(c) for a, c in sorted(outcomes.items())},
            "errors": sum(errors.values()), "errors_by_type": dict(errors),
            "masked_episodes": sum(1 for r in recs if r.get("masked")),
            "infra_errors": sum(v for k, v in errors.items() if k.startswith("infra:")),
            "exceptions": sum(v for k, v in errors.items() if k.startswith("exception:")),
            "error_samples": samples, "error_tracebacks": tracebacks,
            "latency_s": lat(ok), "latency_s_by_agent": per_agent,
        }


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=32, help="concurrent environments (threads)")
    ap.add_argument("--minutes", type=float, default=10.0, help="wall time of the soak")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--warm", type=int, default=4, help="warm-pool size (0: cold starts)")
    ap.add_argument("--sample-every", type=float, default=10.0, help="memory sampling period, s")
    ap.add_argument("--baseline-rounds", type=int, default=2,
                    help="rounds of the agent mix played by one environment alone first (0: none)")
    ap.add_argument("--run-tag", default="soak", help="prefix of the run label of this soak's containers")
    ap.add_argument("--trace-frames", type=int, default=8,
                    help="tracemalloc frames per allocation, to tell the library's memory from the soak's "
                         "own (0: off; on, episodes run slower)")
    ap.add_argument("--library-slope-bound", type=float, default=LIBRARY_SLOPE_BOUND,
                    help="MB/min: the most the library's traced memory may grow in the soak's second half")
    args = ap.parse_args(argv)
    if args.envs < 1 or args.minutes <= 0:
        ap.error("--envs must be >= 1 and --minutes > 0")

    stop, interrupted = threading.Event(), threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if not interrupted.is_set():
            log(f"soak: {signal.Signals(signum).name}: stopping; closing the live environments "
                "(a second Ctrl-C is ignored until the containers are removed)")
        interrupted.set()
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    if args.trace_frames:
        import tracemalloc

        tracemalloc.start(args.trace_frames)
    t_start = time.time()
    rss_at_start = _status_kb("self", "VmRSS")
    run_id = f"{args.run_tag}-{os.getpid()}-{int(t_start)}"
    client = get_client()
    task = load_task(TASK)
    log(f"soak: task {task.name}, run label terminal-env.run={run_id}")
    TerminalEnv(task, client=client, run_id=run_id).close()  # build the image outside the timing
    model = ModelServer()
    phases: dict[str, Phase] = {}
    sampler = Sampler(client, args.sample_every, lambda: phases["soak"].count() if "soak" in phases else 0,
                      trace=bool(args.trace_frames))
    pools: list[WarmPool] = []
    result: dict[str, Any] = {
        "benchmark": "soak", "task": str(TASK.relative_to(ROOT)), "agents": AGENTS,
        "expected_outcomes": EXPECTED, "run_id": run_id,
        "config": {"envs": args.envs, "minutes": args.minutes, "warm": args.warm,
                   "sample_every_s": args.sample_every, "baseline_rounds": args.baseline_rounds,
                   "model_server": model.server.base_url, "model_http_500_every": FAIL_EVERY},
        "cpus": os.cpu_count(),
    }
    stuck: list[str] = []
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    fatal: str | None = None
    fd_before = fd_after = threads_before = threads_after = None
    try:
        def run_phase(name: str, envs: int, **kw: Any) -> Phase:
            pool = WarmPool(size=args.warm, workers=2) if args.warm else None
            if pool is not None:
                pools.append(pool)
            ph = Phase(name, envs=envs, task=task, client=client, pool=pool, model=model, run_id=run_id,
                       stop=stop, interrupted=interrupted, **kw)
            phases[name] = ph
            ph.start()
            while ph.alive() and not stop.wait(0.5):
                pass
            if interrupted.is_set():
                ph.close_live()
            stuck.extend(ph.join(timeout=120 if interrupted.is_set() else 600))
            if pool is not None:
                pool.close()
            return ph

        # warm-up (untimed): one oracle episode loads every module and the image
        if not stop.is_set():
            log("soak: warm-up episode")
            warm_env = TerminalEnv(task, client=client, run_id=run_id, max_steps=10)
            try:
                play(warm_env, "oracle", model)
            finally:
                warm_env.close()
        sampler.sample("start")
        if args.baseline_rounds and not stop.is_set():
            log(f"soak: baseline: 1 environment, {args.baseline_rounds} round(s) of {len(AGENTS)} agents")
            run_phase("baseline", 1, rounds=args.baseline_rounds)
        before = sampler.sample("before-soak")
        fd_before, threads_before = fd_kinds(), thread_names()
        if not stop.is_set():
            log(f"soak: {args.envs} environments for {args.minutes:g} min")
            sampler.start()
            run_phase("soak", args.envs, deadline=time.monotonic() + 60 * args.minutes)
            sampler.halt.set()
            sampler.join(timeout=30)
        after = sampler.sample("after-soak")
        fd_after, threads_after = fd_kinds(), thread_names()
    except Exception as exc:  # noqa: BLE001 - reported in the JSON (and in the exit status)
        fatal = f"{type(exc).__name__}: {exc}"
        log(f"soak: fatal: {traceback.format_exc()}")
    finally:
        # ---- shutdown: nothing may be left behind, whatever happened above
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the cleanup finish
        for ph in phases.values():
            ph.close_live()
        for pool in pools:
            try:
                pool.close()
            except Exception as exc:  # noqa: BLE001
                log(f"soak: closing a warm pool: {exc}")
        model.close()
        leaked = own_containers(client)
        deadline = time.monotonic() + 30  # used sandboxes are removed in the background
        while leaked and time.monotonic() < deadline:
            time.sleep(0.5)
            leaked = own_containers(client)
        leaked_names = [(c.attrs.get("Names") or ["?"])[0].lstrip("/") for c in leaked]
        cleanup.remove_all()  # what exit would do; then remove whatever this process still owns
        for c in own_containers(client):
            try:
                c.remove(force=True, v=True)
            except Exception as exc:  # noqa: BLE001
                log(f"soak: could not remove {c.id[:12]}: {exc}")
        left_after_sweep = len(own_containers(client))

    soak = phases["soak"].summary() if "soak" in phases else None
    base = phases["baseline"].summary() if "baseline" in phases else None
    samples = sampler.samples
    soak_samples = [s for s in samples if s["phase"] in ("before-soak", "soak", "after-soak")]
    memory = {
        "process_rss_mb": {"at_start": round(rss_at_start / 1024, 1),
                           "before_soak": before.get("rss_mb"),
                           "after_soak": after.get("rss_mb"),
                           "max": max((s["rss_mb"] for s in samples), default=None)},
        "dockerd_rss_mb": {"before_soak": before.get("dockerd_rss_mb"),
                           "after_soak": after.get("dockerd_rss_mb"),
                           "max": max((s["dockerd_rss_mb"] for s in samples), default=None)},
        "containerd_rss_mb": {"before_soak": before.get("containerd_rss_mb"),
                              "after_soak": after.get("containerd_rss_mb"),
                              "max": max((s["containerd_rss_mb"] for s in samples), default=None)},
        "slope_mb_per_min": {k: slope_per_minute(soak_samples, k)
                             for k in ("rss_mb", "dockerd_rss_mb", "containerd_rss_mb")},
        # the first minutes include warming up (caches, allocator arenas): the second half of the
        # soak says more about a leak
        "slope_second_half_mb_per_min": {
            k: slope_per_minute(soak_samples[len(soak_samples) // 2:], k)
            for k in ("rss_mb", "dockerd_rss_mb", "containerd_rss_mb")},
        "fds": {"before_soak": before.get("fds"),
                "after_soak": after.get("fds")},
        "threads": {"before_soak": before.get("threads"),
                    "after_soak": after.get("threads")},
        "fd_kinds": {"before_soak": fd_before, "after_soak": fd_after},
        "thread_names": {"before_soak": threads_before, "after_soak": threads_after},
        "note": "RSS from /proc/PID/status; slope: least squares over the samples of the soak phase",
        "samples": samples,
    }
    library_slope = None
    if args.trace_frames:
        keys = ("library_mb", "bookkeeping_mb", "other_mb")
        second = soak_samples[len(soak_samples) // 2:]
        library_slope = slope_per_minute(second, "library_mb")
        soak_keys = [k for k in sampler.sites if k.startswith("soak@")]
        middle = soak_keys[len(soak_keys) // 2] if soak_keys else None
        at = {k: sampler.sites.get(k) for k in ("before-soak", "after-soak")}
        memory["tracemalloc"] = {
            "frames": args.trace_frames,
            "before_soak": {k: before.get(k) for k in keys}, "after_soak": {k: after.get(k) for k in keys},
            "slope_mb_per_min": {k: slope_per_minute(soak_samples, k) for k in keys},
            "slope_second_half_mb_per_min": {k: slope_per_minute(second, k) for k in keys},
            "library_slope_bound_mb_per_min": args.library_slope_bound,
            "top_growth_first_half": top_growth(at["before-soak"], sampler.sites[middle])
            if at["before-soak"] and middle else [],
            "top_growth_second_half": top_growth(sampler.sites[middle], at["after-soak"])
            if at["after-soak"] and middle else [],
            "note": "traced Python allocations by owner: the most recent frame in terminal_env/ "
                    "(library) or benchmarks/ (the soak's bookkeeping) decides; RSS also holds "
                    "the allocator's free lists and native memory that tracemalloc does not see",
        }
    for key in ("process_rss_mb", "dockerd_rss_mb", "containerd_rss_mb"):
        m = memory[key]
        if m.get("before_soak") is not None and m.get("after_soak") is not None:
            m["growth"] = round(m["after_soak"] - m["before_soak"], 1)
    errors = (soak or {}).get("errors", 0) + (base or {}).get("errors", 0) + (1 if fatal else 0)
    result.update({
        "interrupted": interrupted.is_set(),
        "soak": soak, "baseline": base,
        "latency_ratio_p50_soak_over_baseline": {
            a: round(soak["latency_s_by_agent"][a]["p50"] / base["latency_s_by_agent"][a]["p50"], 2)
            for a in AGENTS
            if soak and base and soak["latency_s_by_agent"][a].get("n") and base["latency_s_by_agent"][a].get("n")
        },
        "memory": memory,
        "model_server": {"requests": model.n, "http_500_injected": model.failed},
        "leaked_containers": len(leaked_names), "leaked_container_names": leaked_names[:20],
        "containers_left_after_final_sweep": left_after_sweep,
        "stuck_threads": stuck,
        "fatal": fatal,
        "errors": errors,
        "library_memory_flat": None if library_slope is None else library_slope <= args.library_slope_bound,
        "ok": errors == 0 and not leaked_names and not stuck and left_after_sweep == 0
        and (library_slope is None or library_slope <= args.library_slope_bound),
        "wall_s": round(time.time() - t_start, 1),
    })
    text = json.dumps(result, indent=1)
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if not result["ok"]:
        return 1
    return 130 if interrupted.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
