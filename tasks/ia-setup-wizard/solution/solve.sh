#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The wizard reads its answers with input(), so they can be piped in, one per line, in the order
# it asks: name, port, backend, host, db port, db name, user, password, TLS, cert, key, e-mail,
# admin password twice, confirmation.
printf '%s\n' ledger-api 8443 2 db.internal 6432 ledger ledger_app Tr1cky-Pass y \
  /app/certs/server.crt /app/certs/server.key ops@ledger.example correct-horse-42 correct-horse-42 y \
  | /app/setup-wizard
cat /app/config/app.json
