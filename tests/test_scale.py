"""Rollouts at scale on one host: warm pools, vector environments, the asyncio rollout API, and a
remote engine through DOCKER_HOST (a TCP endpoint on loopback)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest

from terminal_env import TaskSpec, TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.errors import ConfigError, ImageNotFoundError
from terminal_env.models.simple import OracleBackend
from terminal_env.scale.warm import CreationLimiter, WarmPool

ROOT = Path(__file__).resolve().parent.parent
TASK = str(ROOT / "tests/data/tasks/harbor-sum")


def run_label(client, run_id):
    return client.containers.list(all=True, sparse=True, filters={"label": f"terminal-env.run={run_id}"})


def wait_gone(client, run_id, keep=0, timeout=30):
    deadline = time.monotonic() + timeout
    while len(run_label(client, run_id)) > keep and time.monotonic() < deadline:
        time.sleep(0.1)
    return len(run_label(client, run_id))


def test_creation_limiter_spaces_creations():
    lim = CreationLimiter(rate=20, burst=2)
    t0 = time.monotonic()
    for _ in range(8):
        lim.acquire()
    assert time.monotonic() - t0 >= (8 - 2) / 20 * 0.9  # cannot be faster than the rate
    assert CreationLimiter(None).acquire() == 0.0
    with pytest.raises(ConfigError):
        CreationLimiter(0)
    with pytest.raises(ConfigError):
        WarmPool(size=-1)


@pytest.mark.docker
def test_warm_episode_sees_nothing_of_the_previous_one(client, base_image):
    spec = TaskSpec(name="leak", instruction="x", image=base_image)
    with WarmPool(size=1) as pool:
        env = TerminalEnv(spec, pool=pool, client=client, run_id="leak-test")
        assert pool.prefill(env._recipe_key(), env._make_ready, n=2) == 2
        _, info = env.reset()
        assert info["warm"] is True
        first = env.sandbox.container.id
        env.step("echo secret > /app/left.txt; echo s > /tmp/left; export LEFT=1; cd /tmp")
        env.step("bash -c 'exec -a leftover-proc sleep 1000' >/dev/null 2>&1 &")
        env.step("echo 'echo BASHRC-RAN' >> ~/.bashrc; alias ls=false")
        assert "leftover-proc" in env.step("ps -eo args")[0]
        obs, info = env.reset()
        assert info["warm"] is True and env.sandbox.container.id != first
        assert env.step("ls /app/left.txt /tmp/left 2>&1; echo $LEFT; pwd")[0].split("\n")[:4] == [
            "ls: cannot access '/app/left.txt': No such file or directory",
            "ls: cannot access '/tmp/left': No such file or directory", "", "/app"]
        assert "leftover-proc" not in env.step("ps -eo args")[0]
        assert "alias" not in env.step("type ls | head -1")[0]
        env.close()
        # the used containers are removed in the background; the pool keeps one idle sandbox
        assert wait_gone(client, "leak-test", keep=1) == 1
        assert pool.stats()["hits"] == 2
    assert wait_gone(client, "leak-test") == 0


@pytest.mark.docker
def test_a_dead_idle_sandbox_is_never_handed_out(client, base_image):
    spec = TaskSpec(name="dead", instruction="x", image=base_image)
    with WarmPool(size=1) as pool:
        env = TerminalEnv(spec, pool=pool, client=client, run_id="dead-test")
        assert pool.prefill(env._recipe_key(), env._make_ready) == 1
        (idle,) = run_label(client, "dead-test")  # sparse: kill by id
        idle.kill()
        obs, info = env.reset()
        assert env.step("echo alive")[0] == "alive\n"
        assert env.sandbox.container.id != idle.id
        env.close()
    assert wait_gone(client, "dead-test") == 0


@pytest.mark.docker
def test_a_pool_that_cannot_fill_says_why(client, base_image):
    spec = TaskSpec(name="noimg", instruction="x", image="terminal-env/no-such-image:1")
    with WarmPool(size=2) as pool:
        env = TerminalEnv(spec, pool=pool, client=client, run_id="noimg-test")
        with pytest.raises(ImageNotFoundError, match="no-such-image"):
            env.reset()
        assert pool.prefill(env._recipe_key(), env._make_ready, timeout=30) == 0
        (recipe,) = pool.stats()["recipes"].values()
        assert recipe["failures_in_a_row"] >= WarmPool.MAX_FAILURES and "no-such-image" in recipe["last_error"]
        env.close()
    assert run_label(client, "noimg-test") == []


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_envs(mode, base_image):
    spec = TaskSpec(name="vec", instruction="count", image=base_image)
    kwargs = {"task": spec, "max_steps": 2}
    if mode == "sync":
        envs = gym.make_vec("terminal_env:TerminalEnv-v0", num_envs=3, vectorization_mode="sync", **kwargs)
    else:
        envs = gym.vector.AsyncVectorEnv([lambda: gym.make("terminal_env:TerminalEnv-v0", **kwargs)] * 2,
                                         shared_memory=False)
    try:
        obs, info = envs.reset(seed=0)
        n = envs.num_envs
        assert len(obs) == n and all("count" in o for o in obs)
        obs, reward, term, trunc, info = envs.step([f"echo env{i}" for i in range(n)])
        assert list(obs) == [f"env{i}\n" for i in range(n)] and not any(term) and not any(trunc)
        obs, reward, term, trunc, info = envs.step(["#!submit"] + ["true"] * (n - 1))
        assert term[0] and all(trunc[1:])  # submitted; step budget of 2 used up
        obs, *_ = envs.step(["echo again"] * n)  # next-step autoreset: fresh episodes
        assert all("count" in o for o in obs)
    finally:
        envs.close()


@pytest.mark.docker
def test_rollout_api_many_episodes(client, base_image):
    from terminal_env.models.scripted_server import ScriptedServer
    from terminal_env.scale.rollout import RolloutPool, rollout

    def script(body):
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        if turn == 0:
            return {"tool_calls": [{"name": "write_file", "arguments": {
                "path": "/app/sum.py", "content": "import sys\nprint(sum(int(a) for a in sys.argv[1:]))\n"}}]}
        return {"tool_calls": [{"name": "submit", "arguments": {}}]}

    async def main(base_url):
        async with RolloutPool(max_concurrency=3, warm=1, creation_rate=10, client=client,
                               env_config={"run_id": "rollout-test"}) as pool:
            jobs = [pool.rollout("oracle", TASK), pool.rollout("nop", TASK), pool.rollout("oracle", TASK),
                    pool.rollout("openai:m", TASK, "tool-calling", base_url=base_url, params={"logprobs": True})]
            trajs = await asyncio.gather(*jobs)
            stats = pool.stats()
        return trajs, stats

    with ScriptedServer(script) as server:
        trajs, stats = asyncio.run(main(server.base_url))
    assert [t.strict_success for t in trajs] == [True, False, True, True]
    model = trajs[3]
    assert model.harness == "tool-calling"
    assert all(t.completion.logprobs for t in model.turns)  # log-probs reach the trajectory
    assert stats["made"] >= 4 and stats["hits"] + stats["misses"] == 4
    assert run_label(client, "rollout-test") == []
    one = asyncio.run(rollout("nop", TASK))
    assert one.termination == "submitted" and not one.strict_success


class _Forwarder:
    """A TCP endpoint on loopback for the local engine's unix socket: a 'remote' engine."""

    def __init__(self, target="/var/run/docker.sock", port=0):
        self.target = target
        self.srv = socket.create_server(("127.0.0.1", port))
        self.port = self.srv.getsockname()[1]
        self.connections = 0
        self.live: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            self.connections += 1
            up = socket.socket(socket.AF_UNIX)
            up.connect(self.target)
            self.live += [conn, up]
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        """The 'engine' stops: no new connections, and the open ones (the shell's) are cut."""
        self.srv.close()
        for s in self.live:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


