"""Fault injection too disruptive for the default test run. Each fault is injected for real and
the system must survive it as documented. Loopback only; sandboxes have no network.

    python benchmarks/faults.py                          # every fault (engine-restart last)
    python benchmarks/faults.py --only container-killed container-oom
    python benchmarks/faults.py --skip engine-restart    # all but the engine restart
    python benchmarks/faults.py --list

=====================  ==========================================================================
fault                  injected / expected
=====================  ==========================================================================
container-killed       ``docker kill`` of the sandbox from outside while the agent's command runs:
                       the episode ends masked (``infra_error``, never verified or scored),
                       ``close()`` does not raise, the next episode passes, no container left
container-oom          the agent allocates twice the task's memory limit: its process is killed
                       (exit 137, the cgroup's ``oom_kill`` counter moves), the sandbox lives on,
                       the episode is verified and NOT masked (the agent's failure)
model-server-errors    scripted OpenAI-compatible servers on 127.0.0.1 through the runner: HTTP 500
                       twice then fine (retried, scored, not masked); a dropped connection then
                       fine (retried); 429 with ``Retry-After: 1`` (waited, retried); a server
                       that stalls (every try times out: masked ``model_error`` after
                       ``--retries`` retries, excluded from Mean@k)
corrupt-run-dir        a finished run directory with a damaged ``run.json`` (bad JSON, foreign
                       schema, empty) or a damaged ``result.json`` (truncated, ``{}``, another
                       trial's): resuming refuses (exit 2) with a message naming the file and
                       leaves the file as it was; repaired, the resume finishes with nothing redone
runner-sigkill         ``terminal-env run`` in a subprocess against a scripted server on loopback,
                       SIGKILLed while a trial's episode is live: its sandbox is orphaned,
                       ``terminal-env gc`` removes it, the same command resumes and records every
                       trial (only the unfinished ones ask the model again), no container left
engine-restart         a real restart of the Docker engine (systemctl or service when they manage
                       it, else dockerd is stopped with SIGTERM and started again the way
                       ``scripts/install-engine.sh`` starts it: same argv and environment,
                       detached, log appended to /var/log/terminal-env-dockerd.log; the script
                       itself only as a last resort, if the engine does not answer within 120 s,
                       since with the engine down it may apt-get what it finds missing) while the
                       agent's command runs: masked ``infra_error``, ``close()`` does not raise,
                       the engine answers again, the next episode passes, no container left
                       (after the exit handler's retry, which the README documents for a
                       container whose removal found the engine down)
=====================  ==========================================================================

engine-restart stops every container on the engine (live-restore is off by default), so it
refuses to run while containers that are not its own are running, unless
``--force-engine-restart`` is given. Run it at a quiet moment.

Each fault prints a record ``{name, injected, survived, detail, checks, seconds}`` (progress on
stderr); the JSON on stdout holds the list and the totals, and the containers of this run still
present at the end (then removed by a final sweep). Exit status 0 when every fault was injected
and survived and no container leaked, else 1; Ctrl-C stops after removing what the run made
(130, or 1 if something could not be removed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import log

from terminal_env import TerminalEnv
from terminal_env.sandbox import LABEL_MANAGED, cleanup
from terminal_env.sandbox.engine import DOCKERD_LOG, get_client

ROOT = Path(__file__).resolve().parent.parent
WORD_STATS = ROOT / "tests" / "data" / "protected" / "word-stats"
HARBOR_SUM = ROOT / "tests" / "data" / "tasks" / "harbor-sum"
SUBMIT = "Done.\n```bash\n#!submit\n```"


# ---------------------------------------------------------------------------- records
class Fault:
    """What one fault did: checks (name, ok, what was observed) and notes."""

    def __init__(self, name: str):
        self.name = name
        self.injected = False
        self.checks: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.t0 = time.monotonic()
        self.error: str | None = None

    def check(self, what: str, ok: bool, observed: Any = None) -> bool:
        self.checks.append({"check": what, "ok": bool(ok), "observed": observed})
        log(f"  [{'ok' if ok else 'FAIL'}] {what}" + (f": {observed}" if observed not in (None, "") else ""))
        return bool(ok)

    def note(self, text: str) -> None:
        self.notes.append(text)
        log(f"  note: {text}")

    def record(self) -> dict[str, Any]:
        failed = [c["check"] for c in self.checks if not c["ok"]]
        survived = self.injected and self.error is None and bool(self.checks) and not failed
        if self.error:
            detail = f"error: {self.error}"
        elif not self.injected:
            detail = "not injected: " + ("; ".join(self.notes) or "setup failed")
        elif failed:
            detail = "failed: " + "; ".join(failed)
        else:
            detail = f"all {len(self.checks)} checks passed"
        if self.notes and self.injected:
            detail += " (" + "; ".join(self.notes) + ")"
        return {"name": self.name, "injected": self.injected, "survived": survived, "detail": detail,
                "checks": self.checks, "seconds": round(time.monotonic() - self.t0, 1)}


class Ctx:
    def __init__(self, tag: str, workdir: Path, force_engine_restart: bool):
        #: every container made here has a run label starting with this (runner run ids are the
        #: run directory's name, so those directories are named after it too)
        self.tag = f"{tag}-{os.getpid()}"
        self.run_id = f"{self.tag}-env"
        self.workdir = workdir
        self.force_engine_restart = force_engine_restart
        self.client = get_client()


def cname(c: Any) -> str:
    """A container's name, also from a sparse listing (which has ``Names``, not ``Name``)."""
    names = c.attrs.get("Names") or [c.attrs.get("Name") or c.id[:12]]
    return names[0].lstrip("/")


