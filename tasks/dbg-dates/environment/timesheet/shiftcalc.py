#!/usr/bin/env python3
"""shiftcalc.py FILE: timesheet summary of a CSV file of work shifts.

Each line is EMPLOYEE,START,END where START and END are ISO-8601 timestamps with a UTC offset,
e.g. 2024-03-09T22:30:00-05:00 ("Z" stands for +00:00). Blank lines and lines starting with "#"
are ignored. Shifts come from offices in several time zones, and a shift may span a change of
daylight-saving time (its END then has another offset than its START).

Prints one JSON object (keys sorted, 2-space indent):

  {"employees": {NAME: {"total_minutes": M,
                        "weeks": {"YYYY-Www": M, ...},
                        "days": {"YYYY-MM-DD": M, ...}}, ...},
   "rejected": N}

- A shift lasts the real time that elapsed between START and END, in whole minutes.
- "weeks": all minutes of a shift count for the ISO-8601 week (ISO year, ISO week number, two
  digits) of the shift's START instant in UTC.
- "days": the minutes of each shift are split at midnight UTC and counted for the UTC calendar
  day on which they elapsed.
- A shift whose END is not after its START is not counted anywhere; "rejected" is the number of
  such lines.
"""

import csv
import json
import sys
from datetime import datetime

FMT = "%Y-%m-%dT%H:%M:%S"


def parse_ts(text: str) -> datetime:
    return datetime.strptime(text.strip()[:19], FMT)


def week_key(ts: datetime) -> str:
    return ts.strftime("%Y-W%W")


def split_days(start: datetime, end: datetime) -> dict[str, int]:
    minutes = int((end - start).total_seconds() // 60)
    return {start.date().isoformat(): minutes}


def summarize(rows) -> dict:
    employees: dict[str, dict] = {}
    rejected = 0
    for row in rows:
        if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
            continue
        name, start_text, end_text = (x.strip() for x in row)
        start, end = parse_ts(start_text), parse_ts(end_text)
        if end <= start:
            rejected += 1
            continue
        minutes = int((end - start).total_seconds() // 60)
        emp = employees.setdefault(name, {"total_minutes": 0, "weeks": {}, "days": {}})
        emp["total_minutes"] += minutes
        wk = week_key(start)
        emp["weeks"][wk] = emp["weeks"].get(wk, 0) + minutes
        for day, m in split_days(start, end).items():
            emp["days"][day] = emp["days"].get(day, 0) + m
    return {"employees": employees, "rejected": rejected}


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: shiftcalc.py FILE", file=sys.stderr)
        return 2
    with open(sys.argv[1], newline="", encoding="utf-8") as f:
        report = summarize(csv.reader(f))
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
