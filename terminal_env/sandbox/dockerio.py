"""Raw exec and attach sockets of the Docker engine, opened and closed without leaking.

docker-py's ``exec_start(socket=True)`` drops the HTTP response that owns the connection (for
unix sockets it cannot pin it to the socket), and its streaming wrapper leaves sockets for the
garbage collector; under ``python -X dev`` both show as ResourceWarnings. Keeping the response
and closing the three layers in order (response, socket file, socket) leaves nothing behind.
This uses two private docker-py helpers, pinned by the ``docker<8`` requirement.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import docker.errors

#: the most a response's head may take (the engine's are a few hundred bytes)
_HEAD_LIMIT = 64 * 1024


def _upgrade(path: str, url: str, body: bytes, timeout: float | None) -> tuple[socket.socket, bytes]:
    """``POST url`` with an upgrade to a raw stream, over a new connection to the engine's unix
    socket at ``path``: the connected socket, and the stream's bytes read along with the head.
    An HTTP error is raised as docker-py raises it (404: NotFound)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout if timeout and timeout > 0 else None)
        sock.connect(path)
        sock.sendall(f"POST {url} HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk or len(data) > _HEAD_LIMIT:
                raise docker.errors.APIError(f"the engine closed {url} before answering")
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if code not in (101, 200):
            sock.settimeout(5)
            try:
                while len(rest) < _HEAD_LIMIT:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    rest += chunk
            except OSError:
                pass
            text = rest.decode("utf-8", "replace")
            try:
                text = json.loads(text[text.index("{"):text.rindex("}") + 1]).get("message", text)
            except ValueError:
                pass
            error = docker.errors.NotFound if code == 404 else docker.errors.APIError
            raise error(f"{status_line}: {text.strip()}")
        sock.settimeout(None)
        return sock, rest
    except BaseException:
        sock.close()
        raise


class ExecSocket:
    """The hijacked connection of one started exec (``tty`` decides if frames are multiplexed).

    On a local engine (a unix socket) the upgrade is done here, on a connection of its own: the
    request written, the response's head read up to its blank line, and whatever of the stream
    came in the same read kept in ``leftover``. Through docker-py the head is read by a buffered
    reader, which can swallow the stream's first bytes when the command answers at once (seen
    under load: an exec's output lost, or a frame header read as output)."""

    def __init__(self, api: Any, exec_id: str, *, tty: bool):
        #: bytes of the stream read with the response's head (read them before the socket)
        self.leftover = b""
        self._res: Any = None
        path = getattr(getattr(api, "_custom_adapter", None), "socket_path", None)
        if path and api.base_url == "http+docker://localhost":
            body = json.dumps({"Tty": tty, "Detach": False}).encode()
            # (a TTY session discards what its shell prints before its first sentinel anyway)
            self.raw, self.leftover = _upgrade(path, f"/v{api._version}/exec/{exec_id}/start", body,
                                               getattr(api, "timeout", None))
            self.sock = self.raw
            return
        self._res = api._post_json(
            api._url("/exec/{0}/start", exec_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": tty, "Detach": False},
            stream=True,
        )
        self.sock = api._get_raw_response_socket(self._res)  # raises APIError on HTTP errors
        self.raw = getattr(self.sock, "_sock", self.sock)

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        for obj in (self._res, self.sock, self.raw):
            try:
                if obj is not None:
                    obj.close()
            except (OSError, ValueError):
                pass

    def frames(self):
        """The multiplexed stream (no TTY) as ``(stream, bytes)``: 1 stdout, 2 stderr; ends at EOF.
        Reads the ``leftover`` first; :meth:`pending` says whether bytes wait here unread."""
        while True:
            head = self._read_exactly(8)
            if len(head) < 8:
                return
            stream, size = head[0], int.from_bytes(head[4:8], "big")
            while size > 0:
                chunk = self._read_some(min(size, 65536))
                if not chunk:
                    return
                size -= len(chunk)
                yield stream, chunk

    def pending(self) -> bool:
        return bool(self.leftover)

    def _read_some(self, n: int) -> bytes:
        if self.leftover:
            chunk, self.leftover = self.leftover[:n], self.leftover[n:]
            return chunk
        while True:
            try:
                return self.raw.recv(n)
            except InterruptedError:
                continue

    def _read_exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self._read_some(n - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def __enter__(self) -> "ExecSocket":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AttachSocket(ExecSocket):
    """The hijacked connection of ``POST /containers/{id}/attach`` to a container's stdio.

    Opened before the container starts (as ``docker start -a`` does), so none of the main
    process's output is missed. With a TTY the stream is raw; without, it is multiplexed. Only
    new output is streamed (``logs`` is not requested), so nothing is replayed from the log.
    """

    def __init__(self, api: Any, container_id: str):  # noqa: D107 (same layers as ExecSocket)
        self._res = api._post(
            api._url("/containers/{0}/attach", container_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            params={"stream": 1, "stdin": 1, "stdout": 1, "stderr": 1},
            stream=True,
        )
        self.sock = api._get_raw_response_socket(self._res)  # raises APIError on HTTP errors
        self.raw = getattr(self.sock, "_sock", self.sock)

    def __enter__(self) -> "AttachSocket":
        return self
