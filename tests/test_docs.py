"""The README and the guides as a new user reads them: every `terminal-env` command in their shell
blocks is one the CLI accepts (its subcommands, flags and choices), and every example or script
they name exists. The examples themselves run in tests/test_examples.py."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from terminal_env.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("bash", "sh", "console", "")


def shell_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, logical line) of the shell blocks; in `console` blocks only `$ ` lines."""
    out: list[tuple[int, str]] = []
    lang: str | None = None
    pending = ""
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        if raw.startswith("```"):
            lang = None if lang is not None else raw[3:].strip()
            continue
        if lang not in SHELL:
            continue
        line = raw.strip()
        if lang == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        line = pending + line
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        out.append((n, line))
    return out


def commands() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for n, line in shell_lines(path):
            m = re.match(r"^(?:\S*/)?terminal-env\s+(.*)$", line)
            if m:
                cmd = re.split(r"\s+#", m.group(1))[0]
                cmd = re.split(r"\s*(?:&&|\|\||\||;|>)\s*", cmd)[0]
                found.append((f"{path.relative_to(ROOT)}:{n}", cmd))
    return found


def test_the_docs_have_commands():
    assert len(commands()) >= 40


@pytest.mark.parametrize("where,cmd", commands())
def test_every_documented_command_is_one_the_cli_accepts(where, cmd):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(shlex.split(cmd))
    except SystemExit as exc:
        assert not exc.code, f"{where}: `terminal-env {cmd}`: {err.getvalue().strip().splitlines()[-1]}"


def test_every_named_example_and_script_exists():
    missing = []
    for path in DOCS:
        # paths of this repository (not ../shared/scripts/..., nor another project's `scripts/`)
        text = path.read_text()
        for ref in re.findall(r"(?<![\w./-])((?:examples|scripts|benchmarks)/[\w./-]+\.(?:py|sh))\b", text):
            if not (ROOT / ref).is_file():
                missing.append(f"{path.relative_to(ROOT)}: {ref}")
    assert not missing, missing
