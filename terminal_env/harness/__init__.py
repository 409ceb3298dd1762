"""Harness adapters, found by name.

Built in: ``generic``, ``terminus``, ``tool-calling``, ``react``. Third-party harnesses register a
:class:`~terminal_env.harness.base.Harness` subclass under the entry-point group
``terminal_env.harnesses``, e.g. in their ``pyproject.toml``::

    [project.entry-points."terminal_env.harnesses"]
    my-harness = "my_package.harness:MyHarness"
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from ..errors import ConfigError
from .base import ActionResult, CommandRecord, FormatError, Harness, HarnessAction

ENTRY_POINT_GROUP = "terminal_env.harnesses"

BUILTIN: dict[str, str] = {
    "generic": "terminal_env.harness.generic:GenericHarness",
    "terminus": "terminal_env.harness.terminus:TerminusHarness",
    "tool-calling": "terminal_env.harness.tool_calling:ToolCallingHarness",
    "react": "terminal_env.harness.react:ReactHarness",
}


def _load(target: str) -> type[Harness]:
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def _plugins() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_harnesses() -> list[str]:
    """Names of the built-in and the installed third-party harnesses."""
    return sorted(set(BUILTIN) | set(_plugins()))


def harness_class(name: str) -> type[Harness]:
    if name in BUILTIN:
        return _load(BUILTIN[name])
    plugins = _plugins()
    if name in plugins:
        try:
            cls = plugins[name].load()
        except Exception as exc:  # a broken plugin must say which one
            raise ConfigError(
                f"harness {name!r} (entry point {plugins[name].value!r}) failed to load: {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Harness)):
            raise ConfigError(
                f"entry point {plugins[name].value!r} for harness {name!r} is not a Harness subclass"
            )
        return cls
    raise ConfigError(f"unknown harness {name!r}; available: {', '.join(available_harnesses())}")


def get_harness(name: str, **options: Any) -> Harness:
    """A fresh harness instance (one per episode or per worker)."""
    return harness_class(name)(**options)


__all__ = [
    "ActionResult", "CommandRecord", "FormatError", "Harness", "HarnessAction", "ENTRY_POINT_GROUP",
    "available_harnesses", "get_harness", "harness_class",
]
