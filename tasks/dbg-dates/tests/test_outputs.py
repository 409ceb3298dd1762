# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Runs shiftcalc.py on hidden timesheets: offsets and DST changes, ISO weeks around new year,
shifts across UTC midnight."""

import json
import random
import subprocess
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

OFFSETS = [-8 * 60, -5 * 60, -4 * 60, 0, 60, 2 * 60, 5 * 60 + 30, 9 * 60, 12 * 60 + 45]


def fmt(utc: datetime, offset_min: int, zulu_ok: bool = False) -> str:
    local = utc.astimezone(timezone(timedelta(minutes=offset_min)))
    s = local.strftime("%Y-%m-%dT%H:%M:%S")
    if offset_min == 0 and zulu_ok:
        return s + "Z"
    sign = "-" if offset_min < 0 else "+"
    return s + f"{sign}{abs(offset_min) // 60:02d}:{abs(offset_min) % 60:02d}"


def reference(shifts):
    """shifts: (name, start_utc, end_utc); returns the report dict."""
    emps, rejected = {}, 0
    for name, s, e in shifts:
        if e <= s:
            rejected += 1
            continue
        m = int((e - s).total_seconds() // 60)
        emp = emps.setdefault(name, {"total_minutes": 0, "weeks": {}, "days": {}})
        emp["total_minutes"] += m
        y, w, _ = s.isocalendar()
        wk = f"{y}-W{w:02d}"
        emp["weeks"][wk] = emp["weeks"].get(wk, 0) + m
        cur = s
        while cur < e:
            nxt = datetime(cur.year, cur.month, cur.day, tzinfo=timezone.utc) + timedelta(days=1)
            seg = min(nxt, e)
            key = cur.date().isoformat()
            emp["days"][key] = emp["days"].get(key, 0) + int((seg - cur).total_seconds() // 60)
            cur = seg
    return {"employees": emps, "rejected": rejected}


def run(lines: list[str]) -> dict:
    d = Path(tempfile.mkdtemp())
    f = d / "shifts.csv"
    f.write_text("# employee,start,end\n" + "\n".join(lines) + "\n", encoding="utf-8")
    r = subprocess.run(["python3", "/app/timesheet/shiftcalc.py", str(f)], capture_output=True,
                       text=True, timeout=60, cwd="/tmp")
    assert r.returncode == 0, r.stderr[-1500:]
    return json.loads(r.stdout), r.stdout


def rand_utc(rng, year_lo=2019, year_hi=2027):
    base = datetime(rng.randint(year_lo, year_hi), 1, 1, tzinfo=timezone.utc)
    return base + timedelta(days=rng.randint(0, 364), minutes=rng.randint(0, 24 * 60 - 1))


def test_total_minutes_across_offsets():
    rng = random.Random(3001)
    names = ["ana", "ben", "chen", "dara", "emil"]
    shifts, lines = [], []
    for _ in range(300):
        s = rand_utc(rng)
        e = s + timedelta(minutes=rng.randint(30, 12 * 60))
        so = rng.choice(OFFSETS)
        eo = so + rng.choice([0, 0, 60, -60])            # a DST change during the shift
        name = rng.choice(names)
        shifts.append((name, s, e))
        lines.append(f"{name},{fmt(s, so)},{fmt(e, eo)}")
    # fall-back edge: the clock reading goes down but time goes on
    s = datetime(2024, 11, 3, 5, 50, tzinfo=timezone.utc)
    for name, e in (("ana", s + timedelta(minutes=30)), ("ben", s - timedelta(minutes=10))):
        shifts.append((name, s, e))
        lines.append(f"{name},{fmt(s, -4 * 60)},{fmt(e, -5 * 60)}")
    got, _ = run(lines)
    want = reference(shifts)
    assert got["rejected"] == want["rejected"], "wrong number of rejected lines"
    for name, emp in want["employees"].items():
        assert got["employees"][name]["total_minutes"] == emp["total_minutes"], f"total of {name}"


def test_iso_weeks():
    rng = random.Random(3002)
    shifts, lines = [], []
    days = [datetime(y, m, d, tzinfo=timezone.utc) for y in range(2019, 2028)
            for m, d in ((12, 28), (12, 29), (12, 30), (12, 31), (1, 1), (1, 2), (1, 3), (1, 4))]
    days += [rand_utc(rng).replace(hour=0, minute=0) for _ in range(80)]
    for day in days:
        s = day + timedelta(hours=rng.randint(6, 10), minutes=rng.choice([0, 15, 30]))
        e = s + timedelta(hours=rng.randint(1, 8))
        name = rng.choice(["fox", "gil"])
        shifts.append((name, s, e))
        lines.append(f"{name},{fmt(s, 0, rng.random() < 0.5)},{fmt(e, 0, rng.random() < 0.5)}")
    got, _ = run(lines)
    want = reference(shifts)
    for name, emp in want["employees"].items():
        assert got["employees"][name]["weeks"] == emp["weeks"], f"weeks of {name}"


def test_days_split_at_utc_midnight():
    rng = random.Random(3003)
    shifts, lines = [], []
    for _ in range(150):
        s = rand_utc(rng).replace(hour=rng.randint(16, 23), minute=rng.choice([0, 10, 45]))
        e = s + timedelta(minutes=rng.choice([90, 300, 480, 600, 1500, 2900]))
        name = rng.choice(["hal", "ivy", "jo"])
        shifts.append((name, s, e))
        lines.append(f"{name},{fmt(s, 0, rng.random() < 0.5)},{fmt(e, 0)}")
    got, _ = run(lines)
    want = reference(shifts)
    for name, emp in want["employees"].items():
        assert got["employees"][name]["days"] == emp["days"], f"days of {name}"


def test_full_report():
    rng = random.Random(3004)
    shifts, lines = [], []
    for i in range(120):
        s = rand_utc(rng, 2023, 2025)
        e = s + timedelta(minutes=rng.randint(-60, 16 * 60))
        so = rng.choice(OFFSETS)
        name = f"emp{rng.randint(1, 6)}"
        shifts.append((name, s, e))
        lines.append(f"{name},{fmt(s, so)},{fmt(e, so + rng.choice([0, 60]))}")
        if i % 17 == 0:
            lines.append("")
    got, text = run(lines)
    want = reference(shifts)
    assert got == want
    assert text.strip() == json.dumps(want, indent=2, sort_keys=True)
