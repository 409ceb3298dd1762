#!/bin/bash
# Runs in the working directory before the step's agent starts.
seq 1 17 > /app/items.txt
