import csv

import pytest


def counts():
    with open("/app/levels.csv", newline="") as fh:
        return {row["level"]: int(row["count"]) for row in csv.DictReader(fh)}


@pytest.mark.parametrize("level,count", [("ERROR", 14), ("WARN", 31), ("INFO", 208)])
def test_level(level, count):
    assert counts()[level] == count


def test_order():
    with open("/app/levels.csv") as fh:
        assert [line.split(",")[0] for line in fh.read().split()] == ["level", "ERROR", "WARN", "INFO"]
