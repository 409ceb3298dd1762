"""Generated task families: seeded generators of task directories, by category.

``FAMILIES`` maps a family's name to its :class:`.base.Family`; each category's module holds its
families. ``terminal-env tasks generate FAMILY|all`` (:mod:`terminal_env.tasks.generate`) writes
them; ``docs/generated-pool.md`` has the table of families.
"""

from __future__ import annotations

from . import (build_repair, debugging, git, git_2, interactive, interactive_2, long_horizon, long_horizon_2,
               performance, performance_2, scientific, scientific_2, security, security_2, security_3,
               sysadmin, sysadmin_2, text_data, text_data_2, interactive_3, build_repair_2, interactive_4)
from .base import CATEGORIES, DIFFICULTIES, Family, Instance

_MODULES = (build_repair, debugging, git, git_2, interactive, long_horizon, long_horizon_2, performance,
            performance_2, scientific, scientific_2, security, security_2, security_3, sysadmin, sysadmin_2,
            text_data, text_data_2, interactive_2, interactive_3, build_repair_2, interactive_4)


def _registry() -> dict[str, Family]:
    found: dict[str, Family] = {}
    for module in _MODULES:
        for family in module.FAMILIES:
            if family.name in found:
                raise ValueError(f"two task families are named {family.name!r}")
            if family.category not in CATEGORIES:
                raise ValueError(f"family {family.name}: category {family.category!r} is not one of "
                                 f"{', '.join(CATEGORIES)}")
            found[family.name] = family
    return found


FAMILIES: dict[str, Family] = _registry()

__all__ = ["CATEGORIES", "DIFFICULTIES", "FAMILIES", "Family", "Instance"]
