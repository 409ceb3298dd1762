"""Rollouts and benchmark runs on a real Ray cluster of two nodes, on loopback.

The module starts a head node and a second worker node (two raylets, each with its own
resources) as separate ``ray start --block`` processes sharing one Docker engine, runs episodes
through them, kills a worker under an episode, and stops exactly the processes it started.

Ray replaces a node address of 127.0.0.1 by the host's first non-loopback address
(``ray._private.services.resolve_ip_for_localhost``). Nothing here may talk to a non-loopback
address, so the nodes are started through a two-line shim that keeps ``--node-ip-address`` as
given, and the drivers (this process, the ``terminal-env run`` subprocess) resolve their own
address to loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which only changes that lookup).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from terminal_env.errors import ConfigError
from terminal_env.models.scripted_server import Fail, ScriptedServer, Stall
from terminal_env.scale.rollout import RolloutPool

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
TASK = str(ROOT / "tests/data/tasks/harbor-sum")
GOOD = "printf 'import sys\\nprint(sum(int(a) for a in sys.argv[1:]))\\n' > /app/sum.py"
LOOPBACK_RAY = (
    "import sys\n"
    "from ray._private import services\n"
    "services.resolve_ip_for_localhost = lambda host: host\n"
    "services.get_node_ip_address = lambda address=None: '127.0.0.1'\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv[0] = 'ray'\n"
    "sys.exit(main())\n"
)
DRIVER_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def turn_of(body: dict) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def terminus(turn: int) -> str:
    if turn == 0:
        return json.dumps({"analysis": "empty", "plan": "write sum.py",
                           "commands": [{"keystrokes": GOOD + "\n", "duration": 1.0}], "task_complete": False})
    return json.dumps({"analysis": "written", "plan": "finish", "commands": [], "task_complete": True})


def containers_of(client, pid: int) -> list:
    labels = ["terminal-env.managed=1", f"terminal-env.owner-pid={pid}",
              f"terminal-env.owner-host={socket.gethostname()}"]
    return client.containers.list(all=True, filters={"label": labels})


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ---------------------------------------------------------------------- the cluster


def _session_members(sids: set[int]) -> list[int]:
    """Live processes of the sessions ``sids`` (each ``ray start`` runs in a session of its own,
    and raylets start their workers inside it)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z" and int(fields[3]) in sids:
            out.append(int(entry))
    return out


def _stop(procs: list[subprocess.Popen]) -> None:
    sids = {p.pid for p in procs}
    for p in procs:  # `ray start --block` stops its node's processes on SIGTERM
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    while _session_members(sids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in _session_members(sids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _start_node(args: list[str], log: Path, env: dict[str, str], procs: list) -> None:
    proc = subprocess.Popen([sys.executable, "-c", LOOPBACK_RAY, "start", "--block", *args],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True, cwd=log.parent)
    procs.append(proc)
    deadline = time.monotonic() + 90
    while "Ray runtime started" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"ray start {' '.join(args)} failed:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(client, base_image):
    from terminal_env.tasks import load_task
    from terminal_env.tasks.build import build_image

    build_image(load_task(TASK), client=client, log=lambda m: None)  # not twice, once per worker
    tmp = Path(tempfile.mkdtemp(prefix="te-ray-", dir="/tmp"))  # short: Ray's socket paths are capped
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--node-ip-address=127.0.0.1", f"--temp-dir={tmp}", "--object-store-memory=100000000",
              "--disable-usage-stats"]
    procs: list[subprocess.Popen] = []
    mp = pytest.MonkeyPatch()
    try:
        _start_node(["--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false", *common],
                    tmp / "head.log", env, procs)
        _start_node([f"--address=127.0.0.1:{port}", "--num-cpus=1", *common], tmp / "worker.log", env, procs)
        mp.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)  # this driver: loopback
        ray.init(address=f"127.0.0.1:{port}", logging_level="WARNING", log_to_driver=False)
        wait_for(lambda: sum(n["Alive"] for n in ray.nodes()) == 2, 60, "two live Ray nodes")
        nodes = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
        yield SimpleNamespace(address=f"127.0.0.1:{port}", port=port, nodes=set(nodes), tmp=tmp,
                              head=next(i for i, n in nodes.items() if "node:__internal_head__" in n["Resources"]))
    finally:
        if ray.is_initialized():
            ray.shutdown()
        mp.undo()
        _stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------- tests


