#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
# The canonical verifier entry point (terminal-env's verifiers/test.sh, copied into a task's tests/).
# pytest runs the task's tests from /tests (a fresh directory: nothing the agent wrote is first on
# sys.path) with the kit's plugin (tests/te_checks.py), which writes /logs/verifier/checks.json (one
# named, weighted check per test) and /logs/verifier/reward.txt (the passed share of the weights).
mkdir -p /logs/verifier
cd /tests || exit 1
exec python3 -m pytest -q -rA -p no:cacheprovider -p te_checks --junitxml=/logs/verifier/junit.xml /tests
