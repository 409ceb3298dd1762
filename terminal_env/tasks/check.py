"""The quality gate of a task: build it, then probes through ``TerminalEnv``.

* ``oracle`` must reach strict success (reward 1.0);
* ``nop`` must not succeed;
* ``snoop``, an agent that searches the filesystem for the task's tests, solution and expected
  values, must find none of them (and must not succeed either);
* the probes for tests that can be fooled without solving the task (:mod:`.probes`): the
  oracle on rewritten inputs (``rewrite``), knowledge-free answers (``constant``) and a second
  build without cache (``instance``).

The snooping agent looks for the files of ``tests/`` and ``solution/`` by name, for the pool's
canary string (every test and solution file carries it), and for distinctive lines of the test
files that appear neither in the instruction nor in the environment: if any of these is inside
the sandbox, the task leaks its verifier.

One broken task never stops the check of the others: every failure is caught and reported by
name with the reason.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import random
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import docker

from ..actions import Command
from ..agent import run_episode
from ..env import TerminalEnv
from ..errors import TerminalEnvError
from ..models.simple import NopBackend, ScriptedBackend
from ..sandbox import Sandbox, SandboxConfig
from ..sandbox.engine import get_client
from ..sandbox.images import map_base_image
from .build import build_image
from .load import load_task
from .model import files_digest, tree_files
from .probes import (
    CONSTANT_MAX,
    ProbeOracle,
    WriteFiles,
    constant_variants,
    input_candidates,
    instance_digest,
    is_noise,
    task_files,
)
from .scaffold import copy_problems

#: the probes for foolable tests that :func:`check_task` runs besides oracle, nop and snoop
PROBES = ("rewrite", "constant", "instance")
REWRITE_FIX = (
    "the tests recompute their expectations from files the agent can rewrite: keep the expected "
    "values (or a hidden copy of the inputs, or the seed that makes them) in tests/, or list the "
    "inputs in protected_paths"
)
CONSTANT_FIX = (
    "partial credit rewards an answer that knows nothing about the instance: make each check "
    "need instance knowledge (e.g. both an approval and a denial right), or weight such checks down"
)
INSTANCE_FIX = (
    "two builds of the image give different instances: seed the generator of the task's data "
    "(random.Random(N), not os.urandom or the clock), so results compare across hosts"
)

CANARY = "TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30"
_NEEDLES_FILE = "/tmp/.te-snoop-needles"
_MIN_LINE = 40


@dataclass
class CheckRow:
    task: str
    path: str
    split: str | None = None
    category: str | None = None
    difficulty: str | None = None
    build_s: float | None = None
    oracle: str = "-"
    nop: str = "-"
    snoop: str = "-"
    checks: int | None = None
    check_s: float | None = None
    ok: bool = False
    reason: str = ""
    snoop_hits: list[str] = field(default_factory=list)
    #: where the tests load agent-written code into their own process (static scan, then the
    #: files the oracle run's test process executed from outside the interpreter and the tests)
    in_process: list[str] = field(default_factory=list)
    #: the probes for foolable tests (probes.py): the oracle on rewritten inputs, constant
    #: answers, and the instance after a second build without cache
    rewrite: str = "-"
    constant: str = "-"
    instance: str = "-"
    #: sha256 of the task's files and the gate's code when it was checked: ``tasks check
    #: --resume`` checks a task again when either changed since (a regenerated pool, an edited
    #: family, other probes)
    digest: str = ""
    #: seconds per phase (build, oracle, nop, snoop and each probe): where the gate's time goes
    times: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def needles(task: Any) -> list[str]:
    """What a snooping agent searches for: the canary and distinctive lines of the tests."""
    given = task.instruction
    env_dir = Path(task.environment_dir)
    for f in sorted(env_dir.rglob("*")):
        if f.is_file() and f.stat().st_size < 2_000_000:
            given += "\n" + f.read_text(errors="replace")
    out = [CANARY]
    for src in sorted(task.verifier_files().values(), key=str):
        text = Path(src).read_text(errors="replace") if not isinstance(src, bytes) else src.decode(errors="replace")
        for line in text.splitlines():
            line = line.strip()
            if len(line) >= _MIN_LINE and line not in given and "CANARY" not in line:
                out.append(line)
    return sorted(set(out))[:400]


def _secret_files(task: Any) -> dict[str, bytes]:
    """Contents of the task's tests and solution, by name."""
    files: dict[str, bytes] = {}
    for name, src in {**task.verifier_files(), **(task.solution_files() or {})}.items():
        files[name] = src if isinstance(src, bytes) else Path(src).read_bytes()
    return files