def by_label(client: Any, run_id: str) -> list[Any]:
    return client.containers.list(all=True, sparse=True, filters={"label": f"terminal-env.run={run_id}"})


def tagged(client: Any, tag: str) -> list[Any]:
    """The project's containers whose run label starts with ``tag`` (every container a fault
    makes is labelled so), running or not."""
    out = []
    for c in client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL_MANAGED}=1"}):
        if (c.attrs.get("Labels") or {}).get("terminal-env.run", "").startswith(tag):
            out.append(c)
    return out


def wait_for(pred: Callable[[], Any], timeout: float, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every)


def load_test_module(name: str) -> Any:
    """A module of tests/ loaded by path (helpers are reused, not copied)."""
    path = ROOT / "tests" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_faults_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------- an episode under fire
def running_command(client: Any, env: TerminalEnv, needle: str) -> bool:
    """Whether a process whose command line contains ``needle`` runs in the env's sandbox."""
    box = env.sandbox
    if box is None or box.container is None:
        return False
    try:
        top = client.api.top(box.container.id, ps_args="-eo pid,args")
    except Exception:  # noqa: BLE001 - not up yet
        return False
    return any(needle in " ".join(map(str, p)) for p in top.get("Processes") or [])


def episode_under_fault(f: Fault, ctx: Ctx, inject: Callable[[TerminalEnv], bool], *, what: str,
                        join_timeout: float = 180.0) -> None:
    """The agent (a scripted backend, generic harness) starts ``sleep 60``; ``inject`` strikes
    while it runs (it returns False when it declined to). Then: the episode is masked and never
    verified, close() does not raise."""
    from terminal_env.agent import run_agent
    from terminal_env.harness import get_harness
    from terminal_env.models.simple import ScriptedBackend

    env = TerminalEnv(WORD_STATS, run_id=ctx.run_id, max_steps=10)
    backend = ScriptedBackend(["I will wait.\n```bash\nsleep 60\n```", SUBMIT])
    box: dict[str, Any] = {}

    def agent() -> None:
        try:
            box["traj"] = run_agent(env, get_harness("generic"), backend, max_turns=4)
        except BaseException as exc:  # noqa: BLE001 - run_agent must not raise for infrastructure
            box["raised"] = f"{type(exc).__name__}: {exc}"
        box["ended"] = time.monotonic()

    th = threading.Thread(target=agent, name=f"fault-{f.name}", daemon=True)
    th.start()
    if not wait_for(lambda: running_command(ctx.client, env, "sleep 60"), 60):
        f.note("the agent's command never started")
        th.join(120)
        env.close()
        return
    container = env.sandbox.name if env.sandbox is not None else "?"
    t_inject = time.monotonic()
    if not inject(env):
        th.join(120)  # the agent's sleep ends, it submits, the episode is verified as usual
        env.close()
        return
    f.injected = True
    th.join(join_timeout)
    f.check("the episode ended (no hang)", not th.is_alive(),
            f"{box['ended'] - t_inject:.1f} s after the {what} began" if "ended" in box else "still running")
    if th.is_alive():
        return
    f.check("run_agent did not raise", "raised" not in box, box.get("raised"))
    traj = box.get("traj")
    if traj is not None:
        f.check("the episode is masked as an infrastructure error",
                traj.masked and traj.termination == "infra_error",
                {"masked": traj.masked, "termination": traj.termination, "error": (traj.error or "")[:240]})
        f.check("it was never verified nor scored", not traj.verification and not traj.reward,
                {"verification": (traj.verification or {}).get("outcome"), "reward": traj.reward})
    try:
        env.close()
        f.check("close() did not raise", True, f"container {container}")
    except Exception as exc:  # noqa: BLE001
        f.check("close() did not raise", False, f"{type(exc).__name__}: {exc}")


