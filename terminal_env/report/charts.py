"""Inline SVG charts: horizontal bars with confidence whiskers, diverging bars, a stacked bar,
and a line chart over ordered categories with an error bar on every point.

Hand-drawn SVG (no library, nothing fetched); colours come from the page's CSS variables so the
charts follow the light/dark theme. Every label is escaped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .html import esc, pct


@dataclass
class Bar:
    """One row: ``value`` (solid bar) with an optional interval and a ``secondary`` value
    (thin light bar below, e.g. partial progress). Values are shares in [0, ``max_value``]."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    secondary: float | None = None
    note: str = ""


def _short(label: str, limit: int = 26) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def bar_chart(
    bars: Sequence[Bar],
    *,
    width: int = 520,
    max_value: float = 1.0,
    fmt: Callable[[float | None], str] = pct,
    label: str = "chart",
) -> str:
    """Horizontal bars, one row per :class:`Bar`, gridlines at quarters of ``max_value``."""
    if not bars:
        return '<p class="muted">no data</p>'
    label_w = min(190, max(60, 7 * max(len(_short(b.label)) for b in bars) + 10))
    value_w = 58
    area = width - label_w - value_w
    top, row_h = 20, 32
    height = top + row_h * len(bars) + 4

    def x(v: float) -> float:
        v = min(max(v, 0.0), max_value)
        return label_w + area * (v / max_value if max_value else 0.0)

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(5):
        gx = x(max_value * i / 4)
        parts.append(f'<line class="axis" x1="{gx:.1f}" y1="{top - 4}" x2="{gx:.1f}" y2="{height - 2}"/>')
        parts.append(
            f'<text class="val" x="{gx:.1f}" y="{top - 8}" text-anchor="middle">'
            f"{esc(fmt(max_value * i / 4).replace('.0%', '%'))}</text>"
        )
    for i, b in enumerate(bars):
        y = top + i * row_h
        tip = f"{b.label}: {fmt(b.value)}"
        if b.low is not None and b.high is not None:
            tip += f" (CI {fmt(b.low)} to {fmt(b.high)})"
        if b.secondary is not None:
            tip += f"; progress {fmt(b.secondary)}"
        if b.note:
            tip += f"; {b.note}"
        parts.append(f"<g><title>{esc(tip)}</title>")
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">{esc(_short(b.label))}</text>'
        )
        if b.value is not None:
            parts.append(
                f'<rect class="bar" x="{label_w}" y="{y + 5}" width="{x(b.value) - label_w:.1f}" '
                f'height="13" rx="2"/>'
            )
        if b.secondary is not None:
            parts.append(
                f'<rect class="bar2" x="{label_w}" y="{y + 20}" '
                f'width="{x(b.secondary) - label_w:.1f}" height="6" rx="2"/>'
            )
        if b.low is not None and b.high is not None and b.value is not None:
            cy = y + 11.5
            x1, x2 = x(b.low), x(b.high)
            parts.append(
                f'<path class="whisker" d="M{x1:.1f} {cy}H{x2:.1f}M{x1:.1f} {cy - 5}V{cy + 5}'
                f'M{x2:.1f} {cy - 5}V{cy + 5}"/>'
            )
        parts.append(
            f'<text class="val" x="{width - 4}" y="{y + 15}" text-anchor="end">{esc(fmt(b.value))}</text>'
        )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def diverging(
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    *,
    width: int = 140,
    height: int = 16,
    limit: float = 1.0,
) -> str:
    """A small bar from the centre (0) towards ``value`` in [-limit, limit], with a whisker."""
    mid = width / 2

    def x(v: float) -> float:
        return mid + mid * max(-1.0, min(1.0, v / limit))

    parts = [f'<svg class="div" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg">']
    if value is not None:
        x0, x1 = sorted((mid, x(value)))
        cls = "gain" if value > 0 else "loss"
        parts.append(f'<rect class="{cls}" x="{x0:.1f}" y="3" width="{max(x1 - x0, 0.0):.1f}" '
                     f'height="{height - 6}" rx="1"/>')
    if low is not None and high is not None:
        cy = height / 2
        parts.append(f'<path class="whisker" d="M{x(low):.1f} {cy}H{x(high):.1f}"/>')
    parts.append(f'<line class="axis" x1="{mid}" y1="0" x2="{mid}" y2="{height}"/></svg>')
    return "".join(parts)


def stacked(segments: Sequence[tuple[str, int, str]]) -> str:
    """A 100% stacked bar of counts: ``(label, count, css class)``; zero counts are left out."""
    total = sum(c for _, c, _ in segments)
    if total <= 0:
        return '<p class="muted">no trials</p>'
    cells = "".join(
        f'<span class="{esc(cls)}" style="flex:{count}" title="{esc(label)}: {count}">'
        f"{esc(label) if count / total > 0.08 else ''}</span>"
        for label, count, cls in segments if count > 0
    )
    return f'<div class="stack">{cells}</div>'



