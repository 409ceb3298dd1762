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


#: the OCI runtimes the attack and verifier suites run under (where the engine has them). Under
#: gVisor they are the exhaustive run (``pytest -m slow -k runsc``, about 5 minutes): the default
#: run keeps gVisor's own behaviours (test_runtimes.py) and one quality gate under it (test_pool.py)
RUNTIMES = ["runc", pytest.param("runsc", marks=pytest.mark.slow)]


def skip_unless_runtime(client, name: str) -> str:
    offered = sorted((client.info().get("Runtimes") or {}).keys())
    if name not in offered:
        pytest.skip(
            f"OCI runtime {name!r} is not registered in this Docker engine (it offers {offered}): "
            "scripts/install-engine.sh installs and registers gVisor's runsc where the Debian "
            "mirror has it (see SECURITY.md, 'Stronger options')"
        )
    return name


@pytest.fixture(scope="module", params=RUNTIMES)
def runtime(request, client, base_image):
    """Every OCI runtime the engine offers among runc and runsc; the others skip, saying why."""
    return skip_unless_runtime(client, request.param)


@pytest.fixture(scope="session")
def compose_tool():
    """The compose tool that multi-container tasks need, or a skip saying why it is not here: like
    runsc, scripts/install-engine.sh installs it where the machine's Debian sources have it."""
    from terminal_env.errors import ConfigError
    from terminal_env.sandbox.stack import compose_command

    try:
        return compose_command()
    except ConfigError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def runsc(client, base_image):
    """gVisor's runsc, or a skip saying why it is not here."""
    return skip_unless_runtime(client, "runsc")


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
