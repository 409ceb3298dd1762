import json


def test_summary():
    with open("/app/summary.json") as fh:
        got = json.load(fh)
    assert got == {"regions": 4, "top": "west", "total": 1253.3}
