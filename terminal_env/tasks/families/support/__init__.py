"""Helpers that a family's generator imports and that its hidden tests get a verbatim copy of
(``source(module)``): one implementation of the reference, used to make the instance and to check
the agent's answer. Standard library only, since they run in the sandbox's Python."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType


def source(module: ModuleType) -> str:
    """The text of a support module, to be written next to the tests."""
    return Path(module.__file__ or "").read_text(encoding="utf-8")
