"""Property-based fuzzing (hypothesis) of the two parsers of untrusted input: the terminal output
cleaner and the task loader. No Docker. Reproducible: ``derandomize=True`` and no example
database, so CI runs the same examples every time; set ``TERMINAL_ENV_FUZZ_SCALE=20`` locally to
run twenty times as many.

Properties:

* ``clean_text`` / ``strip_ansi`` / ``truncate_middle`` / ``OutputBuffer`` never raise on any
  bytes; ``clean_text``'s result has no ESC and no control character but tab and newline;
  plain text passes through unchanged; ``truncate_middle`` keeps exactly ``max_chars`` characters
  of head and tail around its marker; an ``OutputBuffer`` keeps its bounds and its value does not
  depend on how the same bytes were chunked.
* ``read_task`` returns ``(Task | None, problems)`` and never raises; ``load_task`` returns a Task
  or raises ``TaskFormatError`` naming the task and each problem's file; ``validate`` returns a
  list of Problems. Inputs are valid fixtures mutated: random or mutated ``task.toml`` /
  ``task.yaml`` / ``docker-compose.yaml`` / ``solution.yaml``, invalid UTF-8, missing and extra
  files, symlinks out of the task, loops, dangling links, special files.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
import os
import re
import shutil
import socket
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from terminal_env.errors import ConfigError
from terminal_env.output import OutputBuffer, clean_text, strip_ansi, truncate_middle
from terminal_env.tasks import Problem, Task, TaskFormatError, load_task, read_task, validate

SCALE = int(os.environ.get("TERMINAL_ENV_FUZZ_SCALE", "1"))


def fuzz(n: int) -> settings:
    return settings(max_examples=n * SCALE, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ==== output cleaner ===========================================================================

# Fragments a terminal really sends, cut anywhere: the fuzzer splices them with random bytes.
TERMINAL_FRAGMENTS = [
    b"\x1b", b"\x1b[", b"\x1b[31", b"\x1b[1;31m", b"\x1b[0m", b"\x1b[?1049h", b"\x1b[2J",
    b"\x1b]", b"\x1b]0;title", b"\x07", b"\x1b\\", b"\x1bP", b"\x1b_apc", b"\x1b(", b"\x1b(B",
    b"\x1b=", b"\x1b7", b"\x9b", b"\xc2\x9b", b"\xc2\x85", b"\xc2\x90", b"\r", b"\r\n", b"\n",
    b"\t", b"\x08", b"\x7f", b"\x00", b"\xff", b"\xfe", b"\xe2\x82", b"\xe2\x82\xac", b"\xf0\x9f",
    b"\xed\xa0\x80", "é€😀".encode(), b"progress 10%", b" ",
]
terminal_bytes = st.lists(
    st.one_of(
        st.sampled_from(TERMINAL_FRAGMENTS),
        st.binary(max_size=40),
        st.builds(lambda b, n: b * n, st.sampled_from([b"\r", b"\x08", b"\x1b", b"\x00", b"a"]),
                  st.integers(0, 3000)),  # storms of CR, backspace, ESC, NUL
    ),
    max_size=30,
).map(b"".join)

# What clean_text may leave: no C0 control but tab and newline, no DEL, no C1 (its docstring:
# "other control characters dropped").
FORBIDDEN_AFTER_CLEAN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@fuzz(400)
@given(terminal_bytes)
def test_clean_text_never_raises_and_leaves_no_controls(data):
    out = clean_text(data)
    assert isinstance(out, str)
    assert "\x1b" not in out
    assert not FORBIDDEN_AFTER_CLEAN.search(out), repr(out)
    assert "\r" not in out  # CRs are applied (or normalised with \r\n), never passed on
    # bytes and the same bytes decoded give the same text
    assert clean_text(data.decode("utf-8", errors="replace")) == out


@fuzz(200)
@given(st.text(max_size=300))
def test_clean_text_of_any_str_leaves_no_controls(text):
    out = clean_text(text)
    assert "\x1b" not in out and not FORBIDDEN_AFTER_CLEAN.search(out)
    assert isinstance(strip_ansi(text), str)


# Text with no control character at all (Unicode category Cc) is plain: nothing to remove.
plain_text = st.text(
    st.characters(blacklist_categories=("Cc", "Cs")) | st.sampled_from("\n\t"), max_size=200)


@fuzz(200)
@given(plain_text)
def test_plain_text_passes_through_unchanged(text):
    assert strip_ansi(text) == text
    assert clean_text(text) == text
    assert clean_text(text.encode("utf-8")) == text


complete_sequences = st.sampled_from([
    "\x1b[0m", "\x1b[1;31m", "\x1b[?25l", "\x1b[2K", "\x1b[10;20H", "\x1b]0;a title\x07",
    "\x1b]8;;http://x\x1b\\", "\x1bPq#0\x1b\\", "\x1b(B", "\x1b=", "\x1b>", "\x1b7", "\x1bc",
])


@fuzz(200)
@given(st.lists(st.one_of(plain_text, complete_sequences), max_size=12))
def test_strip_ansi_removes_complete_sequences_only(parts):
    # A printable character right after a sequence must not be eaten, hence the "." joins.
    text = ".".join(parts)
    # the sequence-only parts vanish but their "." separators stay
    expected = ".".join("" if p.startswith("\x1b") else p for p in parts)
    assert strip_ansi(text) == expected


def test_clean_text_storms_are_fast_and_bounded():
    # the last ESC takes the first "x" as a two-byte escape; the other ESCs are cells of the line
    # (dropped at the end), which the backspaces and the CR return over for "y" to overwrite.
    data = b"\x1b" * 100_000 + b"x" * 1000 + b"\x08" * 200_000 + b"\r" * 200_000 + b"y"
    assert clean_text(data) == "y" + "x" * 999


# ---- truncate_middle --------------------------------------------------------------------------


@fuzz(300)
@given(st.text(max_size=400) | terminal_bytes.map(clean_text), st.integers(-5, 500),
       st.floats(0, 1))
def test_truncate_middle_keeps_max_chars_of_head_and_tail(text, max_chars, head_fraction):
    out, cut = truncate_middle(text, max_chars, head_fraction)
    if max_chars <= 0 or len(text) <= max_chars:
        assert (out, cut) == (text, False)
        return
    assert cut
    head_n = int(max_chars * head_fraction)
    tail_n = max_chars - head_n
    assert 0 <= head_n <= max_chars
    head, tail = text[:head_n], text[len(text) - tail_n:]
    assert out.startswith(head) and out.endswith(tail)
    dropped = text[head_n:len(text) - tail_n]
    marker = out[len(head):len(out) - len(tail)]
    assert marker == (f"\n[... {len(dropped)} characters ({dropped.count(chr(10))} lines) "
                      "truncated ...]\n")
    assert len(out) - len(marker) == max_chars  # exactly max_chars of the text are kept


# ---- OutputBuffer -----------------------------------------------------------------------------


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]  # may hold empty chunks


@fuzz(300)
@given(terminal_bytes | st.binary(max_size=600), st.integers(0, 200), st.integers(0, 200),
       st.lists(st.integers(0, 5000), max_size=20), st.lists(st.integers(0, 5000), max_size=20))
def test_output_buffer_is_bounded_and_chunking_independent(data, head_limit, tail_limit,
                                                           cuts_a, cuts_b):
    values = []
    for cuts in (cuts_a, cuts_b, []):
        buf = OutputBuffer(head_limit=head_limit, tail_limit=tail_limit)
        for chunk in chunked(data, cuts):
            buf.feed(chunk)
        assert len(buf.head) <= head_limit and len(buf.tail) <= tail_limit
        assert buf.total == len(data)
        assert buf.head == data[:head_limit]
        rest = data[head_limit:]
        assert buf.tail == (rest[-tail_limit:] if tail_limit else b"")
        assert buf.dropped == len(data) - len(buf.head) - len(buf.tail) >= 0
        value = buf.getvalue()
        if buf.dropped == 0:
            assert value == data
        else:
            marker = f"\n[... {buf.dropped} bytes of output not kept ...]\n".encode()
            assert value == buf.head + marker + buf.tail
        values.append((buf.head, buf.tail, buf.total, value))
    assert values[0] == values[1] == values[2]
    assert isinstance(clean_text(values[0][3]), str)


# ==== task loader ==============================================================================

TASKS = Path(__file__).parent / "data" / "tasks"
HARBOR = TASKS / "harbor-sum"
TB1 = TASKS / "tb1-grep"


def check_loader(path: Path) -> tuple[Task | None, list[Problem]]:
    """The loader's contract on one directory; returns what read_task gave."""
    task, problems = read_task(path)  # never raises
    assert task is None or isinstance(task, Task)
    assert isinstance(problems, list) and all(isinstance(p, Problem) for p in problems)
    assert all(p.severity in ("error", "warning") and p.file for p in problems)
    errors = [p for p in problems if p.severity == "error"]
    assert (task is None) == bool(errors), problems
    if task is not None:
        assert task.warnings == problems

    for strict in (False, True):
        try:
            loaded = load_task(path, strict=strict)
        except TaskFormatError as exc:
            assert isinstance(exc, ConfigError)
            assert task is None or (strict and problems)
            message = str(exc)
            assert str(path) in message
            assert exc.problems == problems
            for p in exc.problems:
                assert str(p) in message  # each problem names its file (and field)
        else:
            assert task is not None and not (strict and problems)
            assert loaded == task

    found = validate([path])
    assert isinstance(found, list) and all(isinstance(p, Problem) for p in found)
    if task is None:
        assert found  # a task that does not load is never reported clean
    strict_found = validate([path], strict=True)
    assert all(p.severity == "error" for p in strict_found) and len(strict_found) == len(found)
    return task, problems


