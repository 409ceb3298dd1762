"""Shared fixtures. Integration tests use the real Docker engine and the project's base image;
when either is missing they fail with the remedy instead of silently skipping."""

from __future__ import annotations

import pytest

BASE = "terminal-env/base:bookworm-1"

#: helpers imported by tests, not tests: their doctest collection would import torch
collect_ignore = ["tiny_lm.py"]


@pytest.fixture(scope="session")
def client():
    from terminal_env.sandbox.engine import get_client

    return get_client()


@pytest.fixture(scope="session")
def base_image(client):
    from terminal_env.sandbox.images import require_image

    require_image(client, BASE)  # raises with "run `terminal-env images bootstrap`"
    return BASE


@pytest.fixture
def sandbox(client, base_image):
    from terminal_env import Sandbox, SandboxConfig

    with Sandbox(SandboxConfig(image=base_image, workdir="/app", task="pytest"), client=client) as sb:
        yield sb


@pytest.fixture
def session(sandbox):
    from terminal_env import ShellSession

    s = ShellSession(sandbox).start()
    yield s
    s.close()


@pytest.fixture(autouse=True, scope="session")
def _no_containers_left(request):
    """After the whole run, no container of this process may remain."""
    yield
    if not any(item.get_closest_marker("docker") for item in request.session.items):
        return
    from terminal_env.sandbox import cleanup

    assert cleanup.live_count() == 0, "sandboxes still registered at the end of the test run"
