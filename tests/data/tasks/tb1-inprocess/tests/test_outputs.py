"""Checks of /app/solution.py, imported into the pytest process as many Terminal-Bench tasks do."""

import sys

sys.path.insert(0, "/app")

from solution import slug  # noqa: E402


def test_simple():
    assert slug("Hello World") == "hello-world"


def test_runs_collapse():
    assert slug("a -- b!!c") == "a-b-c"


def test_ends_stripped():
    assert slug("  --Title 2--  ") == "title-2"
