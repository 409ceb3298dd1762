#!/bin/bash
# A naive verifier, as many tasks from outside have: the agent's module is imported into the
# pytest process, and reward.txt is written from pytest's exit status alone.
mkdir -p /logs/verifier
python3 -m pytest -q -rA -p no:cacheprovider /tests/test_stats.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
