"""The unit table: every unit has a kind, and maps to its kind's base unit as
base = value * scale + offset."""

import json
from typing import NamedTuple

from .core import UnitError


class Unit(NamedTuple):
    name: str
    kind: str
    scale: float
    offset: float


_TABLE: dict[str, Unit] = {}


def _load() -> dict[str, Unit]:
    if not _TABLE:
        with open("units.json", encoding="utf-8") as f:
            data = json.load(f)
        for kind, table in data.items():
            for name, (scale, offset) in table.items():
                _TABLE[name] = Unit(name, kind, float(scale), float(offset))
    return _TABLE


def lookup(name: str) -> Unit:
    try:
        return _load()[name]
    except KeyError:
        raise UnitError(f"unknown unit {name!r}") from None


def units(kind: str | None = None) -> list[str]:
    """Names of the known units (of one kind), sorted."""
    return sorted(u.name for u in _load().values() if kind is None or u.kind == kind)
