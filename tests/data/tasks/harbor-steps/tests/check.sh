#!/bin/bash
# Shared helpers for every step's test.sh (the task-level tests/ is uploaded before a step's own).
mkdir -p /logs/verifier
verdict() { if "$@"; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi; }
