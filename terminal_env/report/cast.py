"""Terminal recordings (asciinema v2) as screen frames, and the page's player.

A recording is a stream of bytes full of cursor movements and colours; replaying it needs a
terminal. The report renders it here, server-side, with pyte (a VT100 emulator): output events
are fed into a ``pyte.Screen`` of the header's size and the screen's text is snapshotted at
event times. Snapshots are coalesced into at most ``max_frames`` time slots, long pauses are
shortened to ``idle_limit`` seconds, and huge recordings are capped (the head and the tail are
kept, the middle skipped), so a page stays small and fast whatever the agent printed.

The page embeds the frames as JSON (each distinct line stored once) and a small player script
(play/pause, speed, seek) shows them in a ``<pre>`` with ``textContent``: nothing the recording
contains is ever parsed as HTML.
"""

from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyte

from .html import esc, json_script

MAX_FRAMES = 600
#: bytes of the file read at most (head and tail halves)
MAX_BYTES = 16_000_000
#: characters of output fed to the emulator at most (head and tail halves); ~0.5 MB/s
MAX_CHARS = 1_000_000
MAX_COLS, MAX_ROWS = 500, 200
IDLE_LIMIT = 2.0
MAX_MARKERS = 300


class CastError(ValueError):
    """The file is not a readable asciinema v2 recording."""


