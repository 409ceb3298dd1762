"""Helpers that a family's generator imports and that its hidden tests get a verbatim copy of
(``source(module)``): one implementation of the reference, used to make the instance and to check
the agent's answer. Standard library only, since they run in the sandbox's Python."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType


def source(module: ModuleType) -> str:
    """The text of a support module, to be written next to the tests."""
    return Path(module.__file__ or "").read_text(encoding="utf-8")


def functions(module: ModuleType, *names: str) -> str:
    """The source of the named top-level functions of a support module, in the order asked (an
    oracle's program carries the reference it needs). A function ends where the next line at the
    left margin begins."""
    lines = source(module).splitlines()
    parts = []
    for name in names:
        start = next((i for i, line in enumerate(lines) if line.startswith(f"def {name}(")), None)
        if start is None:
            raise ValueError(f"{module.__name__} has no top-level function {name!r}")
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t)]}"):
            end += 1
        parts.append("\n".join(lines[start:end]).rstrip())
    return "\n\n\n".join(parts)
