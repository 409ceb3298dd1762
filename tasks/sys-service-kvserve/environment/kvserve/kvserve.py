"""kvserve: a tiny read-only HTTP file service.

Usage: python3 kvserve.py [CONFIG]   (default /etc/kvserve/kvserve.conf)

Endpoints: GET /health, GET /motd, GET /files/<path below docroot>.
Configuration (INI):
  [server]  bind, port, user (the account the service switches to after binding)
  [content] docroot, motd
  [auth]    require_key (yes/no), api_key_file (read after switching user; header X-Api-Key)
  [logging] file (opened after switching user; one line per request)
"""
import configparser
import http.server
import os
import pwd
import sys
import time

cfg = configparser.ConfigParser(interpolation=None)
path = sys.argv[1] if len(sys.argv) > 1 else "/etc/kvserve/kvserve.conf"
if not cfg.read(path):
    sys.exit(f"kvserve: cannot read {path}")
server_cfg, content, auth, logging_cfg = cfg["server"], cfg["content"], cfg["auth"], cfg["logging"]
BIND, PORT = server_cfg.get("bind", "0.0.0.0"), server_cfg.getint("port", 8080)
DOCROOT = os.path.realpath(content.get("docroot", "/var/www/html"))
MOTD = content.get("motd", "")
REQUIRE_KEY = auth.getboolean("require_key", False)


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body, ctype="text/plain; charset=utf-8"):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, "ok\n")
        if self.path == "/motd":
            return self.reply(200, MOTD + "\n")
        if self.path.startswith("/files/"):
            if REQUIRE_KEY and self.headers.get("X-Api-Key", "") != API_KEY:
                return self.reply(401, "missing or wrong X-Api-Key\n")
            target = os.path.realpath(os.path.join(DOCROOT, self.path[len("/files/"):]))
            if not target.startswith(DOCROOT + os.sep) or not os.path.isfile(target):
                return self.reply(404, "not found\n")
            with open(target, "rb") as f:
                return self.reply(200, f.read(), "application/octet-stream")
        return self.reply(404, "not found\n")

    def log_message(self, fmt, *args):
        LOG.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.address_string()} {fmt % args}\n")
        LOG.flush()


httpd = http.server.ThreadingHTTPServer((BIND, PORT), Handler)
account = pwd.getpwnam(server_cfg.get("user", "nobody"))
os.setgroups([])
os.setgid(account.pw_gid)
os.setuid(account.pw_uid)
API_KEY = None
if REQUIRE_KEY:
    with open(auth["api_key_file"]) as f:
        API_KEY = f.read().strip()
    if not API_KEY:
        sys.exit("kvserve: empty API key")
LOG = open(logging_cfg.get("file", "/var/log/kvserve/kvserve.log"), "a")
LOG.write(f"kvserve listening on {BIND}:{PORT} as {account.pw_name}\n")
LOG.flush()
httpd.serve_forever()
