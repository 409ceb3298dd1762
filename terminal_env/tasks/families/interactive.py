"""Generated task families of the interactive category (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import random

from .base import Family, Instance
from .tty import pty_driver

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ ia-tty-enroll
# A device enrolment program that asks its questions on the terminal (/dev/tty, typeahead
# flushed before each question); the answers come from a work order and two lookup tables.

_CITIES = ["Porto", "Lyon", "Gdansk", "Tartu", "Bergen", "Ghent", "Brno", "Cork", "Turku", "Graz"]
_HOSTS = ["lab-west", "dock-2", "cold-store", "annex-b", "yard-gate", "mezzanine", "roof-a", "hall-9"]

_KINDS = {
    # kind: (output format, questions: key, prompt, answer source)
    "sensor": ("ini", [("device", "Device name", "lit"), ("site", "Site code", "site"),
                       ("rack", "Rack position", "lit"), ("interval_s", "Sampling interval in seconds", "min2s"),
                       ("gateway", "Gateway address", "host")]),
    "label-printer": ("json", [("queue", "Queue name", "lit"), ("site", "Site code", "site"),
                               ("address", "Printer address", "host"), ("media", "Label media", "lit"),
                               ("darkness", "Print darkness (1-30)", "lit")]),
    "backup-agent": ("kv", [("agent", "Agent name", "lit"), ("site", "Site code", "site"),
                            ("vault", "Vault host address", "host"), ("keep_days", "Retention in days", "wk2d"),
                            ("level", "Compression level (1-9)", "lit")]),
    "vpn-peer": ("yaml", [("peer", "Peer name", "lit"), ("site", "Site code", "site"),
                          ("endpoint", "Endpoint address", "host"), ("keepalive_s", "Keepalive in seconds", "min2s"),
                          ("mtu", "Tunnel MTU", "lit")]),
}

_PROGRAM = r'''#!/usr/bin/env python3
"""Device enrolment: asks its questions on the terminal and writes the device's file."""
import hashlib, hmac, json, os, re, sys, termios

KIND = __KIND__
FMT = __FMT__
QUESTIONS = __QUESTIONS__
KEY = __KEY__
OUT = "/app/enrolled/" + KIND + ".conf"


def main():
    try:
        tty_in, tty = open("/dev/tty"), open("/dev/tty", "w")
    except OSError:
        sys.exit("enroll: this program must be run on a terminal")
    tty.write(f"Enrolling a new {KIND}.\n")
    answers = {}
    for key, prompt, pattern in QUESTIONS:
        while True:
            termios.tcflush(tty_in.fileno(), termios.TCIFLUSH)
            tty.write(prompt + ": ")
            tty.flush()
            line = tty_in.readline()
            if not line:
                sys.exit("enroll: aborted")
            answer = line.strip()
            if re.fullmatch(pattern, answer):
                break
            tty.write("  not a valid answer, try again\n")
        answers[key] = answer
    termios.tcflush(tty_in.fileno(), termios.TCIFLUSH)
    tty.write("Write the enrolment? [y/N]: ")
    tty.flush()
    if tty_in.readline().strip().lower() != "y":
        sys.exit("enroll: nothing written")
    code = hmac.new(KEY.encode(), json.dumps(answers, sort_keys=True).encode(), hashlib.sha256).hexdigest()[:20]
    answers["enrolment_code"] = code
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        if FMT == "json":
            json.dump(answers, f, indent=2)
        elif FMT == "ini":
            f.write(f"[{KIND}]\n" + "".join(f"{k} = {v}\n" for k, v in answers.items()))
        elif FMT == "yaml":
            f.write("".join(f"{k}: \"{v}\"\n" for k, v in answers.items()))
        else:
            f.write("".join(f"{k}={v}\n" for k, v in answers.items()))
    tty.write(f"written {OUT}\n")


main()
'''

_ENROLL_TESTS = '''"""Reads the enrolment file the program wrote and checks its values."""

import hashlib
import hmac
import json
import re
from pathlib import Path

import pytest

FMT = __FMT__
KIND = __KIND__
WANT = __WANT__
SOURCES = __SOURCES__
KEY = __KEY__


def read():
    p = Path("/app/enrolled/" + KIND + ".conf")
    if not p.is_file():
        return {}
    text = p.read_text()
    if FMT == "json":
        return json.loads(text)
    sep = {"ini": " = ", "yaml": ": ", "kv": "="}[FMT]
    out = {}
    for line in text.splitlines():
        if sep in line and not line.startswith("["):
            k, v = line.split(sep, 1)
            out[k.strip()] = v.strip().strip('"')
    return out


def check(kinds):
    got = read()
    keys = [k for k in WANT if SOURCES[k] in kinds]
    assert keys
    for k in keys:
        assert got.get(k) == WANT[k], f"wrong value for {k}"


@pytest.mark.weight(1)
def test_given_values():
    check({"lit"})


@pytest.mark.weight(2)
def test_looked_up_values():
    check({"site", "host"})


@pytest.mark.weight(1)
def test_converted_values():
    check({"min2s", "wk2d", "site"})


