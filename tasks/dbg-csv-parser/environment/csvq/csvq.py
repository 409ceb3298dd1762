#!/usr/bin/env python3
"""csvq.py FILE COLUMN [COLUMN...]: prints the given columns of a CSV file.

The first record of FILE is the header (column names). For every following record, prints one
line: a JSON array (json.dumps) of the record's values in the requested columns, in the order
requested. An unknown column name prints an error on stderr and exits with status 2.
"""

import json
import sys

from csvparse import parse


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: csvq.py FILE COLUMN [COLUMN...]", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8", newline="") as f:
        records = parse(f.read())
    if not records:
        return 0
    header = records[0]
    try:
        idx = [header.index(col) for col in argv[1:]]
    except ValueError as exc:
        print(f"error: unknown column: {exc}", file=sys.stderr)
        return 2
    for rec in records[1:]:
        print(json.dumps([rec[i] for i in idx]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
