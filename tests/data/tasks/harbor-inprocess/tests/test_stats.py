"""Checks of /app/stats.py, imported into this process (the pattern the guard exists for)."""

import importlib.util

spec = importlib.util.spec_from_file_location("stats", "/app/stats.py")
stats = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stats)


def test_median_odd():
    assert stats.median([5, 1, 3]) == 3


def test_median_even():
    assert stats.median([4, 1, 3, 2]) == 2.5


def test_mode_smallest_on_tie():
    assert stats.mode([3, 1, 3, 1, 2]) == 1
