"""Reading a playbook's text as a shell would, for the leak checks of :mod:`.review`.

* :func:`variants`: the text, then the text with its quoting undone (``/te""sts``, ``$'\\x2ftests'``,
  ``'/te' + 'sts'``), its variables substituted (``d=/te; ${d}sts``), its ``printf`` formats
  applied (``printf '/%s' tests``), and its obvious encodings decoded (base64, hex, ``rev``, rot13).
* :func:`verifier_paths`: where a text reaches the verifier's or the oracle's files, named
  literally (``path-reference``) or any other way (``obfuscated-path``): one of the variants,
  a relative path from the directory a ``cd`` left (``cd / && cat tests/x``, ``../tests``), a glob
  that matches those paths and no ordinary one (``/t?sts/*``), a search of ``/`` for their file
  names (``find / -name 'test_*.py'``), or another process's ``/proc`` entries.
* :func:`written_literals`: the literals a text writes as data: what ``echo``/``printf`` send to
  a file, a data heredoc's words, shell and Python assignments of a lone literal, ``print``/
  ``write`` of a literal, a dict entry's literal value, a ``sed`` replacement.
* :func:`shell_test_values`: what a task's ``test.sh`` compares (the other side of the check).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import posixpath
import re
import shlex
from dataclasses import dataclass, field

#: the verifier's and the oracle's directories (a path under one of them is theirs)
PROTECTED_DIRS = ("/tests", "/solution", "/logs/verifier", "/oracle")
#: their files, wherever named
PROTECTED_NAMES = ("test_outputs.py", "run-tests.sh", "solve.sh", "reward.txt", "reward.json", "te_checks.py")
_LITERAL = re.compile(
    r"(?<![\w.~/-])(/tests|/solution|/logs/verifier|/oracle)(?![\w-])"
    r"|(?<![\w-])(?:reward\.(?:txt|json)|test_outputs\.py|run-tests\.sh|solve\.sh|te_checks\.py)\b")
#: what a glob must match to reach them ...
_TARGETS = [*PROTECTED_DIRS, "/tests/test_outputs.py", "/tests/test.sh", "/solution/solve.sh",
            "/logs/verifier/reward.txt", "/logs", "/logs/verifier/checks.json"]
#: ... and none of: a glob that also matches ordinary paths is not aimed at them
_DECOYS = ["/app", "/tmp", "/usr", "/etc", "/var", "/home", "/root", "/opt", "/srv", "/bin", "/lib", "/mnt",
           "/proc", "/sys", "/dev", "/run", "/sbin", "/boot", "/media", "/app/x.py", "/tmp/x.py",
           "/app/run.sh", "/tmp/x.txt", "/usr/bin", "/etc/x.conf", "/var/log", "/tmp/x", "/app/x"]
_DECOY_NAMES = ["main.py", "app.py", "setup.py", "util.py", "run.sh", "build.sh", "x.txt", "notes.txt",
                "data.csv", "config.json", "out.txt", "README.md", "Makefile"]
_PROC = re.compile(r"/proc/(\$\([^()]*\)|[^/\s'\"]+)/(root|cwd|fd|environ|mem|maps|cmdline|exe|task)\b")
_GLOB = re.compile(r"[*?\[]")
_ASSIGN = re.compile(r"(?:^|[\s;&|(])(?:export\s+|local\s+|readonly\s+)?([A-Za-z_]\w*)=([^\s;&|)]*)")
#: a value that is one literal word (not an expression or a command)
_LONE = re.compile(r"""(?:"[^"$`]*"|'[^']*'|[\w.,:@%+/-]*)\Z""")


@dataclass
class ShellState:
    """What earlier steps left for later ones: the working directory and plain variables."""

    cwd: str = "/app"
    variables: dict[str, str] = field(default_factory=dict)


# ---- undoing quoting and encodings ----------------------------------------------------------


def _unescape(text: str) -> str:
    """``\\x2f``, ``\\057``, ``\\u002f`` as the characters (what ``$'..'``, printf and echo -e do)."""
    def one(m: re.Match) -> str:
        s = m.group(0)
        try:
            return chr(int(s[2:], 16) if s[1] in "xu" else int(s[1:], 8))
        except ValueError:
            return s
    return re.sub(r"\\x[0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\[0-7]{3}", one, text)


def _dequote(text: str) -> str:
    """The words with quotes removed and adjacent strings joined: ``/te""sts``, ``'/te'+'sts'``."""
    text = re.sub(r"\$'((?:[^'\\]|\\.)*)'", lambda m: _unescape(m.group(1)), text)
    text = re.sub(r"""(['"])\s*\+\s*(['"])""", "", text)  # Python / JS string concatenation
    text = re.sub(r"os\.path\.join\(([^()]*)\)",
                  lambda m: "/".join(p.strip().strip("'\"") for p in m.group(1).split(",")), text)
    text = re.sub(r"\\\n", "", _unescape(text))
    return re.sub(r"//+", "/", re.sub(r"""["'\\]""", "", text))


def _printf(text: str) -> list[str]:
    """What each ``printf FORMAT ARGS`` prints (its ``%s``/``%d``/``%b`` filled in turn)."""
    out = []
    for m in re.finditer(r"""\bprintf\s+(?:-v\s+\S+\s+)?('[^']*'|"[^"]*"|[^\s|;&)]+)([^|;&)`\n]*)""", text):
        fmt = _unescape(m.group(1).strip("'\"").replace("\\n", "\n").replace("\\t", "\t"))
        args = _words(re.split(r"\d?>", m.group(2))[0])
        slots = len(re.findall(r"%[-0-9.]*[sdbcqfx]", fmt))
        done = []
        for i in range(0, max(len(args), 1), max(slots, 1)):
            chunk = iter(args[i:i + slots] if slots else [])
            done.append(re.sub(r"%[-0-9.]*[sdbcqfx]", lambda _m: next(chunk, ""), fmt))
        out.append("".join(done).replace("%%", "%"))
    return out


def _decoded(text: str) -> list[str]:
    """Base64 and hex runs that decode to printable text; reversed words where ``rev`` runs;
    rot13 where ``tr`` rotates letters."""
    found = []
    for tok in re.findall(r"[A-Za-z0-9+/]{8,}={0,2}", text):
        for decode in (lambda t: base64.b64decode(t + "=" * (-len(t) % 4), validate=True),
                       lambda t: bytes.fromhex(t) if len(t) % 2 == 0 else b""):
            try:
                raw = decode(tok)
            except (binascii.Error, ValueError):
                continue
            s = raw.decode("ascii", "replace")
            if len(s) >= 3 and all(32 <= ord(c) < 127 or c in "\n\t" for c in s) and s != tok:
                found.append(s)
    if re.search(r"(?:^|[|;&]\s*)rev\b(?!-)", text, re.M):
        found += [w[::-1] for w in re.findall(r"[^\s'\"|;&()]+", text)]
    if re.search(r"\btr\b.*N-ZA-M", text, re.I):
        found.append(codecs.encode(text, "rot13"))
    return found


def variants(text: str, state: ShellState | None = None) -> list[tuple[str, str]]:
    """``(how, text)``: the raw text, then the text unquoted, with its variables substituted,
    what its ``printf``s print, and what its encoded runs decode to (each may be empty)."""
    state = state if state is not None else ShellState()
    plain = _dequote(text)
    for name, value in _ASSIGN.findall(plain):
        if "$" not in value:
            state.variables[name] = value
    expanded = re.sub(r"\$\{?([A-Za-z_]\w*)\}?", lambda m: state.variables.get(m.group(1), m.group(0)), plain)
    expanded = re.sub(r"\$\((?:echo|printf)\s+(?:-n\s+)?([^()]*)\)", r"\1", expanded)
    return [("raw", text), ("quoting", plain), ("variables", expanded),
            ("printf", "\n".join(_printf(text))), ("encoding", "\n".join(_decoded(plain)))]


# ---- the verifier's paths -------------------------------------------------------------------


def _glob_regex(pattern: str) -> re.Pattern | None:
    """A shell glob as a regex: ``*`` and ``?`` never cross a ``/`` (None: not a glob we read)."""
    out = ""
    for part in re.split(r"(\*|\?|\[[^\]]+\])", pattern):
        if part == "*":
            out += "[^/]*"
        elif part == "?":
            out += "[^/]"
        elif part.startswith("[") and part.endswith("]") and len(part) > 2:
            body = part[1:-1]
            negated = body[0] in "!^"
            out += "[" + "^" * negated + "".join(c if c == "-" else re.escape(c) for c in body[negated:]) + "]"
        else:
            out += re.escape(part)
    try:
        return re.compile(out + r"\Z")
    except re.error:
        return None


def _aimed(pattern: str, targets: list[str], decoys: list[str]) -> str | None:
    """The target a glob matches when it matches no decoy, else None."""
    rx = _glob_regex(pattern)
    hit = rx and next((t for t in targets if rx.match(t)), None)
    return hit if hit and not any(rx.match(d) for d in decoys) else None


def _words(line: str) -> list[str]:
    """Shell words, operators (``;``, ``&&``, ``|``, ``>``) apart: ``cd /;`` goes to ``/``."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return line.split()


