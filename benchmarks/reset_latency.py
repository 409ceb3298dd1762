"""Cold-start latency of ``TerminalEnv.reset()`` against a bare ``docker run`` of the same image.

Usage: python benchmarks/reset_latency.py [--n 30] [--warmup 2] [--runtimes runc,runsc] [--out FILE]

For two tasks, the bundled hello task (image terminal-env/base:bookworm-1) and the test task
``tests/data/tasks/harbor-sum`` (its own built image), in one process and interleaved round by
round (the order rotates each round, so drift on a shared machine hits every variant alike):

* (a) floor: docker-py ``client.containers.create(...)`` + ``container.start()`` with exactly the
  options ``Sandbox.start`` uses (image, entrypoint, init, CPU/memory/pids limits, no network,
  labels, working dir...), timed until ``start()`` returns, i.e. until the engine says the
  container runs. Removed afterwards, untimed.
* (b) the same through the low-level API (``client.api.create_container`` + ``client.api.start``):
  what docker-py's high-level wrapper itself costs (it inspects the container after creating it).
* (c) ours: ``env.reset()`` without a warm pool, from the call to its return (the sandbox is up,
  the task prepared, a bash session answered its first prompt). The previous episode is closed
  before the timer starts, so no teardown is included. ``info["timings"]`` gives the breakdown.
  Also timed, for information: a reset while an episode is live (it removes that container).
* (d) ours with ``first_shell="attach"``: as (c), but the container's main process starts the
  first bash on the container's TTY and the session attaches to it (no ``docker exec`` on the
  cold path). Its container differs from the floor's by design (TTY, open stdin, log driver
  ``none``, a sh wrapper as entrypoint); the differences are listed.
* warm: ``env.reset()`` taking a ready sandbox from a ``terminal_env.scale.warm.WarmPool`` (size 1,
  refilled between resets, untimed), if that module exists; else null.

Under each OCI runtime of ``--runtimes`` that the engine has (default runc and gVisor's runsc),
the variants (a)-(d) run for both tasks, the floor with the options that runtime's sandboxes get
(under runsc: the statx fix's read-only mounts and the wider host pids limit);
results of runtimes other than runc are keyed ``task@runtime``. The warm pool is measured under
runc only.

The target of the issue: median (c) <= 1.2 x median (a), both measured in this run. The output
also lists the engine API calls one cold reset makes (a counting wrapper around the client's
HTTP requests) and checks that the floor's container really has the options of ours.
One JSON document goes to stdout (and to --out); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import secrets
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Callable

import _common

from terminal_env import TerminalEnv
from terminal_env.sandbox import LABEL_MANAGED, LABEL_PREFIX, SandboxConfig, cleanup
from terminal_env.sandbox.engine import get_client
from terminal_env.sandbox.runtimes import runtime_of
from terminal_env.task import hello_task

ROOT = Path(__file__).resolve().parent.parent
HARBOR_SUM = ROOT / "tests" / "data" / "tasks" / "harbor-sum"
DOCKER = os.environ.get("DOCKER", "docker")
TARGET_RATIO = 1.2

log = partial(_common.log, prefix="[bench] ")
#: seconds in, {n, median_ms, p90_ms, mean_ms, min_ms, max_ms} out
stats = partial(_common.stats, fields=("n", "median", "p90", "mean", "min", "max"),
                scale=1000, digits=2, suffix="_ms")


# ---------------------------------------------------------------------- the floor
def floor_options(cfg: SandboxConfig, run_id: str) -> dict[str, Any]:
    """docker-py ``containers.create`` keyword arguments: the options of ``Sandbox.start``."""
    runtime = runtime_of(cfg.runtime)
    opts: dict[str, Any] = dict(
        image=cfg.image,
        entrypoint=["sleep", "infinity"],
        command=[],
        name=f"te-bench-floor-{secrets.token_hex(4)}",
        hostname=cfg.hostname,
        labels={
            LABEL_MANAGED: "1",
            f"{LABEL_PREFIX}.run": run_id,
            f"{LABEL_PREFIX}.task": cfg.task,
            **cleanup.owner_labels(),
            **cfg.labels,
        },
        detach=True,
        init=True,
        nano_cpus=int(cfg.cpus * 1e9),
        mem_limit=f"{cfg.memory_mb}m",
        memswap_limit=f"{cfg.memory_mb}m",
        pids_limit=runtime.process_limits(cfg.pids_limit)[0],
        environment=dict(cfg.env),
        volumes=runtime.container_options().get("binds"),
        security_opt=["no-new-privileges"],
        stop_signal="SIGKILL",
    )
    if not cfg.network:
        opts["network_mode"] = "none"
    if cfg.workdir:
        opts["working_dir"] = cfg.workdir
    if cfg.runtime:
        opts["runtime"] = cfg.runtime
    return opts


_HOST_KEYS = ("init", "nano_cpus", "mem_limit", "memswap_limit", "pids_limit", "security_opt",
              "network_mode", "runtime", "binds")


def floor_highlevel(client: Any, cfg: SandboxConfig, run_id: str) -> tuple[float, float, str]:
    """(create seconds, start seconds, id) through docker-py's high-level API."""
    opts = floor_options(cfg, run_id)
    t0 = time.perf_counter()
    c = client.containers.create(**opts)  # POST /containers/create, then GET .../json
    t1 = time.perf_counter()
    c.start()
    return t1 - t0, time.perf_counter() - t1, c.id


