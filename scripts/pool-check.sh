#!/usr/bin/env bash
# The whole bundled pool through the quality gate (oracle, nop, snoop and the rewrite, constant
# and instance probes for every task), with the per-task results and times written to
# docs/pool-check.json and summarised in docs/pool.md (with the split similarity report).
# Slow on purpose (minutes): CI runs the same gate on a fixed sample inside the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
status=0
"$PY" -m terminal_env tasks check tasks --jobs "${JOBS:-2}" --json docs/pool-check.json || status=$?
"$PY" scripts/pool_table.py docs/pool-check.json > docs/pool.md
echo "wrote docs/pool.md and docs/pool-check.json" >&2
exit "$status"
