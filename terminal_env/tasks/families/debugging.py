"""Generated task families of the debugging category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

from .base import Family

FAMILIES: list[Family] = []
