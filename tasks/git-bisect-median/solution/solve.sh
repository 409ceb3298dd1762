#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/stats
git bisect start main v1.0
git bisect run sh -c 'test "$(python3 stats.py median 3 8 1 6)" = 4.5'
git rev-parse refs/bisect/bad > /app/first_bad.txt
git bisect reset
git log -1 --format='%H %s' "$(cat /app/first_bad.txt)"
