"""A third-party harness found through a real entry point (a dist-info on sys.path, as pip would
leave it), then played end to end in Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from terminal_env.errors import ConfigError
from terminal_env.harness import available_harnesses, get_harness

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    dist = tmp_path / "site" / "terminal_env_json_command-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: terminal-env-json-command\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(
        "[terminal_env.harnesses]\njson-command = json_command_harness:JsonCommandHarness\n"
        "broken = json_command_harness:NoSuchThing\nnot-a-harness = json:dumps\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(ROOT / "harnesses/json_command"))
    return dist


def test_plugin_is_found_by_name(installed_plugin):
    assert "json-command" in available_harnesses()
    h = get_harness("json-command")
    from terminal_env.models.base import Completion

    (act,) = h.parse(Completion(text='Sure: {"command": "ls"}'))
    assert [a.model_dump() for a in h.compile(act)] == [{"kind": "command", "command": "ls", "timeout": None}]
    with pytest.raises(ConfigError, match="broken.*failed to load"):
        get_harness("broken")
    with pytest.raises(ConfigError, match="not a Harness subclass"):
        get_harness("not-a-harness")


@pytest.mark.docker
def test_plugin_plays_a_task(installed_plugin, client, base_image):
    from terminal_env.agent import run_agent
    from terminal_env.env import TerminalEnv
    from terminal_env.models.simple import ScriptedBackend

    cmd = "printf 'import sys\\nprint(sum(int(a) for a in sys.argv[1:]))\\n' > /app/sum.py"
    backend = ScriptedBackend(["not json", json.dumps({"command": cmd}), '{"submit": true}'])
    env = TerminalEnv(str(ROOT / "tests/data/tasks/harbor-sum"), client=client)
    try:
        traj = run_agent(env, get_harness("json-command"), backend)
    finally:
        env.close()
    assert traj.harness == "json-command" and traj.strict_success
    assert traj.turns[0].format_error and "JSON" in traj.turns[0].format_error
    assert traj.generic_commands() == [cmd, "#!submit"]
