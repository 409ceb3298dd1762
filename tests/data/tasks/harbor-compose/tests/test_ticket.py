"""The service, not the agent's files, says whether the ticket is real."""

import re
import urllib.error
import urllib.request
from pathlib import Path


def ticket() -> str:
    return Path("/app/ticket.txt").read_text().strip()


def owner(value: str) -> str | None:
    try:
        with urllib.request.urlopen(f"http://api:8000/check?ticket={value}", timeout=10) as resp:
            return resp.read().decode()
    except urllib.error.HTTPError:
        return None


def test_ticket_file_written():
    assert Path("/app/ticket.txt").is_file()


def test_ticket_looks_like_one():
    assert re.fullmatch(r"[0-9a-f]{32}", ticket())


def test_ticket_was_issued_by_the_service():
    assert owner(ticket()) is not None, "the service never issued this ticket"


def test_ticket_was_issued_to_agent():
    assert owner(ticket()) == "agent"