@pytest.mark.docker
def test_remote_engine_through_docker_host(monkeypatch, base_image):
    from terminal_env.sandbox import engine

    fwd = _Forwarder()
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{fwd.port}")
    try:
        remote = engine.get_client()  # a client of its own, keyed by DOCKER_HOST
        assert "127.0.0.1" in remote.api.base_url
        env = TerminalEnv(TASK)  # builds (cached), runs and verifies through the TCP endpoint
        reward, info = run_episode(env, OracleBackend())
        assert reward == 1.0 and env.sandbox.client is remote
        env.reset()  # the hijacked exec socket of the shell works over TCP too
        assert env.step("echo over-tcp")[0] == "over-tcp\n"
        env.close()
        assert fwd.connections > 0
    finally:
        fwd.close()


@pytest.mark.docker
def test_an_engine_that_stops_mid_episode_is_an_infrastructure_error(monkeypatch, client, base_image):
    """The engine goes away under a running episode: the trajectory is masked (never the agent's
    failure), close() does not raise, and once the engine is back nothing of the run is left."""
    from terminal_env.agent import run_agent
    from terminal_env.harness import get_harness
    from terminal_env.models.simple import ScriptedBackend

    fwd = _Forwarder()
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{fwd.port}")
    env = TerminalEnv(TaskSpec(name="enginestop", instruction="x", image=base_image), run_id="engine-stop")

    def model(messages):
        if sum(m["role"] == "assistant" for m in messages) == 1:
            fwd.close()  # the engine stops between two turns
        return "```bash\necho still-here\n```"

    traj = run_agent(env, get_harness("generic"), ScriptedBackend(model), max_turns=4)
    assert traj.masked and traj.termination == "infra_error", (traj.termination, traj.error)
    assert traj.verification is None
    env.close()  # must not raise while the engine is unreachable
    assert run_label(client, "engine-stop")  # still there: nobody could remove it
    back = _Forwarder(port=fwd.port)  # the engine answers again
    try:
        from terminal_env.sandbox import cleanup

        cleanup.remove_all()  # what the exit handler does
        assert wait_gone(client, "engine-stop") == 0
    finally:
        back.close()
