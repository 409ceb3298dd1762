"""The gate's probes for tests that can be fooled without solving the task.

A task's tests must hold even when the agent rewrites everything it can. Three probes look for
the ways in which naive tests do not, for any task (bundled or imported), from the outside:

* **input rewrite** (:func:`rewrite_inputs`): the files the task's build added to its image (its
  inputs: logs, tables, configs) are replaced by small valid-looking versions of themselves (the
  first lines of a text file, the first element of each JSON list, inside gzip too), then the
  oracle's solution runs on them. If checks pass while reading those files themselves, or all
  pass while the oracle's outputs changed, the tests recompute their expectations from files
  that the agent can rewrite: an agent can replace the inputs with trivial ones and answer for
  those.
* **constant policy** (:func:`constant_variants`): the files the oracle wrote, with every
  categorical field (a JSON key, a table column or a line whose few values repeat) set to one
  value for all records (approve-all, deny-all), and the same files empty. Partial credit above
  a small share for such an answer rewards a policy that knows nothing about the instance.
* **same instance** (:func:`instance_digest`): the image built twice without the build cache
  must hold the same files; a build that draws from ``os.urandom`` or the clock makes a new
  instance each time, and scores are not comparable across hosts.

The probes only read and write the sandbox through the engine (never a shell tool the task's
image might lack), and keep every file's owner and mode when they rewrite it.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import shlex
from collections import Counter
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any, Callable

from ..actions import Submit, action_to_text
from ..models.simple import OracleBackend, ScriptedBackend, fenced
from ..sandbox import Sandbox, SandboxConfig

#: partial reward that flags a constant answer
CONSTANT_MAX = 0.3
_MARK = "/var/tmp/.te-probe-mark"
_STAGE = "/var/tmp/.te-probe-stage"
_PRUNE = ("/proc", "/sys", "/dev", "/run", "/tmp", "/var/tmp")
#: trees whose files are the system's, not the task's inputs or the agent's outputs
_SYSTEM = ("/usr/", "/bin/", "/sbin/", "/lib", "/etc/", "/var/lib/", "/var/cache/", "/var/log/apt/",
           "/var/log/dpkg.log", "/var/log/alternatives.log", "/root/.cache/", "/.terminal-env/",
           "/opt/terminal-env/", "/boot/", "/snap/")
_VOLATILE = ("/.git/", "/__pycache__/", "/.pytest_cache/", "/node_modules/")
_CODE = {".py", ".sh", ".c", ".h", ".cc", ".cpp", ".hpp", ".go", ".rs", ".js", ".ts", ".java", ".rb",
         ".pl", ".mk", ".cmake", ".s", ".so", ".a", ".o", ".pyc", ".whl", ".tar", ".zip"}
#: outputs that differ from run to run whatever the inputs (build logs, build trees)
_NOISE_DIRS = {"build", "CMakeFiles", "dist", ".cache", "target", "tmp"}
_NOISE_SUFFIXES = (".log", ".o", ".pid", ".lock", ".sock")
_MAX_FILE = 5_000_000
_MAX_FILES = 200
_MAX_OUTPUT = 300_000


def _prune_expr() -> str:
    return " -o ".join(f"-path {p}" for p in _PRUNE)


def listing(sb: Sandbox) -> dict[str, tuple[int, str, int]]:
    """``{path: (size, mtime, mode)}`` of every regular file outside the kernel's trees."""
    out = sb.exec(
        f"find / -xdev \\( {_prune_expr()} \\) -prune -o -type f -printf '%s\\t%T@\\t%m\\t%p\\n'",
        user="root", timeout=120, output_limit=64_000_000,
    ).stdout.decode("utf-8", "replace")
    files = {}
    for line in out.splitlines():
        parts = line.split("\t", 3)
        if len(parts) == 4 and parts[0].isdigit():
            files[parts[3]] = (int(parts[0]), parts[1], int(parts[2], 8))
    return files


@lru_cache(maxsize=8)
def _base_listing(image: str) -> dict[str, tuple[int, str, int]]:
    with Sandbox(SandboxConfig(image=image, task="probe-base")) as sb:
        return listing(sb)