def test_fixtures_load_clean():
    for fixture in (HARBOR, TB1):
        task, problems = check_loader(fixture)
        assert task is not None and not [p for p in problems if p.severity == "error"]


# ---- value strategies -------------------------------------------------------------------------

scalar = st.one_of(
    st.none(), st.booleans(),
    st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 1, 2**63 - 1, -(2**63), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([math.nan, math.inf, -0.0]),
    st.text(max_size=20), st.sampled_from(["", "2G", "512M", "1e400G", "9" * 400 + "G", "/abs",
                                           "rel/path", "org/name", "public", "allowlist",
                                           "separate", "shared", "train", "linux", "é\x00\u202e"]),
    st.dates(), st.datetimes(), st.times(),
)
values = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=8) | st.sampled_from(["name", "source", "env", "cpus", "memory_mb"]),
        inner, max_size=4),
    max_leaves=12,
)


def toml_string(text: str) -> str:
    """A basic TOML string; surrogates (not encodable) are left out."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}"
                         for c in text if not 0xD800 <= ord(c) <= 0xDFFF) + '"'


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_string(key)


def toml_value(value: Any) -> str | None:
    """TOML for ``value``; None for what TOML cannot hold (null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") \
            if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        items = [v for v in map(toml_value, value) if v is not None]
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        items = [f"{toml_key(str(k))} = {v}" for k, v in
                 ((k, toml_value(v)) for k, v in value.items()) if v is not None]
        return "{" + ", ".join(items) + "}"
    raise TypeError(value)


def dump_toml(data: dict[str, Any]) -> str:
    """Top-level scalars, then one [table] per top-level dict (sub-tables inline)."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            tables.append((key, value))
        elif (text := toml_value(value)) is not None:
            lines.append(f"{toml_key(key)} = {text}")
    for key, table in tables:
        lines.append(f"\n[{toml_key(key)}]")
        lines += [f"{toml_key(str(k))} = {t}" for k, v in table.items()
                  if (t := toml_value(v)) is not None]
    return "\n".join(lines) + "\n"


HARBOR_DATA = tomllib.loads((HARBOR / "task.toml").read_text())
HARBOR_FIELDS = [
    "version", "schema_version", "source", "artifacts", "steps", "task", "task.name",
    "task.keywords", "task.authors", "metadata", "metadata.split", "metadata.tags",
    "metadata.category", "metadata.canary", "metadata.terminal_env",
    "metadata.terminal_env.check_weights", "metadata.terminal_env.protected_paths",
    "metadata.terminal_env.workdir", "metadata.terminal_env.verifier_mode",
    "metadata.terminal_env.artifacts", "metadata.terminal_env.typo",
    "verifier", "verifier.timeout_sec", "verifier.env", "verifier.user",
    "verifier.environment_mode", "verifier.environment", "verifier.environment.cpus",
    "verifier.environment.memory", "verifier.environment.network_mode",
    "agent", "agent.timeout_sec", "agent.user", "environment", "environment.build_timeout_sec",
    "environment.docker_image", "environment.os", "environment.cpus", "environment.memory_mb",
    "environment.memory", "environment.storage_mb", "environment.storage", "environment.gpus",
    "environment.allow_internet", "environment.network_mode", "environment.env",
    "solution", "solution.env", "unknown_top", "environment.unknown",
]


def set_path(data: Any, dotted: str, value: Any, delete: bool) -> Any:
    """``data`` with ``dotted`` set to ``value`` (or deleted), creating tables on the way."""
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    if delete:
        node.pop(last, None)
    else:
        node[last] = value
    return data


edits = st.lists(st.tuples(st.sampled_from(HARBOR_FIELDS), values, st.booleans()), max_size=5)

# ---- task directory mutations -----------------------------------------------------------------

SYMLINK_TARGETS = ["outside_file", "outside_dir", "dangling", "self_loop", "parent", "root_file"]
file_bytes = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", errors="surrogatepass")),
    st.sampled_from([b"", b"\xff\xfe\x00", b"   \n\t", b"# title\n\nDo it.\n", b"\x00" * 50]),
)


def file_ops(files: list[str]) -> st.SearchStrategy:
    where = st.sampled_from(files)
    return st.lists(st.one_of(
        st.tuples(st.just("remove"), where),
        st.tuples(st.just("write"), where, file_bytes),
        st.tuples(st.just("flip"), where, st.integers(0, 10_000), st.integers(0, 255)),
        st.tuples(st.just("truncate"), where, st.integers(0, 10_000)),
        st.tuples(st.just("symlink"), where, st.sampled_from(SYMLINK_TARGETS)),
        st.tuples(st.just("dir"), where),  # a directory where a file is expected
        st.tuples(st.just("special"), where, st.sampled_from(["fifo", "socket"])),
    ), max_size=4)


def apply_ops(root: Path, task: Path, ops: list[tuple]) -> None:
    outside_dir = root / "outside"
    outside_dir.mkdir(exist_ok=True)
    (outside_dir / "secret.txt").write_text("secret\n")
    for op, rel, *args in ops:
        target = task / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif os.path.lexists(target):
            target.unlink()  # a file, a link, a FIFO or a socket (never opened: a FIFO blocks)
        if op == "remove":
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError:  # an earlier op made a parent a file or a link: skip this one
            continue
        if op == "write":
            target.write_bytes(args[0])
        elif op in ("flip", "truncate"):
            source = (HARBOR if (HARBOR / rel).exists() else TB1) / rel
            data = bytearray(source.read_bytes() if source.is_file() else b"x = 1\n")
            if op == "flip" and data:
                data[args[0] % len(data)] = args[1]
            elif op == "truncate":
                del data[args[0] % (len(data) + 1):]
            target.write_bytes(bytes(data))
        elif op == "symlink":
            link = {
                "outside_file": outside_dir / "secret.txt", "outside_dir": outside_dir,
                "dangling": root / "nowhere", "self_loop": target, "parent": task,
                "root_file": Path("/etc/hostname"),
            }[args[0]]
            target.symlink_to(link)
        elif op == "dir":
            target.mkdir()
        elif op == "special":
            if args[0] == "fifo":
                os.mkfifo(target)
            else:
                sock = socket.socket(socket.AF_UNIX)
                try:
                    sock.bind(str(target))
                except OSError:  # path too long for a socket: a FIFO then
                    os.mkfifo(target)
                finally:
                    sock.close()


HARBOR_FILES = ["task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh",
                "tests/test_sum.py", "solution/solve.sh", "environment", "tests", "solution",
                "environment/docker-compose.yaml", "tests/Dockerfile", "environment/extra",
                "tests/extra", "task.yaml"]
TB1_FILES = ["task.yaml", "docker-compose.yaml", "Dockerfile", "run-tests.sh", "solution.sh",
             "solution.yaml", "tests", "tests/test_outputs.py", "make_log.py", "task.toml",
             "tests/extra", "docker-compose.yml"]


def fixture_copy(root: Path, fixture: Path) -> Path:
    task = root / "task-dir"
    shutil.copytree(fixture, task, symlinks=True)
    return task


@fuzz(250)
@given(edits, file_ops(HARBOR_FILES))
def test_harbor_loader_mutated_toml_and_files(toml_edits, ops):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = fixture_copy(root, HARBOR)
        data = copy.deepcopy(HARBOR_DATA)
        for dotted, value, delete in toml_edits:
            data = set_path(data, dotted, value, delete)
        text = dump_toml(data)
        (task / "task.toml").write_text(text, encoding="utf-8")
        apply_ops(root, task, ops)
        check_loader(task)


# TOML-ish text: the fixture's own lines, shuffled, cut and spliced with random text.
toml_lines = (HARBOR / "task.toml").read_text().splitlines()
tomlish = st.lists(
    st.sampled_from(toml_lines) | st.text(max_size=30) | st.sampled_from([
        "[environment]", "[[steps]]", "[metadata.terminal_env]", "a = " + "[" * 3000,
        "b = " + "{c = " * 3000, 'memory = "' + "9" * 400 + 'G"', "cpus = nan", "cpus = -inf",
        "timeout_sec = -1", "timeout_sec = 1e400", "timeout_sec = 99999999999999999999999",
        "gpus = 9223372036854775808", "x = 1979-05-27T07:32:00Z", "artifacts = [1, {}]",
    ]),
    max_size=25,
).map("\n".join)


@fuzz(250)
@given(tomlish | st.text(max_size=300), st.binary(max_size=100))
def test_harbor_loader_tomlish_text(text, instruction):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = fixture_copy(root, HARBOR)
        (task / "task.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
        (task / "instruction.md").write_bytes(instruction)
        check_loader(task)


# ---- Terminal-Bench 1.x -----------------------------------------------------------------------

TB1_YAML = yaml.safe_load((TB1 / "task.yaml").read_text())
TB1_COMPOSE = yaml.safe_load((TB1 / "docker-compose.yaml").read_text())
TB1_FIELDS = ["instruction", "descriptions", "tags", "parser_name", "max_agent_timeout_sec",
              "max_test_timeout_sec", "run_tests_in_same_shell", "test_scripts", "split",
              "canary", "difficulty", "category", "terminal_env", "terminal_env.workdir",
              "terminal_env.check_weights", "terminal_env.protected_paths",
              "terminal_env.verifier_mode", "terminal_env.typo", "unknown_key"]
COMPOSE_FIELDS = ["services", "services.client", "services.client.build",
                  "services.client.build.context", "services.client.build.dockerfile",
                  "services.client.build.args", "services.client.image",
                  "services.client.environment", "services.client.working_dir",
                  "services.other", "services.other.image"]

# Snippets YAML parses into odd shapes: aliases (a small "billion laughs", self-reference),
# non-mapping tops, bad timestamps, tags, deep nesting, duplicate and unhashable keys.
YAML_SNIPPETS = [
    "a: &a [x, x]\nb: &b [*a, *a, *a]\nc: &c [*b, *b, *b]\ninstruction: *c\n",
    "descriptions: &d [{key: base, description: hi, self: *d}]\n",
    "terminal_env: &t {workdir: /app, check_weights: *t}\n", "&x [*x]\n",
    "- just\n- a list\n", "just a string\n", "42\n", "~\n", "", "---\n---\n",
    "instruction: x\ndifficulty: 2001-13-01\n", "instruction: 2001-02-30\n",
    "instruction: x\nmax_agent_timeout_sec: .nan\n", "max_test_timeout_sec: -.inf\n",
    "instruction: !!python/object:os.system x\n", "instruction: !!binary '@@@'\n",
    "? [a, b]\n: c\n", "instruction: x\ninstruction: y\n", "[" * 600, "{a: " * 600,
    "services: {1: {}, 2: {}}\n", "services: {client: {environment: FOO=bar}}\n",
    "services: {client: {environment: 5}}\n", "services: {client: {build: {context: /}}}\n",
    "services: {client: {build: '../..'}}\n", "services: {client: {build: {dockerfile: '\\0'}}}\n",
    "services: {client: {environment: [A=${T_BENCH_TEST_DIR}, B=${OTHER}, C]}}\n",
    "- {command: ls, min_timeout_sec: .inf}\n- {command: x, append_enter: false}\n",
    "- command\n", "{command: x}\n", "- {command: [1]}\n", "instruction: \"\\ud800\"\n",
]
yaml_text = st.one_of(
    st.sampled_from(YAML_SNIPPETS),
    st.lists(st.sampled_from(YAML_SNIPPETS) | st.text(max_size=30), max_size=6).map("\n".join),
    st.text(max_size=200),
)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that also writes a time of day (YAML has no such type) as its ISO string."""


_Dumper.add_representer(dt.time, lambda d, v: d.represent_str(v.isoformat()))


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, allow_unicode=True)


