"""What a generated task family is: a seeded generator of task instances, and the instance it makes.

A family is code that writes ordinary task directories in the bundled pool's format (see
:mod:`terminal_env.tasks.generate`, which does the writing). A family declares its name, category,
split and a one-line summary, and a ``make(rng, index)`` function returning an :class:`Instance`:
the instruction, the files under ``/app`` in the image, the hidden tests (pytest, with the kit's
``@pytest.mark.weight`` for partial progress), the oracle's ``solve.sh``, and the instance's
difficulty and *variant*. The variant names what the instance is about in substance (the bug, the
schema, the failure mode), so that two instances of one family differ in what must be done, not
only in numbers; the family's tests check that several variants occur.

Rules every family keeps (its test and the gate enforce them):

* Deterministic: ``make`` draws only from the ``random.Random`` it is given.
* Offline: the image is the project's base (or dev) image plus the instance's files; nothing is
  fetched at build or run time.
* The tests hold the expected results, the instruction does not; where the instruction must name
  a value, the tests recompute it from hidden inputs rather than compare with a constant the agent
  could guess (the constant and rewrite probes look for that).
* Partial credit: several weighted checks, none of which a constant or empty answer passes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

CATEGORIES = (
    "build-repair", "debugging", "git", "interactive", "long-horizon",
    "performance", "scientific", "security", "sysadmin", "text-data",
)
DIFFICULTIES = ("easy", "medium", "hard")
IMAGES = {"base": "terminal-env/base:bookworm-1", "dev": "terminal-env/dev:bookworm-1"}


@dataclass
class Instance:
    """One generated task, before it is written to disk.

    ``files`` go to ``/app`` in the image (paths relative to ``/app``); ``test_files`` sit next to
    ``tests/test_outputs.py`` (hidden inputs, reference data); ``executable`` lists paths of either
    that need the executable bit. ``oracle_turns`` is how many shell commands the oracle's solution
    amounts to (for the pool's table)."""

    instruction: str
    tests: str
    solution: str
    difficulty: str
    variant: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    test_files: dict[str, str | bytes] = field(default_factory=dict)
    executable: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    image: str = "base"
    oracle_turns: int = 1
    agent_timeout_sec: float = 600.0
    verifier_timeout_sec: float = 120.0


@dataclass(frozen=True)
class Family:
    """A task family: ``make(rng, index)`` returns instance ``index`` drawn from ``rng``."""

    name: str
    category: str
    split: str
    summary: str
    make: Callable[[random.Random, int], Instance]

    def instance(self, seed: int, index: int) -> Instance:
        """Instance ``index`` of the generation with ``seed``: the same arguments, the same instance."""
        rng = random.Random(f"terminal-env:{self.name}:{seed}:{index}")
        inst = self.make(rng, index)
        if inst.difficulty not in DIFFICULTIES:
            raise ValueError(f"family {self.name}: difficulty {inst.difficulty!r} is not one of "
                             f"{', '.join(DIFFICULTIES)}")
        if inst.image not in IMAGES:
            raise ValueError(f"family {self.name}: image {inst.image!r} is not one of {', '.join(IMAGES)}")
        return inst
