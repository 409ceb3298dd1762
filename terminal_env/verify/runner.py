"""The protected verifier: runs a task's tests after an episode so that the agent cannot fool them.

The order of the steps is the protection:

1. **Freeze.** Every process in the sandbox except PID 1 (the keeper) is stopped, then killed
   (SIGSTOP first, so a fork bomb cannot outrun the sweep; repeated until nothing is left), from
   the host when the engine is local, so that nothing the agent wrote runs
   (:mod:`terminal_env.sandbox.sweep`). A
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
   stats and reads through the archive API). See :mod:`.tamper`.
3. **Fresh tests.** Stale ``/tests`` and ``/logs/verifier`` are removed; the task's tests are
   copied in, owned by root. The digest of the tests on disk must equal the one recorded when
   the task was loaded (a changed verifier is detected, not silently used).
4. **Run.** ``test.sh`` runs as root in a new exec (not the agent's shell), with no network
   (networks are disconnected first), an in-container timeout, and an environment that closes
   the usual side doors (``PYTHONNOUSERSITE``, empty ``BASH_ENV``/``PYTHONPATH``/``LD_PRELOAD``/
   ``PYTEST_ADDOPTS``), with the guard of :mod:`.guard` loaded into pytest.
5. **Read back.** After the run, processes are swept again, and only regular files that the run
   wrote into the fresh ``/logs/verifier`` are read; invalid rewards are failures.

``separate`` mode instead starts a fresh container from the pristine image, copies only the
task's declared artifacts into it, and runs the tests there.

Outcomes: ``passed``, ``failed``, ``partial``, ``timeout``, ``tampered``, ``infra_error``. Every
failure of the engine or the sandbox becomes ``infra_error``: never scored as the agent's.
"""

from __future__ import annotations

import posixpath
import secrets
import shlex
import time
from typing import Any, Iterable

import docker.errors

from ..errors import InfraError, TerminalEnvError
from ..sandbox import Sandbox, SandboxConfig
from ..sandbox import egress
from ..sandbox.sweep import stop_processes
from . import guard
from .parse import CHECK_FILES, REWARD_FILES, parse_results
from .result import VerifierResult, disk_budget_result, exhausted_result
from .tamper import find_tampering

