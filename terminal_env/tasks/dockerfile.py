"""Reading a Dockerfile's text: its instructions, its ``FROM`` lines and its final ``WORKDIR``.

Plain text work, no engine: the task readers (:mod:`~terminal_env.tasks.load`,
:mod:`~terminal_env.tasks.tb1`) take a task's default working directory from here, and
:mod:`~terminal_env.tasks.build` rewrites the ``FROM`` lines it finds here.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass


@dataclass
class Instruction:
    start: int  # index of its first line
    end: int  # index of its last line (continuations included)
    keyword: str  # upper case
    args: str  # the arguments, continuation lines joined


_DIRECTIVE = re.compile(r"#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$")


def parse_dockerfile(text: str) -> tuple[list[str], list[Instruction]]:
    """The lines of a Dockerfile and its instructions (comments, blank lines, continuations and
    the ``escape`` parser directive handled as the engine does).

    >>> _, ins = parse_dockerfile("# c\\nFROM a AS b\\nRUN x \\\\\\n  # note\\n  y\\n")
    >>> [(i.keyword, i.args, i.start, i.end) for i in ins]
    [('FROM', 'a AS b', 1, 1), ('RUN', 'x y', 2, 4)]
    """
    lines = text.splitlines(keepends=True)
    escape = "\\"
    for line in lines:  # parser directives: only at the very top
        m = _DIRECTIVE.match(line.strip())
        if not m:
            break
        if m.group(1).lower() == "escape":
            escape = m.group(2)[:1] or "\\"
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        start, parts = i, []
        while i < len(lines):
            cur = lines[i].rstrip("\r\n").rstrip()
            if cur.endswith(escape):
                parts.append(cur[:-1])
                i += 1
                while i < len(lines) and lines[i].lstrip().startswith("#"):
                    i += 1  # comment lines inside a continuation are dropped
                continue
            parts.append(cur)
            break
        end = min(i, len(lines) - 1)
        i += 1
        joined = " ".join(p.strip() for p in parts if p.strip())
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(start, end, keyword.upper(), args.strip()))
    return lines, out


def _substitute(text: str, args: dict[str, str]) -> str:
    """``$A``, ``${A}``, ``${A:-d}``, ``${A:+x}`` from ``args``; unknown names stay as written."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        op, word = m.group(3), m.group(4) or ""
        value = args.get(name)
        if op == ":-":
            return value if value else word
        if op == ":+":
            return word if value else ""
        return value if value is not None else m.group(0)

    return re.sub(r"\$(?:(\w+)|\{(\w+)(?:(:-|:\+)([^}]*))?\})", sub, text)


@dataclass
class FromLine:
    index: int  # of the instruction
    flags: list[str]
    image: str  # with global ARGs substituted
    stage: str | None


def from_lines(instructions: list[Instruction]) -> list[FromLine]:
    """The FROM instructions, with global ARG defaults substituted into the image."""
    global_args: dict[str, str] = {}
    out: list[FromLine] = []
    for n, ins in enumerate(instructions):
        if ins.keyword == "ARG" and not out:
            for item in ins.args.split():
                key, _, value = item.partition("=")
                global_args[key] = value.strip("\"'")
        elif ins.keyword == "FROM":
            tokens = ins.args.split()
            flags = [t for t in tokens if t.startswith("--")]
            rest = [t for t in tokens if not t.startswith("--")]
            if not rest:
                continue
            stage = rest[2] if len(rest) >= 3 and rest[1].lower() == "as" else None
            out.append(FromLine(n, flags, _substitute(rest[0], global_args), stage))
    return out


def dockerfile_workdir(text: str) -> str | None:
    """The working directory the final stage ends with, when it is plain (no variables)."""
    _, instructions = parse_dockerfile(text)
    workdir: str | None = None
    for ins in instructions:
        if ins.keyword == "FROM":
            workdir = None
        elif ins.keyword == "WORKDIR" and ins.args:
            path = ins.args.strip().strip("\"'")
            if "$" in path:
                return None
            workdir = posixpath.normpath(posixpath.join(workdir or "/", path))
    return workdir
