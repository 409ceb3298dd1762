#!/usr/bin/env python3
"""kvsvc: a tiny user registry over HTTP/JSON (see README.md)."""

import hashlib
import hmac
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

DEFAULT_CONFIG = "/etc/kvsvc/config.json"
LOCK = threading.Lock()


def die(msg):
    print(f"kvsvc: {msg}", file=sys.stderr)
    sys.exit(1)


def load_config(path):
    try:
        with open(path) as fh:
            cfg = json.load(fh)
    except (OSError, ValueError) as e:
        die(f"cannot read config {path}: {e}")
    for key in ("host", "port", "data_dir", "token_file", "log_file"):
        if key not in cfg:
            die(f"config: missing key {key!r}")
    if not isinstance(cfg["port"], int) or not 1024 <= cfg["port"] <= 65535:
        die("config: port must be an integer in 1024..65535")
    if not os.path.isdir(cfg["data_dir"]) or not os.access(cfg["data_dir"], os.W_OK):
        die(f"config: data_dir {cfg['data_dir']} is not a writable directory")
    try:
        st = os.stat(cfg["token_file"])
        token = open(cfg["token_file"]).read().strip()
    except OSError as e:
        die(f"config: token_file: {e}")
    if st.st_mode & 0o077:
        die("config: token_file must not be readable by group or others")
    if not re.fullmatch(r"[0-9a-f]{32,}", token):
        die("config: the token must be at least 32 lowercase hex digits")
    log_dir = os.path.dirname(cfg["log_file"]) or "."
    if not os.path.isdir(log_dir):
        die(f"config: log directory {log_dir} does not exist")
    cfg["token"] = token
    return cfg


class Store:
    def __init__(self, data_dir):
        self.path = os.path.join(data_dir, "users.json")

    def load(self):
        try:
            with open(self.path) as fh:
                return json.load(fh)
        except FileNotFoundError:
            return {}

    def save(self, users):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(users, fh, indent=2, sort_keys=True)
        os.replace(tmp, self.path)


def make_handler(cfg, store):
    token = cfg["token"]

    class Handler(BaseHTTPRequestHandler):
        server_version = "kvsvc/1.2"

        def log_message(self, fmt, *args):
            with open(cfg["log_file"], "a") as fh:
                fh.write("%s %s\n" % (self.address_string(), fmt % args))

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def authorized(self):
            got = self.headers.get("Authorization", "")
            if hmac.compare_digest(got, f"Bearer {token}"):
                return True
            self.reply(401, {"error": "missing or wrong bearer token"})
            return False

        def do_GET(self):
            url = urlparse(self.path)
            if url.path == "/health":
                return self.reply(200, {"status": "ok"})
            if not self.authorized():
                return
            users = store.load()
            if url.path == "/users":
                role = parse_qs(url.query).get("role", [None])[0]
                names = sorted(n for n, u in users.items() if role is None or u["role"] == role)
                return self.reply(200, {"users": [users[n] for n in names]})
            m = re.fullmatch(r"/users/([a-z][a-z0-9_]{0,31})", url.path)
            if m:
                if m[1] not in users:
                    return self.reply(404, {"error": "no such user"})
                return self.reply(200, users[m[1]])
            if url.path == "/stats":
                roles = {}
                for u in users.values():
                    roles[u["role"]] = roles.get(u["role"], 0) + 1
                fp = hashlib.sha256((token + ":" + ",".join(sorted(users))).encode()).hexdigest()[:24]
                return self.reply(200, {"users": len(users), "roles": roles, "fingerprint": fp})
            self.reply(404, {"error": "not found"})

        def do_POST(self):
            if urlparse(self.path).path != "/users":
                return self.reply(404, {"error": "not found"})
            if not self.authorized():
                return
            try:
                n = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(n) or b"{}")
                name, role = req["name"], req["role"]
            except (ValueError, KeyError, TypeError):
                return self.reply(400, {"error": "body must be JSON with 'name' and 'role'"})
            if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name):
                return self.reply(400, {"error": "name must match [a-z][a-z0-9_]{0,31}"})
            if role not in ("admin", "dev", "viewer"):
                return self.reply(400, {"error": "role must be admin, dev or viewer"})
            with LOCK:
                users = store.load()
                if name in users:
                    return self.reply(409, {"error": "user exists"})
                key = hmac.new(token.encode(), name.encode(), hashlib.sha256).hexdigest()[:16]
                users[name] = {"id": max([u["id"] for u in users.values()], default=0) + 1, "name": name,
                               "role": role, "api_key": key}
                store.save(users)
            self.reply(201, users[name])

    return Handler


def main():
    args = sys.argv[1:]
    path = os.environ.get("KVSVC_CONFIG", DEFAULT_CONFIG)
    cfg = load_config(path)
    if args == ["--check-config"]:
        print("config ok")
        return
    if args:
        die("usage: kvsvc.py [--check-config]")
    server = ThreadingHTTPServer((cfg["host"], cfg["port"]), make_handler(cfg, Store(cfg["data_dir"])))
    print(f"kvsvc listening on {cfg['host']}:{cfg['port']}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
