# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Parses /etc/cron.d/maintenance with a small Vixie-cron field validator and compares the next
run times of every job, for hidden timestamps, with the schedule the instruction asks for."""
import datetime as dt
import os
import pwd
import random
import re
import stat

import pytest

PATH = "/etc/cron.d/maintenance"
MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
DAYS = "sun mon tue wed thu fri sat".split()
SPECIAL = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


# ---- a small cron parser ------------------------------------------------------------------
def parse_field(text, lo, hi, names=None):
    def value(tok):
        tok = tok.lower()
        if names and tok in names:
            return names.index(tok) + (1 if names is MONTHS else 0)
        if not re.fullmatch(r"\d+", tok):
            raise ValueError(f"bad value {tok!r}")
        v = int(tok)
        if not lo <= v <= hi:
            raise ValueError(f"{v} out of range {lo}-{hi}")
        return v

    out = set()
    for part in text.split(","):
        m = re.fullmatch(r"([^/]+)(?:/(\d+))?", part)
        if not m:
            raise ValueError(f"bad field part {part!r}")
        rng, step = m.group(1), int(m.group(2) or 1)
        if step < 1:
            raise ValueError("step must be positive")
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (value(x) for x in rng.split("-", 1))
            if a > b:
                raise ValueError(f"reversed range {rng!r}")
        else:
            a = b = value(rng)
            if m.group(2):
                b = hi
        out.update(range(a, b + 1, step))
    return out


class Line:
    def __init__(self, fields, user, command):
        mi, ho, dom, mon, dow = fields
        self.minutes = parse_field(mi, 0, 59)
        self.hours = parse_field(ho, 0, 23)
        self.dom = parse_field(dom, 1, 31)
        self.months = parse_field(mon, 1, 12, MONTHS)
        self.dow = {d % 7 for d in parse_field(dow, 0, 7, DAYS)}
        self.dom_star, self.dow_star = dom.startswith("*"), dow.startswith("*")
        self.user, self.command = user, command
        self.times = sorted((h, m) for h in self.hours for m in self.minutes)

    def day_ok(self, d):
        if d.month not in self.months:
            return False
        dom_ok, dow_ok = d.day in self.dom, (d.weekday() + 1) % 7 in self.dow
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok


def parse_crontab(text):
    env, lines = {}, []
    for raw in text.split("\n"):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)", s)
        if m and not s.startswith("@"):
            val = m.group(2).strip()
            if len(val) >= 2 and val[0] == val[-1] and val[0] in "'\"":
                val = val[1:-1]
            env[m.group(1)] = val
            continue
        parts = s.split(None, 1)
        if parts[0].startswith("@"):
            assert parts[0] in SPECIAL, f"unsupported special {parts[0]!r}"
            fields = SPECIAL[parts[0]].split()
            user, command = parts[1].split(None, 1)
        else:
            p = s.split(None, 6)
            assert len(p) == 7, f"not a system crontab line: {raw!r}"
            fields, user, command = p[:5], p[5], p[6]
        try:
            lines.append(Line(fields, user, command.strip()))
        except ValueError as exc:
            raise AssertionError(f"invalid cron line {raw!r}: {exc}")
    return env, lines


def next_run(day_ok, times, t):
    """First run strictly after t (searching up to 3 years)."""
    d = t.date()
    for _ in range(3 * 366):
        if day_ok(d):
            for h, m in times:
                run = dt.datetime(d.year, d.month, d.day, h, m)
                if run > t:
                    return run
        d += dt.timedelta(days=1)
    return None


# ---- expected schedules, written as plain predicates --------------------------------------
def q15(h0, h1):
    return [(h, m) for h in range(h0, h1 + 1) for m in (0, 15, 30, 45)]


EXPECTED = {
    "/opt/jobs/db-backup.sh": ("backup", lambda d: True, [(2, 30)]),
    "/opt/jobs/rotate-uploads.sh": ("www-data", lambda d: d.weekday() < 5, q15(8, 17)),
    "/opt/jobs/report.sh monthly": ("root", lambda d: d.day in (1, 15), [(6, 0)]),
    "/opt/jobs/cleanup-tmp.sh": ("root", lambda d: d.weekday() == 6, [(4, 10)]),
    "/opt/jobs/cert-check.sh": ("root", lambda d: 3 <= d.month <= 11 and 10 <= d.day <= 20, [(23, 45)]),
    "/opt/jobs/luck.sh": ("root", lambda d: d.weekday() == 4 or d.day == 13, [(12, 0)]),
}


def hidden_times(seed):
    rng = random.Random(seed)
    start = dt.datetime(2024, 1, 1)
    ts = [start + dt.timedelta(minutes=rng.randrange(3 * 365 * 24 * 60)) for _ in range(40)]
    ts += [dt.datetime(2025, 2, 28, 23, 59), dt.datetime(2024, 12, 31, 23, 45), dt.datetime(2025, 6, 13, 11, 59),
           dt.datetime(2026, 11, 20, 23, 45), dt.datetime(2025, 3, 9, 23, 46)]
    return ts


def load():
    assert os.path.isfile(PATH), f"{PATH} is missing"
    return parse_crontab(open(PATH).read())


def check_job(command, seed):
    _, lines = load()
    mine = [l for l in lines if l.command == command]
    assert mine, f"no line runs {command!r}"
    user, day_ok, times = EXPECTED[command]
    assert all(l.user == user for l in mine), f"{command} must run as {user}"
    for t in hidden_times(seed):
        want = next_run(day_ok, times, t)
        got = min(r for r in (next_run(l.day_ok, l.times, t) for l in mine) if r is not None)
        assert got == want, f"{command}: after {t} cron would run it at {got}, expected {want}"


# ---- checks -------------------------------------------------------------------------------
def test_file_loadable():
    _, lines = load()
    st = os.stat(PATH)
    assert st.st_uid == 0, "must be owned by root"
    assert not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_IXUSR), "must not be group/world writable or executable"
    assert re.fullmatch(r"[A-Za-z0-9_-]+", os.path.basename(PATH))
    assert open(PATH, "rb").read().endswith(b"\n"), "the last line must end with a newline"
    for l in lines:
        pwd.getpwnam(l.user)
    assert {l.command for l in lines} <= set(EXPECTED), "unexpected commands"


def test_environment():
    env, _ = load()
    assert env.get("MAILTO") == "ops@example.com"
    assert env.get("PATH") == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def test_db_backup():
    check_job("/opt/jobs/db-backup.sh", 11)


def test_rotate_uploads():
    check_job("/opt/jobs/rotate-uploads.sh", 12)


def test_report():
    check_job("/opt/jobs/report.sh monthly", 13)


def test_cleanup():
    check_job("/opt/jobs/cleanup-tmp.sh", 14)


def test_cert_check():
    check_job("/opt/jobs/cert-check.sh", 15)


def test_luck():
    check_job("/opt/jobs/luck.sh", 16)