def floor_lowlevel(client: Any, cfg: SandboxConfig, run_id: str) -> tuple[float, float, str]:
    """(create seconds, start seconds, id) through the low-level API: no inspect."""
    opts = floor_options(cfg, run_id)
    opts["binds"] = opts.pop("volumes")  # the low-level API's name for them
    api = client.api
    host = {k: v for k in _HOST_KEYS if k in opts and (v := opts.pop(k)) is not None}
    t0 = time.perf_counter()
    cid = api.create_container(host_config=api.create_host_config(**host), **opts)["Id"]
    t1 = time.perf_counter()
    api.start(cid)
    return t1 - t0, time.perf_counter() - t1, cid


# ---------------------------------------------------------------------- API call counting
class CallLog:
    """Wraps ``client.api.request`` (every engine request of docker-py goes through it)."""

    def __init__(self, api: Any):
        self.api, self.orig, self.calls = api, api.request, []
        self.on = False

    def __enter__(self) -> "CallLog":
        def request(method: str, url: str, *a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return self.orig(method, url, *a, **kw)
            finally:
                if self.on:
                    path = re.sub(r"^.*?/v[0-9.]+/", "/", url.split("?")[0])
                    path = re.sub(r"/(containers|exec)/[0-9a-f]{64}", r"/\1/{id}", path)
                    self.calls.append((f"{method} {path}", time.perf_counter() - t0))

        self.api.request = request
        return self

    def __exit__(self, *exc: object) -> None:
        del self.api.request  # the instance attribute shadowed the class method

    def summary(self) -> list[dict[str, Any]]:
        return [{"call": c, "ms": round(dt * 1000, 2)} for c, dt in self.calls]


# ---------------------------------------------------------------------- options check
def options_diff(client: Any, floor_id: str, ours_id: str) -> list[str]:
    """Differences between the floor's container and ours, beyond names and per-run labels."""
    a, b = client.api.inspect_container(floor_id), client.api.inspect_container(ours_id)
    diffs = []
    for key in sorted(set(a["HostConfig"]) | set(b["HostConfig"])):
        if a["HostConfig"].get(key) != b["HostConfig"].get(key):
            diffs.append(
                f"HostConfig.{key}: {a['HostConfig'].get(key)!r} != {b['HostConfig'].get(key)!r}"
            )
    for key in ("Image", "Entrypoint", "Cmd", "Env", "WorkingDir", "Hostname", "User", "Tty",
                "OpenStdin", "StopSignal"):
        if a["Config"].get(key) != b["Config"].get(key):
            diffs.append(f"Config.{key}: {a['Config'].get(key)!r} != {b['Config'].get(key)!r}")
    if sorted(a["Config"]["Labels"]) != sorted(b["Config"]["Labels"]):
        diffs.append("Config.Labels keys differ")
    return diffs


def remove(client: Any, cid: str) -> None:
    client.api.remove_container(cid, force=True, v=True)


# ---------------------------------------------------------------------- one task
def bench_task(label: str, env: TerminalEnv, env_attach: TerminalEnv, client: Any, run_id: str,
               n: int, warmup: int) -> dict[str, Any]:
    cfg = env.task.sandbox_config(run_id=run_id, runtime=env.config.runtime)
    log(f"{label}: image {cfg.image}")

    # The floor's options against ours, on one container of each.
    _, _, fid = floor_highlevel(client, cfg, run_id)
    env.reset()
    diffs = options_diff(client, fid, env.sandbox.id)
    remove(client, fid)
    env.close()
    if diffs:
        log(f"{label}: the floor's container differs from ours: {diffs}")
    _, _, fid = floor_highlevel(client, cfg, run_id)
    env_attach.reset()
    diffs_attach = options_diff(client, fid, env_attach.sandbox.id)
    remove(client, fid)
    env_attach.close()

    # The engine calls of one cold reset.
    with CallLog(client.api) as calls:
        calls.on = True
        env.reset()
        calls.on = False
    env.close()
    with CallLog(client.api) as calls_attach:
        calls_attach.on = True
        env_attach.reset()
        calls_attach.on = False
    env_attach.close()

    samples: dict[str, list[float]] = {
        "floor_docker_py": [], "floor_low_level": [], "reset": [], "reset_after_episode": [],
        "reset_attach": [], "reset_attach_after_episode": []}
    timings: dict[str, list[float]] = {}
    timings_attach: dict[str, list[float]] = {}
    parts: dict[str, list[float]] = {}

    def run_floor(fn: Callable[..., tuple[float, float, str]], key: str, keep: bool) -> None:
        t_create, t_start, cid = fn(client, cfg, run_id)
        remove(client, cid)
        if keep:
            samples[key].append(t_create + t_start)
            parts.setdefault(f"{key}.create", []).append(t_create)
            parts.setdefault(f"{key}.start", []).append(t_start)

    def run_reset(keep: bool, e: TerminalEnv = env, key: str = "reset",
                  tm: dict[str, list[float]] = timings) -> None:
        t0 = time.perf_counter()
        _, info = e.reset()
        dt = time.perf_counter() - t0
        # Informative: a reset that ends a live episode also removes its container first.
        t1 = time.perf_counter()
        e.reset()
        dt_after = time.perf_counter() - t1
        e.close()
        if keep:
            samples[key].append(dt)
            samples[f"{key}_after_episode"].append(dt_after)
            for k, v in info.get("timings", {}).items():
                tm.setdefault(k, []).append(v)

    variants = [
        lambda keep: run_floor(floor_highlevel, "floor_docker_py", keep),
        lambda keep: run_floor(floor_lowlevel, "floor_low_level", keep),
        run_reset,
        lambda keep: run_reset(keep, env_attach, "reset_attach", timings_attach),
    ]
    for i in range(warmup + n):
        keep = i >= warmup
        for j in range(len(variants)):
            variants[(i + j) % len(variants)](keep)
        if keep and (i - warmup + 1) % 10 == 0:
            log(f"{label}: {i - warmup + 1}/{n} rounds, reset median so far "
                f"{statistics.median(samples['reset']) * 1000:.1f} ms, floor "
                f"{statistics.median(samples['floor_docker_py']) * 1000:.1f} ms")

    res = {k: stats(v) for k, v in samples.items()}
    floor, floor_ll, ours = (
        res[k]["median_ms"] for k in ("floor_docker_py", "floor_low_level", "reset")
    )
    ratio = ours / floor
    ours_attach = res["reset_attach"]["median_ms"]
    ratio_attach = ours_attach / floor
    log(f"{label}: floor {floor} ms, low-level floor {floor_ll} ms, reset {ours} ms, "
        f"ratio {ratio:.3f}; attach reset {ours_attach} ms, ratio {ratio_attach:.3f}")
    return {
        "image": cfg.image,
        "floor_docker_py": res["floor_docker_py"],
        "floor_low_level": res["floor_low_level"],
        "reset_cold": res["reset"],
        "reset_cold_after_episode": res["reset_after_episode"],
        "reset_breakdown_median_ms": {
            k: round(statistics.median(v) * 1000, 2) for k, v in sorted(timings.items())
        },
        "api_calls_one_reset": calls.summary(),
        "ratio_reset_to_floor": round(ratio, 3),
        # Per round (the two ran seconds apart), then the median: steadier under outside load.
        "ratio_paired_median": round(statistics.median(
            r / f for r, f in zip(samples["reset"], samples["floor_docker_py"])), 3),
        "ratio_reset_to_low_level_floor": round(ours / floor_ll, 3),
        "floor_parts_median_ms": {
            k: round(statistics.median(v) * 1000, 2) for k, v in sorted(parts.items())
        },
        # From the create phase alone (start is the same call in both): far less noisy than
        # the difference of the totals.
        "docker_py_wrapper_cost_ms": round(
            1000 * (statistics.median(parts["floor_docker_py.create"])
                    - statistics.median(parts["floor_low_level.create"])), 2),
        "target_ratio_le_1_2": ratio <= TARGET_RATIO,
        "floor_options_differ": diffs,
        "attach": {
            "reset_cold": res["reset_attach"],
            "reset_cold_after_episode": res["reset_attach_after_episode"],
            "reset_breakdown_median_ms": {
                k: round(statistics.median(v) * 1000, 2) for k, v in sorted(timings_attach.items())
            },
            "api_calls_one_reset": calls_attach.summary(),
            "ratio_reset_to_floor": round(ratio_attach, 3),
            "ratio_paired_median": round(statistics.median(
                r / f for r, f in zip(samples["reset_attach"], samples["floor_docker_py"])), 3),
            "ratio_to_exec_reset": round(ours_attach / ours, 3),
            "target_ratio_le_1_2": ratio_attach <= TARGET_RATIO,
            "floor_options_differ": diffs_attach,
        },
    }


def bench_warm(label: str, task: Any, run_id: str, n: int, client: Any) -> dict[str, Any] | None:
    """``env.reset()`` taking a sandbox from a warm pool (``terminal_env.scale.warm.WarmPool``), if the
    module exists. Before each timed reset the pool is given time to hold a ready sandbox."""
    try:
        from terminal_env.scale.warm import WarmPool
    except ImportError:
        return None
    pool = WarmPool(size=1)
    env = TerminalEnv(task, pool=pool, run_id=run_id, client=client)
    samples: list[float] = []
    hits = 0

    def wait_ready(timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            recipes = pool.stats()["recipes"].values()
            if any(r["idle"] >= 1 for r in recipes):
                return
            time.sleep(0.01)

    try:
        env.reset()  # the first one is a miss: it registers the recipe and starts the refill
        env.close()
        for _ in range(n):
            wait_ready()
            t0 = time.perf_counter()
            _, info = env.reset()
            samples.append(time.perf_counter() - t0)
            hits += bool(info.get("warm"))
            env.close()
    finally:
        env.close()
        pool.close()
    out = stats(samples)
    log(f"{label}: warm reset median {out['median_ms']} ms ({hits}/{n} from the pool)")
    return {"reset_warm": out, "hits": hits, "pool_size": 1}


def sh(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(list(argv), capture_output=True, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=30, help="timed rounds per task")
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    ap.add_argument("--runtimes", default="runc,runsc",
                    help="OCI runtimes to measure under (comma-separated); absent ones are reported")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()

    client = get_client()
    run_id = f"bench-{secrets.token_hex(4)}"
    tasks = {"hello": hello_task(), "harbor_sum": HARBOR_SUM}
    offered = set(client.info().get("Runtimes") or {})
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    unavailable = {r: f"the engine offers {sorted(offered)}" for r in runtimes if r not in offered}
    results: dict[str, Any] = {}
    warm: dict[str, Any] = {}
    for runtime in [r for r in runtimes if r in offered]:
        for name, task in tasks.items():
            label = name if runtime == "runc" else f"{name}@{runtime}"
            env = TerminalEnv(task, run_id=run_id, client=client, first_shell="exec", runtime=runtime)
            env_attach = TerminalEnv(task, run_id=run_id, client=client, first_shell="attach", runtime=runtime)
            try:
                results[label] = bench_task(label, env, env_attach, client, run_id, args.n, args.warmup)
            finally:
                env.close()
                env_attach.close()
            if runtime == "runc":
                warm[label] = bench_warm(label, task, run_id, args.n, client)
                if warm[label] is not None:
                    floor = results[label]["floor_docker_py"]["median_ms"]
                    warm[label]["ratio_to_floor"] = round(warm[label]["reset_warm"]["median_ms"] / floor, 4)
    if all(v is None for v in warm.values()):
        warm_doc: dict[str, Any] | None = None
    else:
        warm_doc = warm

    leaked = sh(DOCKER, "ps", "-a", "-q", "--filter", f"label={LABEL_MANAGED}=1",
                "--filter", f"label={LABEL_PREFIX}.run={run_id}").stdout.decode().split()
    ver = client.version()
    doc = {
        "benchmark": "reset_latency",
        "tasks": results,
        "runtimes_unavailable": unavailable,
        "warm": warm_doc,
        "derived": {
            label: {
                "floor_median_ms": r["floor_docker_py"]["median_ms"],
                "reset_median_ms": r["reset_cold"]["median_ms"],
                "ratio": r["ratio_reset_to_floor"],
                "ratio_paired_median": r["ratio_paired_median"],
                "target_ratio_le_1_2": r["target_ratio_le_1_2"],
                "attach_reset_median_ms": r["attach"]["reset_cold"]["median_ms"],
                "attach_ratio": r["attach"]["ratio_reset_to_floor"],
                "attach_ratio_paired_median": r["attach"]["ratio_paired_median"],
                "attach_target_ratio_le_1_2": r["attach"]["target_ratio_le_1_2"],
            }
            for label, r in results.items()
        },
        "metadata": {
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "nproc": os.cpu_count(),
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            "docker_server_version": ver.get("Version"),
            "docker_api_version": client.api.api_version,
            "n": args.n,
            "warmup": args.warmup,
            "run_id": run_id,
        },
        "leaked_containers": leaked,
        "notes": [
            "ms, time.perf_counter() around one call; per round the four variants run one after "
            "another in a rotating order; containers are removed between variants, untimed.",
            "floor_docker_py = client.containers.create(**same options) + container.start(): the "
            "engine's create and start, plus docker-py's inspect after create.",
            "floor_low_level = client.api.create_container + client.api.start, same options.",
            "reset_cold = env.reset() on an env whose previous episode was closed untimed: no warm "
            "pool, no teardown. Breakdown from info['timings'] (medians, ms).",
            "reset_cold_after_episode = env.reset() while an episode is live (right after a cold "
            "reset): the same plus removing the previous container. Informative, not the target.",
            "api_calls_one_reset: every HTTP request to the engine during one cold reset, with "
            "its latency; the exec's hijacked stream is not a request and is not listed.",
            "ratio_reset_to_floor = median(reset_cold) / median(floor_docker_py), the issue's "
            "criterion; ratio_paired_median = median over rounds of reset/floor of that round.",
            "attach: variant (d), env.reset() with first_shell='attach' (the first bash is the "
            "container's main process, reached through the attach stream); same fields as (c).",
            "floor_options_differ: HostConfig and Config fields of the floor's container against "
            "the env's container; must be empty for the comparison to be fair.",
        ],
    }
    _common.emit(doc, args.out)
    return 0 if not leaked else 1


if __name__ == "__main__":
    sys.exit(main())
