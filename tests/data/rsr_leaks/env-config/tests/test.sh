#!/bin/bash
set -u
mkdir -p /logs/verifier
fail() { echo "FAIL: $1"; echo 0 > /logs/verifier/reward.txt; exit 0; }
EXPECTED_WORKERS=6
. /app/svc/.env || fail "cannot read the .env file"
[ "$WORKERS" -eq "$EXPECTED_WORKERS" ] || fail "WORKERS is $WORKERS"
[[ "$MODE" == prod ]] || fail "MODE"
grep -q '^TOKEN=mint-a008918$' /app/svc/.env || fail "TOKEN"
echo 1 > /logs/verifier/reward.txt
