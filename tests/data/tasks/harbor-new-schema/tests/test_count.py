"""Checks of /app/count.txt against the words file the image was built with (seed 7)."""

import random
from pathlib import Path

COUNT = Path("/app/count.txt")


def expected() -> int:
    r = random.Random(7)
    lines = [" ".join(r.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(r.randint(0, 9)))
             for _ in range(40)]
    return sum(len(line.split()) for line in lines)


def test_file_exists():
    assert COUNT.is_file()


def test_count():
    assert int(COUNT.read_text().strip()) == expected()


def test_single_line():
    assert len(COUNT.read_text().strip().splitlines()) == 1