def test_unreachable_address_is_a_config_error_in_bounded_time(tmp_path):
    """Before the cluster exists in this process: a closed port, a port that is not Ray, and the
    CLI (one line, no traceback)."""
    closed = free_port()
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=f"127.0.0.1:{closed}.*ray start --head"):
        RolloutPool(ray_address=f"127.0.0.1:{closed}")
    with ScriptedServer([]) as server, pytest.raises(ConfigError, match="not a Ray cluster"):
        RolloutPool(ray_address=f"127.0.0.1:{server.port}")
    assert time.monotonic() - t0 < 15
    assert not ray.is_initialized()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "terminal_env.cli", "run", "--tasks", TASK, "--model", "nop",
                           "--attempts", "1", "--out", str(tmp_path / "run"), "--quiet",
                           "--ray-address", f"127.0.0.1:{closed}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, **DRIVER_ENV})
    assert proc.returncode == 2 and "error:" in proc.stderr and f"127.0.0.1:{closed}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 30
    assert not Path(str(tmp_path / "run")).exists()


def test_rollouts_land_on_both_nodes(cluster, client):
    async def main():
        async with RolloutPool(ray_address=cluster.address, max_concurrency=4, warm=1) as pool:
            workers = pool.executor.workers
            trajs = await pool.map("oracle", [TASK, TASK]) + await asyncio.gather(
                pool.rollout("oracle", TASK), pool.rollout("nop", TASK), pool.rollout("nop", TASK))
            return workers, trajs, pool.stats()

    workers, trajs, stats = asyncio.run(main())
    with pytest.raises(ConfigError, match="connected to the Ray cluster at 127.0.0.1"):
        RolloutPool(ray_address="127.0.0.1:1")  # this process is on another cluster already
    assert {w["node_id"] for w in workers} == cluster.nodes  # one worker per node
    oracle, nop = trajs[:3], trajs[3:]
    assert all(t.strict_success and t.reward == 1.0 and not t.masked for t in oracle)
    assert all(not t.strict_success and t.termination == "submitted" and not t.masked for t in nop)
    assert {t.extra["ray"]["node_id"] for t in trajs} == cluster.nodes
    assert all(t.extra["ray"]["tries"] == 1 for t in trajs)
    rows = stats["workers"]
    assert sum(r["episodes"] for r in rows) == 5 and sum(r["failures"] for r in rows) == 0
    assert all(r["warm"]["size"] == 1 and r["warm"]["made"] >= 1 for r in rows)  # each its own warm pool
    assert stats["deaths"] == 0
    for w in workers:  # closed: no sandbox of any worker is left, warm ones included
        assert containers_of(client, w["pid"]) == []


def test_a_multi_container_task_on_ray_workers_with_warm_pools(cluster, client, compose_tool):
    """Each episode's services start with its sandbox on the worker (warm ones included), the
    tests ask them, and nothing of any stack is left once the pool closes."""
    compose = str(ROOT / "tests/data/tasks/harbor-compose")

    async def main():
        async with RolloutPool(ray_address=cluster.address, max_concurrency=2, warm=1) as pool:
            workers = pool.executor.workers
            trajs = await asyncio.gather(pool.rollout("oracle", compose), pool.rollout("nop", compose),
                                         pool.rollout("oracle", compose))
            return workers, trajs

    workers, trajs = asyncio.run(main())
    assert [t.strict_success for t in trajs] == [True, False, True]
    assert not any(t.masked for t in trajs)
    for w in workers:
        assert containers_of(client, w["pid"]) == []
        flt = {"label": [f"terminal-env.owner-pid={w['pid']}", "terminal-env.managed=1"]}
        assert client.networks.list(filters=flt) == [] and client.volumes.list(filters=flt) == []


def test_a_scripted_model_server_drives_terminus_on_a_worker(cluster):
    with ScriptedServer(lambda body: terminus(turn_of(body))) as server:
        async def main():
            async with RolloutPool(ray_address=cluster.address, ray_workers=1) as pool:
                return await pool.rollout("openai:scripted", TASK, "terminus", base_url=server.base_url,
                                          params={"logprobs": True, "temperature": 0.6}, seed=3)

        traj = asyncio.run(main())
        bodies = server.requests
    assert traj.harness == "terminus" and traj.strict_success and traj.termination == "submitted"
    assert len(bodies) == len(traj.turns) >= 2 and {b["temperature"] for b in bodies} == {0.6}
    assert traj.turns[0].completion.logprobs  # token log-probs travel back with the trajectory
    assert traj.extra["ray"]["node_id"] in cluster.nodes