def base_image_of(task: Any) -> str | None:
    """The image the task's Dockerfile starts FROM (after the offline mapping)."""
    for line in Path(task.dockerfile).read_text(errors="replace").splitlines():
        words = line.split()
        if words and words[0].upper() == "FROM":
            refs = [w for w in words[1:] if not w.startswith("--")]
            return map_base_image(refs[0]) if refs else None
    return None


_FIND = "find / -xdev \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f"
_GREP = ("grep -rIhoF -f {file} --exclude=.te-snoop-needles / --exclude-dir=proc --exclude-dir=sys "
         "--exclude-dir=dev 2>/dev/null | sort -u")


def innocent(task: Any, hits: list[str], wanted: list[str] | None = None) -> list[str]:
    """The snoop's hits less those already in the pristine base image: a common code line, a
    stock file or a file name the base image holds cannot be a leak of this task. The base
    image is searched only for what the snoop found (nothing, for a sound task). ``wanted``:
    the task's :func:`needles`, when the caller has them (they are read again otherwise)."""
    if not hits:
        return hits
    image = base_image_of(task)
    wanted = needles(task) if wanted is None else wanted

    def needle(hit: str) -> str:  # "FOUND-TEXT: <path>:#<n>", the n-th needle (from 1)
        ref = hit.rsplit(":", 1)[-1]
        n = int(ref[1:]) if ref.startswith("#") and ref[1:].isdigit() else 0
        return wanted[n - 1] if 0 < n <= len(wanted) else ref

    lines = {needle(h) for h in hits if h.startswith("FOUND-TEXT: ")}
    lines.discard(CANARY)
    copies = {h.split()[1] for h in hits if h.startswith("FOUND-COPY: ")}
    names = {h.rsplit("/", 1)[-1] for h in hits if h.startswith("FOUND-FILE: ")}
    if not image or not (lines or copies or names):
        return hits
    with Sandbox(SandboxConfig(image=image, task=f"{task.name}-baseline")) as sb:
        sb.write_files({_NEEDLES_FILE: "\n".join(sorted(lines)) + "\n",
                        _NEEDLES_FILE + "-sha": "\n".join(sorted(copies)) + "\n"})
        common_lines = set(sb.exec(
            _GREP.format(file=_NEEDLES_FILE), user="root", timeout=300, output_limit=4_000_000,
        ).stdout.decode("utf-8", "replace").splitlines()) if lines else set()
        common_hashes = set(sb.exec(
            f"{_FIND} -size -2000k -print0 2>/dev/null | xargs -0 -r sha256sum 2>/dev/null "
            f"| grep -F -f {_NEEDLES_FILE}-sha | cut -d' ' -f1 | sort -u",
            user="root", timeout=300, output_limit=4_000_000,
        ).stdout.decode().split()) if copies else set()
        find_expr = " -o ".join(f"-name {_shq(n)}" for n in sorted(names))
        common_names = set(sb.exec(
            f"{_FIND} \\( {find_expr} \\) -printf '%f\\n' 2>/dev/null | sort -u", user="root", timeout=300,
        ).stdout.decode().split()) if names else set()

    def leak(hit: str) -> bool:
        if hit.startswith("FOUND-TEXT: "):
            return needle(hit) not in common_lines
        if hit.startswith("FOUND-COPY: "):
            return hit.split()[1] not in common_hashes
        if hit.startswith("FOUND-FILE: "):
            return hit.rsplit("/", 1)[-1] not in common_names
        return True
    return [h for h in hits if leak(h)]


