"""Generated task families of the sysadmin category, part 2 (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import json
import random

from .base import Family, Instance

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ sys-name-tables
# Name service tables (hosts, services, networks) filled from an inventory in one of several
# formats; the tests ask the resolver (getent) for names, aliases, reverse lookups, retired ones.

_NT_TESTS = '''"""Asks the system's resolver (getent) about the inventory's entries."""

import subprocess

import pytest

DB = __DB__
ENTRIES = __ENTRIES__


def getent(key):
    r = subprocess.run(["getent", DB, key], capture_output=True, text=True, timeout=30)
    return r.stdout.split() if r.returncode == 0 else []


def value(e):
    return e["value"] if DB != "services" else f"{e['value']}/{e['proto']}"


def key(name, e):
    return f"{name}/{e['proto']}" if DB == "services" else name


def active():
    return [e for e in ENTRIES if e["active"]]


@pytest.mark.weight(2)
def test_names():
    for e in active():
        got = getent(key(e["name"], e))
        assert got[:2] == ([e["value"], e["name"]] if DB == "hosts" else [e["name"], value(e)]), e["name"]


@pytest.mark.weight(1)
def test_aliases():
    assert any(getent(key(e["name"], e)) for e in active()), "nothing resolves"
    for e in active():
        for a in e["aliases"]:
            got = getent(key(a, e))
            assert e["name"] in got and value(e) in got, f"alias {a}"


@pytest.mark.weight(1)
def test_reverse():
    for e in active():
        got = getent(value(e))
        assert got and got[1 if DB == "hosts" else 0] == e["name"], f"reverse lookup of {value(e)}"


@pytest.mark.weight(1)
def test_retired_left_out():
    assert any(getent(key(e["name"], e)) for e in active()), "nothing resolves"
    for e in ENTRIES:
        if not e["active"]:
            for n in [e["name"]] + e["aliases"]:
                assert not getent(key(n, e)), f"{n} is retired and must not resolve"
'''


def _nt_entries(rng: random.Random, db: str) -> list[dict]:
    words = rng.sample(["atlas", "boreal", "cinder", "dune", "ember", "fjord", "garnet", "helix",
                        "iris", "juniper", "kestrel", "lumen", "mistral", "nimbus"], 8)
    out, used = [], set()
    for i, w in enumerate(words):
        e = {"active": i % 3 != 2, "proto": rng.choice(["tcp", "udp"])}
        if db == "hosts":
            e["name"] = f"{w}.{rng.choice(['corp', 'lab'])}.example"
            e["aliases"] = [w] + ([f"{w}-{rng.choice(['db', 'api', 'mq'])}"] if rng.random() < 0.5 else [])
            e["value"] = (f"fd00:{rng.randint(1, 99)}::{rng.randint(2, 250):x}" if rng.random() < 0.3
                          else f"10.{rng.randint(0, 60)}.{rng.randint(0, 255)}.{rng.randint(2, 250)}")
        elif db == "services":
            e["name"] = f"{w}d"
            e["aliases"] = [w] if rng.random() < 0.6 else []
            e["value"] = rng.randint(7000, 9900)
        else:
            e["name"] = f"{w}-net"
            e["aliases"] = [w] if rng.random() < 0.6 else []
            e["value"] = rng.choice([f"10.{rng.randint(1, 250)}.0.0", f"192.168.{rng.randint(1, 250)}.0"])
        if e["value"] in used:
            continue
        used.add(e["value"])
        out.append(e)
    return out


def _nt_render(fmt: str, db: str, entries: list[dict]) -> str:
    def val(e):
        if db == "services":
            return f"{e['value']}/{e['proto']}"
        if db == "networks":
            return e["value"] + ("/16" if e["value"].endswith(".0.0") else "/24")
        return e["value"]
    if fmt == "csv":
        return "name,address,aliases,status\n" + "".join(
            f"{e['name']},{val(e)},{';'.join(e['aliases'])},{'active' if e['active'] else 'retired'}\n"
            for e in entries)
    if fmt == "json":
        return json.dumps([{"name": e["name"], "address": val(e), "aliases": e["aliases"],
                            "retired": not e["active"]} for e in entries], indent=2) + "\n"
    return "".join(f"[{e['name']}]\naddress = {val(e)}\naliases = {' '.join(e['aliases'])}\n"
                   f"state = {'in-service' if e['active'] else 'decommissioned'}\n\n" for e in entries)


def _name_tables(rng: random.Random, index: int) -> Instance:
    db = rng.choice(["hosts", "services", "networks"])
    fmt = rng.choice(["csv", "json", "ini"])
    entries = _nt_entries(rng, db)
    inv = f"inventory.{fmt}"
    what = {"hosts": ("host", "`getent hosts NAME` and `getent hosts ADDRESS`; the canonical name is "
                      "the entry's `name` (a fully qualified name), its aliases are alternative names"),
            "services": ("network service", "`getent services NAME/PROTO` and `getent services "
                         "PORT/PROTO`; `address` holds `PORT/PROTO`, the canonical name is `name`"),
            "networks": ("network", "`getent networks NAME` and `getent networks ADDRESS`; `address` "
                         "holds the network in CIDR notation, the canonical name is `name`")}[db]
    retired = {"csv": "`status` is `retired`", "json": "`retired` is true",
               "ini": "`state` is `decommissioned`"}[fmt]
    instruction = f"""\
`/app/{inv}` lists this site's {what[0]}s. Make the system's name service know them: after your
change, {what[1]}, must answer for every entry in service, by its name and by each of its aliases.
Entries whose {retired} must not be known at all (nor their aliases).

Nothing but this host's own files is consulted (there is no DNS server); change the system's
configuration, not the inventory.
"""
    lines = []
    for e in entries:
        if not e["active"]:
            continue
        if db == "hosts":
            lines.append(f"{e['value']} {e['name']} {' '.join(e['aliases'])}".strip())
        elif db == "services":
            lines.append(f"{e['name']} {e['value']}/{e['proto']} {' '.join(e['aliases'])}".strip())
        else:
            lines.append(f"{e['name']} {e['value']} {' '.join(e['aliases'])}".strip())
    solution = f"cat >> /etc/{db} <<'EOF'\n" + "\n".join(lines) + "\nEOF\n"
    tests = _NT_TESTS.replace("__DB__", repr(db)).replace("__ENTRIES__", repr(entries))
    difficulty = {"hosts": "easy", "services": "medium", "networks": "medium"}[db]
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"{db}/{fmt}", files={inv: _nt_render(fmt, db, entries)},
        tags=("nss", "getent", db), oracle_turns=2,
    )


FAMILIES.append(Family("sys-name-tables", "sysadmin", "train",
                       "fill /etc/hosts, /etc/services or /etc/networks from an inventory (csv, json, "
                       "ini) with aliases and retired entries, checked through getent", _name_tables))
