"""Conversion arithmetic."""

from .registry import lookup


class UnitError(ValueError):
    """An unknown unit, or two units of different kinds."""


def convert(value: float, src: str, dst: str) -> float:
    """``value`` in unit ``src`` expressed in unit ``dst``."""
    a, b = lookup(src), lookup(dst)
    if a.kind != b.kind:
        raise UnitError(f"cannot convert {a.kind} ({src}) to {b.kind} ({dst})")
    base = float(value) * a.scale + a.offset
    return (base - b.offset) / b.scale
