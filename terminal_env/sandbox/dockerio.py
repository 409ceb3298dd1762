"""Raw exec and attach sockets of the Docker engine, opened and closed without leaking.

docker-py's ``exec_start(socket=True)`` drops the HTTP response that owns the connection (for
unix sockets it cannot pin it to the socket), and its streaming wrapper leaves sockets for the
garbage collector; under ``python -X dev`` both show as ResourceWarnings. Keeping the response
and closing the three layers in order (response, socket file, socket) leaves nothing behind.
This uses two private docker-py helpers, pinned by the ``docker<8`` requirement.
"""

from __future__ import annotations

from typing import Any


class ExecSocket:
    """The hijacked connection of one started exec (``tty`` decides if frames are multiplexed)."""

    def __init__(self, api: Any, exec_id: str, *, tty: bool):
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
                obj.close()
            except (OSError, ValueError):
                pass

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
