"""The protected verifier: runs a task's tests after an episode so that the agent cannot fool them.

The order of the steps is the protection:

1. **Freeze.** Every process in the sandbox except PID 1 (the keeper) is stopped, then killed
   (SIGSTOP first, so a fork bomb cannot outrun the sweep; repeated until nothing is left), from
   the host when the engine is local, so that nothing the agent wrote runs (:mod:`.freeze`). A
   background job that would rewrite results after submit is gone before the tests exist.
2. **Tamper check.** The container is diffed against its image (``docker diff``). Files of the
   image that were changed or deleted under protected trees (interpreters, shells, libraries,
   the test framework), new modules that would shadow pytest or run at interpreter start-up
   (``sitecustomize``, ``.pth`` with code, a new ``pytest11`` plugin entry point, a
   ``conftest.py`` at ``/``), anything under
   ``/tests`` or ``/logs/verifier``, any change to the loader's configuration
   (``/etc/ld.so.preload``), a program or library added under the name of one found elsewhere
   on its search path (a ``timeout`` or ``python3`` in ``/usr/local/bin``), and any change under
   the task's own protected paths make the outcome ``tampered``, with reward 0 and the paths
   named. Nothing runs in the container for this: the engine is asked (``docker diff``, file
   stats and reads through the archive API).
3. **Fresh tests.** Stale ``/tests`` and ``/logs/verifier`` are removed; the task's tests are
   copied in, owned by root. The digest of the tests on disk must equal the one recorded when
   the task was loaded (a changed verifier is detected, not silently used).
4. **Run.** ``test.sh`` runs as root in a new exec (not the agent's shell), with no network
   (networks are disconnected first), an in-container timeout, and an environment that closes
   the usual side doors (``PYTHONNOUSERSITE``, empty ``BASH_ENV``/``PYTHONPATH``/``LD_PRELOAD``/
   ``PYTEST_ADDOPTS``).
5. **Read back.** After the run, processes are swept again, and only regular files that the run
   wrote into the fresh ``/logs/verifier`` are read; invalid rewards are failures.

``separate`` mode instead starts a fresh container from the pristine image, copies only the
task's declared artifacts into it, and runs the tests there.

Outcomes: ``passed``, ``failed``, ``partial``, ``timeout``, ``tampered``, ``infra_error``. Every
failure of the engine or the sandbox becomes ``infra_error``: never scored as the agent's.
"""

from __future__ import annotations

import base64
import io
import json
import posixpath
import re
import tarfile
import time
from typing import Any, Iterable

import docker.errors

from ..errors import InfraError, SandboxError, TerminalEnvError
from ..sandbox import Sandbox, SandboxConfig
from ..sandbox.sweep import host_sweep, host_sweep_possible, sweep_inside
from . import guard
from .parse import parse_results
from .result import VerifierResult, disk_budget_result

# Trees whose files from the image must not be changed or deleted (additions are allowed there:
# installing a tool is legitimate work, replacing one is not).
PROTECTED_TREES = (
    "/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/lib", "/lib", "/lib64",
    "/usr/local/bin", "/usr/local/lib", "/etc/ld.so.preload", "/etc/bash.bashrc",
    "/etc/profile", "/etc/environment",
)
# The dynamic loader's own configuration: any change at all counts (a preloaded library runs in
# every process of the verification).
LOADER_CONFIG = ("/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
# Where programs and shared libraries are looked up. A file added in one of these directories
# under the name of one that exists in another is flagged: it would run in place of the real one
# (a `timeout` or `python3` in /usr/local/bin ahead of /usr/bin, a libc in /usr/local/lib).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LIBRARY_DIRS = (
    "/usr/local/lib", "/usr/local/lib64", "/lib", "/usr/lib", "/lib64", "/usr/lib64",
    *(f"{root}/{arch}-linux-gnu" for arch in ("x86_64", "aarch64", "i386", "arm")
      for root in ("/usr/local/lib", "/lib", "/usr/lib")),
)
# Trees where any change at all counts: they belong to the verifier.
VERIFIER_TREES = ("/tests", "/logs/verifier")
# New files with these names change how Python or pytest start, wherever they appear.
STARTUP_HOOKS = {"sitecustomize.py", "usercustomize.py"}
# Module names (file or package stem) that would shadow the test framework.
SHADOW_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig"})
# Config files pytest reads from the rootdir and its ancestors: at "/" they steer every run.
ROOT_CONFIGS = {"/conftest.py", "/pytest.ini", "/tox.ini", "/setup.cfg", "/pyproject.toml"}
RESULT_FILES_LIMIT = 10 * 1024 * 1024

