#!/bin/bash
# Verifier entry point: pytest writes a JUnit report (one check per test); reward.txt is the
# strict verdict (1 only if every test passed).
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_stats.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
