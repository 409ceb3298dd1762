"""Generated task families of the security category, continued (see :mod:`.base` for what a
family is; the others are in :mod:`.security` and :mod:`.security_2`)."""

from __future__ import annotations

import json
import random

from .base import Family, Instance
from .support import h4_jwt, source

FAMILIES: list[Family] = []

# ------------------------------------------------------------------ token-check
# An HS256 token checker with one to four flaws (alg none, no expiry check, prefix signature
# compare, unknown kid falls back to an empty key, audience unchecked). The tests mint honest
# tokens with hidden keys and forge one token per flaw.

_TC_CODE = {
    "alg-none": ('    if header.get("alg") == "none":\n        return claims\n', ""),
    "no-exp": ("", '    if not isinstance(claims.get("exp"), int) or claims["exp"] <= now:\n'
                   '        fail("expired")\n'),
    "sig-prefix": ("    if not want.startswith(sig):\n        fail(\"bad signature\")\n",
                   "    if not hmac.compare_digest(want, sig):\n        fail(\"bad signature\")\n"),
    "kid-fallback": ('    key = keys.get(header.get("kid"), "")\n',
                     '    if header.get("kid") not in keys:\n        fail("unknown kid")\n'
                     '    key = keys[header["kid"]]\n'),
    "no-aud": ("", '    if claims.get("aud") != AUD:\n        fail("wrong audience")\n'),
}

_TC_TEMPLATE = '''#!/usr/bin/env python3
"""Checks an access token for __AUD__: prints its claims (JSON, sorted keys) or refuses it.

Usage: python3 __PROG__ [--keys FILE] [--now EPOCH] TOKEN
"""
import argparse, base64, binascii, hashlib, hmac, json, sys, time

AUD = "__AUD__"


def fail(why):
    print(f"invalid: {why}", file=sys.stderr)
    sys.exit(1)


def unb64(part):
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        fail("bad base64")


def check(token, keys, now):
    parts = token.split(".")
    if len(parts) != 3:
        fail("not three parts")
    try:
        header, claims = json.loads(unb64(parts[0])), json.loads(unb64(parts[1]))
    except ValueError:
        fail("bad json")
    if not isinstance(header, dict) or not isinstance(claims, dict):
        fail("bad json")
__NONE__    if header.get("alg") != "HS256":
        fail("unsupported alg")
__KID__    want = base64.urlsafe_b64encode(hmac.new(key.encode(), f"{parts[0]}.{parts[1]}".encode(),
                                              hashlib.sha256).digest()).rstrip(b"=").decode()
    sig = parts[2]
__SIG____EXP____AUD_CHECK__    return claims


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--keys", default="__KEYS__")
    p.add_argument("--now", type=int, default=None)
    p.add_argument("token")
    a = p.parse_args()
    keys = json.load(open(a.keys))
    now = a.now if a.now is not None else int(time.time())
    print(json.dumps(check(a.token, keys, now), sort_keys=True))


if __name__ == "__main__":
    main()
'''

_TC_TESTS = '''"""Mints honest tokens with hidden keys and forges one token per flaw."""

import json
import random
import subprocess
import tempfile
from pathlib import Path

import pytest

from h4_jwt import forge, mint

PROG, AUD, FLAWS = __PROG__, __AUD__, __FLAWS__
NOW = 1_900_000_000


def keys_file(seed):
    rng = random.Random(seed)
    keys = {f"k{rng.randint(10, 99)}": "".join(rng.choice("abcdefghjkmnpqrstuvwxyz0123456789") for _ in range(24))
            for _ in range(3)}
    path = Path(tempfile.mkdtemp()) / "keys.json"
    path.write_text(json.dumps(keys))
    return keys, str(path)


def run(path, token):
    return subprocess.run(["python3", PROG, "--keys", path, "--now", str(NOW), token],
                          capture_output=True, text=True, timeout=30)


def accepted(path, token, claims):
    r = run(path, token)
    assert r.returncode == 0, f"an honest token was refused: {r.stderr[-300:]}"
    assert json.loads(r.stdout) == claims and r.stdout.strip() == json.dumps(claims, sort_keys=True)


def refused(path, token, what):
    r = run(path, token)
    assert r.returncode == 1 and r.stdout == "", f"{what}: accepted (exit {r.returncode})"
    assert r.stderr.startswith("invalid"), f"{what}: stderr should start with 'invalid'"


def honest(keys, rng):
    kid = rng.choice(sorted(keys))
    claims = {"sub": rng.choice(["ana", "bo", "cy"]), "aud": AUD, "exp": NOW + rng.randint(1, 9999),
              "scope": rng.choice(["read", "write", "read write"])}
    return mint(claims, keys[kid], kid), claims


@pytest.mark.weight(2)
@pytest.mark.parametrize("flaw", FLAWS)
def test_forgery_refused(flaw):
    keys, path = keys_file(100 + len(flaw))
    tok, claims = honest(keys, random.Random(1))
    accepted(path, tok, claims)
    refused(path, forge(flaw, keys, AUD, NOW), flaw)


@pytest.mark.weight(1)
def test_honest_tokens():
    keys, path = keys_file(77)
    rng = random.Random(3)
    for _ in range(6):
        tok, claims = honest(keys, rng)
        accepted(path, tok, claims)
    for flaw in FLAWS:
        refused(path, forge(flaw, keys, AUD, NOW), flaw)


@pytest.mark.weight(1)
def test_tampering_and_garbage():
    keys, path = keys_file(78)
    tok, claims = honest(keys, random.Random(4))
    head, body, sig = tok.split(".")
    other = mint(dict(claims, sub="root"), keys[sorted(keys)[0]], sorted(keys)[0]).split(".")[1]
    for bad in [f"{head}.{other}.{sig}", f"{head}.{body}.{sig[:-2]}", f"{head}.{body}", "x.y.z", "",
                f"{head}.{body}.{sig}.x", forge(FLAWS[0], keys, AUD, NOW)]:
        refused(path, bad, f"token {bad[:40]!r}")
'''