_SAFE_ENV = {
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONPATH": "",
    "PYTHONSTARTUP": "",
    "PYTEST_ADDOPTS": "",
    "PYTEST_PLUGINS": "",
    "BASH_ENV": "",
    "ENV": "",
    "LD_PRELOAD": "",
    "LD_LIBRARY_PATH": "",
    "TEST_DIR": "/tests",
}


class ProtectedVerifier:
    """Verify an episode of ``task`` (a loaded :class:`terminal_env.tasks.Task`).

    Call it with the episode's sandbox: ``verifier(sandbox, spec) -> VerifierResult``. That is the
    ``verifier`` hook of :class:`terminal_env.TerminalEnv`.
    """

    def __init__(
        self,
        task: Any,
        *,
        mode: str | None = None,
        timeout: float | None = None,
        protected_paths: Iterable[str] = (),
    ):
        self.task = task
        self.mode = mode or getattr(task, "verifier_mode", "same") or "same"
        if self.mode not in ("same", "separate"):
            raise TerminalEnvError(f"verifier mode must be 'same' or 'separate', got {self.mode!r}")
        self.timeout = timeout or float(getattr(task, "verifier_timeout", 600) or 600)
        self.protected = tuple(getattr(task, "protected_paths", ()) or ()) + tuple(protected_paths)
        self.last_timings: dict[str, float] = {}

    def __call__(self, sandbox: Sandbox, spec: Any = None) -> VerifierResult:
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        guard = getattr(sandbox, "disk", None)
        if guard is not None:
            # The agent's last writes count (measured now); the verifier's own do not.
            guard.check(force=True)
            guard.stop()
            if guard.tripped:
                return disk_budget_result(guard.message()).model_copy(
                    update={"tests_digest": self.task.tests_digest}
                )
        try:
            result = self._verify(sandbox, timings)
        except _AgentExhausted as exc:
            result = VerifierResult(outcome="failed", message=str(exc))
        except (InfraError, docker.errors.APIError, OSError) as exc:
            result = VerifierResult.infra_error(f"verification could not run: {exc}")
        timings["total"] = time.perf_counter() - t0
        self.last_timings = timings
        return result.model_copy(update={"tests_digest": self.task.tests_digest})

    # ------------------------------------------------------------------ steps
    def _verify(self, sandbox: Sandbox, timings: dict[str, float]) -> VerifierResult:
        t = time.perf_counter()
        sandbox.check_alive()
        self._sweep(sandbox)
        timings["freeze"] = time.perf_counter() - t
        changed = _recompute_digest(self.task)
        if changed:
            return VerifierResult.infra_error(changed)
        if self.mode == "separate":
            return self._verify_separate(sandbox, timings)
        t = time.perf_counter()
        tampered = self.tamper_check(sandbox)
        timings["tamper_check"] = time.perf_counter() - t
        if tampered:
            shown = ", ".join(tampered[:10]) + (" ..." if len(tampered) > 10 else "")
            return VerifierResult.tampered(
                tampered, f"protected files were changed during the episode: {shown}"
            )
        return self._run_tests(sandbox, timings)

    def _sweep(self, sandbox: Sandbox) -> None:
        """Stop every process but the keeper (see :mod:`.freeze`): from the host when the engine
        is local, else with the built-in-only sweep inside."""
        if host_sweep(sandbox):
            return
        detail = "the processes could not be listed from the host"
        if not host_sweep_possible():
            try:
                ok, detail = sweep_inside(sandbox)
                if ok:
                    return
            except SandboxError as exc:
                sandbox.check_alive()
                detail = str(exc)
        if _pids_exhausted(sandbox):
            raise _AgentExhausted(
                "the agent filled the sandbox's process table (a fork bomb?), so it could not be "
                "verified; this is the agent's failure, not the infrastructure's"
            )
        raise InfraError(f"could not stop the agent's processes: {detail}")

    def tamper_check(self, sandbox: Sandbox) -> list[str]:
        """Paths whose changes make the episode ``tampered`` (empty: nothing suspicious)."""
        changes = sandbox.client.api.diff(sandbox.id) or []
        flagged: list[str] = []
        maybe_files: list[str] = []
        pth_files: list[str] = []
        added: list[str] = []
        for change in changes:
            path, kind = change["Path"], change["Kind"]  # 0 changed, 1 added, 2 deleted
            base = posixpath.basename(path)
            if kind == 1:
                added.append(path)
            if _under(path, VERIFIER_TREES) or _under(path, self.protected) or _under(path, LOADER_CONFIG):
                flagged.append(path)
            elif path in ROOT_CONFIGS and kind != 2:
                flagged.append(path)
            elif base in STARTUP_HOOKS or path.startswith("/etc/python"):
                # Debian links /usr/lib/python3.X/sitecustomize.py to /etc/python3.X/: writing
                # through the link changes the file in /etc, so both places count.
                flagged.append(path)
            elif (
                kind == 1
                and _python_path(path)
                and "/__pycache__/" not in path  # a changed .pyc of the image is caught below
                and base.split(".")[0] in SHADOW_MODULES
            ):
                flagged.append(path)
            elif kind == 1 and _python_path(path) and (base.endswith(".pth") or base == "entry_points.txt"):
                pth_files.append(path)  # read below: code in a .pth, a pytest plugin entry point
            elif _under(path, PROTECTED_TREES):
                if kind == 2:
                    flagged.append(path)
                elif kind == 0:
                    maybe_files.append(path)  # a changed directory is fine, a changed file is not
        # Everything below asks the engine (no exec: a changed /bin/sh or grep must not be the
        # one that says whether it was changed).
        look = _Stat(sandbox)
        flagged += [p for p in maybe_files if not look.is_dir(p)]
        for path in pth_files:
            base = posixpath.basename(path)
            if base == "entry_points.txt":
                if _registers_pytest_plugin(look.read(path)):
                    flagged.append(path)
            elif base != "distutils-precedence.pth" and _pth_runs_code(look.read(path)):
                flagged.append(path)
        path_dirs = set(DEFAULT_PATH.split(":")) | set(LIBRARY_DIRS)
        if any(posixpath.dirname(p) in path_dirs for p in added):  # the engine reports real paths
            flagged += _shadowing(look, added, _container_path(sandbox))
        flagged += _python_shadowing(look, added, getattr(self.task, "workdir", None) or "/")
        return sorted(set(flagged))

    def _run_tests(self, sandbox: Sandbox, timings: dict[str, float]) -> VerifierResult:
        task = self.task
        t = time.perf_counter()
        self._disconnect_networks(sandbox)
        prep = sandbox.exec(
            ["sh", "-c", "rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier && "
             + guard.prepare_script()],
            user="root",
            timeout=60,
        )
        if prep.exit_code != 0:
            raise InfraError(f"could not reset /tests and /logs/verifier: {prep.output[-500:]}")
        tests = {f"/tests/{n.lstrip('/')}": _read(src) for n, src in task.verifier_files().items()}
        scripts = {p: d for p, d in tests.items() if p.endswith(".sh")}
        # Scripts executable, the rest read-only for the tests' own user; all owned by root.
        sandbox.write_files(scripts, mode=0o755)
        sandbox.write_files(
            {**{p: d for p, d in tests.items() if p not in scripts}, **guard.files()}, mode=0o644
        )
        timings["copy_tests"] = time.perf_counter() - t
        key = guard.new_key()
        env = {
            **{str(k): str(v) for k, v in (getattr(task, "verifier_env", {}) or {}).items()},
            **_SAFE_ENV, **guard.env(key),
        }
        t = time.perf_counter()
        run = sandbox.exec(
            list(task.test_command),
            user="root",
            timeout=self.timeout,
            workdir=getattr(task, "workdir", None) or "/",
            env=env,
        )
        timings["tests"] = time.perf_counter() - t
        t = time.perf_counter()
        self._sweep(sandbox)  # whatever the tests started must not write after them
        files = _read_results(sandbox)
        checked = guard.verdict(
            guard.read_records(sandbox), key,
            pytest_expected=guard.uses_pytest(scripts),
        )
        timings["read_back"] = time.perf_counter() - t
        log_tail = (run.stdout + run.stderr).decode("utf-8", "replace")[-2000:]
        if run.timed_out:
            return VerifierResult.timeout(
                f"the verifier did not finish within {self.timeout:g} s",
                duration=run.duration, log_tail=log_tail,
            )
        result = parse_results(
            files,
            exit_code=run.exit_code,
            stdout=run.stdout.decode("utf-8", "replace"),
            weights=getattr(task, "check_weights", None) or None,
            fmt=getattr(task, "result_format", "harbor"),
        )
        update: dict[str, Any] = {
            "duration": run.duration, "exit_code": run.exit_code, "log_tail": log_tail,
            "guard": checked.note, "guard_modules": checked.modules,
        }
        if checked.ok is False:
            # Whatever the result files say: the test process did not run its tests to the end
            # as pytest reported them. Not a success, and no partial credit from such a run.
            return VerifierResult(
                outcome="failed", progress=0.0, source=result.source,
                message=f"{checked.note}; the result files were not trusted ({result.message})",
                **update,
            )
        return result.model_copy(update=update)

    def _verify_separate(self, agent_box: Sandbox, timings: dict[str, float]) -> VerifierResult:
        artifacts = list(getattr(self.task, "artifacts", ()) or ())
        cfg = agent_box.config
        fresh = Sandbox(
            SandboxConfig(
                image=cfg.image, cpus=cfg.cpus, memory_mb=cfg.memory_mb,
                pids_limit=cfg.pids_limit, network=False, workdir=cfg.workdir,
                env=dict(cfg.env), runtime=cfg.runtime, run_id=cfg.run_id,
                task=f"{cfg.task}-verify", first_shell="exec",
            ),
            client=agent_box.client,
        )
        t = time.perf_counter()
        with fresh:
            for path in artifacts:
                try:
                    stream, _ = agent_box.container.get_archive(path)
                except docker.errors.NotFound:
                    continue  # an artifact the agent did not produce: the tests will say so
                parent = posixpath.dirname(path.rstrip("/")) or "/"
                fresh.exec(["mkdir", "-p", parent], user="root", timeout=30)
                fresh.client.api.put_archive(fresh.id, parent, b"".join(stream))
            timings["copy_artifacts"] = time.perf_counter() - t
            return self._run_tests(fresh, timings)

    @staticmethod
    def _disconnect_networks(sandbox: Sandbox) -> None:
        sandbox.container.reload()
        networks = sandbox.container.attrs.get("NetworkSettings", {}).get("Networks", {}) or {}
        for name in networks:
            if name not in ("none", "host"):
                sandbox.client.api.disconnect_container_from_network(sandbox.id, name, force=True)


