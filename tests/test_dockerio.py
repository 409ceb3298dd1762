"""The exec stream's upgrade (terminal_env/sandbox/dockerio.py), against a stand-in engine on a
unix socket this test serves: an engine that sends the start of the stream in the same write as
the response's head (what a busy machine does when the command answers at once)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import docker
import docker.errors
import pytest
from docker.utils.socket import frames_iter

from terminal_env.sandbox.dockerio import ExecSocket

HEAD = (b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n"
        b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


STREAM = frame(1, b"hello\n") + frame(2, b"oops\n") + frame(1, b"x" * 70000)


def serve(path: Path, reply: bytes, requests: list[bytes]) -> threading.Thread:
    """Answer one request on ``path`` with ``reply`` in one write, then close."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def run() -> None:
        conn, _ = server.accept()
        with conn, server:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            head, body = data.split(b"\r\n\r\n", 1)
            size = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length")))
            while len(body) < size:
                body += conn.recv(4096)
            requests.append(head + b"\r\n\r\n" + body)
            conn.sendall(reply)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_stream_sent_with_the_response_head_is_read_whole(tmp_path):
    requests: list[bytes] = []
    api = docker.APIClient(base_url=f"unix://{tmp_path / 'a.sock'}", version="1.41")
    # docker-py's own path reads the head through a buffered reader and loses what came with it
    serve(tmp_path / "a.sock", HEAD + STREAM, requests).join(0)
    res = api._post_json(api._url("/exec/{0}/start", "abc"), headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                         data={"Tty": False, "Detach": False}, stream=True)
    lost = b"".join(chunk for _, chunk in frames_iter(api._get_raw_response_socket(res), tty=False))
    res.close()
    assert lost != b"hello\noops\n" + b"x" * 70000  # the failure this module mends
    # here: the same reply read whole, stdout and stderr apart
    api = docker.APIClient(base_url=f"unix://{tmp_path / 'b.sock'}", version="1.41")
    serve(tmp_path / "b.sock", HEAD + STREAM, requests)
    with ExecSocket(api, "abc", tty=False) as conn:
        got = list(conn.frames())
    out = b"".join(c for s, c in got if s == 1)
    err = b"".join(c for s, c in got if s == 2)
    assert out == b"hello\n" + b"x" * 70000 and err == b"oops\n"
    assert requests[-1].startswith(b"POST /v1.41/exec/abc/start HTTP/1.1\r\n")
    assert requests[-1].endswith(b'{"Tty": false, "Detach": false}')


def test_an_engine_error_is_raised_as_docker_py_raises_it(tmp_path):
    api = docker.APIClient(base_url=f"unix://{tmp_path / 'c.sock'}", version="1.41")
    body = b'{"message":"No such exec instance: abc"}'
    serve(tmp_path / "c.sock", b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n" % len(body) + body, [])
    with pytest.raises(docker.errors.NotFound, match="No such exec instance: abc"):
        ExecSocket(api, "abc", tty=False)
