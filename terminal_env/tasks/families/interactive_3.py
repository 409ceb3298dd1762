"""Generated task families of the interactive category, part 3 (see :mod:`.base` for what a family is)."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import random

from .base import Family, Instance
from .tty import TTY_PROMPTS, pty_driver, seal_key

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ ia-menu-register
# A small record register kept by a numbered-menu terminal program (menu order, date format and
# domain vary); a change ticket asks for edits, some of which need looking records up first.

_REG = r'''#!/usr/bin/env python3
"""A record register, kept through numbered menus on the terminal."""
__TTY__
import datetime
KEY = __KEY__
TITLE = __TITLE__
PREFIX = __PREFIX__
FIELDS = __FIELDS__
MENU = __MENU__
DATES = __DATES__
DB = "/app/data/register.json"
LABELS = {"list": "List all records", "show": "Show one record", "edit": "Change a field of a record",
          "add": "Add a record", "remove": "Remove a record", "save": "Save changes", "quit": "Quit"}
FORMS = {"iso": ("%Y-%m-%d", "YYYY-MM-DD"), "dmy": ("%d.%m.%Y", "DD.MM.YYYY"),
         "mdy": ("%m/%d/%Y", "MM/DD/YYYY")}


def show(kind, v):
    if kind == "date":
        return datetime.date.fromisoformat(v).strftime(FORMS[DATES][0])
    return str(v)


def parse(kind, arg, text):
    if kind == "int":
        lo, hi = arg
        return int(text) if text.isdigit() and lo <= int(text) <= hi else None
    if kind == "choice":
        return text if text in arg else None
    if kind == "date":
        try:
            return datetime.datetime.strptime(text, FORMS[DATES][0]).date().isoformat()
        except ValueError:
            return None
    return text if text and "|" not in text else None


def hint(kind, arg):
    return {"int": lambda: f"{arg[0]}-{arg[1]}", "choice": lambda: "/".join(arg),
            "date": lambda: FORMS[DATES][1], "text": lambda: "text"}[kind]()


def value(name, kind, arg):
    while True:
        v = parse(kind, arg, ask(f"{name} ({hint(kind, arg)})"))
        if v is not None:
            return v
        say("  not valid here")


def line(r):
    return r["id"] + "  " + "  ".join(f"{n}={show(k, r[n])}" for n, k, _ in FIELDS)


def main():
    recs = {r["id"]: r for r in json.load(open(DB))["records"]}
    dirty = False
    say(f"{TITLE} ({len(recs)} records)")
    while True:
        say("")
        for i, m in enumerate(MENU, 1):
            say(f"  {i}) {LABELS[m]}")
        c = ask("Choice")
        if not (c.isdigit() and 1 <= int(c) <= len(MENU)):
            say("  no such menu entry")
            continue
        act = MENU[int(c) - 1]
        if act == "list":
            for rid in sorted(recs):
                say(line(recs[rid]))
        elif act in ("show", "edit", "remove"):
            rid = ask("Record id")
            if rid not in recs:
                say("  no such record")
                continue
            r = recs[rid]
            if act == "show":
                say(line(r))
            elif act == "remove":
                if ask(f"Type {rid} again to remove it") == rid:
                    del recs[rid]
                    dirty = True
                    say("  removed")
            else:
                for i, (n, k, _) in enumerate(FIELDS, 1):
                    say(f"  {i}) {n} = {show(k, r[n])}")
                f = ask("Field number")
                if not (f.isdigit() and 1 <= int(f) <= len(FIELDS)):
                    say("  no such field")
                    continue
                n, k, a = FIELDS[int(f) - 1]
                v = value("New " + n, k, a)
                if ask(f"Set {n} of {rid} to {show(k, v)}? [y/N]").lower() == "y":
                    r[n] = v
                    dirty = True
        elif act == "add":
            r = {n: value(n, k, a) for n, k, a in FIELDS}
            rid = f"{PREFIX}-{max([int(x.split('-')[1]) for x in recs] + [0]) + 1:03d}"
            if ask(f"Add it as {rid}? [y/N]").lower() == "y":
                r["id"] = rid
                recs[rid] = r
                dirty = True
        elif act == "save":
            rows = [recs[k] for k in sorted(recs)]
            with open(DB, "w") as fh:
                json.dump({"records": rows, "seal": stamp(json.dumps(rows, sort_keys=True))}, fh, indent=1)
            dirty = False
            say(f"  saved {len(rows)} records")
        elif not dirty or ask("Unsaved changes will be lost. Quit anyway? [y/N]").lower() == "y":
            return


main()
'''

_REG_TESTS = '''"""Loads the register the program saved (its seal must match) and checks each part of the
ticket."""

import hashlib
import hmac
import json
from pathlib import Path

import pytest

KEY = __KEY__
FINAL = __FINAL__
GROUPS = __GROUPS__


def state():
    p = Path("/app/data/register.json")
    assert p.is_file(), "the register is gone"
    data = json.loads(p.read_text())
    rows = data["records"]
    seal = hmac.new(KEY.encode(), json.dumps(rows, sort_keys=True).encode(), hashlib.sha256).hexdigest()
    assert hmac.compare_digest(str(data.get("seal")), seal), "the register was not saved by its program"
    return {r["id"]: r for r in rows}


def group(name):
    got = state()
    assert GROUPS[name]
    for rid, field, want in GROUPS[name]:
        if field is None:
            assert (rid in got) == want, f"{rid} should {'exist' if want else 'be gone'}"
        else:
            assert rid in got and got[rid].get(field) == want, f"{rid}: {field} is not as the ticket asks"
__GROUP_TESTS__

@pytest.mark.weight(1)
def test_whole_register_as_expected():
    assert state() == {r["id"]: r for r in FINAL}, "records or fields the ticket does not mention changed"
'''

_GROUP_TEST = '''

@pytest.mark.weight({w})
def test_{name}():
    group({name!r})
'''

_DOMAINS = {
    "samples": ("Sample register", "S", [("label", "text", None),
                                        ("freezer", "choice", ["F1", "F2", "F3", "F4"]),
                                        ("volume_ml", "int", [1, 500]), ("expires", "date", None),
                                        ("status", "choice", ["active", "hold", "discarded"])]),
    "moorings": ("Mooring register", "B", [("boat", "text", None), ("owner", "text", None),
                                          ("length_m", "int", [4, 30]), ("paid_until", "date", None),
                                          ("pontoon", "choice", ["A", "B", "C", "D"])]),
    "tools": ("Tool crib", "T", [("tool", "text", None), ("bay", "choice", ["north", "south", "east"]),
                                 ("condition", "choice", ["good", "worn", "broken"]),
                                 ("last_check", "date", None), ("holder", "text", None)]),
    "seeds": ("Seed bank", "L", [("species", "text", None), ("drawer", "int", [1, 40]),
                                 ("grams", "int", [1, 900]), ("harvested", "date", None),
                                 ("viability", "choice", ["high", "medium", "low"])]),
}
_TEXT = {"label": ["plasma", "serum", "lysate", "buffer", "eluate", "pellet", "extract"],
         "boat": ["Kittiwake", "Petrel", "Whimbrel", "Tern", "Curlew", "Gannet", "Shearwater"],
         "owner": ["Aalto", "Brennan", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Varga"],
         "tool": ["torque-wrench", "crimper", "multimeter", "heat-gun", "borescope", "rivet-gun"],
         "holder": ["Ines", "Marek", "Sade", "Tomas", "Yuki", "Noor", "Pavel"],
         "species": ["Allium cepa", "Daucus carota", "Pisum sativum", "Beta vulgaris", "Brassica rapa"]}
_FORMS = {"iso": "%Y-%m-%d", "dmy": "%d.%m.%Y", "mdy": "%m/%d/%Y"}


def _value(rng: random.Random, name: str, kind: str, arg) -> str | int:
    if kind == "int":
        return rng.randint(*arg)
    if kind == "choice":
        return rng.choice(arg)
    if kind == "date":
        return (datetime.date(2024, 1, 1) + datetime.timedelta(days=rng.randint(0, 1400))).isoformat()
    return f"{rng.choice(_TEXT[name])}-{rng.randint(10, 99)}"


def _register(rng: random.Random, index: int) -> Instance:
    domain = rng.choice(sorted(_DOMAINS))
    title, prefix, fields = _DOMAINS[domain]
    mix = rng.choice(["direct", "lookup", "bulk", "mixed"])
    dates = rng.choice(["iso", "dmy", "mdy"])
    kinds = {n: (k, a) for n, k, a in fields}
    cur: dict[str, dict] = {}
    used: set = set()
    for i in sorted(rng.sample(range(1, 120), rng.randint(10, 14))):
        r = {"id": f"{prefix}-{i:03d}"}
        for n, k, a in fields:
            v = _value(rng, n, k, a)
            while k == "text" and v in used:
                v = _value(rng, n, k, a)
            used.add(v)
            r[n] = v
        cur[r["id"]] = r
    orig = {k: dict(v) for k, v in cur.items()}
    menu = rng.sample(["list", "show", "edit", "add", "remove", "save", "quit"], 7)
    pick = {m: str(i + 1) for i, m in enumerate(menu)}
    fidx = {n: str(i + 1) for i, (n, _, _) in enumerate(fields)}
    touched: set = set()
    ticket, answers = [], []
    groups: dict[str, list] = {"direct_changes": [], "looked_up_changes": [], "removal": [], "addition": []}

    def disp(n: str, v) -> str:
        return datetime.date.fromisoformat(v).strftime(_FORMS[dates]) if kinds[n][0] == "date" else str(v)

    def fresh(n: str, old):
        v = old
        while v == old:
            v = _value(rng, n, *kinds[n])
        return v

    def edit(rid: str, n: str, v, group: str) -> None:
        cur[rid][n] = v
        touched.add(rid)
        answers.extend([pick["edit"], rid, fidx[n], disp(n, v), "y"])
        groups[group].append((rid, n, v))

    settable = [n for n, k, _ in fields if k != "text"]
    if mix in ("direct", "lookup", "mixed"):
        for n in rng.sample(settable, 2 if mix == "direct" else 1):
            n = next((m for m in settable if kinds[m][0] == "date"), n) if mix != "direct" else n
            rid = rng.choice(sorted(set(cur) - touched))
            v = fresh(n, cur[rid][n])
            ticket.append(f"Record `{rid}`: set `{n}` to `{v}`.")
            edit(rid, n, v, "direct_changes")
    if mix in ("bulk", "mixed"):
        for _ in range(200):
            f = rng.choice([n for n in settable if kinds[n][0] == "choice"])
            g = rng.choice(kinds[f][1])
            h = rng.choice([n for n in settable if n != f])
            v = _value(rng, h, *kinds[h])
            hits = [rid for rid in sorted(cur) if cur[rid][f] == g]
            # a record the ticket already changed is not changed again (its expectation would clash)
            if 2 <= len(hits) <= 5 and sum(cur[rid][h] != v for rid in hits) >= 2 and not touched & set(hits):
                break
        ticket.append(f"Every record whose `{f}` is `{g}`: set `{h}` to `{v}`.")
        for rid in hits:
            edit(rid, h, v, "looked_up_changes")
    if mix in ("lookup", "bulk", "mixed"):
        for _ in range(500):
            f = rng.choice([n for n in settable if kinds[n][0] == "choice"])
            g = rng.choice(kinds[f][1])
            e = rng.choice([n for n in settable if kinds[n][0] in ("int", "date")])
            h = rng.choice([n for n in settable if n not in (e, f)])
            hi = rng.random() < 0.5
            hits = sorted((cur[rid][e], rid) for rid in cur if cur[rid][f] == g)
            if len(hits) >= 3 and hits[0][0] != hits[1][0] and hits[-1][0] != hits[-2][0] \
                    and (hits[-1][1] if hi else hits[0][1]) not in touched:
                break
        rid = hits[-1][1] if hi else hits[0][1]
        word = (("latest", "earliest") if kinds[e][0] == "date" else ("largest", "smallest"))[not hi]
        v = fresh(h, cur[rid][h])
        ticket.append(f"Among the records whose `{f}` is `{g}`, the one with the {word} `{e}`: "
                      f"set `{h}` to `{v}`.")
        edit(rid, h, v, "looked_up_changes")
    if mix != "bulk":
        rid = rng.choice(sorted(set(cur) - touched - {max(cur)}))
        if mix == "direct":
            ticket.append(f"Remove record `{rid}`.")
        else:
            t = fields[0][0]
            ticket.append(f"Remove the record whose `{t}` is `{cur[rid][t]}`.")
        del cur[rid]
        answers.extend([pick["remove"], rid, rid])
        groups["removal"].append((rid, None, False))
    if mix != "lookup":
        new = {"id": f"{prefix}-{max(int(x.split('-')[1]) for x in cur) + 1:03d}"}
        for n, k, a in fields:
            v = _value(rng, n, k, a)
            while k == "text" and v in used:
                v = _value(rng, n, k, a)
            new[n] = v
            answers.append(disp(n, v))
        answers[len(answers) - len(fields):len(answers) - len(fields)] = [pick["add"]]
        answers.append("y")
        cur[new["id"]] = new
        ticket.append("Add a record with " + ", ".join(f"`{n}` = `{new[n]}`" for n, _, _ in fields)
                      + " (the program gives it the next free id).")
        groups["addition"] += [(new["id"], n, new[n]) for n, _, _ in fields]
    answers += [pick["save"], pick["quit"]]
    key = seal_key(rng)
    rows = [orig[k] for k in sorted(orig)]
    seal = hmac.new(key.encode(), json.dumps(rows, sort_keys=True).encode(), hashlib.sha256).hexdigest()
    db = json.dumps({"records": rows, "seal": seal}, indent=1)
    cmd = {"samples": "samplereg", "moorings": "berths", "tools": "toolcrib", "seeds": "seedbank"}[domain]
    program = (_REG.replace("__TTY__", TTY_PROMPTS).replace("__KEY__", repr(key))
               .replace("__TITLE__", repr(title))
               .replace("__PREFIX__", repr(prefix)).replace("__FIELDS__", repr(fields))
               .replace("__MENU__", repr(menu)).replace("__DATES__", repr(dates)))
    weights = {"direct_changes": 1, "looked_up_changes": 2, "removal": 1, "addition": 1}
    body = "".join(_GROUP_TEST.format(w=weights[g], name=g) for g in weights if groups[g])
    tests = (_REG_TESTS.replace("__KEY__", repr(key))
             .replace("__FINAL__", repr([cur[k] for k in sorted(cur)]))
             .replace("__GROUPS__", repr({g: v for g, v in groups.items() if v}))
             .replace("__GROUP_TESTS__", body))
    steps = "\n".join(f"{i}. {t}" for i, t in enumerate(ticket, 1))
    instruction = f"""\
The {title.lower()} in `/app/data/register.json` is kept with `/app/{cmd}`, a menu program that
runs on the terminal (it reads the terminal itself, not its standard input, and discards keys
typed before each question). Only the program may write the register: it seals the file when
you choose its save entry, and a register changed by other means is rejected. Apply this change
ticket with the program, in this order, then save:

{steps}

Dates in the ticket are written as YYYY-MM-DD. Records and fields the ticket does not mention
must stay as they are.
"""
    return Instance(
        instruction=instruction, tests=tests, solution=pty_driver([f"/app/{cmd}"], answers),
        difficulty={"direct": "easy", "mixed": "hard"}.get(mix, "medium"), variant=f"{domain}/{mix}",
        files={cmd: program, "data/register.json": db + "\n"}, executable=(cmd,),
        tags=("tty", "menus", "records"), oracle_turns=4,
    )


FAMILIES.append(Family("ia-menu-register", "interactive", "train",
                       "apply a change ticket (edits by id, looked-up and bulk edits, removals, additions) "
                       "to a sealed record register through its numbered-menu terminal program", _register))
