"""Rollouts at scale on this host: throughput of many concurrent environments, and host memory
per live environment. Prints one JSON document on stdout (progress on stderr).

    python benchmarks/scale.py throughput [--envs 32] [--steps 20] [--episodes 2] [--warm 4]
    python benchmarks/scale.py memory [--envs 32]

throughput
    ``--envs`` threads each play ``--episodes`` episodes of the `harbor-sum` test task in one
    process, sharing one Docker client and one warm pool: ``--steps - 1`` shell commands, the
    task's solution written on the way, then submit and the protected verifier. Reports verified
    episodes per minute, the machine's CPU-seconds per episode (every core's busy time over the
    run, from /proc/stat: this process, the engine and the sandboxes alike; run it on an
    otherwise idle machine), step latency, verification time and every error. Baselines in the
    same run: the same episodes one at a time (``--envs 1``), so the speed-up of concurrency on
    this machine is visible; and the floor, as many threads each doing per episode what no
    sandboxed, verified episode can avoid (create, start and remove a bare container of the
    task's image, and run the task's tests in it with docker exec, the tests put in place
    beforehand), whose CPU-seconds per episode the episode's are held against.
    Targets (issue #39): with 64 environments on 2 cores, at least 100 verified episodes a
    minute, 0 errors, 0 leaked, and CPU per episode within 1.5x the floor's.

memory
    ``--envs`` live environments (reset, shell running) in this process. Host memory is counted
    as proportional set size (PSS: shared pages split between their users), for (a) this Python
    process, (b) the engine's per-container shim processes, (c) the processes inside each
    container. Baseline in the same run: as many bare containers of the same image (the floor any
    container costs: shim + init + sleep). Target: at most 15 MB of host memory per live
    environment.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import threading
import time
from pathlib import Path

from _common import log, stats
from episode_cpu import machine_seconds

from terminal_env import TerminalEnv
from terminal_env.sandbox.engine import get_client
from terminal_env.scale.warm import WarmPool

ROOT = Path(__file__).resolve().parent.parent
TASK = str(ROOT / "tests" / "data" / "tasks" / "harbor-sum")
SOLVE = "printf 'import sys\\nprint(sum(int(a) for a in sys.argv[1:]))\\n' > /app/sum.py"


# ---------------------------------------------------------------------------- throughput
def run_threads(worker, n: int) -> tuple[float, float]:
    """``worker(i)`` on ``n`` threads at once: (wall seconds, the machine's CPU-seconds)."""
    t0, cpu0 = time.perf_counter(), machine_seconds()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, machine_seconds() - cpu0


def play(envs: int, steps: int, episodes: int, warm: int, run_id: str) -> dict:
    client = get_client()
    step_lat: list[float] = []
    verify: list[float] = []
    resets: list[float] = []
    errors: list[str] = []
    outcomes: dict[str, int] = {}
    lock = threading.Lock()
    pool = WarmPool(size=warm, workers=2) if warm else None

    def worker(i: int) -> None:
        env = TerminalEnv(TASK, client=client, pool=pool, run_id=run_id, max_steps=steps + 1)
        try:
            for _ in range(episodes):
                t0 = time.perf_counter()
                env.reset()
                with lock:
                    resets.append(time.perf_counter() - t0)
                for s in range(steps - 1):
                    cmd = SOLVE if s == steps // 2 else f"echo step {s} $((RANDOM % 100)) | tr a-z A-Z"
                    t0 = time.perf_counter()
                    obs, _, term, trunc, info = env.step(cmd)
                    with lock:
                        step_lat.append(time.perf_counter() - t0)
                    if info.get("exit_code") not in (0, None) or term or trunc:
                        raise RuntimeError(f"step {s} ended early or failed: {obs[-200:]!r}")
                obs, reward, term, trunc, info = env.step("#!submit")
                res = info["verification"]
                with lock:
                    verify.append(res.duration)
                    outcomes[res.outcome.value] = outcomes.get(res.outcome.value, 0) + 1
                if not res.strict_success:
                    raise RuntimeError(f"verification: {res.outcome.value}: {res.message[:200]}")
        except Exception as exc:  # noqa: BLE001 - every error is counted and reported
            with lock:
                errors.append(f"env {i}: {type(exc).__name__}: {exc}")
        finally:
            env.close()

    TerminalEnv(TASK, client=client).close()  # build the task image outside the timing
    wall, cpu = run_threads(worker, envs)
    if pool is not None:
        pool.close()
    n = envs * episodes
    return {
        "envs": envs, "steps_per_episode": steps, "episodes": n, "wall_s": round(wall, 2),
        "episodes_per_minute": round(60 * (n - len(errors)) / wall, 1),
        "machine_cpu_s_per_episode": round(cpu / n, 3),
        "errors": len(errors), "error_messages": errors[:10], "outcomes": outcomes,
        "step_ms": stats(step_lat, ("median", "p99"), scale=1000, digits=2),
        "reset_s": stats(resets, ("median", "p90"), digits=3),
        "verify_s": stats(verify, ("median", "p90"), digits=3),
        "leaked_containers": len(client.containers.list(all=True, sparse=True,
                                                        filters={"label": f"terminal-env.run={run_id}"})),
    }


def floor(envs: int, episodes: int) -> dict:
    """What each episode cannot avoid, done by as many threads: a bare container of the task's
    image created, started and removed, and the task's tests run in it by docker exec (the
    tests put in place before the clock, as a verifier with nothing to guard against would)."""
    from terminal_env.tasks import load_task

    client = get_client()
    task = load_task(TASK)
    probe = TerminalEnv(TASK, client=client)  # builds the task's image if it is not there
    image = probe.task.image
    probe.close()
    errors: list[str] = []
    lock = threading.Lock()
    archive = _tests_archive(task)

    def worker(i: int) -> None:
        for _ in range(episodes):
            c = None
            try:
                c = client.containers.create(image, ["sleep", "infinity"], network_mode="none", init=True,
                                             labels={"terminal-env.managed": "1", "terminal-env.run": "bench-floor"})
                c.start()
                c.put_archive("/", archive)
                run = c.exec_run(list(task.test_command), workdir=task.workdir or "/")
                if run.exit_code != 0:
                    raise RuntimeError(f"the tests failed in the bare container: {run.output[-300:]!r}")
            except Exception as exc:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(f"floor {i}: {type(exc).__name__}: {exc}")
            finally:
                if c is not None:
                    c.remove(force=True)

    wall, cpu = run_threads(worker, envs)
    # a create that failed on the client's side may still have made its container
    for left in client.containers.list(all=True, filters={"label": "terminal-env.run=bench-floor"}):
        left.remove(force=True)
    n = envs * episodes
    return {"envs": envs, "episodes": n, "wall_s": round(wall, 2),
            "episodes_per_minute": round(60 * (n - len(errors)) / wall, 1),
            "machine_cpu_s_per_episode": round(cpu / n, 3), "errors": len(errors), "error_messages": errors[:5]}


def _tests_archive(task) -> bytes:
    """The task's tests with the solution's file already in place (the floor's tests pass)."""
    import io
    import tarfile

    files = {f"tests/{n.lstrip('/')}": (src if isinstance(src, bytes) else Path(src).read_bytes())
             for n, src in task.verifier_files().items()}
    files["app/sum.py"] = b"import sys\nprint(sum(int(a) for a in sys.argv[1:]))\n"
    files["logs/verifier/.keep"] = b""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# ---------------------------------------------------------------------------- memory
def pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def shim_pids(container_ids: set[str]) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and b"containerd-shim" in cmd[0]:
            for i, arg in enumerate(cmd[:-1]):
                if arg == b"-id" and cmd[i + 1].decode() in container_ids:
                    out.append(int(d.name))
    return out


def daemon_kb() -> int:
    """PSS of dockerd and containerd (shared by all containers; counted by their growth)."""
    total = 0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                name = (d / "comm").read_text().strip()
            except OSError:
                continue
            if name in ("dockerd", "containerd"):
                total += pss_kb(int(d.name))
    return total


def container_pids(client, cid: str) -> list[int]:
    top = client.api.top(cid, ps_args="-eo pid")
    return [int(p[0]) for p in top.get("Processes") or []]


def host_memory(client, cids: list[str]) -> dict:
    shims = sum(pss_kb(p) for p in shim_pids(set(cids)))
    inside = sum(pss_kb(p) for c in cids for p in container_pids(client, c))
    return {"shim_kb": shims, "container_kb": inside}


def memory(envs: int, image_task: str) -> dict:
    client = get_client()
    warmup = TerminalEnv(image_task, client=client)  # build the image, load every module
    warmup.reset()
    warmup.step("true")
    warmup.close()
    gc.collect()
    # baseline: bare containers of the same image, same limits (what any container costs)
    spec = warmup.task
    image = spec.image
    d0 = daemon_kb()
    bare = [client.containers.run(image, ["sleep", "infinity"], detach=True, init=True,
                                  network_mode="none", labels={"terminal-env.managed": "1",
                                                               "terminal-env.run": "bench-mem-bare"})
            for _ in range(envs)]
    time.sleep(1.0)
    base = host_memory(client, [c.id for c in bare])
    base["daemons_kb"] = daemon_kb() - d0
    for c in bare:
        c.remove(force=True)
    gc.collect()
    time.sleep(1.0)
    before, d0 = pss_kb(os.getpid()), daemon_kb()
    live = []
    for i in range(envs):
        env = TerminalEnv(image_task, client=client, run_id="bench-mem")
        env.reset()
        env.step("echo ready")
        live.append(env)
    gc.collect()
    time.sleep(1.0)
    after = pss_kb(os.getpid())
    ours = host_memory(client, [e.sandbox.container.id for e in live])
    ours["daemons_kb"] = daemon_kb() - d0
    for e in live:
        e.close()
    per_env_process = (after - before) / envs
    per_env_total = per_env_process + (ours["shim_kb"] + ours["container_kb"] + ours["daemons_kb"]) / envs
    per_bare = (base["shim_kb"] + base["container_kb"] + base["daemons_kb"]) / envs
    return {
        "envs": envs,
        "per_env_mb": {
            "python_process": round(per_env_process / 1024, 2),
            "engine_shim": round(ours["shim_kb"] / envs / 1024, 2),
            "inside_container": round(ours["container_kb"] / envs / 1024, 2),
            "engine_daemons_growth": round(ours["daemons_kb"] / envs / 1024, 2),
            "total": round(per_env_total / 1024, 2),
        },
        "baseline_bare_container_mb": {
            "engine_shim": round(base["shim_kb"] / envs / 1024, 2),
            "inside_container": round(base["container_kb"] / envs / 1024, 2),
            "engine_daemons_growth": round(base["daemons_kb"] / envs / 1024, 2),
            "total": round(per_bare / 1024, 2),
        },
        "over_bare_container_mb": round((per_env_total - per_bare) / 1024, 2),
        "target_total_mb": 15, "target_met": per_env_total / 1024 <= 15,
        "note": "PSS in MB per live environment; dockerd and containerd count by their growth "
                "while the environments are live",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["throughput", "memory"])
    ap.add_argument("--envs", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--episodes", type=int, default=2)
    ap.add_argument("--warm", type=int, default=4)
    args = ap.parse_args()
    if args.what == "memory":
        log(f"memory: {args.envs} live environments")
        print(json.dumps(memory(args.envs, TASK), indent=1))
        return
    log("baseline: one environment at a time")
    base = play(1, args.steps, 4, 0, "bench-tp-base")
    log(f"floor: {args.envs} threads x {args.episodes} bare containers and test runs")
    bare = floor(args.envs, args.episodes)
    log(f"concurrent: {args.envs} environments x {args.episodes} episodes")
    conc = play(args.envs, args.steps, args.episodes, args.warm, "bench-tp")
    ratio = conc["machine_cpu_s_per_episode"] / max(bare["machine_cpu_s_per_episode"], 1e-9)
    print(json.dumps({
        "concurrent": conc, "baseline_sequential": base, "floor": bare,
        "speedup_episodes_per_minute": round(conc["episodes_per_minute"] / max(base["episodes_per_minute"], 1e-9), 2),
        "cpu_per_episode_over_floor": round(ratio, 3),
        "target": "64 environments: >= 100 verified episodes a minute, 0 errors, 0 leaked, "
                  "CPU per episode within 1.5x the floor's",
        "target_met": (conc["errors"] == 0 and conc["leaked_containers"] == 0 and conc["envs"] >= 64
                       and conc["steps_per_episode"] >= 20 and conc["episodes_per_minute"] >= 100
                       and ratio <= 1.5),
        "cpus": os.cpu_count(),
    }, indent=1))


if __name__ == "__main__":
    main()