@dataclass
class Series:
    """One line of :func:`line_chart`: per category ``(value, low, high)``, or None where the
    series has no point (the line breaks there rather than inventing one). ``colour`` is a CSS
    colour, best a variable of the page's theme."""

    label: str
    points: Sequence[tuple[float | None, float | None, float | None] | None]
    colour: str = "var(--accent)"
    dashed: bool = False


def line_chart(
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    width: int = 560,
    height: int = 280,
    max_value: float = 1.0,
    fmt: Callable[[float | None], str] = pct,
    label: str = "chart",
) -> str:
    """Lines over ordered ``categories`` (x, evenly spaced), y from 0 to ``max_value`` with
    gridlines at quarters; every point with an interval gets a vertical error bar (class
    ``errbar``) with caps. Series are nudged apart sideways so their bars do not hide each other.

    >>> svg = line_chart(["a", "b"], [Series("s", [(0.5, 0.25, 0.75), None])])
    >>> svg.count('class="pt"'), svg.count("errbar")
    (1, 1)
    """
    if not categories or not series:
        return '<p class="muted">no data</p>'
    left, right, top, bottom = 46, 12, 34, 40
    area_w, area_h = width - left - right, height - top - bottom
    n = len(categories)
    spread = 8.0

    def x(i: int, j: int) -> float:
        return left + area_w * (i + 0.5) / n + (j - (len(series) - 1) / 2) * spread

    def y(v: float) -> float:
        v = min(max(v, 0.0), max_value)
        return top + area_h * (1 - (v / max_value if max_value else 0.0))

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i in range(5):
        gy = y(max_value * i / 4)
        parts.append(f'<line class="axis" x1="{left}" y1="{gy:.1f}" x2="{width - right}" y2="{gy:.1f}"/>')
        parts.append(f'<text class="val" x="{left - 6}" y="{gy + 4:.1f}" text-anchor="end">'
                     f"{esc(fmt(max_value * i / 4).replace('.0%', '%'))}</text>")
    for i, name in enumerate(categories):
        parts.append(f'<text x="{x(i, 0) + (len(series) - 1) / 2 * spread:.1f}" y="{height - bottom + 18}" '
                     f'text-anchor="middle"><title>{esc(name)}</title>{esc(_short(name, 14))}</text>')
    lx = left
    for s in series:  # the legend, above the plot
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        parts.append(f'<g class="legend-item"><line x1="{lx}" y1="14" x2="{lx + 22}" y2="14" '
                     f'style="stroke:{esc(s.colour)};stroke-width:2"{dash}/>'
                     f'<circle cx="{lx + 11}" cy="14" r="3.5" style="fill:{esc(s.colour)}"/>'
                     f'<text x="{lx + 28}" y="18">{esc(s.label)}</text></g>')
        lx += 40 + 7 * len(s.label)
    for j, s in enumerate(series):
        dash = ' stroke-dasharray="5 3"' if s.dashed else ""
        runs: list[list[str]] = [[]]
        for i in range(n):
            p = s.points[i] if i < len(s.points) else None
            if p is None or p[0] is None:
                runs.append([])
            else:
                runs[-1].append(f"{x(i, j):.1f} {y(p[0]):.1f}")
        for run in runs:
            if len(run) > 1:
                parts.append(f'<path d="M{"L".join(run)}" style="fill:none;stroke:{esc(s.colour)};'
                             f'stroke-width:2"{dash}/>')
        for i in range(n):
            p = s.points[i] if i < len(s.points) else None
            if p is None or p[0] is None:
                continue
            value, low, high = p
            cx, cy = x(i, j), y(value)
            tip = f"{s.label}, {categories[i]}: {fmt(value)}"
            bar = ""
            if low is not None and high is not None:
                tip += f" (CI {fmt(low)} to {fmt(high)})"
                y1, y2 = y(low), y(high)
                bar = (f'<path class="whisker errbar" style="stroke:{esc(s.colour)}" '
                       f'd="M{cx:.1f} {y1:.1f}V{y2:.1f}M{cx - 4:.1f} {y1:.1f}H{cx + 4:.1f}'
                       f'M{cx - 4:.1f} {y2:.1f}H{cx + 4:.1f}"/>')
            parts.append(f'<g><title>{esc(tip)}</title>{bar}<circle class="pt" cx="{cx:.1f}" '
                         f'cy="{cy:.1f}" r="3.5" style="fill:{esc(s.colour)}"/></g>')
    parts.append("</svg>")
    return "".join(parts)