# ---------------------------------------------------------------------- helpers
class _AgentExhausted(Exception):
    """The agent made its own sandbox unverifiable (not an infrastructure failure)."""


def _pids_exhausted(sandbox: Sandbox) -> bool:
    try:
        stats = sandbox.container.stats(stream=False).get("pids_stats") or {}
    except docker.errors.APIError:
        return False
    current, limit = stats.get("current") or 0, stats.get("limit") or 0
    return bool(limit) and current >= limit - 2


class _Stat:
    """Questions about files in the container, answered by the engine (``HEAD .../archive``)."""

    DIR, LINK = 1 << 31, 1 << 27  # Go's os.FileMode bits in the engine's answer

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self._cache: dict[str, dict[str, Any] | None] = {}

    def stat(self, path: str) -> dict[str, Any] | None:
        if path not in self._cache:
            api = self.sandbox.client.api
            res = api.head(api._url("/containers/{0}/archive", self.sandbox.id), params={"path": path})
            if res.status_code in (404, 500):
                # 500: a path through a file ("not a directory"); HEAD carries no body to tell
                # more. Either way nothing is there: a changed path is then taken for a file.
                self._cache[path] = None
            else:
                api._raise_for_status(res)  # an engine error is not an answer about the file
                header = res.headers.get("X-Docker-Container-Path-Stat") or ""
                self._cache[path] = json.loads(base64.b64decode(header)) if header else None
        return self._cache[path]

    def is_dir(self, path: str) -> bool:
        st = self.stat(path)
        return bool(st and int(st.get("mode", 0)) & self.DIR)

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def resolve_dir(self, path: str) -> str:
        """A directory with a symlink resolved once (usr-merged /bin -> usr/bin)."""
        st = self.stat(path)
        if st and int(st.get("mode", 0)) & self.LINK and st.get("linkTarget"):
            return posixpath.normpath(posixpath.join(posixpath.dirname(path), st["linkTarget"]))
        return path

    def read(self, path: str, limit: int = 1 << 20) -> bytes:
        try:
            stream, _ = self.sandbox.container.get_archive(path)
            data = b"".join(stream)
        except docker.errors.NotFound:
            return b""
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None or not member.isfile() or member.size > limit:
                return b""
            fh = tar.extractfile(member)
            return fh.read() if fh else b""


