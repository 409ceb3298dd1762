#!/bin/bash
# Verifier entry point: one JUnit check per test; reward.txt is 1 only if every test passed.
mkdir -p /logs/verifier
python3 -m pytest -q -rA -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_sum.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
