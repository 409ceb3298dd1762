# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Recomputes the balances from the raw files with an independent reader and compares."""
import bisect
import datetime as dt
import json
import struct
from decimal import ROUND_HALF_EVEN, Decimal

ANSWER = "/app/answer.json"
CUR = ["EUR", "USD", "GBP", "CHF", "SEK"]


def expected():
    data = open("/app/data/tx.bin", "rb").read()
    magic, n = struct.unpack_from("<4sI", data)
    assert magic == b"LKT1"
    rates = {c: sorted((dt.date.fromisoformat(d), Decimal(str(r))) for d, r in t.items())
             for c, t in json.load(open("/app/data/rates.json")).items()}
    balances = {}
    for i in range(n):
        acct, day, cur, flags, amount = struct.unpack_from("<HHBbi", data, 8 + 10 * i)
        if flags & 1:
            continue
        when = dt.date(2024, 1, 1) + dt.timedelta(days=day)
        if CUR[cur] == "EUR":
            rate = Decimal(1)
        else:
            table = rates[CUR[cur]]
            rate = table[bisect.bisect_right([d for d, _ in table], when) - 1][1]
        cents = int((Decimal(amount) * rate).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
        balances[acct] = balances.get(acct, 0) + cents
    return balances


def answer():
    try:
        return json.load(open(ANSWER))
    except FileNotFoundError:
        raise AssertionError(f"{ANSWER} is missing")
    except json.JSONDecodeError as exc:
        raise AssertionError(f"{ANSWER} is not JSON: {exc}")


def test_answer_format():
    a = answer()
    assert set(a) == {"balances", "top3", "total"}, sorted(a)
    assert isinstance(a["balances"], dict) and all(isinstance(v, int) for v in a["balances"].values())
    assert all(k.isdigit() for k in a["balances"])
    assert isinstance(a["top3"], list) and len(a["top3"]) == 3 and all(isinstance(x, int) for x in a["top3"])
    assert isinstance(a["total"], int)


def test_balances():
    want = {str(k): v for k, v in expected().items()}
    got = answer()["balances"]
    assert set(got) == set(want), f"accounts differ: extra {sorted(set(got) - set(want))[:5]}, missing {sorted(set(want) - set(got))[:5]}"
    wrong = [k for k in want if got[k] != want[k]]
    assert not wrong, f"{len(wrong)} balances wrong, e.g. account {wrong[0]}: {got[wrong[0]]} vs {want[wrong[0]]}"


def test_top3():
    want = expected()
    assert answer()["top3"] == sorted(want, key=lambda a: (-want[a], a))[:3]


def test_total():
    assert answer()["total"] == sum(expected().values())
