#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/ledger
# The reflog entry just before "reset: moving to ..." is the tip that was thrown away.
lost=$(git log -g --format='%H %gs' HEAD | awk '/reset: moving to/ { getline; print $1; exit }')
git log --oneline main.."$lost"
git cherry-pick main.."$lost"
git status --short