def task_files(sb: Sandbox, base_image: str | None) -> list[str]:
    """Files the task's build added to its image or changed there, outside system trees."""
    now = listing(sb)
    base = _base_listing(base_image) if base_image else {}
    return sorted(p for p, meta in now.items() if base.get(p) != meta and _is_task_file(p))


def _is_task_file(path: str) -> bool:
    return not path.startswith(_SYSTEM) and not any(v in path for v in _VOLATILE) \
        and not path.endswith((".pyc", ".swp"))


# ---- input rewrite ------------------------------------------------------------------------

def _shrink_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_shrink_json(v) for v in value[:1]]
    if isinstance(value, dict):
        return {k: _shrink_json(v) for k, v in value.items()}
    return value


def _text_and_json(data: bytes) -> tuple[str | None, Any]:
    """The file as text (None if it is not UTF-8) and as JSON (None if it is not JSON)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, None
    if text.lstrip()[:1] in ("{", "["):
        try:
            return text, json.loads(text)
        except ValueError:
            pass
    return text, None


def shrink(data: bytes) -> bytes | None:
    r"""A small valid-looking version of an input file, or None when there is none.

    >>> shrink(b"head\nrow1\nrow2\nrow3\n")
    b'head\nrow1\n'
    >>> shrink(b'{"rows": [1, 2, 3], "n": 3}')
    b'{"rows": [1], "n": 3}'
    >>> gzip.decompress(shrink(gzip.compress(b"a\nb\nc\n")))
    b'a\nb\n'
    >>> shrink(b"one line\n") is None, shrink(b"\x00\x01\xff") is None
    (True, True)
    """
    if data[:2] == b"\x1f\x8b":
        try:
            inner = shrink(gzip.decompress(data))
        except (OSError, EOFError):
            return None
        return None if inner is None else gzip.compress(inner, mtime=0)
    text, value = _text_and_json(data)
    if text is None or "\x00" in text:
        return None
    if value is not None:
        small = json.dumps(_shrink_json(value))
        return None if json.loads(small) == value else small.encode()
    lines = text.splitlines(keepends=True)
    return "".join(lines[:2]).encode() if len(lines) >= 3 else None


def input_candidates(sb: Sandbox, files: list[str], protected: tuple[str, ...] = ()) -> dict[str, bytes]:
    """The task's input files that have a smaller valid-looking version: ``{path: new content}``.
    Programs and source code are left alone (rewriting them only breaks the oracle), and so are
    the task's ``protected_paths`` (the verifier already refuses any change there)."""
    meta = {p: m for p, m in listing(sb).items() if p in set(files)}
    out: dict[str, bytes] = {}
    for path in files:
        if any(path == p.rstrip("/") or path.startswith(p.rstrip("/") + "/") for p in protected):
            continue
        size, _, mode = meta.get(path, (0, "", 0))
        suffix = PurePosixPath(path).suffix.lower()
        if not 0 < size <= _MAX_FILE or mode & 0o111 or suffix in _CODE or path.endswith("Makefile"):
            continue
        small = shrink(sb.read_file(path, limit=_MAX_FILE + 1))
        if small is not None:
            out[path] = small
        if len(out) >= _MAX_FILES:
            break
    return out


def overwrite(sb: Sandbox, files: dict[str, bytes]) -> None:
    """Replace the content of existing files, keeping their owner and mode (and create missing
    ones, with their directories)."""
    staged = {f"{_STAGE}/{i}": data for i, data in enumerate(files.values())}
    sb.write_files(staged)
    script = ["set -e"]
    for i, path in enumerate(files):
        q = shlex.quote(path)
        script.append(f"mkdir -p $(dirname {q}) && cat {_STAGE}/{i} > {q}")
    script.append(f"rm -rf {_STAGE}")
    res = sb.exec("\n".join(script), user="root", timeout=120)
    if res.exit_code != 0:
        raise RuntimeError(f"could not rewrite the files: {res.stderr.decode(errors='replace')[-300:]}")