def test_a_worker_killed_mid_episode_is_retried_elsewhere_and_its_sandbox_removed(cluster, client):
    asked = []

    def script(body):
        asked.append(body)
        return Stall(60) if len(asked) == 1 else terminus(turn_of(body))

    with ScriptedServer(script) as server:
        async def main():
            async with RolloutPool(ray_address=cluster.address, max_concurrency=2) as pool:
                job = asyncio.ensure_future(pool.rollout("openai:scripted", TASK, "terminus", base_url=server.base_url))
                while not asked:  # the episode's sandbox is up and the model was asked
                    await asyncio.sleep(0.05)
                (busy,) = [w for w in pool.stats()["workers"] if w["inflight"]]
                assert containers_of(client, busy["pid"]), "the episode's sandbox should exist"
                os.kill(busy["pid"], signal.SIGKILL)
                traj = await job
                deadline = time.monotonic() + 60  # the dead worker's replacement comes up
                while len(pool.executor.workers) < 2 and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                return busy, traj, pool.stats(), pool.executor.workers

        busy, traj, stats, workers = asyncio.run(main())
    assert traj.strict_success and not traj.masked
    assert traj.extra["ray"]["tries"] == 2 and traj.extra["ray"]["node_id"] != busy["node_id"]
    assert containers_of(client, busy["pid"]) == []
    assert stats["deaths"] == 1 and stats["orphans_removed"] >= 1 and stats["cleanup_errors"] == []
    dead = [r for r in stats["workers"] if r["pid"] == busy["pid"]]
    assert dead and not dead[0]["alive"] and dead[0]["failures"] == 1
    assert busy["node_id"] in {w["node_id"] for w in workers}  # restarted on its node


def test_a_worker_killed_with_no_retries_left_comes_back_masked(cluster, client):
    from terminal_env.scale.cluster import RayRollouts

    with ScriptedServer(lambda body: Stall(60)) as server:
        rr = RayRollouts(cluster.address, workers=1, max_task_retries=0)
        try:
            (worker,) = rr.workers

            async def main():
                job = asyncio.ensure_future(rr.rollout("openai:scripted", TASK, "terminus",
                                                       backend_options={"base_url": server.base_url}))
                while not server.requests:
                    await asyncio.sleep(0.05)
                ray.kill(worker["actor"])
                return await job

            traj = asyncio.run(main())
        finally:
            rr.close()
    assert traj.masked and traj.termination == "infra_error" and traj.reward is None
    assert "ActorDiedError" in traj.error and "killed" in traj.error and str(worker["pid"]) in traj.error
    assert traj.task.name == "harbor-sum" and traj.extra["ray"]["tries"] == 1
    assert containers_of(client, worker["pid"]) == []


def test_terminal_env_run_on_ray_writes_a_complete_run_directory(cluster, client, tmp_path):
    from terminal_env.cli import main
    from terminal_env.runner.records import load_results
    from terminal_env.trajectory import Trajectory

    out = tmp_path / "run"
    with ScriptedServer(lambda body: terminus(turn_of(body))) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "terminal_env.cli", "run", "--tasks", TASK, "--model", "openai:m",
             "--base-url", server.base_url, "--harness", "terminus", "--attempts", "2", "--concurrency", "2",
             "--out", str(out), "--quiet", "--ray-address", cluster.address],
            cwd=ROOT, capture_output=True, text=True, timeout=180, env={**os.environ, **DRIVER_ENV},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        n_requests = len(server.requests)
    results = load_results(out)
    assert [r.attempt for r in results] == [1, 2]
    assert all(r.strict_success and r.termination == "submitted" and r.tries == 1 for r in results)
    assert sum(r.turns for r in results) == n_requests and all(r.prompt_tokens > 0 for r in results)
    for attempt in (1, 2):
        trial = out / f"trials/harbor-sum/{attempt}"
        assert {"result.json", "trajectory.json", "recording.cast", "verifier.json", "verifier.log"} <= {
            p.name for p in trial.iterdir()}
        assert Trajectory.load(trial / "trajectory.json").strict_success
        assert json.loads((trial / "recording.cast").read_text().splitlines()[0])["version"] == 2
        assert json.loads((trial / "verifier.json").read_text())["outcome"] == "passed"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_trials"] == 2 and summary["mean_at_k"]["value"] == 1.0
    assert main(["report", str(out)]) == 0
    assert "harbor-sum" in (out / "report/index.html").read_text()
    from terminal_env.runner.config import RunConfig
    from terminal_env.runner.run import Runner

    run_id = Runner(RunConfig(tasks=[TASK], model="nop"), out).run_id
    assert client.containers.list(all=True, filters={"label": f"terminal-env.run={run_id}"}) == []


