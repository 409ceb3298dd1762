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


# ------------------------------------------------------------------ sys-alternatives
# Several installed versions of a tool under /app/opt, to be registered with update-alternatives
# (priorities from a rule, auto or a pinned manual choice, a slave link). The tests query the
# alternatives system and run the tool through its link.

_ALT_TESTS = '''"""Queries update-alternatives and runs the tool through its generic link."""

import re
import subprocess

import pytest

E = __EXPECTED__


def query(name):
    r = subprocess.run(["update-alternatives", "--query", name], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    head, *alts = r.stdout.split("\\n\\n")
    info = dict(re.findall(r"^([A-Za-z ]+): (.*)$", head, re.M))
    entries = {}
    for block in alts:
        f = dict(re.findall(r"^([A-Za-z ]+): (.*)$", block, re.M))
        if "Alternative" in f:
            entries[f["Alternative"]] = (int(f["Priority"]), re.findall(r"^ (\\S+) (\\S+)$", block, re.M))
    return info, entries


@pytest.mark.weight(2)
def test_registered_with_priorities():
    q = query(E["name"])
    assert q, f"no alternatives group {E['name']}"
    assert q[0].get("Link") == E["link"]
    assert {k: v[0] for k, v in q[1].items()} == E["priorities"], "wrong alternatives or priorities"


@pytest.mark.weight(2)
def test_selection():
    q = query(E["name"])
    assert q, f"no alternatives group {E['name']}"
    assert q[0].get("Status") == E["status"] and q[0].get("Value") == E["value"]


@pytest.mark.weight(1)
def test_link_runs_the_chosen_version():
    r = subprocess.run([E["link"], "--version"], capture_output=True, text=True)
    assert r.stdout.strip() == E["version_out"]
'''

_ALT_SLAVE = '''

@pytest.mark.weight(1)
def test_companion_follows():
    q = query(E["name"])
    assert q and q[1], f"no alternatives group {E['name']}"
    for alt, (prio, slaves) in q[1].items():
        assert slaves == [(E["slave_name"], E["slaves"].get(alt))], f"slave link of {alt}"
    r = subprocess.run([E["slave_link"], "--version"], capture_output=True, text=True)
    assert r.stdout.strip() == E["slave_out"]
'''


def _alternatives(rng: random.Random, index: int) -> Instance:
    variant = rng.choice(["auto-highest", "manual-pin", "slave-auto", "slave-pin"])
    tool = rng.choice(["pyfmt", "tilec", "gridctl", "vaultsh", "logq", "mdconv"])
    versions = sorted({(a, b): (a, b, rng.randint(0, 9)) for a, b in
                       ((rng.randint(1, 4), rng.randint(0, 12)) for _ in range(4))}.values())
    files, paths = {}, {}
    for v in versions:
        vs = ".".join(map(str, v))
        p = f"/app/opt/{tool}-{vs}/bin/{tool}"
        paths[vs] = p
        files[p[5:]] = f"#!/bin/sh\necho \"{tool} {vs}\"\n"
        files[p[5:] + "-admin"] = f"#!/bin/sh\necho \"{tool}-admin {vs}\"\n"
    rule = rng.choice(["major*100+minor", "major*1000+minor*10+patch"])
    prio = {vs: (v[0] * 100 + v[1] if rule == "major*100+minor" else v[0] * 1000 + v[1] * 10 + v[2])
            for vs, v in ((".".join(map(str, v)), v) for v in versions)}
    link = f"/usr/local/bin/{tool}"
    pin = rng.choice(sorted(paths)[:-1])
    manual = variant.endswith("pin")
    chosen = pin if manual else max(prio, key=lambda k: prio[k])
    slave = variant.startswith("slave")
    e = {"name": tool, "link": link, "priorities": {paths[k]: prio[k] for k in paths},
         "status": "manual" if manual else "auto", "value": paths[chosen],
         "version_out": f"{tool} {chosen}", "slave_name": f"{tool}-admin",
         "slave_link": f"/usr/local/bin/{tool}-admin", "slaves": {paths[k]: paths[k] + "-admin" for k in paths},
         "slave_out": f"{tool}-admin {chosen}"}
    sel = (f"The generic command must stay on version {pin} (the team's pinned version) even if a "
           "higher-priority version is registered later." if manual else
           "The system must pick the version with the highest priority by itself, now and whenever "
           "versions are added later.")
    sl = (f" Each version also ships `{tool}-admin` next to `{tool}`; `/usr/local/bin/{tool}-admin` "
          f"must always run the `{tool}-admin` of the version that `{tool}` runs (a slave link named "
          f"`{tool}-admin` in the same group)." if slave else "")
    instruction = f"""\
Several versions of `{tool}` are installed under `/app/opt/{tool}-VERSION/bin/`. Register every one of
them with the Debian alternatives system (`update-alternatives`) as alternatives of the group `{tool}`
with the generic link `{link}`, with the priority `{rule}` of its version (e.g. 2.10.3 has
{"210" if rule == "major*100+minor" else "2103"}).{sl}

{sel}
"""
    sol = []
    for vs, p in paths.items():
        extra = f" --slave /usr/local/bin/{tool}-admin {tool}-admin {p}-admin" if slave else ""
        sol.append(f"update-alternatives --install {link} {tool} {p} {prio[vs]}{extra}")
    if manual:
        sol.append(f"update-alternatives --set {tool} {paths[pin]}")
    tests = _ALT_TESTS.replace("__EXPECTED__", repr(e)) + (_ALT_SLAVE if slave else "")
    difficulty = {"auto-highest": "easy", "manual-pin": "easy", "slave-auto": "medium",
                  "slave-pin": "medium"}[variant]
    return Instance(
        instruction=instruction, tests=tests, solution="\n".join(sol) + "\n", difficulty=difficulty,
        variant=f"{variant}/{rule}", files=files, executable=tuple(sorted(files)),
        tags=("update-alternatives", "debian"), oracle_turns=len(sol),
    )


FAMILIES.append(Family("sys-alternatives", "sysadmin", "train",
                       "register installed tool versions with update-alternatives: priorities from "
                       "a rule, automatic or pinned choice, slave links", _alternatives))