def _token_check(rng: random.Random, index: int) -> Instance:
    n = rng.choices([1, 2, 3, 4], [2, 3, 3, 2])[0]
    flaws = sorted(rng.sample(sorted(_TC_CODE), n))
    aud = rng.choice(["billing", "reports", "files", "chat"])
    svc = f"/app/{aud}-gw"
    prog = f"{svc}/tokencheck.py"

    def program(fixed: bool) -> str:
        text = _TC_TEMPLATE.replace("__PROG__", prog).replace("__AUD__", aud).replace("__KEYS__", f"{svc}/keys.json")
        for flaw, slot in [("alg-none", "__NONE__"), ("kid-fallback", "__KID__"), ("sig-prefix", "__SIG__"),
                           ("no-exp", "__EXP__"), ("no-aud", "__AUD_CHECK__")]:
            bad, good = _TC_CODE[flaw]
            text = text.replace(slot, good if fixed or flaw not in flaws else bad)
        return text

    keys = {f"k{rng.randint(10, 99)}": "".join(rng.choice("abcdefghjkmnpqrstuvwxyz0123456789") for _ in range(24))
            for _ in range(2)}
    instruction = f"""\
`{prog}` checks the access tokens of the `{aud}` gateway: `python3 {prog} [--keys FILE] [--now EPOCH] TOKEN`
prints the token's claims as JSON with sorted keys (exit 0), or refuses it with a message starting
with `invalid` on standard error and nothing on standard output (exit 1). Keys are read from
`{svc}/keys.json` (a JSON object from key id to secret) unless `--keys` is given; `--now` replaces
the current time (seconds since the epoch).

A penetration test got forged tokens accepted. Fix the checker so that it accepts exactly the
tokens that meet this specification, and keep everything else about it:
- a token is three base64url parts without padding, `HEADER.PAYLOAD.SIGNATURE`, the first two
  JSON objects;
- the header's `alg` is `HS256` and its `kid` is a key id of the keys file;
- the signature is HMAC-SHA256, keyed with that key's secret (UTF-8), of the ASCII text
  `HEADER.PAYLOAD` exactly as it appears in the token, base64url without padding; it must match
  completely (compare in constant time);
- the payload's `exp` is an integer greater than the current time, and its `aud` is `{aud}`.

It will be tested with other keys and tokens.
"""
    solution = f"cat > {prog} <<'PY_EOF'\n{program(True)}PY_EOF\n"
    tests = (_TC_TESTS.replace("__PROG__", repr(prog)).replace("__AUD__", repr(aud))
             .replace("__FLAWS__", repr(flaws)))
    total = 1 + 1 + min(2, n - 1)
    return Instance(
        instruction=instruction, tests=tests, solution=solution,
        difficulty="easy" if total <= 2 else "medium" if total <= 4 else "hard",
        variant="+".join(flaws), files={f"{prog[5:]}": program(False), f"{svc[5:]}/keys.json": json.dumps(keys)},
        test_files={"h4_jwt.py": source(h4_jwt)}, tags=("tokens", "hmac", *flaws), oracle_turns=1,
    )


FAMILIES.append(Family("token-check", "security", "train",
                       "fix an HS256 token checker with one to four flaws (alg none, expiry, prefix "
                       "signature compare, unknown kid, audience); forged tokens per flaw", _token_check))
