#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The oracle feeds the interactive interpreter the lines a user would type at its prompt.
cd /app
PYTHONPATH=/app/lib python3 -q -i <<'PY'
import json, ledgerkit
book = ledgerkit.load("/app/data/tx.bin", "/app/data/rates.json")
balances = {}
for tx in book.transactions:
    if not tx.reversed:
        balances[tx.account] = balances.get(tx.account, 0) + book.to_eur(tx)

top3 = sorted(balances, key=lambda a: (-balances[a], a))[:3]
answer = {"balances": {str(a): v for a, v in sorted(balances.items())}, "top3": top3, "total": sum(balances.values())}
json.dump(answer, open("/app/answer.json", "w"), indent=1)
print(top3, answer["total"])
PY
