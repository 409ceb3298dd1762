#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/project
# 1
git init -q -b main
git config user.name "Release Bot"
git config user.email "release@example.com"
printf 'build/\n__pycache__/\n*.tmp\n' > .gitignore
git add -A
git commit -q -m "Initial import"
# 2
git apply /app/patches/0001-add-median.patch
git add -A
git commit -q -m "Add median function"
# 3
git tag -a v1.0.0 -m "Release 1.0.0"
# 4
git checkout -q -b fix/mean-empty v1.0.0
python3 - <<'PY'
p = "calc.py"
s = open(p).read()
s = s.replace("""def mean(values):
    values = list(values)
    return sum(values) / len(values)""", """def mean(values):
    values = list(values)
    if not values:
        raise ValueError("empty data")
    return sum(values) / len(values)""")
open(p, "w").write(s)
PY
git commit -q -am "Fix mean of empty list"
# 5
git checkout -q main
git merge -q --no-ff --no-edit fix/mean-empty
git tag -a v1.0.1 -m "Release 1.0.1"
# 6
{
  echo "# Changelog"
  prev=""
  tags=$(git tag -l 'v*' --sort=-v:refname)
  set -- $tags
  while [ $# -gt 0 ]; do
    tag=$1; older=${2:-}
    echo
    echo "## $tag"
    if [ -n "$older" ]; then range="$older..$tag"; else range="$tag"; fi
    git log --no-merges --format='- %s' $range
    shift
  done
} > CHANGELOG.md
git add CHANGELOG.md
git commit -q -m "Update changelog"
