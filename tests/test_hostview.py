"""A container's files read from the host through its PID 1's root
(terminal_env/sandbox/hostview.py): the same answers as the engine's archive API on a battery of
files, links, loops and odd types, and never a host file, whatever links the container holds
(each escape is shown to reach the host file when a link is followed the host's way, then shown
to give nothing here)."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import os
import secrets
import stat
import tarfile

import docker.errors
import pytest

from terminal_env import Sandbox, SandboxConfig
from terminal_env.sandbox.hostview import HostView
from terminal_env.sandbox.sweep import host_sweep_possible

pytestmark = pytest.mark.docker

SETUP = r"""
set -e
mkdir -p /box/dir/sub /box/real && cd /box
echo hello > dir/file; printf 'x%.0s' $(seq 3000) > dir/big; echo in-real > real/r
ln -s dir rel-dir-link; ln -s /box/dir abs-dir-link; ln -s ../box/dir/file up-link
ln -s /../../../../box/dir dotdot-link; ln -s loop-b loop-a; ln -s loop-a loop-b
ln -s dir/file file-link; ln -s /nowhere dangling; mkfifo dir/fifo; ln -s /box/real dir/sub/back
mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo '{}' > /logs/verifier/m.json
mkdir /logs/verifier/nested && ln -s /etc/hostname /logs/verifier/linked
"""
PATHS = [
    "/", "/box", "/box/dir", "/box/dir/file", "/box/dir/big", "/box/dir/fifo", "/box/rel-dir-link",
    "/box/rel-dir-link/file", "/box/abs-dir-link/file", "/box/up-link", "/box/dotdot-link/file",
    "/box/loop-a", "/box/file-link", "/box/dangling", "/box/missing", "/box/dir/file/below",
    "/box/dir/sub/back/r", "/box/dir/../real/r", "/box/abs-dir-link/../real/r", "/usr/bin/python3",
    "/bin/sh", "/lib", "/lib/x86_64-linux-gnu", "/proc/self/root", "/etc/hostname",
]


def needs_host():
    if not host_sweep_possible():
        pytest.skip("reading a container's files from the host needs root on the engine's host")


def engine_stat(sb, path):
    api = sb.client.api
    res = api.head(api._url("/containers/{0}/archive", sb.id), params={"path": path})
    if res.status_code in (404, 500):
        return None
    header = res.headers.get("X-Docker-Container-Path-Stat") or ""
    st = json.loads(base64.b64decode(header))
    mode = int(st["mode"])
    kind = "dir" if mode & (1 << 31) else "link" if mode & (1 << 27) else "other" if mode & (
        (1 << 25) | (1 << 26) | (1 << 21) | (1 << 24)) else "file"
    return kind, st.get("linkTarget") or None, st["size"] if kind == "file" else None


def host_stat(view, path):
    try:
        st = view.lstat(path)
        if st is None:
            return None
        if stat.S_ISDIR(st.st_mode):
            return "dir", None, None
        if stat.S_ISLNK(st.st_mode):
            return "link", view.realpath(path), None
    except OSError:  # a link loop: the engine answers with an error too
        return None
    return ("file", None, st.st_size) if stat.S_ISREG(st.st_mode) else ("other", None, None)


def engine_read(sb, path):
    try:
        stream, _ = sb.container.get_archive(path)
    except docker.errors.NotFound:
        return "absent"
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.next()
        return tar.extractfile(member).read() if member is not None and member.isfile() else None


def test_the_host_view_answers_what_the_engine_answers(base_image, monkeypatch):
    needs_host()
    with Sandbox(SandboxConfig(image=base_image)) as sb:
        assert sb.exec(["bash", "-c", SETUP], user="root", timeout=60).exit_code == 0
        view = sb.host_view()
        assert view is not None
        with view:
            for path in PATHS:
                theirs = engine_stat(sb, path)
                assert host_stat(view, path) == theirs, path
                if theirs is not None and theirs[0] == "file":
                    assert view.read_file(path, 1 << 20) == engine_read(sb, path), path
            assert view.read_file("/box/dir/big", 100) is None  # over the limit
            assert view.read_file("/box/dir/fifo", 100) is None  # not a regular file: never waits
            assert view.read_file("/box/file-link", 100) is None  # a link is not followed at the end
        # the sandbox's own readers, host side, say what the engine's archives say
        dirs = ["/logs/verifier", "/box/abs-dir-link", "/box/abs-dir-link/", "/box/dir", "/box/dir/sub/back/",
                "/box/missing", "/box/dir/file", "/box"]
        files = ["/box/rel-dir-link/file", "/box/file-link", "/box/missing", "/box/dir", "/box/dir/big"]
        ours = [outcome(sb.read_dir, p) for p in dirs] + [outcome(sb.read_file, p) for p in files]
        with monkeypatch.context() as m:
            m.setattr(HostView, "of", classmethod(lambda cls, sandbox: None))
            engine = [outcome(sb.read_dir, p) for p in dirs] + [outcome(sb.read_file, p) for p in files]
        assert ours == engine
        assert ours[0] == {"reward.txt": b"1\n", "m.json": b"{}\n"}  # no link, no subdirectory
        assert ours[1] == {} and ours[2] == {"file": b"hello\n", "big": b"x" * 3000}
        assert ours[5] == "FileNotFoundError" and ours[len(dirs) + 1] == "IsADirectoryError"


def outcome(read, path):
    try:
        return read(path)
    except OSError as exc:
        return type(exc).__name__


def test_no_link_in_the_container_reads_a_file_of_the_host(base_image, tmp_path):
    """Links to a path that exists on the host only: followed the host's way (through
    /proc/PID/root, as a naive reader would), each reaches the host's file; here none does."""
    needs_host()
    secret = tmp_path / f"host-only-{secrets.token_hex(4)}"
    secret.mkdir()
    (secret / "reward.txt").write_text("host secret\n")
    links = {
        "/logs/verifier": str(secret),  # the whole results directory
        "/box/abs": str(secret / "reward.txt"),
        "/box/rel": "../../../../../../../.." + str(secret / "reward.txt"),
    }
    script = "mkdir -p /box /logs && " + " && ".join(f"ln -s {t} {p}" for p, t in links.items())
    with Sandbox(SandboxConfig(image=base_image)) as sb:
        assert sb.exec(["bash", "-c", script], user="root", timeout=60).exit_code == 0
        view = sb.host_view()
        assert view is not None
        pid = _pid_of(sb)
        # the attack: the naive host-side reader (open() on /proc/PID/root/...) ends up on the host
        naive = f"/proc/{pid}/root/box/abs"
        assert open(naive).read() == "host secret\n"
        assert sorted(os.listdir(f"/proc/{pid}/root/logs/verifier")) == ["reward.txt"]
        with view:
            for path in ("/box/abs", "/box/rel"):
                assert view.read_file(path, 1 << 20) is None  # the link itself: not read
            assert view.lstat("/logs/verifier/reward.txt") is None  # resolved inside: not there
        assert sb.read_dir("/logs/verifier") == {}
        with pytest.raises(FileNotFoundError):
            sb.read_dir("/logs/verifier/")
        with pytest.raises(IsADirectoryError):
            sb.read_file("/box/abs")


def _pid_of(sb) -> int:
    sb.container.reload()
    return int(sb.container.attrs["State"]["Pid"])


def test_no_view_where_the_host_cannot_read_the_container(base_image, monkeypatch):
    needs_host()
    with Sandbox(SandboxConfig(image=base_image)) as sb:
        monkeypatch.setattr(type(sb), "runtime", dataclasses.replace(sb.runtime, host_processes=False))
        assert HostView.of(sb) is None
        # and the readers still answer, through the engine
        sb.exec(["bash", "-c", "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"],
                user="root", timeout=60)
        assert sb.read_dir("/logs/verifier") == {"reward.txt": b"1\n"}
