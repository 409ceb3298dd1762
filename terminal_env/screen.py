"""A rendered terminal screen (rows x cols) for full-screen programs, kept with pyte.

Editors, pagers and ``top`` redraw the screen with cursor movements; the stream of bytes is then
unreadable but the screen is not. Rendering costs CPU, so only a bounded amount of each step's
output is fed (the caller passes head+tail, never a whole flood).
"""

from __future__ import annotations

import pyte


class Screen:
    def __init__(self, rows: int, cols: int):
        self._screen = pyte.Screen(cols, rows)
        self._stream = pyte.ByteStream(self._screen)

    def feed(self, data: bytes) -> None:
        # pyte expects a terminal that translates "\n" as a line feed only; a PTY with onlcr
        # already sends "\r\n", which is what pyte renders correctly.
        self._stream.feed(data)

    def text(self) -> str:
        """The screen's lines, right-trimmed, trailing blank lines removed."""
        lines = [line.rstrip() for line in self._screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)

    @property
    def cursor(self) -> tuple[int, int]:
        return self._screen.cursor.y, self._screen.cursor.x