def next_episode_passes(f: Fault, ctx: Ctx) -> None:
    from terminal_env.agent import run_agent
    from terminal_env.harness import get_harness
    from terminal_env.models.registry import make_backend

    try:
        env = TerminalEnv(WORD_STATS, run_id=ctx.run_id, max_steps=10)
        try:
            traj = run_agent(env, get_harness("generic"), make_backend("oracle"), max_turns=4)
        finally:
            env.close()
        f.check("the next episode passes", traj.strict_success and not traj.masked,
                {"outcome": (traj.verification or {}).get("outcome"), "masked": traj.masked,
                 "error": (traj.error or "")[:200]})
    except Exception as exc:  # noqa: BLE001
        f.check("the next episode passes", False, f"{type(exc).__name__}: {exc}")


def none_left(f: Fault, ctx: Ctx, *, exit_handler: bool = False) -> None:
    left = [cname(c) for c in by_label(ctx.client, ctx.run_id)]
    if exit_handler:
        f.note(f"containers still there before the exit handler: {left or 'none'}")
        cleanup.remove_all()  # what atexit does when this process ends
        left = [cname(c) for c in by_label(ctx.client, ctx.run_id)]
    f.check("no container of the fault left", not left, left or "none")


# ---------------------------------------------------------------------------- (b) container-killed
def fault_container_killed(ctx: Ctx) -> Fault:
    f = Fault("container-killed")

    def kill(env: TerminalEnv) -> bool:
        assert env.sandbox is not None
        proc = subprocess.run(["docker", "kill", env.sandbox.name], check=False, capture_output=True, text=True, timeout=60)
        f.note(f"docker kill {env.sandbox.name}: exit {proc.returncode}")
        return proc.returncode == 0

    episode_under_fault(f, ctx, kill, what="kill", join_timeout=120)
    if f.injected:
        next_episode_passes(f, ctx)
    none_left(f, ctx)
    return f


# ---------------------------------------------------------------------------- (c) container-oom
OOM_COUNTER = ("cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || "
               "cat /sys/fs/cgroup/memory.events 2>/dev/null")


def oom_kills(env: TerminalEnv) -> int | None:
    assert env.sandbox is not None
    res = env.sandbox.exec(OOM_COUNTER, user="root", timeout=30)
    for line in res.output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "oom_kill":
            return int(parts[1])
    return None


def fault_container_oom(ctx: Ctx) -> Fault:
    from terminal_env.tasks import load_task

    f = Fault("container-oom")
    task = load_task(WORD_STATS)
    limit_mb = int(task.memory_mb)
    hog = f"python3 -c \"x = b'x' * ({2 * limit_mb} * 2**20)\""
    env = TerminalEnv(task, run_id=ctx.run_id, max_steps=10)
    try:
        env.reset()
        before = oom_kills(env)
        obs, _, term, trunc, info = env.step(hog)
        f.injected = True
        f.note(f"memory limit {limit_mb} MB; the agent asked for {2 * limit_mb} MB")
        f.check("the agent's process was killed", info.get("exit_code") == 137,
                {"exit_code": info.get("exit_code"), "observation": obs[-120:]})
        after = oom_kills(env)
        f.check("by the OOM killer (cgroup oom_kill counter moved)",
                before is not None and after is not None and after > before, {"before": before, "after": after})
        f.check("the sandbox lives on", env.sandbox is not None and env.sandbox.status() == "running",
                env.sandbox.status() if env.sandbox is not None else None)
        obs, _, term, trunc, info = env.step("echo alive")
        f.check("the shell still answers", obs.strip() == "alive" and not term and not trunc, obs[-80:])
        obs, reward, term, trunc, info = env.step("#!submit")
        v = info.get("verification")
        f.check("the episode is verified and NOT masked (the agent's failure)",
                v is not None and not info.get("masked") and v.outcome.value == "failed" and reward == 0.0,
                {"outcome": v.outcome.value if v else None, "masked": info.get("masked"), "reward": reward})
    finally:
        try:
            env.close()
        except Exception as exc:  # noqa: BLE001
            f.check("close() did not raise", False, f"{type(exc).__name__}: {exc}")
    none_left(f, ctx)
    return f


