from parse_levels import level


def test_level():
    assert level('ts=1 WARN svc=x') == 'WARN'