@dataclass
class Frame:
    t: float  # seconds on the player's timeline
    lines: list[str]  # the screen's rows, right-trimmed, trailing blank rows dropped

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Cast:
    width: int
    height: int
    #: length of the player's timeline (pauses shortened)
    duration: float
    #: length of the recording as recorded
    real_duration: float
    frames: list[Frame]
    output_events: int = 0
    input_events: int = 0
    notes: list[str] = field(default_factory=list)
    #: named points ("m" events, e.g. model turns): (player time, label)
    markers: list[tuple[float, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Compact form for the page: each distinct line once in ``pool``, frames as
        ``[t, [line indices]]``."""
        pool: dict[str, int] = {}
        frames = []
        for f in self.frames:
            frames.append([round(f.t, 3), [pool.setdefault(line, len(pool)) for line in f.lines]])
        return {"width": self.width, "height": self.height, "duration": round(self.duration, 3),
                "pool": list(pool), "frames": frames}


def _read_lines(path: Path, max_bytes: int) -> tuple[list[str], bool]:
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size <= max_bytes:
            data, cut = fh.read(), False
        else:
            head = fh.read(max_bytes // 2)
            fh.seek(size - max_bytes // 2)
            tail = fh.read()
            head = head[: head.rfind(b"\n") + 1]  # whole lines only
            tail = tail[tail.find(b"\n") + 1:]
            data, cut = head + tail, True
    # split on "\n" only: JSON strings escape it, while str.splitlines would also split on
    # characters a JSON string may hold raw (U+2028, form feed...)
    return data.decode("utf-8", errors="replace").split("\n"), cut


def _header(line: str, path: Path) -> tuple[int, int]:
    try:
        header = json.loads(line)
    except ValueError:
        raise CastError(f"{path.name}: the first line is not JSON (not an asciinema v2 file)") from None
    if not isinstance(header, dict) or header.get("version") != 2:
        version = header.get("version") if isinstance(header, dict) else None
        raise CastError(f"{path.name}: not an asciinema v2 recording (version {version!r})")

    def dim(key: str, default: int, top: int) -> int:
        v = header.get(key)
        return min(max(int(v), 1), top) if isinstance(v, (int, float)) and math.isfinite(v) else default

    return dim("width", 80, MAX_COLS), dim("height", 24, MAX_ROWS)


class _Screen(pyte.Screen):
    """pyte's screen, plus

    * the alternate screen (``CSI ?1049h``/``l``) full-screen programs (vim, less, top) switch
      to: leaving it brings the shell's screen back, as in a real terminal;
    * :meth:`text`, the rows as text, re-rendered only where pyte marked them dirty, with a
      scroll shifting the rendered rows instead of dirtying all of them (rendering every row
      of a 160x40 screen for every frame would otherwise dominate the cost).
    """

    ALT_MODES = frozenset({47, 1047, 1049})

    def __init__(self, columns: int, lines: int):
        super().__init__(columns, lines)
        self._main: tuple[Any, Any] | None = None
        self._rows = [""] * lines
        self.dirty.update(range(lines))

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and self.ALT_MODES & set(modes) and self._main is None:
            self._main = (copy.deepcopy(self.buffer), copy.copy(self.cursor))
            self.erase_in_display(2)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and self.ALT_MODES & set(modes) and self._main is not None:
            buffer, cursor = self._main
            self._main = None
            self.buffer.clear()
            self.buffer.update(buffer)
            self.cursor = cursor
            self.dirty.update(range(self.lines))
        super().reset_mode(*modes, **kwargs)

    def index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y != bottom or len(self._rows) != self.lines:
            super().index()
            return
        dirty = set(self.dirty)
        super().index()  # moves rows top+1..bottom up one, empties bottom, dirties everything
        rows = self._rows
        rows[top:bottom] = rows[top + 1:bottom + 1]
        rows[bottom] = ""
        self.dirty.clear()
        self.dirty.update(y for y in dirty if not top <= y <= bottom)
        self.dirty.update(y - 1 for y in dirty if top < y <= bottom)

    def text(self) -> list[str]:
        """The rows, right-trimmed, trailing blank rows dropped."""
        cols = self.columns
        if len(self._rows) != self.lines:
            self._rows = [""] * self.lines
            self.dirty.update(range(self.lines))
        for y in self.dirty:
            if not 0 <= y < self.lines:
                continue
            row = self.buffer.get(y)
            if not row:
                self._rows[y] = ""
                continue
            chars = [" "] * cols
            for x, ch in row.items():
                if 0 <= x < cols:
                    chars[x] = ch.data  # a wide character's stub cell holds ""
            self._rows[y] = "".join(chars).rstrip()
        self.dirty.clear()
        lines = list(self._rows)
        while lines and not lines[-1]:
            lines.pop()
        return lines


def read_cast(
    path: str | os.PathLike[str],
    *,
    max_frames: int = MAX_FRAMES,
    max_bytes: int = MAX_BYTES,
    max_chars: int = MAX_CHARS,
    idle_limit: float | None = IDLE_LIMIT,
) -> Cast:
    """Render a recording into at most ``max_frames`` frames; :class:`CastError` if unreadable."""
    path = Path(path)
    if max_frames < 2:
        raise ValueError("max_frames must be >= 2")
    try:
        lines, cut = _read_lines(path, max_bytes)
    except OSError as exc:
        raise CastError(f"{path.name}: cannot be read ({exc.strerror or exc})") from None
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        raise CastError(f"{path.name}: the recording is empty")
    width, height = _header(lines[0], path)
    notes = []
    if cut:
        notes.append(f"the file is {path.stat().st_size:,} bytes: only its first and last "
                     f"{max_bytes // 2:,} bytes were read")

    # events -> (player time, real time, text)
    events: list[tuple[float, float, str]] = []
    markers: list[tuple[float, str]] = []
    bad = inputs = 0
    real = player = 0.0
    for ln in lines[1:]:
        try:
            ev = json.loads(ln)
            t, kind, data = float(ev[0]), ev[1], ev[2]
        except (ValueError, TypeError, IndexError, KeyError):
            bad += 1
            continue
        if not math.isfinite(t) or not isinstance(data, str):
            bad += 1
            continue
        t = max(t, real)
        gap = t - real
        player += min(gap, idle_limit) if idle_limit is not None else gap
        real = t
        if kind == "o":
            events.append((player, real, data))
        elif kind == "i":
            inputs += 1
        elif kind == "m" and len(markers) < MAX_MARKERS:
            markers.append((player, data[:80]))
    if bad:
        notes.append(f"{bad} malformed event line(s) skipped")
    if idle_limit is not None and real - player > 0.5:
        notes.append(f"pauses longer than {idle_limit:g} s are shortened "
                     f"(recorded length {real:.1f} s)")

    # cap what the emulator is fed: the head and the tail of the output, whole events
    total = sum(len(d) for _, _, d in events)
    keep = [True] * len(events)
    if total > max_chars:
        half = max_chars // 2
        events = [(pt, rt, d if len(d) <= half else d[-half:]) for pt, rt, d in events]
        used, i = 0, 0
        while i < len(events) and used + len(events[i][2]) <= half:
            used += len(events[i][2])
            i += 1
        used, j = 0, len(events)
        while j > i and used + len(events[j - 1][2]) <= half:
            used += len(events[j - 1][2])
            j -= 1
        for n in range(i, j):
            keep[n] = False
        if j > i:
            skipped = sum(len(events[n][2]) for n in range(i, j))
            notes.append(f"{skipped:,} characters of output in the middle were not replayed "
                         "(the screen may be inaccurate just after the gap)")

    screen = _Screen(width, height)
    stream = pyte.Stream(screen)
    frames: list[Frame] = []
    duration = max(events[-1][0] if events else 0.0, markers[-1][0] if markers else 0.0)
    per_event = len(events) <= max_frames - 1
    slots = max_frames - 1

    def slot(t: float) -> int:
        return min(slots - 1, int(t / duration * slots)) if duration > 0 else 0

    for n, (pt, _rt, data) in enumerate(events):
        if keep[n]:
            try:
                stream.feed(data)
            except Exception as exc:  # noqa: BLE001 - a hostile stream must not break the report
                notes.append(f"the terminal emulator failed at event {n + 1} ({type(exc).__name__}); "
                             "the rest of the recording is not shown")
                events = events[: n + 1]
                duration = pt
        last = n == len(events) - 1
        if per_event or last or slot(events[n + 1][0]) != slot(pt):
            snap = screen.text()
            if not frames or frames[-1].lines != snap:
                frames.append(Frame(pt, snap))
        if last:
            break
    if not frames or frames[0].t > 0:
        frames.insert(0, Frame(0.0, []))
    return Cast(width=width, height=height, duration=duration, real_duration=real, frames=frames,
                output_events=len(events), input_events=inputs, notes=notes,
                markers=[(t, label) for t, label in markers if t <= duration])


def player_html(cast: Cast) -> str:
    """The player: the last frame (readable without scripts), controls, and the frames."""
    final = cast.frames[-1].text if cast.frames else ""
    speeds = "".join(
        f'<button type="button" class="speed" data-speed="{s}" aria-pressed="{str(s == 1).lower()}">'
        f"{s}×</button>"
        for s in (1, 2, 4)
    )
    parts = [
        f'<div class="player" data-duration="{cast.duration:.3f}">',
        f'<pre class="screen" style="min-height:{cast.height * 1.2 + 1:.1f}em">{esc(final)}</pre>',
        '<div class="controls"><button type="button" class="play">▶ play</button>',
        speeds,
        f'<input type="range" class="seek" min="0" max="{cast.duration:.3f}" step="0.01" '
        f'value="{cast.duration:.3f}" aria-label="seek">',
        '<span class="clock mono"></span></div>',
    ]
    if cast.markers:
        marks = "".join(f'<button type="button" class="mark" data-t="{t:.3f}">{esc(label)}</button>'
                        for t, label in cast.markers)
        parts.append(f'<div class="markers"><span class="muted">jump to:</span> {marks}</div>')
    parts.append(
        f'<p class="muted">{cast.width}×{cast.height}, {len(cast.frames)} frames from '
        f"{cast.output_events} output events ({cast.input_events} input events)</p>"
    )
    if cast.notes:
        parts.append('<ul class="muted">' + "".join(f"<li>{esc(n)}</li>" for n in cast.notes) + "</ul>")
    parts.append(json_script(cast.to_json(), cls="cast-data"))
    parts.append("</div>")
    return "".join(parts)


#: The player script, shared by every player on a page. Written for this report.
PLAYER_JS = r"""
(function () {
  function fmt(t) {
    var m = Math.floor(t / 60), s = t - 60 * m;
    return m + ":" + (s < 10 ? "0" : "") + s.toFixed(1);
  }
  document.querySelectorAll(".player").forEach(function (box) {
    var data = JSON.parse(box.querySelector("script.cast-data").textContent);
    var pre = box.querySelector("pre.screen"), play = box.querySelector("button.play");
    var seek = box.querySelector("input.seek"), clock = box.querySelector(".clock");
    var frames = data.frames, pool = data.pool, dur = data.duration;
    var now = dur, speed = 1, playing = false, last = null, shown = -1;
    function frameAt(t) {
      var lo = 0, hi = frames.length - 1, found = 0;
      while (lo <= hi) {
        var mid = (lo + hi) >> 1;
        if (frames[mid][0] <= t) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
      }
      return found;
    }
    function render() {
      var i = frameAt(now);
      if (i !== shown) {
        pre.textContent = frames[i][1].map(function (j) { return pool[j]; }).join("\n");
        shown = i;
      }
      seek.value = now;
      clock.textContent = fmt(now) + " / " + fmt(dur);
    }
    function stop() { playing = false; play.textContent = "▶ play"; }
    function tick(ts) {
      if (!playing) return;
      if (last !== null) now += (ts - last) / 1000 * speed;
      last = ts;
      if (now >= dur) { now = dur; stop(); }
      render();
      if (playing) requestAnimationFrame(tick);
    }
    play.addEventListener("click", function () {
      if (playing) { stop(); return; }
      if (now >= dur) now = 0;
      playing = true; last = null; play.textContent = "❚❚ pause";
      requestAnimationFrame(tick);
    });
    box.querySelectorAll("button.speed").forEach(function (b) {
      b.addEventListener("click", function () {
        speed = parseFloat(b.getAttribute("data-speed"));
        box.querySelectorAll("button.speed").forEach(function (o) {
          o.setAttribute("aria-pressed", o === b ? "true" : "false");
        });
      });
    });
    seek.addEventListener("input", function () { now = parseFloat(seek.value) || 0; render(); });
    box.querySelectorAll("button.mark").forEach(function (b) {
      b.addEventListener("click", function () {
        now = Math.min(dur, parseFloat(b.getAttribute("data-t")) || 0); render();
      });
    });
    render();
  });
})();
"""
