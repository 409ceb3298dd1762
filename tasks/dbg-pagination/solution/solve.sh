#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/pager
python3 - <<'PY'
from pathlib import Path
p = Path("pager.py")
s = p.read_text()
s = s.replace("total_pages = max(1, len(items) // per_page)",
              "total_pages = max(1, -(-len(items) // per_page))")   # ceil, not floor
s = s.replace("end = start + per_page - 1", "end = start + per_page")  # slice end is exclusive
s = s.replace('"has_next": page * per_page <= len(items),', '"has_next": page < total_pages,')
p.write_text(s)
v = Path("view.py")
s = v.read_text()
s = s.replace('lines = f.read().split("\\n")', "lines = f.read().splitlines()")
v.write_text(s)
PY
grep -n "total_pages =\|end =\|has_next\"\|splitlines" pager.py view.py
python3 view.py sample.txt --page 3 --per-page 20
