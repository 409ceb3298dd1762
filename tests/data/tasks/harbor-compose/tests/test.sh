#!/bin/bash
# Verifier entry point: the service itself says whether the ticket is one it issued to `agent`.
mkdir -p /logs/verifier
python3 -m pytest -q -rA -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_ticket.py
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
