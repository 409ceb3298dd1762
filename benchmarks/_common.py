"""Helpers the benchmark scripts share: progress logging and summary statistics.

Every percentile a benchmark reports (``p50``, ``p90``, ``p99`` ...) comes from :func:`quantile`,
which uses a single method: linear interpolation between the two closest ranks. For sorted
samples ``x[0] <= ... <= x[n-1]`` the q-quantile sits at position ``h = q * (n - 1)`` and is
``x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])``. This is what
``statistics.quantiles(..., method="inclusive")`` computes (numpy's default ``"linear"``,
Hyndman & Fan type 7): ``q=0`` is the minimum, ``q=1`` the maximum, ``q=0.5`` the median, and a
single sample is its own every quantile.

Why one method: the scripts used to compute percentiles in different ways (interpolated in
reset_latency and step_latency; the lower of the two closest ranks in agent_overhead, scale and
soak; the sample at index ``int(0.9 * n)`` in verify_overhead, which for 10 samples is the
maximum), so a ``p90`` key named a different number depending on which script wrote it, and
reports could not be compared. Interpolation was kept because it is the stdlib's documented
method, it does not snap to whichever single sample a rounding rule picks, and the two scripts
that already used it keep reporting the same numbers.

The scripts are run as ``python benchmarks/<name>.py``, so this file's folder is on
``sys.path`` and they import it as ``_common``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence

#: the fields :func:`stats` reports when none are named
DEFAULT_FIELDS = ("n", "median", "p90", "mean", "min", "max")


def emit(doc: dict, out: str | os.PathLike[str] | None = None) -> None:
    """Print a benchmark's JSON document on stdout, and write it to ``out`` too when given."""
    text = json.dumps(doc, indent=2)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")
    print(text)


def log(msg: str, prefix: str = "") -> None:
    """Print ``prefix + msg`` as one line on stderr, flushed at once (stdout carries the JSON)."""
    print(f"{prefix}{msg}", file=sys.stderr, flush=True)


def quantile(samples: Iterable[float], q: float) -> float:
    """The ``q``-quantile (0 <= q <= 1) of ``samples``, interpolated between the closest ranks.

    Matches ``statistics.quantiles(samples, n=N, method="inclusive")[k - 1]`` for ``q = k / N``
    (up to float rounding), and is also defined for one sample and for ``q`` of 0 or 1.

    >>> quantile([1, 2, 3, 4], 0.5)
    2.5
    >>> quantile(range(1, 11), 0.9)   # h = 0.9 * 9 = 8.1: x[8] + 0.1 * (x[9] - x[8])
    9.1
    >>> quantile([7.0], 0.99)
    7.0
    >>> quantile([5.0, 1.0, 3.0], 0.0), quantile([5.0, 1.0, 3.0], 1.0)
    (1.0, 5.0)
    >>> xs = [0.12, 0.5, 0.31, 0.07, 0.9, 0.44, 0.26]
    >>> ref = statistics.quantiles(xs, n=10, method="inclusive")[8]
    >>> abs(quantile(xs, 0.9) - ref) < 1e-12
    True
    >>> quantile([], 0.5)
    Traceback (most recent call last):
    ...
    ValueError: quantile of no samples
    """
    xs = sorted(samples)
    if not xs:
        raise ValueError("quantile of no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q!r}")
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    if lo >= len(xs) - 1:
        return xs[-1]
    return xs[lo] + (pos - lo) * (xs[lo + 1] - xs[lo])


def _measure(field: str) -> Callable[[Sequence[float]], float]:
    """How to compute ``field`` from sorted samples (see :func:`stats`)."""
    fixed: dict[str, Callable[[Sequence[float]], float]] = {
        "median": statistics.median, "mean": statistics.fmean,
        "min": lambda xs: xs[0], "max": lambda xs: xs[-1],
    }
    if field in fixed:
        return fixed[field]
    if field.startswith("p") and field[1:].replace(".", "", 1).isdigit():
        q = float(field[1:]) / 100
        if q <= 1.0:
            return lambda xs: quantile(xs, q)
    raise ValueError(f"unknown stats field {field!r}")


def stats(samples: Iterable[float], fields: Sequence[str] = DEFAULT_FIELDS, *,
          scale: float = 1.0, digits: int = 3, suffix: str = "") -> dict[str, float | int | None]:
    """A summary of ``samples`` as a dict with one key per name in ``fields``, in that order.

    Fields: ``n`` (the count, its key never gets ``suffix``), ``median``, ``mean``, ``min``,
    ``max`` and ``pNN`` (the NN-th percentile by :func:`quantile`, e.g. ``p90``, ``p99.9``).
    Every sample is multiplied by ``scale`` first (1000 turns seconds into ms), every value is
    rounded to ``digits`` decimals, and ``suffix`` (e.g. ``"_ms"``) is appended to each key but
    ``n``. With no samples ``n`` is 0 and the other fields are None.

    >>> stats([0.010, 0.020, 0.030, 0.040], ("n", "median", "p90", "max"), scale=1000,
    ...       digits=2, suffix="_ms")
    {'n': 4, 'median_ms': 25.0, 'p90_ms': 37.0, 'max_ms': 40.0}
    >>> stats([3.0, 1.0, 2.0])
    {'n': 3, 'median': 2.0, 'p90': 2.8, 'mean': 2.0, 'min': 1.0, 'max': 3.0}
    >>> stats([0.5], ("p50", "p99"), digits=1)
    {'p50': 0.5, 'p99': 0.5}
    >>> stats([], ("median", "p99"))
    {'median': None, 'p99': None}
    >>> stats([], ("p90x",))
    Traceback (most recent call last):
    ...
    ValueError: unknown stats field 'p90x'
    """
    measures = {field: _measure(field) for field in fields if field != "n"}
    xs = sorted(x * scale for x in samples)
    out: dict[str, float | int | None] = {}
    for field in fields:
        if field == "n":
            out["n"] = len(xs)
        else:
            out[field + suffix] = round(measures[field](xs), digits) if xs else None
    return out
