"""Generated task families of the interactive category, part 2 (see :mod:`.base` for what a family is).

Both programs read the terminal (``/dev/tty``, typeahead discarded before every prompt) and are the
only legitimate writers of their output: they stamp it with a keyed digest that the tests verify.
The key sits inside the program, so an agent that reads the program could forge the stamp; the
stamp detects a plain edit of the file, not a determined forger."""

from __future__ import annotations

import random

from .base import Family, Instance
from .tty import TTY_PROMPTS, pty_driver, seal_key

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ ia-merge-picker
# A merged settings file with conflict hunks; the only accepted resolver is a terminal tool that
# walks the hunks and offers numbered choices (shuffled per instance). The ticket gives the rules.

_PICK = r'''#!/usr/bin/env python3
"""pickmerge: resolve the conflict hunks of a merged file one at a time, on the terminal."""
__TTY__
KEY = __KEY__
OPTIONS = __OPTIONS__
STATE = "/app/.pickmerge"


def split(lines):
    parts, cur = [], None
    for ln in lines:
        if ln.startswith("<<<<<<< "):
            cur = {"ours": [], "theirs": [], "side": "ours"}
        elif ln.startswith("=======") and cur is not None:
            cur["side"] = "theirs"
        elif ln.startswith(">>>>>>> ") and cur is not None:
            parts.append(cur)
            cur = None
        elif cur is not None:
            cur[cur["side"]].append(ln)
        else:
            parts.append(ln)
    return parts


def main():
    args = [a for a in sys.argv[1:] if a != "--redo"]
    if len(args) != 1:
        sys.exit("usage: pickmerge [--redo] FILE")
    path = os.path.abspath(args[0])
    backup = os.path.join(STATE, path.strip("/").replace("/", "__") + ".orig")
    if "--redo" in sys.argv:
        if not os.path.exists(backup):
            sys.exit("pickmerge: nothing to redo for " + path)
        text = open(backup).read()
    else:
        text = open(path).read()
    parts = split(text.splitlines())
    total = sum(isinstance(p, dict) for p in parts)
    if not total:
        sys.exit(f"pickmerge: no conflicts in {path} (--redo starts again from the conflicted version)")
    out, n = [], 0
    for p in parts:
        if not isinstance(p, dict):
            out.append(p)
            continue
        n += 1
        say(f"\n=== conflict {n} of {total} in {os.path.basename(path)} ===")
        say("--- HEAD (ours):")
        for ln in p["ours"]:
            say("    " + ln)
        say("--- incoming branch (theirs):")
        for ln in p["theirs"]:
            say("    " + ln)
        for i, (label, _) in enumerate(OPTIONS, 1):
            say(f"  {i}) {label}")
        while True:
            c = ask("Choice")
            if c.isdigit() and 1 <= int(c) <= len(OPTIONS):
                break
            say("  unknown choice")
        act = OPTIONS[int(c) - 1][1]
        if act == "edit":
            say("Type the replacement lines; a line with a single . ends them.")
            while True:
                ln = ask("line")
                if ln == ".":
                    break
                out.append(ln)
        else:
            out += {"ours": p["ours"], "theirs": p["theirs"], "both": p["ours"] + p["theirs"],
                    "both-rev": p["theirs"] + p["ours"]}[act]
    if ask("Write the resolved file? [y/N]").lower() != "y":
        sys.exit("pickmerge: nothing written")
    os.makedirs(STATE, exist_ok=True)
    if not os.path.exists(backup):
        with open(backup, "w") as f:
            f.write(text)
    body = "\n".join(out) + "\n"
    with open(path, "w") as f:
        f.write(body)
    digest = hashlib.sha256(body.encode()).hexdigest()
    with open(os.path.join(STATE, "journal"), "a") as f:
        f.write(f"{path} {digest} {stamp(path + ' ' + digest)}\n")
    say("written " + path)


main()
'''

