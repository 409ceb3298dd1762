#!/bin/bash
# The greeting counts the .msg files; the token is what issue-token prints.
mkdir -p /logs/verifier
ok=1
[ "$(cat /app/greet.txt)" = "hello world 5" ] || ok=0
grep -qx 'token=tok-03f14b38' /app/deploy.cfg || ok=0
echo $ok > /logs/verifier/reward.txt