def _pth_runs_code(data: bytes) -> bool:
    """Whether ``site`` would execute a line of this ``.pth`` file."""
    return any(line.startswith((b"import ", b"import\t")) for line in data.splitlines())


def _registers_pytest_plugin(data: bytes) -> bool:
    """Whether an ``entry_points.txt`` declares a ``pytest11`` plugin (pytest loads those by
    itself, and a plugin can rewrite every test report)."""
    return any(line.strip().replace(b" ", b"") == b"[pytest11]" for line in data.splitlines())


def _container_path(sandbox: Sandbox) -> str:
    env = (sandbox.client.api.inspect_container(sandbox.id).get("Config") or {}).get("Env") or []
    for item in env:
        if item.startswith("PATH="):
            return item[5:]
    return DEFAULT_PATH


def _shadowing(look: _Stat, added: list[str], path_var: str) -> list[str]:
    """Added files that take the name of a program or library found in another search dir."""
    flagged = []
    searches = [
        [d for d in path_var.split(":") if d.startswith("/")],
        list(LIBRARY_DIRS),
    ]
    for kind, dirs in enumerate(searches):
        real = {d: look.resolve_dir(d) for d in dict.fromkeys(dirs)}
        for path in added:
            parent, name = posixpath.split(path)
            if parent not in real.values() or (kind == 1 and ".so" not in name):
                continue
            if look.is_dir(path):
                continue
            others = {r for r in real.values() if r != parent}
            if any(look.exists(posixpath.join(o, name)) for o in sorted(others)):
                flagged.append(path)
    return flagged


