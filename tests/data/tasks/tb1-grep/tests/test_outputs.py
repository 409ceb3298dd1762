"""Checks of /app/errors.txt and /app/error_count.txt."""

from pathlib import Path

LOG = Path("/app/logs/server.log")


def error_lines() -> list[str]:
    return [line for line in LOG.read_text().splitlines() if line.split()[1] == "ERROR"]


def test_errors_file_exists():
    assert Path("/app/errors.txt").is_file()


def test_errors_are_the_error_lines_in_order():
    assert Path("/app/errors.txt").read_text().splitlines() == error_lines()


def test_count_matches():
    assert int(Path("/app/error_count.txt").read_text().strip()) == len(error_lines())
