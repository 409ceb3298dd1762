#!/bin/bash
cat > /app/solution.py <<'PY'
import re


def slug(title):
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
PY
