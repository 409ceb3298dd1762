#!/usr/bin/env python3
"""Payment service (excerpt): loads its API token the way production does."""
import configparser
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_token():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(HERE, "config", "settings.ini"))
    pay = cfg["payments"] if cfg.has_section("payments") else {}
    path = pay.get("api_token_file")
    if path:
        with open(path) as f:
            return f.read().strip()
    if pay.get("api_token"):
        return pay["api_token"].strip()
    env = os.path.join(HERE, ".env")
    if os.path.exists(env):
        for line in open(env):
            if line.startswith("PAYMENT_API_TOKEN="):
                return line.split("=", 1)[1].strip()
    return None


if __name__ == "__main__":
    if "--check" in sys.argv:
        token = load_token()
        if not token:
            print("no token configured")
            sys.exit(1)
        print("token fingerprint", hashlib.sha256(token.encode()).hexdigest()[:16])
