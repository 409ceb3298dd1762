import math
from pathlib import Path

HERE = Path(__file__).parent


def test_median():
    got = float(Path("/app/median.txt").read_text())
    assert math.isclose(got, 211.2, abs_tol=0.05)


def test_slowest():
    want = (HERE / "expected_slowest.txt").read_text().strip()
    assert Path("/app/slowest.txt").read_text().strip() == want
