"""Reference of the pw-hash family: the three hash schemes' line formats, hashing and checking."""

import base64
import hashlib
import hmac

SCHEMES = {
    "pbkdf2-sha256": {"dklen": 32},
    "pbkdf2-sha512": {"dklen": 64},
    "scrypt": {"dklen": 32, "n": 16384, "r": 8, "p": 1},
}


def enc(b, how):
    return b.hex() if how == "hex" else base64.b64encode(b).decode()


def dec(s, how):
    return bytes.fromhex(s) if how == "hex" else base64.b64decode(s, validate=True)


def derive(scheme, password, salt, iterations):
    cfg = SCHEMES[scheme]
    pw = password.encode("utf-8")
    if scheme == "scrypt":
        return hashlib.scrypt(pw, salt=salt, n=cfg["n"], r=cfg["r"], p=cfg["p"], dklen=cfg["dklen"])
    return hashlib.pbkdf2_hmac(scheme.split("-")[1], pw, salt, iterations, cfg["dklen"])


def make_line(scheme, how, user, password, salt, iterations):
    h = derive(scheme, password, salt, iterations)
    if scheme == "scrypt":
        c = SCHEMES[scheme]
        return f"{user}:$scrypt$ln={c['n'].bit_length() - 1},r={c['r']},p={c['p']}${enc(salt, how)}${enc(h, how)}"
    return f"{user}:${scheme}${iterations}${enc(salt, how)}${enc(h, how)}"


def parse_line(line):
    user, _, rest = line.partition(":")
    parts = rest.split("$")
    return user, parts  # ["", scheme, params, salt, hash]


def check(scheme, how, line, password, iterations):
    """(ok, salt) for one hashed line; raises on a malformed line."""
    user, parts = parse_line(line)
    assert len(parts) == 5 and parts[0] == "" and parts[1] == scheme, f"malformed entry for {user}"
    if scheme == "scrypt":
        assert parts[2] == "ln=14,r=8,p=1", f"wrong scrypt parameters for {user}"
    else:
        assert parts[2] == str(iterations), f"wrong iteration count for {user}"
    salt, h = dec(parts[3], how), dec(parts[4], how)
    return hmac.compare_digest(derive(scheme, password, salt, iterations), h), salt