class ProbeOracle(OracleBackend):
    """The task's oracle, recording what the sandbox held before it ran (``inputs``: what
    ``look`` makes of the fresh sandbox) and what the solution wrote (``outputs``: path ->
    sha256, ``contents``: path -> bytes of small files); with ``rewrite``, those files are
    overwritten before the solution runs."""

    name = "oracle"

    def __init__(self, *, look: Callable[[Sandbox], dict[str, bytes]] | None = None,
                 rewrite: dict[str, bytes] | None = None) -> None:
        super().__init__()
        self.look = look
        self.rewritten = dict(rewrite or {})
        self.inputs: dict[str, bytes] = {}
        self.outputs: dict[str, str] = {}
        self.contents: dict[str, bytes] = {}
        self._sb: Sandbox | None = None

    def start_episode(self, env: Any, harness: Any) -> None:
        self._sb = env.sandbox
        if self.look is not None:
            self.inputs = self.look(self._sb)
        if self.rewritten:
            overwrite(self._sb, self.rewritten)
        self._sb.exec(f"touch {_MARK}", user="root", timeout=30)
        super().start_episode(env, harness)

    def complete(self, messages, *, tools=None, params=None):
        reply = super().complete(messages, tools=tools, params=params)
        if self._turn == 2 and self._sb is not None:
            self.outputs, self.contents = written_since_mark(self._sb)
        return reply


def is_noise(path: str) -> bool:
    """An output that a rerun changes anyway (a build log, a build tree): no evidence that the
    oracle's answer followed the rewritten inputs.

    >>> is_noise("/app/geo/build/CMakeFiles/CMakeOutput.log"), is_noise("/app/summary.json")
    (True, False)
    """
    parts = PurePosixPath(path).parts
    return path.endswith(_NOISE_SUFFIXES) or any(p in _NOISE_DIRS for p in parts[:-1])


def written_since_mark(sb: Sandbox) -> tuple[dict[str, str], dict[str, bytes]]:
    find = f"find / -xdev \\( {_prune_expr()} \\) -prune -o -type f -newer {_MARK} -size -20000k"
    res = sb.exec(f"{find} -printf 'size %s %p\\n'; {find} -print0 | xargs -0 -r sha256sum",
                  user="root", timeout=120, output_limit=16_000_000)
    hashes, sizes = {}, {}
    for line in res.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("size "):
            size, _, path = line[5:].partition(" ")
            sizes[path] = int(size)
            continue
        digest, _, path = line.partition("  ")
        if path in sizes and not any(v in path for v in _VOLATILE) and not path.endswith(".pyc"):
            hashes[path] = digest
    # what a constant answer may write: the task's own small files, never the system's accounts
    small = [p for p in sorted(hashes) if _is_task_file(p) and sizes[p] <= _MAX_OUTPUT][:50]
    return hashes, {p: sb.read_file(p, limit=_MAX_OUTPUT) for p in small}


# ---- constant policy ----------------------------------------------------------------------

def _categorical(values: list[Any]) -> list[Any] | None:
    """The values of a field by frequency, if it is categorical: at least 3 records, 2 to 4
    distinct values, some repeated."""
    if len(values) < 3:
        return None
    counts = Counter(json.dumps(v, sort_keys=True) for v in values)
    if not 2 <= len(counts) <= 4 or len(counts) == len(values):
        return None
    return [json.loads(k) for k, _ in counts.most_common()]


def _json_fields(value: Any, key: str = "", out: dict[str, list] | None = None) -> dict[str, list]:
    out = {} if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            # a dict keyed by record ids: its values are records, grouped under one name
            name = "*" if len(value) >= 3 and all(isinstance(x, dict) for x in value.values()) else k
            _json_fields(v, f"{key}.{name}", out)
    elif isinstance(value, list):
        for v in value:
            _json_fields(v, f"{key}[]", out)
    elif isinstance(value, (str, bool, int)) and not isinstance(value, float):
        out.setdefault(key, []).append(value)
    return out