def test_runner_retries_a_trial_whose_worker_died(cluster, client, tmp_path):
    """Runner(..., ray_address=...): the worker playing a trial is SIGKILLed; the runner's infra
    retry plays it again on another worker, and the dead worker's sandbox is removed."""
    import threading

    from terminal_env.runner.config import RunConfig
    from terminal_env.runner.records import load_results
    from terminal_env.runner.run import Runner

    asked = []

    def script(body):
        asked.append(body)
        return Stall(60) if len(asked) == 1 else terminus(turn_of(body))

    with ScriptedServer(script) as server:
        cfg = RunConfig(tasks=[TASK], harness="terminus", model="openai:m", attempts=1, max_turns=6,
                        progress=False, infra_retries=1, model_options={"base_url": server.base_url})
        runner = Runner(cfg, tmp_path / "run", ray_address=cluster.address)
        done: dict = {}
        thread = threading.Thread(target=lambda: done.setdefault("summary", runner.run()))
        thread.start()
        wait_for(lambda: asked, 60, "the first model request")
        label = f"terminal-env.run={runner.run_id}"
        (box,) = client.containers.list(all=True, filters={"label": label})
        pid = int(box.labels["terminal-env.owner-pid"])
        os.kill(pid, signal.SIGKILL)
        thread.join(timeout=120)
    assert done["summary"]["mean_at_k"]["value"] == 1.0
    (result,) = load_results(tmp_path / "run")
    assert result.strict_success and result.tries == 2 and not result.masked
    assert containers_of(client, pid) == []
    assert client.containers.list(all=True, filters={"label": label}) == []


def test_ctrl_c_stops_a_ray_run_leaving_nothing_and_a_resume_finishes_it(cluster, client, tmp_path):
    out = tmp_path / "run"
    calls = []

    def script(body):
        calls.append(body)
        return Stall(60) if len(calls) == 1 else terminus(turn_of(body))

    with ScriptedServer(script) as server:
        cmd = [sys.executable, "-m", "terminal_env.cli", "run", "--tasks", TASK, "--model", "openai:m",
               "--base-url", server.base_url, "--harness", "terminus", "--attempts", "1", "--out", str(out),
               "--quiet", "--ray-address", cluster.address]
        env = {**os.environ, **DRIVER_ENV}
        # Ctrl-C reaches it as from a terminal, even where the tests run from a shell that ignores
        # SIGINT (a command started in the background with `&`; its children inherit the ignore)
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        wait_for(lambda: calls or proc.poll() is not None, 60, "the first model request")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "resume with the same command" in err, err[-2000:]
        assert not (out / "trials/harbor-sum/1/result.json").exists()
        from terminal_env.runner.config import RunConfig
        from terminal_env.runner.run import Runner

        label = f"terminal-env.run={Runner(RunConfig(tasks=[TASK], model='nop'), out).run_id}"
        assert client.containers.list(all=True, filters={"label": label}) == []
        assert sum(n["Alive"] for n in ray.nodes()) == 2  # the cluster it did not start still runs
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_trials"] == 1 and summary["mean_at_k"]["value"] == 1.0


def test_a_refused_key_stops_a_ray_run_like_a_local_one(cluster, tmp_path):
    from terminal_env.runner.config import RunConfig
    from terminal_env.runner.run import ModelSetupError, Runner

    with ScriptedServer(lambda body: Fail(401, body="invalid api key")) as server:
        cfg = RunConfig(tasks=[TASK], model="openai:m", attempts=2, progress=False,
                        model_options={"base_url": server.base_url, "max_retries": 0})
        with pytest.raises(ModelSetupError, match="401"):
            Runner(cfg, tmp_path / "run", ray_address=cluster.address).run()
        assert len(server.requests) == 1  # not retried; the second attempt never asked
    assert list((tmp_path / "run").glob("trials/*/*/result.json")) == []
