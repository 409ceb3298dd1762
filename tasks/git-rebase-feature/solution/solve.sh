#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
cd /app/notes
git checkout -q feature/search
git rebase main
# Conflict in "cli: search command": keep both commands and use main's renamed parser.
if git status --porcelain | grep -q '^UU cli.py'; then
  cat > cli.py <<'PY'
"""Command line: python3 cli.py COMMAND NOTES.txt [ARGS...]"""
import sys

from notes import parse_notes
from search import search


def main(argv):
    command, path = argv[0], argv[1]
    with open(path) as f:
        notes = parse_notes(f.read())
    if command == "list":
        for note in notes:
            print(note["title"])
    elif command == "tags":
        counts = {}
        for note in notes:
            for tag in note["tags"]:
                counts[tag] = counts.get(tag, 0) + 1
        for tag in sorted(counts):
            print(f"{tag} {counts[tag]}")
    elif command == "search":
        for title in search(notes, argv[2:]):
            print(title)
    else:
        sys.exit(f"unknown command: {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
PY
  git add cli.py
  GIT_EDITOR=true git rebase --continue
fi
# Conflict in "README: search command": keep every usage line.
if git status --porcelain | grep -q '^UU README.md'; then
  sed -i -E '/^(<<<<<<<|=======|>>>>>>>)/d' README.md
  awk '!(/^    python3/ && seen[$0]++)' README.md > README.tmp && mv README.tmp README.md
  git add README.md
  GIT_EDITOR=true git rebase --continue
fi
git log --format='%h %an %ad %s' -7
printf 'Alpha\nbody one\ntags: x, y\n---\nBeta\nalpha alpha\ntags: y\n' > /tmp/n.txt
python3 cli.py list /tmp/n.txt && python3 cli.py tags /tmp/n.txt && python3 cli.py search /tmp/n.txt alpha
rm -f /tmp/n.txt
cat README.md
git status --short