tb1_edits = st.lists(st.tuples(st.sampled_from(TB1_FIELDS), values, st.booleans()), max_size=4)
compose_edits = st.lists(st.tuples(st.sampled_from(COMPOSE_FIELDS), values, st.booleans()),
                         max_size=4)


@fuzz(250)
@given(tb1_edits, compose_edits, file_ops(TB1_FILES))
def test_tb1_loader_mutated_yaml_and_files(task_edits, compose_changes, ops):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = fixture_copy(root, TB1)
        data = copy.deepcopy(TB1_YAML)
        for dotted, value, delete in task_edits:
            data = set_path(data, dotted, value, delete)
        compose = copy.deepcopy(TB1_COMPOSE)
        for dotted, value, delete in compose_changes:
            compose = set_path(compose, dotted, value, delete)
        (task / "task.yaml").write_text(dump_yaml(data), encoding="utf-8")
        (task / "docker-compose.yaml").write_text(dump_yaml(compose), encoding="utf-8")
        apply_ops(root, task, ops)
        check_loader(task)


@fuzz(250)
@given(st.sampled_from(["task.yaml", "docker-compose.yaml", "solution.yaml"]), yaml_text,
       st.booleans())
def test_tb1_loader_random_yaml(name, text, drop_solution_sh):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task = fixture_copy(root, TB1)
        if drop_solution_sh or name == "solution.yaml":
            (task / "solution.sh").unlink()  # so solution.yaml is read
        (task / name).write_text(text, encoding="utf-8", errors="surrogatepass")
        check_loader(task)


def test_validate_on_paths_that_are_not_tasks():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "file").write_text("x")
        (root / "loop").symlink_to(root / "loop")
        (root / "empty").mkdir()
        for path in (root / "file", root / "loop", root / "empty", root / "missing",
                     root / "nul\x00byte"):
            found = validate([path])
            assert len(found) == 1 and found[0].severity == "error" and str(path) in found[0].file
            task, problems = read_task(path)
            assert task is None and problems and problems[0].severity == "error"
