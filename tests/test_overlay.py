"""The tamper check's change list read on the host from a container's overlay layers
(terminal_env/sandbox/overlay.py): equal to the engine's `docker diff` on batteries of changes,
and stricter where the engine is blind (a protected program patched in place with its size and
modification time kept, which the engine does not report at all: the attack is shown to pass the
engine first, then to make the episode tampered)."""

from __future__ import annotations

from pathlib import Path

import pytest

from terminal_env import Sandbox, SandboxConfig, TerminalEnv
from terminal_env.agent import run_episode
from terminal_env.models.simple import ScriptedBackend
from terminal_env.sandbox import overlay
from terminal_env.sandbox.sweep import host_sweep_possible
from terminal_env.tasks import load_task

pytestmark = pytest.mark.docker

BATTERIES = {
    "files": r"""
mkdir -p /app && cd /app
echo x > /tmp/new.txt; touch /usr/bin/ls; rm /usr/bin/tail; rm -rf /usr/share/doc/bash
mkdir -p /usr/local/lib/python3.11/dist-packages/pkg && echo 1 > /usr/local/lib/python3.11/dist-packages/pkg/__init__.py
echo 'import os' > /usr/local/lib/python3.11/dist-packages/evil.pth
chmod 700 /opt; ln -s /etc/passwd /app/link; mkdir -p /app/sub/deeper && echo q > /app/sub/deeper/f
cp /bin/true /usr/local/bin/timeout; mv /usr/bin/head /usr/bin/head2
echo a > "name with spaces.txt"; touch -- "-dash"; mkfifo /app/fifo; chown 1:1 /usr/bin/cat
ln /usr/bin/env /usr/local/bin/env2
""",
    "made-again": r"""
rm -rf /etc/apt && mkdir /etc/apt && echo z > /etc/apt/sources.list
rm -rf /usr/share/zoneinfo && mkdir -p /usr/share/zoneinfo/Europe && echo t > /usr/share/zoneinfo/Europe/x
rm -rf /usr/share/doc && mkdir -p /usr/share/doc/bash && echo re > /usr/share/doc/bash/README && rm /usr/share/doc/bash/README
rm -rf /usr/lib/python3/dist-packages; rm -f /var/run && mkdir -p /var/run && touch /var/run/x
""",
}
#: a byte of /usr/bin/tail changed in place, its size and modification time kept
PATCH = ("cp -p /usr/bin/tail /tmp/keep && python3 -c \"import sys; p='/usr/bin/tail'; "
         "d=bytearray(open(p,'rb').read()); d[100]^=0xff; open(p,'r+b').write(bytes(d))\" && "
         "touch -r /tmp/keep /usr/bin/tail && ! cmp -s /tmp/keep /usr/bin/tail && rm /tmp/keep && echo patched")


def needs_host():
    if not host_sweep_possible():
        pytest.skip("reading a container's layers needs root on the engine's host")


@pytest.mark.parametrize("battery", sorted(BATTERIES))
def test_the_layers_read_on_the_host_say_what_the_engine_says(base_image, battery):
    needs_host()
    with Sandbox(SandboxConfig(image=base_image)) as sb:
        assert sb.exec(["bash", "-c", BATTERIES[battery]], user="root", timeout=60).exit_code == 0
        sb.container.reload()
        ours = overlay.changes(sb)
        theirs = sb.client.api.diff(sb.id) or []
    assert ours is not None, "overlay2 layers not readable here"
    assert sorted((c["Path"], c["Kind"]) for c in ours) == sorted((c["Path"], c["Kind"]) for c in theirs)


def test_a_program_patched_with_its_size_and_time_kept_is_tampering(tmp_path, base_image):
    needs_host()
    with Sandbox(SandboxConfig(image=base_image)) as sb:
        assert sb.exec(["bash", "-c", PATCH], user="root", timeout=60).stdout.strip() == b"patched"
        # the attack happened, and the engine does not see it: docker diff lists nothing
        assert not [c for c in sb.client.api.diff(sb.id) or [] if c["Path"] == "/usr/bin/tail"]
        sb.container.reload()
        assert ("/usr/bin/tail", 0) in {(c["Path"], c["Kind"]) for c in overlay.changes(sb)}
    task = load_task(Path(__file__).parent / "data" / "protected" / "word-stats")
    env = TerminalEnv(task, reward="partial_progress", max_steps=5)
    try:
        reward, info = run_episode(env, ScriptedBackend.of_actions([PATCH]))
    finally:
        env.close()
    v = info["verification"]
    assert reward == 0.0 and v.outcome.value == "tampered" and "/usr/bin/tail" in v.tampered_paths