RESULT_FILES_LIMIT = 10 * 1024 * 1024
#: the files whose content decides a verdict (parse.py)
RESULT_FILES = tuple(name for name, _ in CHECK_FILES) + REWARD_FILES

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
        #: called with each phase's name as it ends (freeze, tamper_check, collect, copy_tests,
        #: tests, read_back, copy_artifacts): a benchmark's CPU meter reads its counters there
        self.on_phase: Any = None
        self._names: frozenset[str] | None = None
        self._names_for: str | None = None

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
            # The sandbox may have stopped after the agent's last step (an exec then fails, or
            # finds it gone): by the agent's doing (out of memory, or its PID 1 killed where the
            # runtime allows that) it is a failure; anything else is masked.
            stopped_by_agent = getattr(sandbox, "stopped_by_agent", None)
            cause = stopped_by_agent() if stopped_by_agent is not None else None
            result = (exhausted_result(cause) if cause is not None
                      else VerifierResult.infra_error(f"verification could not run: {exc}"))
        timings["total"] = time.perf_counter() - t0
        self.last_timings = timings
        return result.model_copy(update={"tests_digest": self.task.tests_digest})

    # ------------------------------------------------------------------ steps
    def _verify(self, sandbox: Sandbox, timings: dict[str, float]) -> VerifierResult:
        t = time.perf_counter()
        sandbox.check_alive()
        self._sweep(sandbox)
        self._phase(timings, "freeze", t)
        changed = _recompute_digest(self.task)
        if changed:
            return VerifierResult.infra_error(changed)
        # The tests of a separate verifier run in a fresh box, but collect commands run in this
        # one: then the programs they call must be the image's, as for tests in this box.
        if self.mode == "same" or getattr(self.task, "verifier_collect", None):
            t = time.perf_counter()
            tampered = self.tamper_check(sandbox)
            self._phase(timings, "tamper_check", t)
            if tampered:
                shown = ", ".join(tampered[:10]) + (" ..." if len(tampered) > 10 else "")
                return VerifierResult.tampered(
                    tampered, f"protected files were changed during the episode: {shown}"
                )
        collected = self._collect(sandbox, timings)
        if self.mode == "separate":
            return _with_collect(self._verify_separate(sandbox, timings), collected)
        return _with_collect(self._run_tests(sandbox, timings), collected)

    def _collect(self, sandbox: Sandbox, timings: dict[str, float]) -> list[dict[str, Any]]:
        """Run the task's ``[[verifier.collect]]`` commands in the agent's sandbox, whose
        processes are stopped by now (nothing of the agent's runs beside them), in the verifier's
        clean environment; then stop whatever they started. A command that fails or runs out of
        time is recorded and the verification goes on: the tests judge what it left."""
        hooks = list(getattr(self.task, "verifier_collect", None) or [])
        if not hooks:
            return []
        t = time.perf_counter()
        env = {**{str(k): str(v) for k, v in (getattr(self.task, "verifier_env", {}) or {}).items()},
               **_SAFE_ENV}
        runs = []
        for hook in hooks:
            run = sandbox.exec(["bash", "-c", hook.command], user=hook.user or "root", timeout=hook.timeout_sec,
                               workdir=getattr(self.task, "workdir", None) or "/", env=env)
            runs.append({"command": hook.command, "exit_code": run.exit_code, "timed_out": run.timed_out,
                         "duration": round(run.duration, 3),
                         "output": (run.stdout + run.stderr).decode("utf-8", "replace")[-1000:]})
        self._sweep(sandbox)  # whatever the commands started must not write after them
        self._phase(timings, "collect", t)
        return runs

    def _phase(self, timings: dict[str, float], name: str, started: float) -> None:
        timings[name] = time.perf_counter() - started
        if self.on_phase is not None:
            self.on_phase(name)

    def _sweep(self, sandbox: Sandbox) -> None:
        """Stop every process but the keeper (see :mod:`terminal_env.sandbox.sweep`): from the
        host where the runtime allows it, else with the built-in-only sweep inside."""
        ok, detail = stop_processes(sandbox)
        if ok:
            return
        if _pids_exhausted(sandbox):
            raise _AgentExhausted(
                "the agent filled the sandbox's process table (a fork bomb?), so it could not be "
                "verified; this is the agent's failure, not the infrastructure's"
            )
        raise InfraError(f"could not stop the agent's processes: {detail}")

    def tamper_check(self, sandbox: Sandbox) -> list[str]:
        """Paths whose changes make the episode ``tampered`` (see :mod:`.tamper`)."""
        return find_tampering(sandbox, self.protected, getattr(self.task, "workdir", None))

    def _run_tests(self, sandbox: Sandbox, timings: dict[str, float]) -> VerifierResult:
        task = self.task
        t = time.perf_counter()
        self._disconnect_networks(sandbox)
        tests = {f"/tests/{n.lstrip('/')}": _read(src) for n, src in task.verifier_files().items()}
        scripts = {p: d for p, d in tests.items() if p.endswith(".sh")}
        # The tests and the guard go in under a name the agent could not know, in one archive
        # (scripts executable, the rest read-only for the tests' own user, all owned by root);
        # the same exec that runs the tests first moves them into place (one exec fewer: each
        # costs the engine ~45 ms of CPU), so the staging name is never seen by the tests.
        nonce = secrets.token_hex(8)
        stage = f"/.terminal-env-verify-{nonce}"
        staged = {f"{stage}{p}": d for p, d in {**tests, **guard.files()}.items()}
        sandbox.write_files(staged, mode=0o644, modes={f"{stage}{p}": 0o755 for p in scripts})
        self._phase(timings, "copy_tests", t)
        prepare = " && ".join([
            f"rm -rf /tests /logs/verifier && mkdir -p {stage}/tests && mv {stage}/tests /tests && "
            "mkdir -p /logs/verifier",
            guard.prepare_script(),
            *(f"mv {shlex.quote(stage + p)} {shlex.quote(p)}" for p in guard.files()),
            f"rm -rf {stage}",
        ])
        failed = f"terminal-env: the verifier could not be prepared ({nonce})"
        key = guard.new_key()
        env = {
            **{str(k): str(v) for k, v in (getattr(task, "verifier_env", {}) or {}).items()},
            **_SAFE_ENV, **guard.env(key),
        }
        t = time.perf_counter()
        run = sandbox.exec(
            ["sh", "-c", f'if {prepare}; then exec "$@"; fi; echo "{failed}" >&2; exit 125',
             "terminal-env-verify", *task.test_command],
            user="root",
            timeout=self.timeout,
            workdir=getattr(task, "workdir", None) or "/",
            env=env,
        )
        self._phase(timings, "tests", t)
        if run.exit_code == 125 and failed.encode() in run.stderr:
            raise InfraError(f"could not reset /tests and /logs/verifier: {run.output[-500:]}")
        t = time.perf_counter()
        self._sweep(sandbox)  # whatever the tests started must not write after them
        files, ignored = _named_by_tests(_read_results(sandbox), self._result_names())
        checked = guard.verdict(
            guard.read_records(sandbox), key,
            pytest_expected=guard.uses_pytest(scripts),
        )
        self._phase(timings, "read_back", t)
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
            "guard": checked.note, "guard_modules": checked.modules, "guard_opened": checked.opened,
        }
        contradiction = checked.contradicted(result.checks) if checked.ok else None
        if contradiction:
            # Written after the tests' session ended (an exit handler of code the tests imported):
            # the guard saw these tests fail, or never saw them.
            checked = guard.GuardVerdict(False, contradiction, checked.modules, checked.opened)
            update["guard"] = contradiction
        if checked.ok is False:
            # Whatever the result files say: the test process did not run its tests to the end
            # as pytest reported them. Not a success, and no partial credit from such a run.
            return VerifierResult(
                outcome="failed", progress=0.0, source=result.source,
                message=f"{checked.note}; the result files were not trusted ({result.message})",
                **update,
            )
        if ignored:
            update["message"] = f"{result.message} ({_ignored_note(ignored)})"
        return result.model_copy(update=update)

    def _result_names(self) -> frozenset[str] | None:
        """The result files the task's tests name (their names appear in a test file): only
        those are read back. Tests that name none: a Terminal-Bench 1 task's verdict is its
        pytest output (no file is read); a Harbor task's is read from every file, as before
        (its tests make the name some other way)."""
        digest = self.task.tests_digest
        if self._names_for != digest:
            found: set[str] = set()
            for src in self.task.verifier_files().values():
                data = _read(src)
                found.update(n for n in RESULT_FILES if n.encode() in data)
            if not found and getattr(self.task, "result_format", "harbor") == "pytest-output":
                found_or_none: frozenset[str] | None = frozenset()  # the verdict is in the output
            else:
                found_or_none = frozenset(found) or None
            self._names, self._names_for = found_or_none, digest
        return self._names

    def _verify_separate(self, agent_box: Sandbox, timings: dict[str, float]) -> VerifierResult:
        # restored at the same paths in the fresh box: the task's own list and Harbor's
        # ``artifacts`` (what its collect commands snapshot travels this way)
        artifacts = list(dict.fromkeys([*(getattr(self.task, "artifacts", ()) or ()),
                                        *(a.source for a in getattr(self.task, "trial_artifacts", ()) or ())]))
        cfg = agent_box.config
        fresh = Sandbox(
            SandboxConfig(
                image=cfg.image, cpus=cfg.cpus, memory_mb=cfg.memory_mb,
                pids_limit=cfg.pids_limit, network=False, workdir=cfg.workdir,
                env=dict(cfg.env), runtime=cfg.runtime, run_id=cfg.run_id,
                task=f"{cfg.task}-verify", first_shell="exec",
                # the agent's services, still up: the tests may ask them
                networks={name: [] for name in (agent_box.stack.agent_networks()
                                                if agent_box.stack else {})},
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
            self._phase(timings, "copy_artifacts", t)
            return self._run_tests(fresh, timings)

    def _disconnect_networks(self, sandbox: Sandbox) -> None:
        """Tests run cut off from every network but those of the task's own services (which
        the tests may ask about what the agent did); with ``[verifier] network_mode =
        "allowlist"``, reaching only its hosts (:mod:`terminal_env.sandbox.egress`)."""
        hosts = getattr(self.task, "verifier_allowed_hosts", None)
        if hosts is not None:
            egress.restrict(sandbox, list(hosts))
            return
        keep = {"none", "host", *sandbox.config.networks}
        if sandbox.stack is not None:
            keep |= set(sandbox.stack.agent_networks())
        sandbox.container.reload()
        networks = sandbox.container.attrs.get("NetworkSettings", {}).get("Networks", {}) or {}
        for name in networks:
            if name not in keep:
                sandbox.client.api.disconnect_container_from_network(sandbox.id, name, force=True)


# ---------------------------------------------------------------------- helpers
class _AgentExhausted(Exception):
    """The agent made its own sandbox unverifiable (not an infrastructure failure)."""


def _with_collect(result: VerifierResult, runs: list[dict[str, Any]]) -> VerifierResult:
    """``result`` with the collect commands' runs, a failed one named in the message."""
    if not runs:
        return result
    failed = [r["command"] for r in runs if r["exit_code"] != 0]
    update: dict[str, Any] = {"collect": runs}
    if failed:
        shown = "; ".join(f"`{c[:80]}`" for c in failed)
        update["message"] = f"{result.message} (collect command(s) failed: {shown})".strip()
    return result.model_copy(update=update)


def _pids_exhausted(sandbox: Sandbox) -> bool:
    try:
        stats = sandbox.container.stats(stream=False).get("pids_stats") or {}
    except docker.errors.APIError:
        return False
    current, limit = stats.get("current") or 0, stats.get("limit") or 0
    return bool(limit) and current >= limit - 2


def _read(src: Any) -> bytes:
    return src if isinstance(src, bytes) else open(src, "rb").read()


def _named_by_tests(files: dict[str, bytes], names: frozenset[str] | None) -> tuple[dict[str, bytes], list[str]]:
    """The files of /logs/verifier less the result files the task's tests never name. Tests
    often run the agent's program (as root, next to /logs/verifier): a ``reward.json`` that the
    tests never write, beside the ``reward.txt`` they do, can only be someone else's, and
    ``reward.json`` takes precedence (Harbor's rule)."""
    if names is None:
        return files, []
    ignored = sorted(n for n in files if n in RESULT_FILES and n not in names)
    return {k: v for k, v in files.items() if k not in ignored}, ignored


def _ignored_note(ignored: list[str]) -> str:
    return (f"{', '.join(ignored)} ignored: the task's tests never name "
            f"{'it' if len(ignored) == 1 else 'them'}, so the tests did not write "
            f"{'it' if len(ignored) == 1 else 'them'}")


def _read_results(sandbox: Sandbox) -> dict[str, bytes]:
    """Regular files directly in /logs/verifier (links, devices and subdirectories ignored)."""
    try:
        return sandbox.read_dir("/logs/verifier", limit=RESULT_FILES_LIMIT)
    except FileNotFoundError:
        return {}


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
