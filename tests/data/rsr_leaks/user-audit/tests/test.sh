#!/bin/bash
mkdir -p /logs/verifier
expected_users="alice
carol
dmitri
root"
ok=1
[ "$(cat /app/bash_users.txt)" = "$expected_users" ] || ok=0
[ "$(tr -d ' \n' < /app/bash_count.txt)" -eq 4 ] || ok=0
echo $ok > /logs/verifier/reward.txt
