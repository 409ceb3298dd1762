"""Engine connection: real engine where marked `docker`; the failure paths need no engine."""

from __future__ import annotations

import pytest

from terminal_env.errors import EngineUnavailableError
from terminal_env.sandbox import engine

MISSING_SOCKET = "unix:///nonexistent.sock"


@pytest.fixture
def unreachable_engine(monkeypatch):
    """Point DOCKER_HOST at a socket that does not exist, with no cached client to hide it."""
    engine.clear_client_cache()
    monkeypatch.setenv("DOCKER_HOST", MISSING_SOCKET)
    yield
    engine.clear_client_cache()


def test_unreachable_engine_error_names_socket_and_remedy(unreachable_engine):
    with pytest.raises(EngineUnavailableError) as info:
        engine.get_client(timeout=5)
    message = str(info.value)
    assert MISSING_SOCKET in message
    assert "terminal-env doctor --fix" in message
    # No chain of requests/urllib3 internals for the user to wade through.
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_engine_status_reports_unreachable_without_raising(unreachable_engine):
    status = engine.engine_status()
    assert status["reachable"] is False
    assert status["address"] == MISSING_SOCKET
    assert MISSING_SOCKET in status["error"]


def test_ensure_engine_refuses_to_start_a_local_daemon_for_a_remote_host(unreachable_engine):
    # DOCKER_HOST names another engine: starting the local dockerd would not fix that one.
    with pytest.raises(EngineUnavailableError, match="not starting an engine automatically"):
        engine.ensure_engine(wait=1, log=lambda _: None)


@pytest.mark.docker
def test_get_client_pings_and_is_cached_per_process():
    engine.clear_client_cache()
    client = engine.get_client()
    assert client.ping() is True
    assert engine.get_client() is client


@pytest.mark.docker
def test_engine_status_of_live_engine():
    status = engine.engine_status()
    assert status["reachable"] is True, status["error"]
    assert status["version"] and status["api_version"]
    assert "runc" in status["runtimes"]
    assert status["error"] is None


@pytest.mark.docker
def test_ensure_engine_is_a_no_op_when_the_engine_answers():
    messages: list[str] = []
    engine.ensure_engine(log=messages.append)
    assert messages == []  # nothing installed, nothing started