# ---------------------------------------------------------------------------- (f) model-server-errors
def fault_model_server_errors(ctx: Ctx) -> Fault:
    from terminal_env.models.scripted_server import Disconnect, Fail, ScriptedServer, Stall
    from terminal_env.runner.config import RunConfig
    from terminal_env.runner.records import load_results
    from terminal_env.runner.run import Runner
    from terminal_env.trajectory import Trajectory

    tr = load_test_module("test_runner")  # reply(), turn_of(): the scripted model of the runner tests
    f = Fault("model-server-errors")

    def run(name: str, script: Any, opts: dict[str, Any], **kw: Any) -> tuple[Any, Any, list, Path]:
        out = ctx.workdir / f"{ctx.tag}-model-{name}"
        with ScriptedServer(script) as server:
            assert server.base_url.startswith("http://127.0.0.1:")
            cfg = RunConfig(tasks=[str(HARBOR_SUM)], harness="generic", model="openai:scripted", attempts=1,
                            concurrency=1, max_turns=6, progress=False,
                            model_options={"base_url": server.base_url, **opts}, **kw)
            summary = Runner(cfg, out, client=ctx.client).run()
            log_ = server.log
        (res,) = load_results(out)
        return res, summary, log_, out

    def first_then(bad: list[Any]) -> Callable[[dict], Any]:
        state = {"n": 0}

        def script(body: dict) -> Any:
            state["n"] += 1
            if state["n"] <= len(bad):
                return bad[state["n"] - 1]
            return tr.reply("generic", tr.turn_of(body))
        return script

    # 500 twice, then fine: retried inside the backend, the trial is scored
    res, _, reqs, out = run("500", first_then([Fail(500, body="overloaded")] * 2),
                            {"backoff": 0.05, "max_retries": 3})
    f.injected = True
    traj = Trajectory.load(out / "trials/harbor-sum/1/trajectory.json")
    retries = traj.turns[0].completion.retries if traj.turns and traj.turns[0].completion else None
    f.check("HTTP 500 x2: retried, scored, not masked",
            res.strict_success and not res.masked and res.tries == 1 and retries == 2,
            {"outcome": res.outcome, "masked": res.masked, "tries": res.tries, "retries_of_turn_0": retries,
             "posts": sum(1 for r in reqs if r.method == "POST")})
    # a dropped connection, then fine
    res, _, reqs, _ = run("disconnect", first_then([Disconnect()]), {"backoff": 0.05, "max_retries": 3})
    f.check("dropped connection: retried, scored, not masked", res.strict_success and not res.masked,
            {"outcome": res.outcome, "masked": res.masked, "posts": sum(1 for r in reqs if r.method == "POST")})
    # 429 with Retry-After: 1, then fine: the wait is honoured
    res, _, reqs, _ = run("429", first_then([Fail(429, body="slow down", headers={"Retry-After": "1"})]),
                          {"backoff": 0.05, "max_retries": 3})
    posts = [r.time for r in reqs if r.method == "POST"]
    gap = round(posts[1] - posts[0], 2) if len(posts) > 1 else None
    f.check("429 Retry-After 1: waited, retried, scored", res.strict_success and not res.masked
            and gap is not None and gap >= 0.95, {"outcome": res.outcome, "gap_s": gap})
    # a server that stalls: every try times out; after the trial's retries it is masked
    res, summary, reqs, out = run("stall", lambda body: Stall(30),
                                  {"timeout": 0.5, "max_retries": 1, "backoff": 0.05}, infra_retries=1)
    f.check("stalled server: masked model_error after the retries, excluded from the score",
            res.masked and res.termination == "model_error" and res.tries == 2 and "127.0.0.1" in (res.error or "")
            and summary["n_masked"] == 1 and summary["mean_at_k"]["value"] is None,
            {"masked": res.masked, "termination": res.termination, "tries": res.tries,
             "error": (res.error or "")[:160], "n_masked": summary["n_masked"],
             "mean_at_k": summary["mean_at_k"]["value"]})
    f.check("the first try's trajectory is kept", (out / "trials/harbor-sum/1/trajectory.try1.json").exists())
    return f