_PICK_TESTS = '''"""Parses the resolved settings file and checks each group of conflicts; every check
also wants the file as pickmerge wrote it (its journal entry matches the file)."""

import hashlib
import hmac
from pathlib import Path

import pytest

PATH = __PATH__
FMT = __FMT__
KEY = __KEY__
WANT = __WANT__
MODULES = __MODULES__
GROUPS = __GROUPS__


def parse(text):
    vals, mods = {}, []
    for ln in text.splitlines():
        if not ln.strip() or ln.startswith("["):
            continue
        if FMT == "yaml":
            if ln.startswith("  - "):
                mods.append(ln[4:].strip())
            elif ": " in ln:
                k, v = ln.split(": ", 1)
                vals[k.strip()] = v.strip()
        elif FMT == "env":
            k, _, v = ln.partition("=")
            if k.startswith("MODULE_"):
                mods.append(k[7:].lower().replace("_", "-"))
            else:
                vals[k.strip().lower()] = v.strip()
        else:
            k, _, v = ln.partition(" = ")
            if v.strip() == "on":
                mods.append(k.strip())
            else:
                vals[k.strip()] = v.strip()
    return vals, mods


def resolved():
    p = Path(PATH)
    assert p.is_file(), "the settings file is gone"
    body = p.read_bytes()
    assert b"<<<<<<<" not in body and b">>>>>>>" not in body and b"=======" not in body, "conflicts left"
    digest = hashlib.sha256(body).hexdigest()
    journal = Path("/app/.pickmerge/journal")
    lines = journal.read_text().split("\\n") if journal.is_file() else []
    mine = [ln.split() for ln in lines if ln.startswith(PATH + " ")]
    assert mine, "pickmerge never wrote the file"
    _, d, mac = mine[-1]
    good = hmac.new(KEY.encode(), (PATH + " " + d).encode(), hashlib.sha256).hexdigest()
    assert d == digest and hmac.compare_digest(mac, good), "the file was changed after pickmerge wrote it"
    return parse(body.decode())


def group(name):
    vals, _ = resolved()
    keys = GROUPS[name]
    assert keys
    for k in keys:
        assert vals.get(k) == WANT[k], f"{k} resolved wrongly"


@pytest.mark.weight(1)
def test_written_by_pickmerge_and_rest_kept():
    vals, _ = resolved()
    assert vals == WANT, "settings that were not in conflict changed, or some are missing or extra"
    # the full comparison above holds only if every group is right too; the groups score separately


@pytest.mark.weight(2)
def test_numeric_conflicts():
    group("num")


@pytest.mark.weight(1)
def test_other_conflicts():
    group("str")


@pytest.mark.weight(1)
def test_module_list():
    _, mods = resolved()
    assert mods == MODULES, "the module list is not resolved as asked"
__EDIT_TEST__'''

_EDIT_TEST = '''

@pytest.mark.weight(2)
def test_hand_edited_settings():
    group("edit")
'''

_NUM = {"timeout_s": (5, 120), "max_conns": (16, 512), "retries": (1, 9), "cache_mb": (64, 2048),
        "workers": (2, 32), "queue_depth": (10, 900), "batch_size": (50, 5000), "grace_s": (1, 60)}
_STR = {"upstream": ["relay-{}.int", "edge-{}.lan", "hub{}.corp"],
        "spool_dir": ["/var/spool/q{}", "/srv/q{}"],
        "region": ["eu-north-{}", "ap-south-{}", "us-east-{}"], "codec": ["zstd-{}", "lz4-{}", "br-{}"],
        "log_target": ["file{}", "syslog{}", "journal{}"]}
_MODS = ["gzip", "metrics", "ratelimit", "auth-basic", "cors", "tracing", "cache", "geoip", "rewrite",
         "audit", "health", "static"]
_ACTIONS = {"ours": "keep HEAD (ours)", "theirs": "keep the incoming branch (theirs)",
            "both": "keep both, HEAD first", "both-rev": "keep both, incoming first",
            "edit": "type the lines myself"}


def _fmt_line(fmt: str, k: str, v: str) -> str:
    return {"ini": f"{k} = {v}", "env": f"{k.upper()}={v}", "yaml": f"{k}: {v}"}[fmt]


def _mod_line(fmt: str, m: str) -> str:
    return {"ini": f"{m} = on", "env": f"MODULE_{m.upper().replace('-', '_')}=on", "yaml": f"  - {m}"}[fmt]


