"""Terminal tasks over OpenEnv's protocol (terminal_env.integrations.openenv).

Needs openenv-core (``pip install 'terminal-env[openenv]'``, which CI installs) and Docker. The
server is OpenEnv's own FastAPI app under uvicorn on a loopback port this test picks; the client is
OpenEnv's WebSocket client; an episode is played over HTTP to the verifier's reward.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv", reason="the OpenEnv adapter's tests need: pip install 'terminal-env[openenv]'")
uvicorn = pytest.importorskip("uvicorn")

from terminal_env.errors import ConfigError  # noqa: E402
from terminal_env.integrations.openenv import TerminalAction, TerminalEnvClient, make_app  # noqa: E402
from terminal_env.tasks.toy import write_toy_family  # noqa: E402

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, base_image) -> list[Path]:
    return write_toy_family(tmp_path_factory.mktemp("toy") / "fam", n_train=2, n_validation=0, seed=9)


@pytest.fixture(scope="module")
def server(tasks):
    """The app on 127.0.0.1 at a free port, in a thread; its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = make_app([str(p) for p in tasks], reward="partial_progress", max_concurrent_envs=4)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=30)


def _answer(task: Path) -> str:
    return (task / "solution" / "solve.sh").read_text().splitlines()[-1]


def test_a_client_plays_an_episode_over_http_to_the_verified_reward(server, tasks):
    task = tasks[1]
    with TerminalEnvClient(base_url=server).sync() as env:
        result = env.reset(task=task.name)
        assert not result.done and result.observation.task == task.name
        assert "a bash shell is ready in /app" in result.observation.output
        result = env.step(TerminalAction(action="cat /app/answer.txt"))
        assert "No such file" in result.observation.output and "[exit code 1]" in result.observation.output
        assert env.state().step_count == 1
        env.step(TerminalAction(action=_answer(task)))
        result = env.step(TerminalAction(action="#!submit"))
        assert result.done and result.reward == 1.0
        assert result.observation.outcome == "passed" and not result.observation.masked
        # A new episode in the same session: by seed, a near miss scores partial progress.
        result = env.reset(seed=0)
        assert result.observation.task == tasks[0].name
        env.step(TerminalAction(action="touch /app/answer.txt"))
        result = env.step(TerminalAction(action="#!submit"))
        assert result.done and result.reward == 0.25 and result.observation.outcome == "partial"


def test_two_sessions_are_two_sandboxes(server, tasks):
    with TerminalEnvClient(base_url=server).sync() as a, TerminalEnvClient(base_url=server).sync() as b:
        a.reset(task=tasks[0].name)
        b.reset(task=tasks[0].name)
        a.step(TerminalAction(action="echo from-a > /tmp/mark"))
        seen = b.step(TerminalAction(action="cat /tmp/mark"))
        assert "from-a" not in seen.observation.output and "No such file" in seen.observation.output


def test_bad_input_is_named(server, tasks):
    with TerminalEnvClient(base_url=server).sync() as env:
        with pytest.raises(Exception, match="no task 'nosuch'"):
            env.reset(task="nosuch")
        env.reset(task=tasks[0].name)
        with pytest.raises(Exception, match="#!timeout needs a positive number"):
            env.step(TerminalAction(action="#!timeout x\nls"))
        # the session survives a refused action
        assert "ok" in env.step(TerminalAction(action="echo ok")).observation.output
    with pytest.raises(ConfigError, match="unknown reward"):
        make_app([str(tasks[0])], reward="bogus")
    with pytest.raises(ConfigError, match="no such task directory"):
        make_app(["/nonexistent/task"])
    with pytest.raises(ConfigError, match="at least 1"):
        make_app([str(tasks[0])], max_concurrent_envs=0)
