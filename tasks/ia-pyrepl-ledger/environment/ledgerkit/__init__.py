"""ledgerkit: read the cooperative's transaction log.

    >>> import ledgerkit
    >>> book = ledgerkit.load("/app/data/tx.bin", "/app/data/rates.json")
    >>> len(book.transactions)
    >>> tx = book.transactions[0]
    >>> tx.account, tx.day, tx.currency, tx.amount_cents, tx.reversed
    >>> book.rate(tx.currency, tx.day)    # EUR per unit: the latest published rate on or before the day
    >>> book.to_eur(tx)                   # tx amount in EUR cents, rounded half-to-even

A reversed transaction was cancelled later and does not count for any balance.
Book.raw_balance(account) is deprecated: it adds raw amounts of mixed currencies.
"""
import bisect
import datetime as _dt
import json
import struct
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

CURRENCIES = ["EUR", "USD", "GBP", "CHF", "SEK"]
EPOCH = _dt.date(2024, 1, 1)
_HEADER = struct.Struct("<4sI")
_RECORD = struct.Struct("<HHBbi")


@dataclass(frozen=True)
class Tx:
    account: int
    day: _dt.date
    currency: str
    amount_cents: int
    reversed: bool


class Book:
    def __init__(self, transactions, rates):
        self.transactions = transactions
        self._rates = {cur: sorted((_dt.date.fromisoformat(d), Decimal(str(r))) for d, r in table.items())
                       for cur, table in rates.items()}

    def rate(self, currency, day):
        if currency == "EUR":
            return Decimal(1)
        table = self._rates[currency]
        i = bisect.bisect_right([d for d, _ in table], day) - 1
        if i < 0:
            raise ValueError(f"no {currency} rate on or before {day}")
        return table[i][1]

    def to_eur(self, tx):
        value = Decimal(tx.amount_cents) * self.rate(tx.currency, tx.day)
        return int(value.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))

    def raw_balance(self, account):
        """Deprecated: mixes currencies and counts reversed transactions."""
        return sum(t.amount_cents for t in self.transactions if t.account == account)


def load(tx_path, rates_path):
    data = open(tx_path, "rb").read()
    magic, count = _HEADER.unpack_from(data, 0)
    if magic != b"LKT1":
        raise ValueError("not a ledgerkit file")
    txs = []
    for i in range(count):
        account, day, cur, flags, amount = _RECORD.unpack_from(data, _HEADER.size + i * _RECORD.size)
        txs.append(Tx(account, EPOCH + _dt.timedelta(days=day), CURRENCIES[cur], amount, bool(flags & 1)))
    with open(rates_path) as f:
        rates = json.load(f)
    return Book(txs, rates)
