from pathlib import Path


def test_count():
    """The number of orders above 100."""
    assert Path("/app/count.txt").read_text().strip() == "27", "wrong count"
