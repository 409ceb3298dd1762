#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/csvq
python3 - <<'PY'
from pathlib import Path
p = Path("csvparse.py")
s = p.read_text()
doc_end = s.index('"""', 3) + 3
p.write_text(s[:doc_end] + '''


def parse(text: str) -> list[list[str]]:
    """One pass over the whole text: quoted fields may contain line breaks, so the text must
    not be split into lines first; "" inside quotes is one quote; empty fields are kept."""
    records: list[list[str]] = []
    record: list[str] = []
    field: list[str] = []
    started = False          # the current record has at least one character
    in_quotes = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if in_quotes:
            if c == '"':
                if i + 1 < n and text[i + 1] == '"':
                    field.append('"')
                    i += 1
                else:
                    in_quotes = False
            else:
                field.append(c)
        elif c == '"':
            in_quotes = True
            started = True
        elif c == ",":
            record.append("".join(field))
            field = []
            started = True
        elif c == "\\n" or (c == "\\r" and i + 1 < n and text[i + 1] == "\\n"):
            if c == "\\r":
                i += 1
            if started:
                record.append("".join(field))
                records.append(record)
            record, field, started = [], [], False
        else:
            field.append(c)
            started = True
        i += 1
    if started:
        record.append("".join(field))
        records.append(record)
    return records


def parse_line(line: str) -> list[str]:
    """The fields of a single record."""
    records = parse(line)
    return records[0] if records else []
''')
PY
python3 csvq.py people.csv name note
