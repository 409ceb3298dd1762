"""How alike two tasks are, so that no theme is trained on in one split and scored in another.

Two tasks are compared on what makes a task's theme: the words of the instruction and of the
tests (TF-IDF over the pool, words used by half the pool or more left out, cosine), and the
environment files they share byte for byte (a shared input file is the same data: score 1).
:func:`pool_problems` turns a cross-split pair at or above :data:`THRESHOLD` into an error;
``terminal-env tasks similar`` prints the report.

The measure is lexical on purpose: a pair above the threshold shares the vocabulary of one
subject (``cron``, ``crontab``, ``jobs``; ``sqlite``, ``orders``, ``sku``), which is what a
policy trained on one of them carries over to the other. Calibrated on the bundled pool: the
twins a review found (log forensics and the log-report tasks, two service bring-ups, the cron
tasks, the SQLite repairs) score 0.15 to 0.29; unrelated tasks of one category stay below.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable

THRESHOLD = 0.15
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
_MIN_SHARED = 64  # bytes: smaller shared files (an empty __init__.py, a one-line config) say nothing


@dataclass(frozen=True)
class Pair:
    """Two tasks, how alike they are, and why."""

    a: str
    b: str
    split_a: str | None
    split_b: str | None
    score: float
    words: tuple[str, ...]
    shared_files: tuple[str, ...] = ()

    @property
    def cross_split(self) -> bool:
        return self.split_a != self.split_b

    def describe(self) -> str:
        why = f"shared words {', '.join(self.words)}" if self.words else ""
        if self.shared_files:
            why = f"shared environment files {', '.join(self.shared_files)}" + (f"; {why}" if why else "")
        return (f"{self.a} ({self.split_a}) and {self.b} ({self.split_b}): similarity "
                f"{self.score:.2f} ({why})")


def task_text(task: Any) -> str:
    """The instruction and the tests' text (the entry script and the task author's kit, the same
    in every task, left out)."""
    parts = [task.instruction]
    for name, src in sorted(task.verifier_files().items()):
        if Path(name).name in ("test.sh", "te_checks.py"):
            continue
        data = src if isinstance(src, bytes) else Path(src).read_bytes()
        parts.append(data.decode("utf-8", "replace"))
    return "\n".join(line for line in "\n".join(parts).splitlines() if "CANARY" not in line)


def _env_hashes(task: Any) -> dict[str, str]:
    out = {}
    env = Path(task.environment_dir)
    for f in sorted(env.rglob("*")):
        if f.is_file() and f.name != "Dockerfile" and f.stat().st_size >= _MIN_SHARED:
            out[hashlib.sha256(f.read_bytes()).hexdigest()] = f.relative_to(env).as_posix()
    return out


def _vectors(texts: dict[str, str], background: dict[str, str]) -> dict[str, dict[str, float]]:
    bags = {name: Counter(_WORD.findall(text.lower())) for name, text in texts.items()}
    corpus = {**{k: set(_WORD.findall(v.lower())) for k, v in background.items()},
              **{k: set(bag) for k, bag in bags.items()}}
    df = Counter(w for words in corpus.values() for w in words)
    n = len(corpus)
    vectors = {}
    for name, bag in bags.items():
        v = {w: (1 + math.log(c)) * math.log(n / df[w]) for w, c in bag.items() if df[w] < n / 2}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        vectors[name] = {w: x / norm for w, x in v.items()}
    return vectors


def similar_pairs(tasks: Iterable[Any], *, threshold: float = 0.0, cross_split_only: bool = True,
                  top_words: int = 5, background: Iterable[Any] = ()) -> list[Pair]:
    """Pairs of ``tasks`` scoring at least ``threshold``, most alike first. How common a word
    is counts over ``tasks`` and ``background`` (pass the bundled pool when comparing a few
    tasks: in a handful of tasks every shared word looks common)."""
    tasks = sorted(tasks, key=lambda t: t.name)
    vectors = _vectors({t.name: task_text(t) for t in tasks},
                       {f"background:{t.name}": task_text(t) for t in background})
    hashes = {t.name: _env_hashes(t) for t in tasks}
    pairs = []
    for a, b in combinations(tasks, 2):
        if cross_split_only and a.split == b.split:
            continue
        va, vb = vectors[a.name], vectors[b.name]
        terms = sorted(((x * vb[w], w) for w, x in va.items() if w in vb), reverse=True)
        score = sum(t for t, _ in terms)
        shared = tuple(sorted(hashes[a.name][h] for h in set(hashes[a.name]) & set(hashes[b.name])))
        if shared:
            score = 1.0
        if score >= threshold:
            pairs.append(Pair(a.name, b.name, a.split, b.split, round(score, 3),
                              tuple(w for _, w in terms[:top_words]), shared))
    return sorted(pairs, key=lambda p: (-p.score, p.a, p.b))