def _protected(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in PROTECTED_DIRS)


def verifier_paths(text: str, state: ShellState | None = None, *, commands: bool = True) -> list[tuple[str, str]]:
    """``(kind, detail)`` for each way ``text`` reaches the verifier's or the oracle's files.
    ``commands=False`` (reasoning, prose): only what the text names, not the directory walks."""
    state = state if state is not None else ShellState()
    found = [("path-reference", f"names {m.group(0)!r}") for m in _LITERAL.finditer(text)]
    literal = {m.group(0) for m in _LITERAL.finditer(text)}
    readings = variants(text, state)
    for j, (how, body) in enumerate(readings[1:], 1):
        if body in (earlier for _, earlier in readings[:j]):
            continue  # the same text by another reading: said once
        for m in _LITERAL.finditer(body):
            if m.group(0) not in literal:
                found.append(("obfuscated-path", f"reaches {m.group(0)!r} through its {how}"))
    for m in _PROC.finditer(text):
        pid, entry = m.groups()
        enumerated = _GLOB.search(pid) or pid.startswith("$(")  # every process, or one found by name
        if pid not in ("self", "thread-self", "$$") and (enumerated or entry not in ("cmdline", "exe", "task")):
            found.append(("obfuscated-path", f"reads {m.group(0)!r}, another process's view (the verifier's)"))
    if commands:
        for line in readings[2][1].splitlines():  # unquoted, variables substituted
            found += _walk(line, state)
    return list(dict.fromkeys(found))


