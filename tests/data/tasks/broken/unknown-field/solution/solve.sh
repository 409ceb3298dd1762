#!/bin/bash
# Reference solution.
cat > /app/sum.py <<'PY'
import sys

print(sum(int(arg) for arg in sys.argv[1:]))
PY
