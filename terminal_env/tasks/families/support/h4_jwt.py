"""Token minting for the token-check family: HS256 tokens (header.payload.signature, base64url
without padding), honest and forged."""

import base64
import hashlib
import hmac
import json


def b64(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def mint(claims, key, kid, alg="HS256", sig=None):
    head = b64(json.dumps({"alg": alg, "typ": "JWT", "kid": kid}).encode())
    body = b64(json.dumps(claims).encode())
    if sig is None:
        sig = b64(hmac.new(key.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{sig}"


def forge(flaw, keys, aud, now):
    """A token that a verifier with this flaw accepts and a correct one refuses."""
    kid = sorted(keys)[0]
    claims = {"sub": "mallory", "aud": aud, "exp": now + 600, "role": "admin"}
    if flaw == "alg-none":
        return mint(claims, "", kid, alg="none", sig="")
    if flaw == "no-exp":
        return mint(dict(claims, exp=now - 5), keys[kid], kid)
    if flaw == "sig-prefix":
        return mint(claims, keys[kid], kid, sig="")
    if flaw == "kid-fallback":
        return mint(claims, "", "k-unknown")
    return mint(dict(claims, aud=aud + "-staging"), keys[kid], kid)  # no-aud