def _walk(line: str, state: ShellState) -> list[tuple[str, str]]:
    """Relative paths and globs of one command line, read from the directory ``cd`` left."""
    found = []
    words = _words(line)
    from_root = "/" in words or state.cwd == "/"
    for i, word in enumerate(words):
        if i and words[i - 1] in ("cd", "pushd") and not word.startswith("-"):
            known = not word.startswith(("~", "$"))  # a home or a variable: somewhere unknown
            state.cwd = posixpath.normpath(posixpath.join(state.cwd, word)) if known else "/?"
            continue
        for piece in re.split(r"[=:,;&|()<>]", word):  # --dir=X, a:b lists, $(...) leftovers
            if not piece or piece.startswith("-"):
                continue
            path = posixpath.normpath(posixpath.join(state.cwd, piece))
            if _GLOB.search(piece):
                hit = _aimed(path, _TARGETS, _DECOYS)
                if hit:
                    found.append(("obfuscated-path", f"reaches {hit!r} by the glob {piece!r}"))
                name = posixpath.basename(piece)
                if from_root and _GLOB.search(name):
                    hit = _aimed(name, list(PROTECTED_NAMES), _DECOY_NAMES)
                    if hit:
                        found.append(("obfuscated-path", f"searches / for {hit!r} by {name!r}"))
            elif not piece.startswith("/") and _protected(path) and re.match(r"[\w.]", piece):
                found.append(("obfuscated-path", f"reaches {path!r} by {piece!r} from {state.cwd}"))
    return found


# ---- literals a text writes -----------------------------------------------------------------

_LIT = r"""(-?\d+(?:\.\d+)?|"[^"\n]*"|'[^'\n]*')"""
_CODE_WRITES = [re.compile(p, re.M) for p in (
    rf"\bprint\(\s*{_LIT}\s*[,)]", rf"\.write\(\s*{_LIT}", rf"^\s*[A-Za-z_][\w.]*\s*=\s*{_LIT}\s*(?:#.*)?$",
    rf"""["'][\w -]+["']\s*:\s*{_LIT}""", rf"^\s*return\s+{_LIT}\s*$")]
_INTERPRETER = re.compile(r"\b(python[\d.]*|bash|sh|node|perl|ruby|sqlite3|psql|awk|php)\b")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")


def _pieces(payload: str) -> set[str]:
    """A written payload, its words, and their parts between ``= : , ;`` (quotes trimmed)."""
    out = {payload.strip()}
    for word in payload.split():
        out.add(word)
        out.update(re.split(r"[=:,;]", word))
    return {p.strip("\"'()[]{}<>.!?") if not re.fullmatch(r"-?\d+\.\d+", p) else p for p in out} - {""}


