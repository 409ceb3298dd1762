"""asciinema v2 recordings of a terminal session.

The file is written as the episode runs (header line, then one ``[time, "o"|"i", data]`` event per
line), so a run killed mid-episode still leaves a playable recording. The session's internal
completion sentinel is cut out of the output; what remains is what a person at the terminal would
have seen. Play with ``asciinema play FILE`` or in the HTML report.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import IO, Any

# the prompt sentinel (TE) and the attached first shell's death marker (TX)
_SENTINEL = re.compile(rb"\x1eTE[0-9a-f]+:\d+:\d+:[0-9.]*:\d*:[^\x1f]{0,4096}\x1f\r?\n?|\x1eTX[0-9a-f]+:\d+\x1f\r?\n?")
MAX_EVENT_BYTES = 64 * 1024


class CastRecorder:
    """Pass :meth:`output` and :meth:`input` as a session's ``on_output``/``on_input``."""

    def __init__(
        self,
        path: str | Path,
        *,
        width: int = 160,
        height: int = 40,
        title: str | None = None,
        env: dict[str, str] | None = None,
        max_bytes: int = 50 * 1024 * 1024,
    ):
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._pending = b""  # output held back while a sentinel may be split across chunks
        self._written = 0
        self._dropped = 0
        header: dict[str, Any] = {
            "version": 2,
            "width": width,
            "height": height,
            "timestamp": int(time.time()),
            "env": env or {"SHELL": "/bin/bash", "TERM": "xterm-256color"},
        }
        if title:
            header["title"] = title
        self._fh: IO[str] | None = self.path.open("w", encoding="utf-8")
        self._fh.write(json.dumps(header) + "\n")
        self._fh.flush()

    # -- session callbacks ----------------------------------------------------------------
    def output(self, data: bytes) -> None:
        with self._lock:
            data = self._pending + data
            self._pending = b""
            data = _SENTINEL.sub(b"", data)
            cut = data.rfind(b"\x1e")
            if cut >= 0 and b"\x1f" not in data[cut:] and len(data) - cut < 4200:
                data, self._pending = data[:cut], data[cut:]
            self._event("o", data)

    def input(self, data: bytes) -> None:
        with self._lock:
            self._event("i", data)

    def command(self, text: str) -> None:
        """Show a command as typed at a prompt (the session runs with echo off)."""
        shown = text.replace("\r\n", "\n").replace("\n", "\r\n")
        with self._lock:
            self._event("o", f"\x1b[1;32m$\x1b[0m {shown}\r\n".encode())

    def marker(self, label: str) -> None:
        """A named point in the recording (asciinema's "m" event), e.g. a model turn."""
        with self._lock:
            self._event("m", label.encode())

    # -- internals --------------------------------------------------------------------------
    def _event(self, kind: str, data: bytes) -> None:
        if not data or self._fh is None:
            return
        if self._written >= self.max_bytes:
            self._dropped += len(data)
            return
        for i in range(0, len(data), MAX_EVENT_BYTES):
            chunk = data[i : i + MAX_EVENT_BYTES].decode("utf-8", errors="replace")
            line = json.dumps([round(time.monotonic() - self._t0, 6), kind, chunk])
            self._fh.write(line + "\n")
            self._written += len(line)
        self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is None:
                return
            if self._pending:
                self._event("o", _SENTINEL.sub(b"", self._pending))
                self._pending = b""
            if self._dropped:
                note = f"\r\n[terminal-env: recording capped; {self._dropped} bytes not recorded]\r\n"
                self._fh.write(json.dumps([round(time.monotonic() - self._t0, 6), "o", note]) + "\n")
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "CastRecorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_cast(path: str | Path) -> tuple[dict[str, Any], list[list[Any]]]:
    """Header and events of an asciinema v2 file (a truncated last line is ignored)."""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines:
        raise ValueError(f"{path}: empty recording")
    header = json.loads(lines[0])
    events = []
    for line in lines[1:]:
        try:
            ev = json.loads(line)
        except ValueError:
            continue  # a run killed mid-write leaves half a line
        if isinstance(ev, list) and len(ev) == 3:
            events.append(ev)
    return header, events
