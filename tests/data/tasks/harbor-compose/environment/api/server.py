"""The registration service: POST /register (name=...) issues a random ticket and keeps it in
/srv/tickets; GET /check?ticket=... says whether a ticket was issued, and to whom."""

import os
import secrets
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

STORE = "/srv/tickets"


class Handler(BaseHTTPRequestHandler):
    def answer(self, code: int, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/health":
            return self.answer(200, "ok\n")
        if url.path == "/check":
            ticket = (parse_qs(url.query).get("ticket") or [""])[0]
            path = os.path.join(STORE, ticket)
            if ticket.isalnum() and os.path.isfile(path):
                with open(path) as fh:
                    return self.answer(200, fh.read())
            return self.answer(404, "unknown ticket\n")
        self.answer(404, "not found\n")

    def do_POST(self) -> None:
        if urlparse(self.path).path != "/register":
            return self.answer(404, "not found\n")
        length = int(self.headers.get("Content-Length") or 0)
        name = (parse_qs(self.rfile.read(length).decode()).get("name") or [""])[0]
        if not name:
            return self.answer(400, "give name=...\n")
        ticket = secrets.token_hex(16)
        with open(os.path.join(STORE, ticket), "w") as fh:
            fh.write(name)
        self.answer(200, ticket)

    def log_message(self, *args) -> None:
        pass


os.makedirs(STORE, exist_ok=True)
ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