def _split_heredocs(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text without heredoc bodies, and ``(opening line, body)`` of each heredoc."""
    lines, rest, docs = text.split("\n"), [], []
    i = 0
    while i < len(lines):
        rest.append(lines[i])
        m = _HEREDOC.search(lines[i])
        if m:
            body, i = [], i + 1
            while i < len(lines) and lines[i].strip() != m.group(2):
                body.append(lines[i])
                i += 1
            docs.append((lines[i - len(body) - 1], "\n".join(body)))
        i += 1
    return "\n".join(rest), docs


def _code_writes(code: str) -> set[str]:
    out = set()
    for rx in _CODE_WRITES:
        for lit in rx.findall(code):
            out |= _pieces(lit.strip("\"'").replace("\\n", "\n"))
    return out


def _echoes(line: str, always: bool) -> set[str]:
    """``echo``/``printf`` payloads of a line that writes to a file (``always``: to stdout too,
    inside a script), and the values of ``NAME=literal`` assignments."""
    out = set()
    line = re.sub(r"\$\([^()]*\)|`[^`]*`", " CMD ", re.sub(r"\$\([^()]*\)|`[^`]*`", " CMD ", line))
    for name, value in _ASSIGN.findall(line):
        if _LONE.match(value) and "CMD" not in value:
            out |= _pieces(value.strip("\"'"))
    writes = always or re.search(r">>?\s*(?!/dev/null|&)[^\s&]|\|\s*tee\b", line)
    if writes:
        for m in re.finditer(r"\becho\s+(?:-[neE]+\s+)*([^|;&>]*)", line):
            out |= _pieces(" ".join(_words(m.group(1))).replace("\\n", "\n"))
        for printed in _printf(line):
            out |= set().union(*(_pieces(p) for p in printed.split("\n"))) if printed.strip() else set()
    for m in re.finditer(r"\bsed\b[^|;&]*?\bs([/|#])(?:[^/|#\n]*)\1([^/|#\n]*)\1", line):
        out |= _pieces(m.group(2))
    return out


def written_literals(text: str) -> set[str]:
    """The literals ``text`` writes as data (see the module's docstring)."""
    rest, docs = _split_heredocs(text)
    out = _code_writes(rest)
    for line in rest.split("\n"):
        out |= _echoes(line, always=False)
    for opening, body in docs:
        target = re.search(r">\s*(\S+)", opening)
        script = bool(_INTERPRETER.search(opening.split("<<")[0])) or body.startswith("#!") or \
            bool(target and re.search(r"\.(py|sh|js|rb|pl|awk|sql|c|go|rs)$", target.group(1)))
        if not script:
            for line in body.split("\n"):
                out |= _pieces(line)
        else:
            out |= _code_writes(body)
            if body.startswith("#!") and re.match(r"#!.*\b(ba)?sh\b", body):
                for line in body.split("\n"):
                    out |= _echoes(line, always=True)
    return out


# ---- what a shell test compares -------------------------------------------------------------


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _unregex(pattern: str) -> str:
    """A grep pattern as the text it matches, when it is nearly literal (anchors, escapes)."""
    return re.sub(r"\\(.)", r"\1", pattern.removeprefix("^").removesuffix("$"))


def shell_test_values(text: str) -> tuple[list[tuple[str, bool]], list[str]]:
    """A shell test's literals as ``(value, compared)``: the operands of ``[ ]``/``[[ ]]``/
    ``test`` comparisons, ``grep`` patterns and heredoc bodies are compared, and so are the
    variables those compare (``WANT=23 ... -eq "$WANT"``); other assignments are not. Also the
    bodies of its Python heredocs, to be read as Python."""
    lines, values, scripts, i = [], [], [], 0
    raw = re.sub(r"\\\n", " ", text).split("\n")
    while i < len(raw):
        lines.append(raw[i])
        m = _HEREDOC.search(raw[i])
        if m:
            end = next((j for j in range(i + 1, len(raw)) if raw[j].strip() == m.group(2)), len(raw))
            body = "\n".join(raw[i + 1:end])
            if re.search(r"\bpython", raw[i]):
                scripts.append(body)
            else:
                values.append((body, True))
            i = end
        i += 1
    compared: set[str] = set()
    for line in (x for x in lines if not x.lstrip().startswith("#")):
        for test in re.findall(r"\[\[?\s(.*?)\s\]\]?|\btest\s+([^;&|]*)", line):
            words = _split(" ".join(test))
            for j, word in enumerate(words):
                beside = words[max(j - 1, 0):j] + words[j + 1:j + 2]
                if any(re.fullmatch(r"==?|!=|=~|-(eq|ne|lt|le|gt|ge)", w) for w in beside):
                    compared |= set(re.findall(r"\$\{?(\w+)", word))
                    if "$" not in word:
                        values.append((word, True))
        for grep in re.findall(r"\bgrep\s+(.*)", line):
            words, j = _split(re.split(r"[|;&]", grep)[0]), 0
            while j < len(words) and words[j].startswith("-"):
                if words[j] == "-e" and j + 1 < len(words):
                    values.append((_unregex(words[j + 1]), True))
                j += 2 if words[j] in ("-e", "-f", "-m", "-A", "-B", "-C") else 1
            if j < len(words) and "-e" not in words:
                compared |= set(re.findall(r"\$\{?(\w+)", words[j]))
                values.append((_unregex(words[j]), True))
    assigned = re.findall(r"^\s*(?:export\s+|local\s+)?([A-Za-z_]\w*)=['\"]?([^'\"$`\s]*)", text, re.M)
    return values + [(value, name in compared) for name, value in assigned], scripts
