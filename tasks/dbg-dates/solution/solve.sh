#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/timesheet
python3 - <<'PY'
from pathlib import Path
p = Path("shiftcalc.py")
s = p.read_text()
old_start = s.index('FMT = "%Y-%m-%dT%H:%M:%S"')
old_end = s.index("def summarize(")
s = s[:old_start] + '''

def parse_ts(text: str) -> datetime:
    """An aware timestamp, converted to UTC (the offset used to be cut off)."""
    ts = datetime.fromisoformat(text.strip())
    if ts.tzinfo is None:
        raise ValueError(f"timestamp without UTC offset: {text!r}")
    return ts.astimezone(timezone.utc)


def week_key(ts: datetime) -> str:
    """ISO-8601 week (%W counts Monday-based weeks from the first Monday, not ISO weeks)."""
    year, week, _ = ts.isocalendar()
    return f"{year}-W{week:02d}"


def split_days(start: datetime, end: datetime) -> dict[str, int]:
    """Minutes of [start, end) on each UTC calendar day."""
    out: dict[str, int] = {}
    cur = start
    while cur < end:
        midnight = datetime.combine(cur.date() + timedelta(days=1), time(0), tzinfo=timezone.utc)
        seg_end = min(midnight, end)
        out[cur.date().isoformat()] = out.get(cur.date().isoformat(), 0) + int(
            (seg_end - cur).total_seconds() // 60)
        cur = seg_end
    return out


''' + s[old_end:]
s = s.replace("from datetime import datetime\n", "from datetime import datetime, time, timedelta, timezone\n")
p.write_text(s)
PY
python3 shiftcalc.py shifts.csv | head -20