# Python's module search: its standard library (and the zip that precedes it on sys.path, which
# Debian's python lists but does not ship), lib-dynload, site/dist-packages.
_PY_ROOT = re.compile(r"/usr(?:/local)?/lib/python3(?:\.\d+)?(?:/lib-dynload|/dist-packages|/site-packages)?")
_PY_ZIP = re.compile(r"/usr(?:/local)?/lib/python3\d+\.zip")
# Names an agent may give its own files in the working directory without shadowing anything the
# tests use (Debian ships no `test` package; `tests` is the usual name of a project's tests).
_CWD_NAMES_ALLOWED = frozenset({"test", "tests"})


def _module_name(base: str) -> str | None:
    """The top-level module a directory entry provides (``x.py``, ``x/``, ``x.cpython-311-...so``)."""
    if base.startswith(".") or base == "__pycache__" or base.endswith((".dist-info", ".egg-info", ".pth")):
        return None
    if base.endswith(".py"):
        return base[:-3]
    if ".so" in base or base.endswith(".pyc"):
        return base.split(".")[0]
    return base if "." not in base else None


def _python_shadowing(look: _Stat, added: list[str], workdir: str) -> list[str]:
    """Added modules found by Python before the ones of the same name it would have found: a
    zip that precedes the standard library, a package in /usr/local ahead of dist-packages, and
    modules in the tests' working directory (``python3 -m pytest`` puts it first on sys.path)."""
    flagged = [p for p in added if _PY_ZIP.fullmatch(p)]
    workdir = posixpath.normpath(workdir)

    def searched(d: str) -> bool:
        return bool(_PY_ROOT.fullmatch(d)) or d == workdir

    candidates = []
    for path in added:
        parent, base = posixpath.split(path)
        if base.startswith("__init__.") and searched(posixpath.dirname(parent)):
            # a directory made a regular package (it may have been in the image as a plain one)
            anchor, name = posixpath.dirname(parent), posixpath.basename(parent)
        elif searched(parent):
            anchor, name = parent, _module_name(base)
            if name == base and not (look.is_dir(path) and look.exists(f"{path}/__init__.py")):
                continue  # a file without a suffix, or a directory without __init__.py (a namespace
                # portion), never shadows a module
        else:
            continue
        if name and name.isidentifier() and not (anchor == workdir and name in _CWD_NAMES_ALLOWED):
            candidates.append((path, anchor, name))
    if not candidates:
        return flagged
    roots = [
        f"{prefix}/lib/python3.{minor}{sub}"
        for prefix in ("/usr", "/usr/local")
        for minor in range(6, 16)
        if look.is_dir(f"{prefix}/lib/python3.{minor}")
        for sub in ("", "/lib-dynload", "/dist-packages", "/site-packages")
    ] + ["/usr/lib/python3/dist-packages", "/usr/local/lib/python3/dist-packages"]
    roots = [r for r in roots if look.is_dir(r)]
    def provides(root: str, name: str) -> bool:
        if look.exists(f"{root}/{name}.py") or look.is_dir(f"{root}/{name}"):
            return True
        version = re.search(r"python3\.(\d+)", root)
        return bool(version) and root.endswith("lib-dynload") and any(
            look.exists(f"{root}/{name}.cpython-3{version.group(1)}-{arch}-linux-gnu.so")
            for arch in ("x86_64", "aarch64")
        )

    for path, parent, name in candidates:
        if any(provides(r, name) for r in roots if r != parent):
            flagged.append(path)
    return flagged


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _python_path(path: str) -> bool:
    return "/python3" in path or "site-packages" in path or "dist-packages" in path


def _read(src: Any) -> bytes:
    return src if isinstance(src, bytes) else open(src, "rb").read()


def _read_results(sandbox: Sandbox) -> dict[str, bytes]:
    """Regular files directly in /logs/verifier (links, devices and subdirectories ignored)."""
    try:
        stream, _ = sandbox.container.get_archive("/logs/verifier")
    except docker.errors.NotFound:
        return {}
    out: dict[str, bytes] = {}
    data = b"".join(stream)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            parts = member.name.split("/")
            if len(parts) == 2 and member.isfile() and member.size <= RESULT_FILES_LIMIT:
                fh = tar.extractfile(member)
                if fh is not None:
                    out[parts[1]] = fh.read()
    return out


def _recompute_digest(task: Any) -> str | None:
    """A message if the tests on disk differ from those the task was loaded with."""
    recompute = getattr(task, "current_tests_digest", None)
    if recompute is None:
        return None
    now = recompute()
    if now != task.tests_digest:
        return (
            f"the tests of task {task.name!r} changed on disk since it was loaded "
            f"(digest {task.tests_digest[:12]} -> {now[:12]}); reload the task"
        )
    return None
