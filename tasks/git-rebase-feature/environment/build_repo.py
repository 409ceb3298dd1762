"""Builds /app/notes deterministically: main moved on after feature/search branched off."""
import os
import subprocess
from pathlib import Path

REPO = Path("/app/notes")
T0 = 1719824400  # 2024-07-01 09:00:00 UTC
STEP = [0]
KAI = ("Kai Brennan", "kai@notes.test")
ANA = ("Ana Sousa", "ana@notes.test")
BO = ("Bo Lindqvist", "bo@notes.test")


def git(*args, who=KAI):
    STEP[0] += 1
    when = f"{T0 + STEP[0] * 3100} +0000"
    env = dict(os.environ, GIT_AUTHOR_NAME=who[0], GIT_AUTHOR_EMAIL=who[1], GIT_AUTHOR_DATE=when,
               GIT_COMMITTER_NAME=who[0], GIT_COMMITTER_EMAIL=who[1], GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", *args], cwd=REPO, env=env, check=True,
                          capture_output=True, text=True).stdout


def write(rel, text):
    p = REPO / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def commit(msg, who=KAI):
    git("add", "-A", who=who)
    git("commit", "-q", "-m", msg, who=who)


REPO.mkdir(parents=True)
git("init", "-q", "-b", "main")
git("config", "user.name", KAI[0])
git("config", "user.email", KAI[1])

README = "# notes\n\nPlain-text notes, separated by lines `---`; the first line of a note is its title.\n\n"
write("README.md", README + "    python3 cli.py list NOTES.txt\n")
write("notes.py", '''"""Parsing of a notes file."""


def load_notes(text):
    """Notes are separated by lines '---'; the first line of each is its title."""
    notes = []
    for chunk in ("\\n" + text + "\\n").split("\\n---\\n"):
        lines = chunk.strip().splitlines()
        if lines:
            notes.append({"title": lines[0].strip(), "body": "\\n".join(lines[1:]).strip()})
    return notes
''')
write("cli.py", '''"""Command line: python3 cli.py COMMAND NOTES.txt [ARGS...]"""
import sys

from notes import load_notes


def main(argv):
    command, path = argv[0], argv[1]
    with open(path) as f:
        notes = load_notes(f.read())
    if command == "list":
        for note in notes:
            print(note["title"])
    else:
        sys.exit(f"unknown command: {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
''')
commit("Notes file parser and list command")
write(".gitignore", "__pycache__/\n")
commit("Ignore bytecode")

git("checkout", "-q", "-b", "feature/search")
write("search.py", '''"""Full-text search over parsed notes."""


def search(notes, words):
    """Titles of the notes containing every word (case-insensitive) in title or body."""
    words = [w.lower() for w in words]
    hits = []
    for note in notes:
        text = (note["title"] + "\\n" + note["body"]).lower()
        if all(w in text for w in words):
            hits.append(note["title"])
    return hits
''')
commit("Add search over titles and bodies", who=ANA)
write("cli.py", '''"""Command line: python3 cli.py COMMAND NOTES.txt [ARGS...]"""
import sys

from notes import load_notes
from search import search


def main(argv):
    command, path = argv[0], argv[1]
    with open(path) as f:
        notes = load_notes(f.read())
    if command == "list":
        for note in notes:
            print(note["title"])
    elif command == "search":
        for title in search(notes, argv[2:]):
            print(title)
    else:
        sys.exit(f"unknown command: {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
''')
commit("cli: search command", who=ANA)
write("search.py", '''"""Full-text search over parsed notes."""


def search(notes, words):
    """Titles of the notes containing every word (case-insensitive) in title or body,
    best first: by total number of occurrences of the words, then by title."""
    words = [w.lower() for w in words]
    scored = []
    for note in notes:
        text = (note["title"] + "\\n" + note["body"]).lower()
        if all(w in text for w in words):
            scored.append((-sum(text.count(w) for w in words), note["title"]))
    return [title for _, title in sorted(scored)]
''')
commit("search: rank by number of occurrences", who=BO)
write("README.md", README + "    python3 cli.py list NOTES.txt\n    python3 cli.py search NOTES.txt WORD...\n")
commit("README: search command", who=BO)

git("checkout", "-q", "main")
write("notes.py", '''"""Parsing of a notes file."""


def parse_notes(text):
    """Notes are separated by lines '---'; the first line of each is its title.
    A body line `tags: a, b` gives the note's tags and is not part of the body."""
    notes = []
    for chunk in ("\\n" + text + "\\n").split("\\n---\\n"):
        lines = chunk.strip().splitlines()
        if not lines:
            continue
        tags, body = [], []
        for line in lines[1:]:
            if line.lower().startswith("tags:"):
                tags += [t.strip() for t in line[5:].split(",") if t.strip()]
            else:
                body.append(line)
        notes.append({"title": lines[0].strip(), "body": "\\n".join(body).strip(), "tags": tags})
    return notes
''')
write("cli.py", '''"""Command line: python3 cli.py COMMAND NOTES.txt [ARGS...]"""
import sys

from notes import parse_notes


def main(argv):
    command, path = argv[0], argv[1]
    with open(path) as f:
        notes = parse_notes(f.read())
    if command == "list":
        for note in notes:
            print(note["title"])
    else:
        sys.exit(f"unknown command: {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
''')
commit("Parse tags lines; rename load_notes to parse_notes")
write("cli.py", '''"""Command line: python3 cli.py COMMAND NOTES.txt [ARGS...]"""
import sys

from notes import parse_notes


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
    else:
        sys.exit(f"unknown command: {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
''')
commit("cli: tags command")
write("README.md", README + "    python3 cli.py list NOTES.txt\n    python3 cli.py tags NOTES.txt\n")
commit("README: tags command")