def snoop_commands(task: Any, wanted: list[str] | None = None) -> list[str]:
    """What a snooping agent runs: search the sandbox for the canary and distinctive lines of the
    tests (each line found printed once, as ``FOUND-TEXT: path:#n``, the n-th of
    :func:`needles`, so that the output stays short whatever the lines), copies of the test and solution files under
    any name (``FOUND-COPY: sha256  path``), files with their names, and the verifier's
    directories. :func:`innocent` then drops what the base image holds too."""
    secret = {k: v for k, v in _secret_files(task).items() if v}
    names = sorted({Path(n).name for n in secret} | {"solve.sh", "test_outputs.py"})
    find_expr = " -o ".join(f"-name {_shq(n)}" for n in names)
    lines = "\n".join(needles(task) if wanted is None else wanted)
    # Whole-file copies under any name: candidates by exact size, confirmed by sha256. A copy of
    # a test or solution file anywhere in the task's image is a leak, even when it came from the
    # build context: tests that need a file's content keep its hash, not a copy.
    sizes = " -o ".join(sorted({f"-size {len(b)}c" for b in secret.values()})) or "-size 0c"
    hashes_text = "\n".join(sorted({hashlib.sha256(b).hexdigest() for b in secret.values()})) or "0" * 64
    return [
        f"cat > {_NEEDLES_FILE} <<'TE_SNOOP_EOF'\n{lines}\nTE_SNOOP_EOF\n"
        f"cat > {_NEEDLES_FILE}-sha <<'TE_SNOOP_EOF'\n{hashes_text}\nTE_SNOOP_EOF",
        f"{_FIND} \\( {sizes} \\) -print0 2>/dev/null | xargs -0 -r sha256sum 2>/dev/null "
        f"| grep -F -f {_NEEDLES_FILE}-sha | sed 's/^/FOUND-COPY: /'",
        "ls -d /tests /solution /logs/verifier 2>/dev/null | sed 's/^/FOUND-DIR: /'; "
        f"{_FIND} \\( {find_expr} \\) -print 2>/dev/null | sed 's/^/FOUND-FILE: /'; "
        f"grep -rIoF -f {_NEEDLES_FILE} --exclude=.te-snoop-needles / --exclude-dir=proc --exclude-dir=sys "
        f"--exclude-dir=dev 2>/dev/null | awk -v nf={_NEEDLES_FILE} 'BEGIN {{ while ((getline l < nf) > 0) "
        "idx[l] = ++n } { i = index($0, \":\"); k = substr($0, i + 1); if (!(k in seen)) { seen[k] = 1; "
        "print \"FOUND-TEXT: \" substr($0, 1, i) (k in idx ? \"#\" idx[k] : k) } }'; echo SNOOP-DONE",
    ]


