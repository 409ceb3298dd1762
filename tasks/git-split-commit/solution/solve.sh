#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/gateway
orig=$(git rev-parse HEAD)
author=$(git log -1 --format='%an <%ae>' "$orig")
git reset -q --mixed HEAD~1
git add README.md docs
git commit -q --author="$author" -m "Fix typos in documentation"
git add -A
git commit -q --author="$author" -m "Add token-bucket rate limiter"
git log --format='%h %an %s' -4
git diff --stat "$orig" HEAD