@pytest.mark.weight(1)
def test_written_by_the_program():
    got = read()
    assert {k: got.get(k) for k in WANT} == WANT, "the answers are not all right"
    code = hmac.new(KEY.encode(), json.dumps(WANT, sort_keys=True).encode(), hashlib.sha256).hexdigest()[:20]
    assert got.get("enrolment_code") == code, "the file was not written by the enrolment program"
'''

def _enroll(rng: random.Random, index: int) -> Instance:
    kind = rng.choice(sorted(_KINDS))
    fmt, qs = _KINDS[kind]
    cities = rng.sample(_CITIES, 6)
    sites = {c: f"{c[:3].upper()}{rng.randint(10, 99)}" for c in cities}
    hosts = {h: f"10.{rng.randint(0, 40)}.{rng.randint(0, 255)}.{rng.randint(2, 250)}" for h in _HOSTS}
    city, host = rng.choice(cities), rng.choice(_HOSTS)
    want, lines, questions, sources = {}, [], [], {}
    for key, prompt, src in qs:
        sources[key] = src
        if src == "site":
            want[key] = sites[city]
            lines.append(f"- {prompt}: the code of the site in {city} (see `/app/ref/sites.csv`)")
            pat = r"[A-Z]{3}\d\d"
        elif src == "host":
            want[key] = hosts[host]
            lines.append(f"- {prompt}: the IPv4 address of the host `{host}` in `/app/ref/hosts.txt`")
            pat = r"\d{1,3}(\.\d{1,3}){3}"
        elif src == "min2s":
            n = rng.choice([2, 5, 15, 45, 90])
            want[key] = str(n * 60)
            lines.append(f"- {prompt}: every {n} minutes (the program wants seconds)")
            pat = r"\d+"
        elif src == "wk2d":
            n = rng.randint(2, 12)
            want[key] = str(n * 7)
            lines.append(f"- {prompt}: {n} weeks (the program wants days)")
            pat = r"\d+"
        else:
            val = {"device": f"{rng.choice(['th', 'co2', 'hum'])}-{rng.randint(100, 999)}",
                   "rack": f"R{rng.randint(1, 9)}-U{rng.randint(1, 42)}",
                   "queue": f"labels-{rng.choice(['ship', 'recv', 'qa'])}{rng.randint(1, 9)}",
                   "media": rng.choice(["62mm-continuous", "29x90-die-cut", "102x152-die-cut"]),
                   "darkness": str(rng.randint(8, 28)), "agent": f"bk-{rng.choice(_HOSTS)}",
                   "level": str(rng.randint(1, 9)), "peer": f"peer-{rng.choice(_WORDS_PEER)}",
                   "mtu": str(rng.choice([1280, 1380, 1420, 1440]))}[key]
            want[key] = val
            lines.append(f"- {prompt}: `{val}`")
            pat = r"[A-Za-z0-9][A-Za-z0-9._-]*"
        questions.append((key, prompt, pat))
    secret = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(24))
    program = (_PROGRAM.replace("__KIND__", repr(kind)).replace("__FMT__", repr(fmt))
               .replace("__QUESTIONS__", repr(questions)).replace("__KEY__", repr(secret)))
    sites_csv = "city,site_code,opened\n" + "".join(
        f"{c},{sites[c]},20{rng.randint(10, 25)}\n" for c in sorted(cities))
    hosts_txt = "".join(f"{hosts[h]:<16} {h}.corp.internal {h}\n" for h in sorted(_HOSTS))
    sheet = "\n".join(lines)
    instruction = f"""\
A new {kind} has to be enrolled with the program `/app/enroll`. It asks its questions one at a
time on the terminal (it reads the terminal itself, not its standard input, and discards anything
typed before a question is shown), then asks for confirmation and writes
`/app/enrolled/{kind}.conf`. Run it and give these answers, as the work order says:

{sheet}

Then confirm with `y`. The file must be the one the program writes for these answers (do not
write or edit it yourself).
"""
    tests = (_ENROLL_TESTS.replace("__FMT__", repr(fmt)).replace("__KIND__", repr(kind))
             .replace("__WANT__", repr(want)).replace("__SOURCES__", repr(sources))
             .replace("__KEY__", repr(secret)))
    solution = (pty_driver(["/app/enroll"], [want[k] for k, _, _ in qs] + ["y"])
                + "cat /app/enrolled/*.conf\n")
    return Instance(
        instruction=instruction, tests=tests, solution=solution,
        difficulty="easy" if kind == "label-printer" else "medium", variant=f"{kind}/{fmt}",
        files={"enroll": program, "ref/sites.csv": sites_csv, "ref/hosts.txt": hosts_txt},
        executable=("enroll",), tags=("tty", "prompts", "pty"), oracle_turns=4,
    )


_WORDS_PEER = ["harbor", "quarry", "summit", "delta", "meadow", "canyon"]

FAMILIES.append(Family("ia-tty-enroll", "interactive", "train",
                       "enrol a device (sensor, label printer, backup agent, VPN peer) through a "
                       "program that asks on the terminal, with answers looked up and converted",
                       _enroll))