# ---------------------------------------------------------------------------- (e) corrupt-run-dir
def cli(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "1000"}  # rich: no wrapping of the message
    env.pop("TERMINAL_ENV_DEBUG", None)  # the one-line error a user sees, not a traceback
    return subprocess.run([sys.executable, "-m", "terminal_env.cli", *args], cwd=ROOT, check=False, capture_output=True,
                          text=True, timeout=timeout, env=env)


def names_file(stderr: str, path: Path) -> bool:
    flat = "".join(stderr.split())  # rich may wrap a long line anywhere
    return "".join(str(path).split()) in flat


def fault_corrupt_run_dir(ctx: Ctx) -> Fault:
    from terminal_env.runner.config import RunConfig
    from terminal_env.runner.records import load_results
    from terminal_env.runner.run import Runner

    f = Fault("corrupt-run-dir")
    out = ctx.workdir / f"{ctx.tag}-corrupt"
    cmd = ["run", "--tasks", str(HARBOR_SUM), "--model", "oracle", "--attempts", "2", "--out", str(out), "--quiet"]
    first = cli(cmd)
    if first.returncode != 0 or len(load_results(out)) != 2:
        f.note(f"could not make a finished run: exit {first.returncode}: {first.stderr[-300:]}")
        return f
    run_id = Runner(RunConfig(tasks=[str(HARBOR_SUM)], model="oracle", attempts=2), out, client=ctx.client).run_id
    manifest = out / "run.json"
    r1, r2 = out / "trials/harbor-sum/1/result.json", out / "trials/harbor-sum/2/result.json"
    good = {p: p.read_bytes() for p in (manifest, r1, r2)}
    cases = [
        ("run.json is not JSON", manifest, b"{not json", "damaged run manifest"),
        ("run.json of another schema", manifest, b'{"schema": "someone-else/v9", "config": {}}',
         "damaged run manifest"),
        ("run.json is empty", manifest, b"", "damaged run manifest"),
        ("result.json truncated", r1, good[r1][: len(good[r1]) // 2], "damaged trial result"),
        ("result.json is {}", r2, b"{}", "damaged trial result"),
        ("result.json of another trial", r2, good[r1], "holds the result of"),
    ]
    for what, path, damage, phrase in cases:
        path.write_bytes(damage)
        f.injected = True
        res = cli(cmd)
        err = res.stderr
        f.check(f"{what}: resume refuses naming {path.relative_to(out)}",
                res.returncode == 2 and names_file(err, path) and phrase in " ".join(err.split()),
                {"exit": res.returncode, "stderr": " ".join(err.split())[-300:]})
        f.check(f"{what}: the damaged file is left as it was", path.read_bytes() == damage)
        path.write_bytes(good[path])
    res = cli(cmd)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    f.check("repaired: the resume finishes with nothing redone",
            res.returncode == 0 and summary.get("n_trials") == 2 and all(r.strict_success for r in load_results(out))
            and all(p.read_bytes() == good[p] for p in (r1, r2)),
            {"exit": res.returncode, "n_trials": summary.get("n_trials")})
    left = [cname(c) for c in by_label(ctx.client, run_id)]
    f.check("no container of the run left", not left, left or "none")
    return f


# ---------------------------------------------------------------------------- (d) runner-sigkill
def fault_runner_sigkill(ctx: Ctx) -> Fault:
    from terminal_env.models.scripted_server import ScriptedServer, Stall
    from terminal_env.runner.config import RunConfig
    from terminal_env.runner.records import load_results
    from terminal_env.runner.run import Runner

    tr = load_test_module("test_runner")
    f = Fault("runner-sigkill")
    out = ctx.workdir / f"{ctx.tag}-sigkill"
    run_id = Runner(RunConfig(tasks=[str(HARBOR_SUM)], model="openai:m", attempts=3), out, client=ctx.client).run_id
    calls: list[int] = []
    lock = threading.Lock()

    def script(body: dict) -> Any:
        with lock:
            calls.append(tr.turn_of(body))
            n = len(calls)
        answer = tr.reply("generic", tr.turn_of(body))
        # the first request of trial 2 (requests 1-2 are trial 1's) waits, so the kill lands
        # while that trial's episode is live and its sandbox is up
        return Stall(20, then=answer) if n == 3 else answer

    with ScriptedServer(script) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        cmd = ["run", "--tasks", str(HARBOR_SUM), "--model", "openai:m", "--base-url", server.base_url,
               "--attempts", "3", "--out", str(out), "--quiet", "--max-turns", "6"]
        proc = subprocess.Popen([sys.executable, "-m", "terminal_env.cli", *cmd], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            live = wait_for(lambda: len(calls) >= 3 and [c for c in by_label(ctx.client, run_id)
                                                         if c.attrs.get("State") == "running"], 180, every=0.1)
            if not live or proc.poll() is not None:
                f.note(f"trial 2 never started (runner exit {proc.poll()}, {len(calls)} requests)")
                return f
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        f.injected = True
        finished_before = len(load_results(out))
        f.check("killed mid-run, with a trial's sandbox live", 1 <= finished_before < 3 and bool(live),
                {"finished_before": finished_before, "live_containers": [cname(c) for c in live]})
        orphans = [cname(c) for c in by_label(ctx.client, run_id)]
        f.check("its sandbox is orphaned", bool(orphans), orphans)
        gc = cli(["gc"], timeout=300)
        left = [cname(c) for c in by_label(ctx.client, run_id)]
        f.check("terminal-env gc removes it", gc.returncode == 0 and not left,
                {"exit": gc.returncode, "left": left})
        n_before = len(calls)
        done = cli(cmd, timeout=600)
        f.check("the same command resumes and finishes", done.returncode == 0,
                {"exit": done.returncode, "stderr": done.stderr[-300:]})
    results = load_results(out)
    f.check("every trial is recorded, all successes",
            [r.attempt for r in results] == [1, 2, 3] and all(r.strict_success for r in results),
            [(r.attempt, r.outcome, r.masked) for r in results])
    f.check("only the unfinished trials asked the model again (2 turns each)",
            len(calls) - n_before == 2 * (3 - finished_before),
            {"requests_after_resume": len(calls) - n_before, "unfinished": 3 - finished_before})
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    f.check("summary counts 3 trials", summary.get("n_trials") == 3, summary.get("n_trials"))
    left = [cname(c) for c in by_label(ctx.client, run_id)]
    f.check("no container of the run left", not left, left or "none")
    return f


# ---------------------------------------------------------------------------- (a) engine-restart
def _pids(name: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == name and not _zombie(int(d.name)):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone
    return stat[stat.rfind(")") + 2:].split()[0] in ("Z", "X")


def engine_manager() -> dict[str, Any]:
    """How the local engine was started, hence how to restart it the same way."""
    if os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock") != "unix:///var/run/docker.sock":
        raise RuntimeError(f"DOCKER_HOST={os.environ['DOCKER_HOST']}: not restarting a remote engine")
    pid1 = Path("/proc/1/comm").read_text().strip()
    if pid1 == "systemd" and shutil.which("systemctl"):
        active = subprocess.run(["systemctl", "is-active", "docker"], check=False, capture_output=True, text=True)
        if active.stdout.strip() == "active":
            return {"kind": "systemctl", "restart": ["systemctl", "restart", "docker"]}
    if shutil.which("service"):
        status = subprocess.run(["service", "docker", "status"], check=False, capture_output=True, text=True)
        if status.returncode == 0:
            return {"kind": "service", "restart": ["service", "docker", "restart"]}
    pids = _pids("dockerd")
    if len(pids) != 1:
        raise RuntimeError(f"expected one dockerd process, found {len(pids)}: {pids}")
    pid = pids[0]
    argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    environ = dict(kv.decode().split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                   if b"=" in kv)
    cwd = os.readlink(f"/proc/{pid}/cwd")
    return {"kind": "direct", "pid": pid, "argv": argv, "environ": environ, "cwd": cwd, "log": str(DOCKERD_LOG)}


def engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], check=False, capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def restart_engine(how: dict[str, Any], f: Fault) -> float:
    """Restart the engine as it was started; return seconds until it answers again."""
    t0 = time.monotonic()
    if how["kind"] in ("systemctl", "service"):
        proc = subprocess.run(how["restart"], check=False, capture_output=True, text=True, timeout=300)
        f.note(f"{' '.join(how['restart'])}: exit {proc.returncode}")
    else:
        pid = how["pid"]
        os.kill(pid, signal.SIGTERM)  # dockerd shuts down: containers stop, containerd stops
        if not wait_for(lambda: _zombie(pid), 120, every=0.2):
            f.note("dockerd did not stop within 120 s of SIGTERM: SIGKILL")
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda: _zombie(pid), 30, every=0.2)
        wait_for(lambda: not _pids("containerd"), 30, every=0.2)  # its managed containerd
        f.note(f"dockerd (pid {pid}) stopped after {time.monotonic() - t0:.1f} s")
        pidfile = Path("/var/run/docker.pid")
        try:  # a dockerd that had to be SIGKILLed leaves its pid file, and a new one refuses to start
            if pidfile.read_text().strip() == str(pid):
                pidfile.unlink()
                f.note("removed the stale /var/run/docker.pid")
        except OSError:
            pass
        # As scripts/install-engine.sh starts it (`setsid nohup dockerd >>LOG 2>&1 </dev/null &`),
        # with the argv, environment and working directory the old daemon had. Not the script
        # itself: with the engine down it would apt-get install whatever it finds missing.
        try:
            with open(how["log"], "ab") as logf:
                subprocess.Popen(how["argv"], env=how["environ"], cwd=how["cwd"], stdin=subprocess.DEVNULL,
                                 stdout=logf, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
            f.note(f"started {' '.join(how['argv'])} detached (log {how['log']})")
        except OSError as exc:
            f.note(f"could not start {' '.join(how['argv'])}: {exc}")
    up = wait_for(engine_answers, 120, every=0.5)
    if not up and how["kind"] == "direct":
        # never leave the machine without its engine: the project's own remedy, as a last resort
        script = ROOT / "scripts" / "install-engine.sh"
        proc = subprocess.run(["bash", str(script)], check=False, capture_output=True, text=True, timeout=300)
        f.note(f"the engine did not answer within 120 s; scripts/install-engine.sh: exit {proc.returncode}: "
               f"{proc.stderr.strip()[-300:]}")
        up = wait_for(engine_answers, 60, every=0.5)
    return time.monotonic() - t0 if up else -1.0


def fault_engine_restart(ctx: Ctx) -> Fault:
    f = Fault("engine-restart")
    try:
        how = engine_manager()
    except Exception as exc:  # noqa: BLE001
        f.note(f"cannot tell how the engine runs: {exc}")
        return f
    live_restore = ctx.client.info().get("LiveRestoreEnabled")

    def others_running() -> list[str]:
        return [cname(c) for c in ctx.client.containers.list(sparse=True)
                if not (c.attrs.get("Labels") or {}).get("terminal-env.run", "").startswith(ctx.tag)]

    others = others_running()
    if others and not ctx.force_engine_restart:
        f.note(f"refused: {len(others)} other container(s) are running on this engine "
               f"({', '.join(others[:8])}); a restart would stop them. Run at a quiet moment, or pass "
               "--force-engine-restart")
        return f
    f.note(f"engine managed by: {how['kind']}" + (f" ({' '.join(how['argv'])})" if how["kind"] == "direct" else "")
           + f"; live-restore: {live_restore}")
    downtime: dict[str, float] = {}

    def restart(env: TerminalEnv) -> bool:
        now = others_running()  # checked again at the last moment
        if now and not ctx.force_engine_restart:
            f.note(f"refused at the last moment: {len(now)} other container(s) started meanwhile ({', '.join(now[:8])})")
            return False
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)  # never leave the engine down on Ctrl-C
        try:
            downtime["s"] = restart_engine(how, f)
        finally:
            signal.signal(signal.SIGINT, old)
        return True

    episode_under_fault(f, ctx, restart, what="restart", join_timeout=240)
    if f.injected:
        up = downtime.get("s", -1.0)
        f.check("the engine answers again", up >= 0, f"{up:.1f} s after the restart began" if up >= 0 else "no")
        if up < 0:
            return f
        try:
            get_client().ping()
            f.check("this process's cached engine client works again", True)
        except Exception as exc:  # noqa: BLE001
            f.check("this process's cached engine client works again", False, f"{type(exc).__name__}: {exc}")
        next_episode_passes(f, ctx)
    none_left(f, ctx, exit_handler=True)
    return f


# ---------------------------------------------------------------------------- main
FAULTS: dict[str, Callable[[Ctx], Fault]] = {
    "container-killed": fault_container_killed,
    "container-oom": fault_container_oom,
    "model-server-errors": fault_model_server_errors,
    "corrupt-run-dir": fault_corrupt_run_dir,
    "runner-sigkill": fault_runner_sigkill,
    "engine-restart": fault_engine_restart,  # last: it disturbs the engine
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=list(FAULTS), help="run only these faults")
    ap.add_argument("--skip", nargs="+", metavar="NAME", choices=list(FAULTS), default=[],
                    help="run all but these faults")
    ap.add_argument("--list", action="store_true", help="list the faults and exit")
    ap.add_argument("--force-engine-restart", action="store_true",
                    help="restart the engine even while other containers run on it (they are stopped)")
    ap.add_argument("--run-tag", default="faults",
                    help="prefix of the run label of every container made here (the pid is appended)")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(FAULTS))
        return 0
    names = [n for n in (args.only or list(FAULTS)) if n not in args.skip]
    t0 = time.time()
    workdir = Path(tempfile.mkdtemp(prefix="te-faults-"))
    ctx = Ctx(args.run_tag, workdir, args.force_engine_restart)
    records = []
    interrupted = False
    try:
        for name in names:
            log(f"fault {name}")
            try:
                f = FAULTS[name](ctx)
            except KeyboardInterrupt:
                f = Fault(name)
                f.error = "interrupted (Ctrl-C)"
                interrupted = True
            except Exception as exc:  # noqa: BLE001 - a crash of the harness is a failed fault
                f = Fault(name)
                f.error = f"{type(exc).__name__}: {exc}"
                log(traceback.format_exc())
            rec = f.record()
            records.append(rec)
            log(json.dumps({k: rec[k] for k in ("name", "injected", "survived", "detail")}))
            if interrupted:
                log("faults: interrupted: removing what this run made")
                break
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the cleanup runs to its end
        try:
            leaked = [cname(c) for c in tagged(ctx.client, ctx.tag)]
        except Exception as exc:  # noqa: BLE001 - the engine may be down after a failed restart
            leaked = [f"(engine unreachable: {exc})"]
        cleanup.remove_all()
        try:  # nothing is left behind, whatever happened
            for c in tagged(ctx.client, ctx.tag):
                c.remove(force=True, v=True)
            left = [cname(c) for c in tagged(ctx.client, ctx.tag)]
        except Exception as exc:  # noqa: BLE001
            log(f"faults: final sweep: {exc}")
            left = [f"(final sweep failed: {exc})"]
        shutil.rmtree(workdir, ignore_errors=True)
    bad = [r["name"] for r in records if not r["survived"]]
    result = {
        "benchmark": "faults",
        "faults": records,
        "not_run": [n for n in FAULTS if n not in names],
        "totals": {"run": len(records), "injected": sum(r["injected"] for r in records),
                   "survived": sum(r["survived"] for r in records), "not_survived": bad},
        "run_tag": ctx.tag,
        "leaked_containers": len(leaked), "leaked_container_names": leaked[:20],
        "containers_left_after_final_sweep": len(left),
        "interrupted": interrupted,
        "ok": not bad and not leaked and bool(records) and not interrupted,
        "wall_s": round(time.time() - t0, 1),
    }
    text = json.dumps(result, indent=1)
    print(text, flush=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if left or ((leaked or bad) and not interrupted):
        return 1
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