# Calls by which test code loads a module from a path into its own process.
_LOADERS = {
    "sys.path.insert", "sys.path.append", "spec_from_file_location", "SourceFileLoader",
    "run_path", "exec", "load_source",
}
IN_PROCESS_FIX = (
    "the tests load the agent's code into the test process, where it runs with the test runner's "
    "powers (it can end or rewrite the test run); run it in a subprocess instead "
    "(subprocess.run([sys.executable, '-c', ...]) or the program's command line), as the bundled "
    "tasks do"
)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def static_in_process(tests_dir: Path) -> list[str]:
    r"""``file:line: code`` for each call by which a test file loads code from outside the tests
    into its own process. Parsed, not grepped: code inside a string (a driver script the tests
    run in a subprocess) does not count, nor do paths under ``/tests`` or next to the test file.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> _ = (d / "test_a.py").write_text("import sys\nsys.path.insert(0, '/app')\n"
    ...     "sys.path.insert(0, '/tests')\nDRIVER = 'sys.path.insert(0, \"/app\")'\n")
    >>> static_in_process(d)
    ["test_a.py:2: sys.path.insert(0, '/app')"]
    """
    found = []
    for f in sorted(tests_dir.rglob("*.py")):
        text = f.read_text(errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue  # the tests themselves will say so
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            if name not in _LOADERS and name.rsplit(".", 1)[-1] not in _LOADERS - {"exec"}:
                continue
            code = ast.get_source_segment(text, node) or name
            if name == "exec" and not (node.args and isinstance(node.args[0], ast.Call)):
                continue  # exec of a literal or a variable: not a file
            if any(ok in code for ok in ("/tests", "__file__", "TEST_DIR")):
                continue  # the tests' own helpers
            found.append(f"{f.relative_to(tests_dir)}:{node.lineno}: {code[:120]}")
    return found


def _shq(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def check_task(path: str | Path, *, log: Callable[[str], None] = lambda m: None,
               probes: tuple[str, ...] = PROBES, **env_kw: Any) -> CheckRow:
    """Build ``path`` and run the probes (oracle, nop, snoop, then ``probes``); never raises for
    a broken task."""
    unknown = sorted(set(probes) - set(PROBES))
    if unknown:
        raise ValueError(f"unknown probes {unknown}; the probes are {', '.join(PROBES)}")
    row = CheckRow(task=Path(path).name, path=str(path))
    t_start = time.perf_counter()
    try:
        row.digest = task_digest(path)
        task = load_task(path)
        row.task, row.split, row.category, row.difficulty = task.name, task.split, task.category, task.difficulty
        t0 = time.perf_counter()
        build_image(task, log=log)
        row.build_s = row.times["build"] = round(time.perf_counter() - t0, 2)

        def lap(phase: str) -> None:  # the time since the last lap, as the phase's
            nonlocal t0
            t1 = time.perf_counter()
            row.times[phase] = round(t1 - t0, 2)
            t0 = t1

        def play(agent: Any, on_step: Any = None) -> tuple[float, Any, dict[str, Any]]:
            env = TerminalEnv(task, reward="partial_progress", max_steps=20, **env_kw)
            try:
                reward, info = run_episode(env, agent, on_step=on_step)
            finally:
                env.close()
            return reward, info["verification"], info

        # the oracle's run also finds the inputs the rewrite probe shrinks (before it writes)
        base, protected = base_image_of(task), tuple(getattr(task, "protected_paths", ()) or ())
        oracle = ProbeOracle(look=(lambda sb: input_candidates(sb, task_files(sb, base), protected))
                             if "rewrite" in probes else None)
        reward, res, _ = play(oracle)
        lap("oracle")
        row.oracle = f"{res.outcome.value} {reward:.2f}"
        row.checks = len(res.checks)
        problems = []
        row.in_process = static_in_process(Path(task.tests_dir)) + [
            f"the test process ran {m}" for m in res.guard_modules
        ]
        if row.in_process:
            problems.append(f"{IN_PROCESS_FIX}: " + "; ".join(row.in_process[:5]))
        if res.outcome.value != "passed":
            problems.append(f"oracle: {res.outcome.value}: {res.message[:300]} {res.log_tail[-300:]}")
        if len(res.checks) < 3:
            problems.append(f"the verifier reports {len(res.checks)} checks; at least 3 are needed")
        reward, res, _ = play(NopBackend())
        lap("nop")
        row.nop = f"{res.outcome.value} {reward:.2f}"
        if res.strict_success or res.masked:
            problems.append(f"nop: {res.outcome.value} (a task that does nothing must fail)")
        hits: list[str] = []

        def snooped(action: Any, observation: str, info: dict[str, Any]) -> None:
            hits.extend(re.findall(r"^FOUND-[A-Z]+: .*$", observation, flags=re.M))

        wanted = needles(task)  # read once: the snoop searches for them, innocent() names its hits by them
        snoop = ScriptedBackend.of_actions([Command(command=c, timeout=120) for c in snoop_commands(task, wanted)])
        reward, res, _ = play(snoop, snooped)
        lap("snoop")
        row.snoop_hits = hits = innocent(task, hits, wanted)
        row.snoop = f"{len(hits)} found, {res.outcome.value}"
        if hits:
            problems.append("snoop found: " + "; ".join(hits[:5]))
        if res.strict_success:
            problems.append("snoop succeeded without solving the task")
        if "rewrite" in probes:
            problems += _rewrite_probe(play, oracle, row)
            lap("rewrite")
        if "constant" in probes:
            problems += _constant_probe(play, oracle, row)
            lap("constant")
        if "instance" in probes:
            problems += _instance_probe(task, row, log)
            lap("instance")
        problems += copy_problems(task.path)  # the kit and environment files the tests copy
        row.ok = not problems
        row.reason = " | ".join(problems)
    except TerminalEnvError as exc:
        row.reason = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - one broken task must not stop the others
        row.reason = f"unexpected {type(exc).__name__}: {exc}"
    row.check_s = round(time.perf_counter() - t_start, 2)
    return row


def task_digest(path: str | Path) -> str:
    """What a check row is about: the digest of every file of the task directory, and of the
    gate's own code (a row written by another version of the probes is checked again)."""
    return files_digest({**tree_files(Path(path)), "\0gate": _gate_code()})


@functools.lru_cache(maxsize=1)
def _gate_code() -> bytes:
    here = Path(__file__).parent
    return b"".join((here / name).read_bytes() for name in ("check.py", "probes.py"))


def _rewrite_probe(play: Callable, oracle: ProbeOracle, row: CheckRow) -> list[str]:
    """The oracle on small versions of the task's inputs. Checks that pass while they read those
    inputs themselves (the guard records what each test opens), or tests that all pass while the
    oracle's outputs changed, trust files the agent can rewrite."""
    if not oracle.inputs:
        row.rewrite = "no input to rewrite"
        return []
    probe = ProbeOracle(rewrite=oracle.inputs)
    reward, res, _ = play(probe)
    changed = sorted(p for p in set(probe.outputs) | set(oracle.outputs)
                     if probe.outputs.get(p) != oracle.outputs.get(p) and p not in probe.rewritten
                     and not is_noise(p))
    inputs = sorted(probe.rewritten)
    row.rewrite = f"{res.outcome.value} {reward:.2f} on {len(inputs)} rewritten input(s)"
    if res.masked or reward == 0:
        return []
    # checks that passed read rewritten inputs themselves (the guard says which), inputs the
    # oracle did not write in turn (a file edited in place is the task's output too)
    read = sorted(set(res.guard_opened) & set(inputs) - set(probe.outputs))
    if read:
        return [f"rewrite: reward {reward:.2f} after {', '.join(inputs[:4])} were replaced by small "
                f"versions, and checks that passed read {', '.join(read[:3])} themselves: {REWRITE_FIX}"]
    if not res.strict_success:  # no evidence which of the passing checks saw the new outputs
        changed = []
    if changed:  # what a second oracle run on the real inputs changes too is the oracle's noise
        again = ProbeOracle()
        play(again)
        changed = [p for p in changed if again.outputs.get(p) == oracle.outputs.get(p)]
    if not changed:
        row.rewrite += (" (no passing check read them; the oracle's outputs did not change "
                        "beyond its own run-to-run noise, or checks failed on them)")
        return []
    return [f"rewrite: reward {reward:.2f} after {', '.join(inputs[:4])} were replaced by small "
            f"versions and the oracle wrote other outputs ({', '.join(changed[:3])}): {REWRITE_FIX}"]


def _constant_probe(play: Callable, oracle: ProbeOracle, row: CheckRow) -> list[str]:
    """Knowledge-free answers shaped like the oracle's outputs must earn (almost) nothing."""
    variants = constant_variants(oracle.contents)
    if not variants:
        row.constant = "no output to imitate"
        return []
    scores = {}
    for name, files in variants.items():
        reward, res, _ = play(WriteFiles(files))
        scores[name] = (reward, res.strict_success)
    row.constant = "; ".join(f"{n} {r:.2f}" for n, (r, _) in scores.items())
    bad = [f"{n} scores {r:.2f}" for n, (r, ok) in scores.items() if ok or r >= CONSTANT_MAX]
    return [f"constant answers ({'; '.join(bad)}): {CONSTANT_FIX}"] if bad else []


def _instance_probe(task: Any, row: CheckRow, log: Callable[[str], None]) -> list[str]:
    """The image built again without the build cache must hold the same files."""
    tag = build_image(task, log=log)
    client = get_client()
    old = client.api.inspect_image(tag)["Id"]
    base = base_image_of(task)
    first = instance_digest(tag, base)
    build_image(task, client, log=log, force=True, no_cache=True)
    second = instance_digest(tag, base)
    if client.api.inspect_image(tag)["Id"] != old:
        try:  # the first build is now untagged: nothing else uses it
            client.api.remove_image(old)
        except docker.errors.APIError:
            pass
    differ = sorted(p for p in set(first) | set(second) if first.get(p) != second.get(p) and not is_noise(p))
    row.instance = "same" if not differ else f"{len(differ)} file(s) differ"
    return [f"instance: {', '.join(differ[:5])} differ between two builds: {INSTANCE_FIX}"] if differ else []


def sample_paths(paths: list[Path], n: int | None, seed: int = 0) -> list[Path]:
    """A fixed sample: the same n tasks for the same seed and pool (sorted by name first)."""
    paths = sorted(paths, key=lambda p: p.name)
    if n is None or n >= len(paths):
        return paths
    return sorted(random.Random(seed).sample(paths, n), key=lambda p: p.name)


def sample_per_group(paths: list[Path], group_of: Callable[[Path], str], n: int,
                     seed: int = 0) -> list[Path]:
    """A fixed sample of ``n`` tasks from every group (a task family): :func:`sample_paths` in each."""
    groups: dict[str, list[Path]] = {}
    for p in paths:
        groups.setdefault(group_of(p), []).append(p)
    out: list[Path] = []
    for name in sorted(groups):
        out += sample_paths(groups[name], n, seed)
    return sorted(out, key=lambda p: p.name)