def _json_set(value: Any, key: str, choose: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        star = len(value) >= 3 and all(isinstance(x, dict) for x in value.values())
        return {k: _json_set(v, f"{key}.{'*' if star else k}", choose) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_set(v, f"{key}[]", choose) for v in value]
    return choose.get(key, value)


def constant_version(data: bytes, rank: int) -> bytes | None:
    r"""``data`` with each categorical field set, in every record, to its ``rank``-th most
    common value (None when the file has no categorical field).

    >>> constant_version(b'{"r1": {"d": "approved"}, "r2": {"d": "denied"}, "r3": {"d": "denied"}}', 1)
    b'{"r1": {"d": "approved"}, "r2": {"d": "approved"}, "r3": {"d": "approved"}}'
    >>> constant_version(b"id,ok\n1,yes\n2,no\n3,no\n", 0)
    b'id,ok\n1,no\n2,no\n3,no\n'
    >>> constant_version(b"42\n", 0) is None
    True
    """
    text, value = _text_and_json(data)
    if text is None:
        return None
    if value is not None:
        choose = {}
        for key, values in _json_fields(value).items():
            ranked = _categorical(values)
            if ranked:
                choose[key] = ranked[min(rank, len(ranked) - 1)]
        return json.dumps(_json_set(value, "", choose)).encode() if choose else None
    lines = text.splitlines()
    if len(lines) < 3:
        return None
    delimiter = "," if sum("," in ln for ln in lines) >= len(lines) - 1 else None
    rows = list(csv.reader(lines, delimiter=",")) if delimiter else [ln.split() for ln in lines]
    body = rows[1:] if delimiter else rows
    width = min((len(r) for r in body), default=0)
    changed = False
    for col in range(width):
        ranked = _categorical([r[col] for r in body])
        if ranked:
            for r in body:
                r[col] = ranked[min(rank, len(ranked) - 1)]
            changed = True
    if not changed:
        return None
    if delimiter:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        return buf.getvalue().encode()
    return ("\n".join(" ".join(r) for r in rows) + "\n").encode()


def constant_variants(contents: dict[str, bytes]) -> dict[str, dict[str, bytes]]:
    """Knowledge-free answers built from the oracle's outputs: ``{name: {path: content}}``."""
    variants: dict[str, dict[str, bytes]] = {}
    if contents:
        variants["empty outputs"] = {p: b"" for p in contents}
    for rank, name in ((0, "most common value everywhere"), (1, "second value everywhere")):
        # only the transformed files: the oracle's other outputs carry its knowledge
        files = {p: v for p, c in contents.items() if (v := constant_version(c, rank)) is not None}
        if files:
            variants[name] = files
    return variants


class WriteFiles(ScriptedBackend):
    """An agent that writes a fixed set of files (keeping existing files' owner and mode), then
    submits: a constant policy."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__([fenced(action_to_text(Submit()))], name="constant")
        self.native_harness = "generic"
        self.files = files

    def start_episode(self, env: Any, harness: Any) -> None:
        overwrite(env.sandbox, self.files)
        super().start_episode(env, harness)


# ---- same instance ------------------------------------------------------------------------

_NOT_INSTANCE = ("/var/log/", "/var/cache/", "/var/lib/apt/", "/var/lib/dpkg/")
_HOST_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/etc/ld.so.cache")
_HASH_LIST = "/var/tmp/.te-probe-hash-list"


def instance_digest(image: str, base_image: str | None = None) -> dict[str, str]:
    """sha256 of every file of ``image`` that belongs to the task's instance (the volatile
    records of package managers, caches, logs and Git's object store left out).

    Files whose size, mtime and mode are those of the same path in ``base_image`` are the base
    image's own (a build that rewrites a file gives it a new mtime): they are listed as such,
    not read, so a task on a 500 MB image costs a listing and the hashing of its own files."""
    base = _base_listing(base_image) if base_image else {}
    out: dict[str, str] = {}
    todo: list[str] = []
    with Sandbox(SandboxConfig(image=image, task="probe-instance")) as sb:
        for path, meta in listing(sb).items():
            if path.startswith(_NOT_INSTANCE) or path in _HOST_FILES or path.endswith(".pyc") \
                    or "/.git/" in path or "/__pycache__/" in path:
                continue
            if base.get(path) == meta:
                out[path] = "base {} {} {:o}".format(*meta)
            else:
                todo.append(path)
        if todo:
            sb.write_files({_HASH_LIST: "\0".join(todo).encode() + b"\0"})
            res = sb.exec(f"xargs -0 -r sha256sum < {_HASH_LIST}; rm -f {_HASH_LIST}", user="root",
                          timeout=300, output_limit=64_000_000)
            for line in res.stdout.decode("utf-8", "replace").splitlines():
                digest, _, path = line.partition("  ")
                if path:
                    out[path] = digest
    return out


def digest_of(files: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in sorted(files.items())).encode()).hexdigest()