def _merge(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(["ini", "env", "yaml"])
    policy = rng.choice(["larger", "smaller", "named", "handedit"])
    branch = "feature/" + rng.choice(["tuning", "relay-move", "q3-cleanup", "perf-pass", "ops-sync"])
    name = rng.choice(["gateway", "collector", "ingest", "mailer", "indexer"]) + "." + fmt
    nums = rng.sample(sorted(_NUM), rng.randint(4, 6))
    strs = rng.sample(sorted(_STR), rng.randint(2, 3))
    base = {k: str(rng.randint(*_NUM[k])) for k in nums}
    base.update({k: rng.choice(_STR[k]).format(rng.randint(1, 9)) for k in strs})
    order = rng.sample(nums + strs, len(nums) + len(strs))
    n_num = rng.randint(2, 3)
    c_num, c_str = nums[:n_num], strs[:rng.randint(1, 2)]
    edits = nums[n_num:n_num + rng.randint(1, 2)] if policy == "handedit" else []
    named = [c_num[0]] + c_str[:1] + [k for k in c_num[1:] + c_str[1:] if rng.random() < 0.4]
    sides, want = {}, dict(base)
    for k in c_num + edits:
        lo, hi = _NUM[k]
        a, b = rng.sample(range(lo, hi + 1), 2)
        sides[k] = (str(a), str(b))
        if k in edits:
            want[k] = str(rng.choice([x for x in range(lo, hi + 1) if x not in (a, b)]))
        elif policy == "named":
            want[k] = sides[k][k in named]
        else:
            want[k] = str(max(a, b) if policy in ("larger", "handedit") else min(a, b))
    for k in c_str:
        a, b = rng.sample([t.format(d) for t in _STR[k] for d in range(1, 10)], 2)
        sides[k] = (a, b)
        want[k] = sides[k][{"smaller": 0, "named": int(k in named)}.get(policy, 1)]
    mods = rng.sample(_MODS, 8)
    pre, post = mods[:3], mods[7:]
    ours_m, theirs_m = mods[3:3 + rng.randint(1, 2)], mods[5:5 + rng.randint(1, 2)]
    m_want = {"larger": ours_m + theirs_m, "handedit": ours_m + theirs_m, "smaller": theirs_m + ours_m,
              "named": theirs_m}[policy]
    acts = rng.sample(sorted(_ACTIONS), len(_ACTIONS))
    options = [(_ACTIONS[a], a) for a in acts]
    pick = {a: str(i + 1) for i, a in enumerate(acts)}

    def hunk(ours: list[str], theirs: list[str]) -> list[str]:
        return ["<<<<<<< HEAD", *ours, "=======", *theirs, ">>>>>>> " + branch]

    lines, answers = (["[service]"] if fmt == "ini" else []), []
    for k in order:
        if k in sides:
            lines += hunk([_fmt_line(fmt, k, sides[k][0])], [_fmt_line(fmt, k, sides[k][1])])
            if k in edits:
                answers += [pick["edit"], _fmt_line(fmt, k, want[k]), "."]
            else:
                answers.append(pick["ours" if want[k] == sides[k][0] else "theirs"])
        else:
            lines.append(_fmt_line(fmt, k, base[k]))
    lines += {"ini": ["", "[modules]"], "env": [], "yaml": ["modules:"]}[fmt]
    lines += [_mod_line(fmt, m) for m in pre]
    lines += hunk([_mod_line(fmt, m) for m in ours_m], [_mod_line(fmt, m) for m in theirs_m])
    answers.append(pick[{"smaller": "both-rev", "named": "theirs"}.get(policy, "both")])
    lines += [_mod_line(fmt, m) for m in post]
    m_want = pre + m_want + post
    path = f"/app/work/{name}"
    key = seal_key(rng)
    num_rule = "keep the **smaller** of the two values" if policy == "smaller" else \
        "keep the **larger** of the two values"
    ours_txt, theirs_txt = "our side (HEAD)", f"the side of `{branch}`"
    if policy == "named":
        show = ", ".join(f"`{_fmt_line(fmt, k, '').rstrip(' =:')}`" for k in sorted(named))
        rules = (f"- keep {ours_txt} for every setting, except for these settings, which take "
                 f"{theirs_txt}: {show};\n- in the module list, keep only the modules added on `{branch}`.")
    else:
        rules = (f"- numeric settings: {num_rule};\n"
                 f"- other (text) settings: keep {ours_txt if policy == 'smaller' else theirs_txt};\n"
                 f"- the module list: keep the modules of both sides, "
                 f"{'ours first' if policy != 'smaller' else f'those of `{branch}` first'}.")
    for k in edits:
        rules += (f"\n- the setting `{_fmt_line(fmt, k, '').rstrip(' =:')}` takes neither side: it must "
                  f"become `{want[k]}` (same syntax as the other lines of the file).")
    instruction = f"""\
Merging `{branch}` into `main` left conflict hunks in `{path}`. Resolve them with the team's
resolver, `/app/pickmerge {path}`: it shows the hunks one at a time on the terminal and asks for a
numbered choice for each (it reads the terminal itself, not its standard input, and discards keys
typed before its question), then asks before writing the file. It records what it writes in a
journal; a file edited by other means does not count. `pickmerge --redo {path}` starts again
from the conflicted version. Resolve every hunk by these rules:

{rules}

Lines outside the hunks stay as they are.
"""
    groups = {"num": c_num, "str": c_str, "edit": edits}
    tests = (_PICK_TESTS.replace("__PATH__", repr(path)).replace("__FMT__", repr(fmt))
             .replace("__KEY__", repr(key)).replace("__WANT__", repr(want))
             .replace("__MODULES__", repr(m_want))
             .replace("__GROUPS__", repr(groups)).replace("__EDIT_TEST__", _EDIT_TEST if edits else ""))
    program = (_PICK.replace("__TTY__", TTY_PROMPTS).replace("__KEY__", repr(key))
               .replace("__OPTIONS__", repr(options)))
    solution = pty_driver(["/app/pickmerge", path], answers + ["y"]) + f"cat {path}\n"
    diff = {"named": "easy", "larger": "medium", "smaller": "medium", "handedit": "hard"}[policy]
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=diff, variant=f"{fmt}/{policy}",
        files={"pickmerge": program, f"work/{name}": "\n".join(lines) + "\n"}, executable=("pickmerge",),
        tags=("tty", "merge-conflicts", "pty"), oracle_turns=3,
    )


FAMILIES.append(Family("ia-merge-picker", "interactive", "train",
                       "resolve a merged settings file's conflict hunks through a terminal picker, by "
                       "rules (larger/smaller value, named keys, hand-typed lines)", _merge))
