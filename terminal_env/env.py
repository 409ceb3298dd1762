"""``TerminalEnv``: a Gymnasium environment over a Docker sandbox and a persistent shell.

Contract (Gymnasium's, exactly):

* ``reset(seed=None, options=None) -> (observation, info)`` starts a fresh sandbox for the task
  (``options={"task": ...}`` switches task) and returns the instruction and the first screen;
* ``step(action) -> (observation, reward, terminated, truncated, info)``; ``terminated`` on
  submit, ``truncated`` when the step or time budget runs out;
* ``render()`` in ``"ansi"`` mode returns the terminal as text; ``close()`` removes the sandbox.

The task is a task directory (a path), a loaded ``Task``, a ``TaskSpec`` (or its dict), or a
``PreparedTask``; every one goes through :func:`terminal_env.prepare.prepare_task`, the one step
that builds the image and attaches the protected verifier. ``build_options`` are its build
settings (``base_map``, ``ca_bundle``, ...).

Observations and actions are text (``gymnasium.spaces.Text``). Actions may also be typed
(:mod:`terminal_env.actions`). Errors inside the sandbox are observations; infrastructure errors
raise :class:`~terminal_env.errors.InfraError` subclasses.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
from gymnasium import spaces
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .actions import Command, Keys, Submit, action_to_text, parse_action
from .artifacts import collect as collect_artifacts
from .errors import ConfigError, InfraError, SandboxGoneError
from .keys import encode_keys
from .prepare import prepare_task
from .rewards import get_reward
from .sandbox import FirstShellMode, Sandbox, default_first_shell
from .sandbox.cleanup import remove_later
from .sandbox.engine import engine_errors
from .scale.warm import Ready
from .steps import between_steps, combine, min_reward_failure, wait_healthy
from .session import SessionConfig, ShellSession, StepOutput
from .task import TaskSpec, hello_task
from .verify.result import disk_budget_result, exhausted_result
from .verify.runner import ProtectedVerifier

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def observation_charset() -> frozenset[str]:
    """Every character an observation may contain: the Basic Multilingual Plane without
    surrogates and control characters, plus tab and newline. Anything else is replaced."""
    chars = {"\t", "\n"}
    chars.update(chr(c) for c in range(0x20, 0x7F))
    chars.update(chr(c) for c in range(0xA0, 0xD800))
    chars.update(chr(c) for c in range(0xE000, 0x10000))
    return frozenset(chars)


@lru_cache(maxsize=8)
def _text_template(max_length: int) -> spaces.Text:
    return spaces.Text(max_length, min_length=0, charset=observation_charset())


def text_space(max_length: int) -> spaces.Text:
    """A ``Text`` space over the observation charset. Building one indexes ~63,000 characters
    (about 6 MB); every environment gets a shallow copy of one template instead, sharing those
    read-only tables but with a random generator of its own."""
    space = copy.copy(_text_template(max_length))
    space._np_random = None  # seeded (lazily) per copy, never shared
    return space


def fit_text(text: str, max_chars: int) -> str:
    """Make text a member of the observation space: known characters only, bounded length."""
    charset = observation_charset()
    if not all(ch in charset for ch in text):
        text = "".join(ch if ch in charset else "\ufffd" for ch in text)
    if len(text) > max_chars:
        marker = "\n[... observation truncated ...]\n"
        keep = max(max_chars - len(marker), 0)
        text = text[: keep // 2] + marker + text[len(text) - (keep - keep // 2) :]
        text = text[:max_chars]
    return text


def _append_line(text: str, line: str) -> str:
    if not text:
        return line
    return text + line if text.endswith("\n") else text + "\n" + line


class EnvConfig(BaseModel):
    """Budgets and limits of an episode. Validated once when the environment is made."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(100, ge=1, description="Truncate after this many steps.")
    time_limit: float | None = Field(3600.0, gt=0, description="Episode wall-clock budget, s.")
    command_timeout: float = Field(180.0, gt=0, description="Default per-command timeout, s.")
    max_output_chars: int = Field(16_000, ge=200, description="Head+tail kept of one output.")
    max_observation_chars: int = Field(64_000, ge=1000)
    max_action_chars: int = Field(1_000_000, ge=1)
    rows: int = Field(40, ge=5, le=500)
    cols: int = Field(160, ge=20, le=1000)
    screen: bool = Field(False, description="Keep a rendered screen (pyte) for render().")
    run_id: str = "adhoc"
    runtime: str | None = Field(None, description="OCI runtime of the sandbox, e.g. 'runsc'.")
    first_shell: FirstShellMode = Field(
        default_factory=default_first_shell,
        description=(
            "'exec': the first shell is a `docker exec`; 'attach': it is the container's main "
            "process, reached through `attach` (~50 ms faster cold reset); 'auto': attach for "
            "root sandboxes, exec for a non-root agent. Default: $TERMINAL_ENV_FIRST_SHELL or 'auto'."
        ),
    )


class TerminalEnv(gym.Env[str, str]):
    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        task: Any = None,
        *,
        config: EnvConfig | dict[str, Any] | None = None,
        render_mode: str | None = None,
        verifier: Callable[[Sandbox, TaskSpec], Any] | None = None,
        reward: str | Callable[[Any], float] | None = None,
        build_options: dict[str, Any] | None = None,
        client: Any = None,
        pool: Any = None,
        **overrides: Any,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        try:
            if isinstance(config, EnvConfig):
                cfg = config.model_copy(update=overrides) if overrides else config
                if overrides:
                    cfg = EnvConfig.model_validate(cfg.model_dump())
            else:
                cfg = EnvConfig.model_validate({**(config or {}), **overrides})
        except ValidationError as exc:
            raise ConfigError(f"invalid TerminalEnv config: {exc}") from None
        self.config = cfg
        # A task's own agent timeout becomes the time budget unless the user chose one.
        self._explicit_time_limit = isinstance(config, EnvConfig) or "time_limit" in {
            **(config if isinstance(config, dict) else {}), **overrides
        }
        self.render_mode = render_mode
        self.verifier = verifier
        #: where the task's artifacts are copied after the episode (None: not collected); what
        #: was collected, with the reasons for what was not, is then in ``artifacts``
        self.artifacts_dir: str | Path | None = None
        self.artifacts: list[dict[str, Any]] = []
        self._client = client
        #: a terminal_env.scale.warm.WarmPool shared with other environments, or None (cold starts)
        self.pool = pool
        self._build_options = dict(build_options or {})
        self._use(task if task is not None else hello_task())
        if reward is None and self.verifier is not None and self.source_task is not None:
            reward = "binary"
        if isinstance(reward, str):
            reward = get_reward(reward)
        self.reward_fn: Callable[[Any], float] | None = reward
        self.observation_space = text_space(cfg.max_observation_chars)
        self.action_space = text_space(cfg.max_action_chars)
        self.sandbox: Sandbox | None = None
        self.session: ShellSession | None = None
        #: an object with ``output(bytes)`` and ``input(bytes)`` (e.g. recording.CastRecorder)
        #: that sees the terminal of the next episodes; set it before reset()
        self.recorder: Any = None
        self._steps = 0
        self._t0 = 0.0
        self._done = True
        self._last_text = ""
        self._agent_death: str | None = None  # why the agent's doing stopped the sandbox
        self._step_index = 0
        self._step_runs: list[Any] = []
        self._removing: list[Any] = []  # removals of earlier episodes' sandboxes under way

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        if "task" in options:
            self._use(options.pop("task"))
        if options:
            raise ConfigError(f"unknown reset options {sorted(options)}; supported: ['task']")
        self._teardown(background=True)
        self.artifacts = []
        t0 = time.perf_counter()
        with engine_errors():
            if self.pool is not None:
                ready, warm = self.pool.acquire(self._recipe_key(), self._make_ready)
            else:
                ready, warm = self._make_ready(), False
        sandbox, session = ready.sandbox, ready.session
        self.sandbox, self.session = sandbox, session
        self._step_index, self._step_runs = 0, []
        header = ""
        if self.task_steps:
            self.verifier = self.prepared.verifier(step=0)
            with engine_errors():
                between_steps(sandbox, self.task_steps[0], self.task.workdir, self.task.user, first=True)
            header = f"[terminal-env] step 1 of {len(self.task_steps)}: {self.task_steps[0].name}\n\n"
        if self.recorder is not None:
            # attached after start-up: the recording shows the agent's terminal, not our setup
            session.on_output, session.on_input = self.recorder.output, self.recorder.input
        self._steps, self._t0, self._done = 0, time.monotonic(), False
        self._agent_death = None
        self._last_text = ""
        obs = fit_text(
            f"{header}{self.task.instruction.rstrip()}\n\n[terminal-env] a bash shell is ready in {session.cwd}.",
            self.config.max_observation_chars,
        )
        info = {
            "task": self.task.name,
            "cwd": session.cwd,
            "container": sandbox.name,
            "warm": warm,
            **({"task_step": self._step_info()} if self.task_steps else {}),
            "timings": {
                "sandbox_create": sandbox.timing.create,
                "sandbox_start": sandbox.timing.start,
                "session_start": sandbox.timing.extra.get("session_start", 0.0),
                "reset_total": time.perf_counter() - t0,
            },
        }
        return obs, info

    def step(self, action: Any):
        if self._done or self.session is None:
            raise ConfigError("the episode is over (or never started): call reset() first")
        if isinstance(action, str) and len(action) > self.config.max_action_chars:
            raise ConfigError(
                f"action of {len(action)} characters exceeds max_action_chars="
                f"{self.config.max_action_chars}"
            )
        act = parse_action(action)
        if not isinstance(action, str):  # a typed action is held to the limit of its text form
            size = len(action_to_text(act))
            if size > self.config.max_action_chars:
                raise ConfigError(
                    f"action of {size} characters exceeds max_action_chars={self.config.max_action_chars}"
                )
        self._steps += 1
        remaining = self._time_left()
        terminated = truncated = False
        if isinstance(act, Submit):
            out = None
            terminated = True
            text = "[terminal-env] submitted."
        else:
            out = self._act(act, remaining)
            text = out.text()
            if out.exit_code not in (None, 0):
                text = _append_line(text, f"[exit code {out.exit_code}]")
        if not terminated:
            if self._steps >= self.config.max_steps:
                truncated = True
                text = _append_line(text, f"[terminal-env] step budget of {self.config.max_steps} used up.")
            elif self._time_left() <= 0:
                truncated = True
                text = _append_line(text, f"[terminal-env] time budget of {self._time_limit():g} s used up.")
        if self._agent_death is not None and not terminated:
            truncated = True
            text = _append_line(text, "[terminal-env] the episode is over.")
        disk = self.sandbox.disk if self.sandbox is not None else None
        if disk is not None and (terminated or truncated or disk.tripped):
            if not disk.tripped:
                disk.check(force=True)  # the episode ends: measure now, not up to 0.5 s ago
            if disk.tripped:
                # The agent's doing: the episode ends as its failure (never masked).
                truncated = not terminated
                text = _append_line(text, f"[terminal-env] {disk.message()}; the episode is over.")
        info = self._info(out, act)
        if disk is not None and disk.tripped:
            info["disk_exceeded"] = True
        reward = 0.0
        if (terminated or truncated) and self.task_steps:
            # a step ends: by the agent's submit or its time budget the next step can begin;
            # the episode's step budget, a final submit, a dead sandbox or a full disk end it all
            final = (isinstance(act, Submit) and act.final) or (truncated and (
                self._steps >= self.config.max_steps or self._agent_death is not None
                or bool(info.get("disk_exceeded"))))
            return self._end_step(text, info, terminated, truncated, final)
        if terminated or truncated:
            self._done = True
            reward, verification = self._verify()
            return self._episode_over(text, info, reward, terminated, truncated, verification)
        self._last_text = text
        return fit_text(text, self.config.max_observation_chars), reward, terminated, truncated, info

    def _episode_over(self, text: str, info: dict[str, Any], reward: float, terminated: bool, truncated: bool,
                      verification: Any):
        """The last step's return: the verdict, whether to mask it, the artifacts collected."""
        info["verification"] = verification
        # Infrastructure failures are never the agent's: trainers mask, runners retry.
        info["masked"] = bool(getattr(verification, "masked", False))
        if self.artifacts_dir is not None and self.sandbox is not None:
            info["artifacts"] = self.artifacts = collect_artifacts(
                self.sandbox, list(getattr(self.source_task, "trial_artifacts", None) or []),
                Path(self.artifacts_dir))
        self._last_text = text
        return fit_text(text, self.config.max_observation_chars), reward, terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self.session is not None and self.session.screen_text() is not None:
            return self.session.screen_text()
        return self._last_text

    def close(self) -> None:
        self._teardown()
        super().close()

    # ------------------------------------------------------------------ helpers
    @property
    def source_task(self) -> Any:
        """The loaded task (task directory) behind the spec, when there is one."""
        return self.prepared.source

    def _use(self, task: Any) -> None:
        """Make ``task`` this environment's, through :func:`prepare_task` (the one step from a
        task to an episode): its spec, its own protected verifier (unless a verifier of the
        caller's choosing was given) and its time budget (unless one was chosen)."""
        self.prepared = prepare_task(task, build=self._build_options, client=self._client)
        self.task = self.prepared.spec
        #: a multi-step task's steps (terminal_env.steps), else []
        self.task_steps = self.prepared.steps
        if self.task_steps and self.verifier is not None and not isinstance(self.verifier, ProtectedVerifier):
            raise ConfigError(f"task {self.task.name!r} has {len(self.task_steps)} steps, each verified by its "
                              f"own tests: a verifier of your own cannot judge them; leave verifier unset")
        if self.verifier is None or isinstance(self.verifier, ProtectedVerifier):
            self.verifier = self.prepared.verifier(step=0 if self.task_steps else None)
        if not self._explicit_time_limit and self.prepared.time_limit:
            self.config = self.config.model_copy(update={"time_limit": self.prepared.time_limit})

    def _make_ready(self) -> Any:
        """A started sandbox, prepared for the task, with its shell running (a warm pool calls
        this ahead of time)."""
        sandbox = Sandbox(
            self._sandbox_config(),
            client=self._client,
        )
        try:
            sandbox.start()
            self._prepare(sandbox)
            t_session = time.perf_counter()
            session = self._open_session(sandbox)
            sandbox.timing.extra["session_start"] = time.perf_counter() - t_session
        except BaseException:
            sandbox.remove()
            raise
        return Ready(sandbox, session)

    def _open_session(self, sandbox: Sandbox) -> ShellSession:
        session = ShellSession(
            sandbox,
            SessionConfig(
                rows=self.config.rows,
                cols=self.config.cols,
                max_output_chars=self.config.max_output_chars,
                workdir=self.task.workdir,
            ),
        )
        if self.config.screen:
            session.enable_screen()
        session.start()
        return session

    def _sandbox_config(self) -> Any:
        # a multi-step task opens a new shell per step: the first is an exec like the others
        return self.task.sandbox_config(
            run_id=self.config.run_id, runtime=self.config.runtime,
            first_shell="exec" if self.task_steps else self.config.first_shell,
        )

    def _recipe_key(self) -> str:
        """What makes two prepared sandboxes interchangeable for this environment."""
        parts = [
            self._sandbox_config().model_dump_json(),
            repr(sorted((k, v if isinstance(v, (str, bytes)) else str(v)) for k, v in self.task.files.items())),
            repr(list(self.task.setup)), self.task.workdir or "",
            repr((self.config.rows, self.config.cols, self.config.max_output_chars, self.config.screen)),
        ]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]

    def _prepare(self, sandbox: Sandbox) -> None:
        if self.task.files:
            sandbox.write_files(self.task.files)
        for cmd in self.task.setup:
            res = sandbox.exec(cmd, user="root", timeout=self.task.setup_timeout, workdir=self.task.workdir)
            if res.exit_code != 0:
                raise ConfigError(
                    f"setup command of task {self.task.name!r} failed (exit {res.exit_code}): "
                    f"{cmd!r}\n{res.output[-2000:]}"
                )
        wait_healthy(sandbox, self.task.healthcheck, self.task.user, f"task {self.task.name}")

    def _time_limit(self) -> float | None:
        """The time budget of the episode, or of the current step of a multi-step task (its own
        agent timeout, unless the caller chose a time limit)."""
        if self.task_steps and not self._explicit_time_limit:
            return self.task_steps[self._step_index].agent_timeout or self.config.time_limit
        return self.config.time_limit

    def _time_left(self) -> float:
        limit = self._time_limit()
        if limit is None:
            return float("inf")
        return limit - (time.monotonic() - self._t0)

    # ------------------------------------------------------------------ multi-step tasks
    @property
    def step_index(self) -> int:
        """Which step of a multi-step task the episode is in (from 0; 0 for a one-step task)."""
        return self._step_index if self.task_steps else 0

    def _step_info(self) -> dict[str, Any]:
        step = self.task_steps[self._step_index]
        return {"index": self._step_index, "name": step.name, "of": len(self.task_steps)}

    def _end_step(self, text: str, info: dict[str, Any], terminated: bool, truncated: bool,
                  final: bool):
        """The current step's verification; then the next step, or the episode's verdict."""
        step = self.task_steps[self._step_index]
        reward, result = self._verify()
        self._step_runs.append((step.name, result, reward))
        info["task_step"] = {**self._step_info(), "outcome": result.outcome.value, "reward": reward}
        last = self._step_index + 1 == len(self.task_steps)
        stopped = None
        if result.masked:
            stopped = f"step {step.name}'s verification failed for infrastructure reasons"
        elif result.outcome.value == "tampered":
            stopped = f"step {step.name} tampered with the verifier's files"
        elif final:
            stopped = f"the episode ended in step {step.name}"
        elif (why := min_reward_failure(result, step.min_reward)) is not None:
            stopped = f"step {step.name}: {why}"
        if not last and stopped is None:
            self._next_step()
            nxt = self.task_steps[self._step_index]
            info["next_step"] = self._step_info()
            text = (f"{text}\n[terminal-env] step {self._step_index} of {len(self.task_steps)} is over.\n\n"
                    f"[terminal-env] step {self._step_index + 1} of {len(self.task_steps)}: {nxt.name}\n\n"
                    f"{nxt.instruction.rstrip()}\n\n[terminal-env] a new bash shell is ready in {self.session.cwd}.")
            self._last_text = text
            return fit_text(text, self.config.max_observation_chars), 0.0, False, False, info
        self._done = True
        combined, total = combine(self._step_runs, getattr(self.source_task, "multi_step_reward_strategy", None),
                                  len(self.task_steps), None if last else stopped,
                                  cut_short=final and not last)
        return self._episode_over(text, info, total, terminated, truncated, combined)

    def _next_step(self) -> None:
        """The sandbox as the next step's agent finds it: the verifier's files gone, the step's
        ``workdir/`` copied in and its ``setup.sh`` run, a new shell (the verifier stopped every
        process of the last), the disk budget watched again."""
        assert self.sandbox is not None and self.session is not None
        self.session.close()
        self._step_index += 1
        self.verifier = self.prepared.verifier(step=self._step_index)
        try:
            with engine_errors():
                between_steps(self.sandbox, self.task_steps[self._step_index], self.task.workdir, self.task.user)
                self.sandbox.watch_disk()
                self.session = self._open_session(self.sandbox)
        except ConfigError as exc:  # the task's own step could not begin: never the agent's failure
            self._done = True
            raise InfraError(f"step {self.task_steps[self._step_index].name} could not begin: {exc}") from None
        except BaseException:
            self._done = True
            raise
        if self.recorder is not None:
            self.session.on_output, self.session.on_input = self.recorder.output, self.recorder.input
        self._t0 = time.monotonic()

    def _act(self, act: Command | Keys, remaining: float) -> StepOutput:
        assert self.session is not None
        try:
            with engine_errors():
                return self._act_unguarded(act, remaining)
        except InfraError:
            self._done = True
            raise

    def _act_unguarded(self, act: Command | Keys, remaining: float) -> StepOutput:
        assert self.session is not None
        try:
            if isinstance(act, Command):
                show = getattr(self.recorder, "command", None)
                if show is not None:
                    show(act.command)  # the session types with echo off; show what was run
                timeout = min(act.timeout or self.config.command_timeout, max(remaining, 1.0))
                return self.session.run(act.command, timeout=timeout)
            data = encode_keys(act.keys, literal=act.literal)
            return self.session.send_keys(data, wait=min(act.wait, max(remaining, 0.1)), quiet=act.quiet)
        except SandboxGoneError:
            self._done = True
            cause = self.sandbox.stopped_by_agent() if self.sandbox is not None else None
            if cause is not None:
                # Not the infrastructure's failure: the agent used up the memory limit (and the
                # kernel killed the container's keeper), or killed the keeper itself where the
                # runtime allows it. The episode ends as the agent's failure.
                self._agent_death = cause
                return StepOutput(output="", raw=b"", exit_code=None, cwd=None, duration=0.0,
                                  output_bytes=0, truncated=False, notes=[self._agent_death + "."])
            raise

    def _info(self, out: StepOutput | None, act: Any) -> dict[str, Any]:
        info: dict[str, Any] = {"step": self._steps, "action_kind": act.kind}
        if out is not None:
            info.update(
                exit_code=out.exit_code,
                cwd=out.cwd,
                duration=out.duration,
                output_bytes=out.output_bytes,
                truncated=out.truncated,
                timed_out=out.timed_out,
                busy=out.busy,
                shell_restarted=out.shell_restarted,
                notes=list(out.notes),
            )
        info["elapsed"] = time.monotonic() - self._t0
        return info

    def _verify(self) -> tuple[float, Any]:
        if self.sandbox is not None and self.sandbox.disk is not None:
            self.sandbox.disk.stop()  # what the verifier writes is not the agent's
        if self.verifier is None or self.sandbox is None:
            return 0.0, None
        if self._agent_death is not None or self.sandbox.disk_exceeded:
            if self._agent_death is not None:
                result = exhausted_result(self._agent_death)
            else:
                assert self.sandbox.disk is not None
                result = disk_budget_result(self.sandbox.disk.message())
            digest = getattr(getattr(self.verifier, "task", None), "tests_digest", None)
            if isinstance(digest, str):
                result = result.model_copy(update={"tests_digest": digest})
        else:
            with engine_errors():
                result = self.verifier(self.sandbox, self.task)
        if self.reward_fn is not None:
            return float(self.reward_fn(result)), result
        return float(getattr(result, "reward", 0.0) or 0.0), result

    def _teardown(self, background: bool = False) -> None:
        """End the sandbox of the last episode. ``background`` (a reset): its removal runs on a
        background thread, off the next episode's critical path; close() waits for those."""
        if self.pool is not None and self.sandbox is not None and self.session is not None:
            self.pool.release(Ready(self.sandbox, self.session))  # removed in the background
            self.sandbox = self.session = None
        if self.session is not None:
            self.session.close()
            self.session = None
        if self.sandbox is not None:
            sandbox, self.sandbox = self.sandbox, None
            if background:
                self._removing = [f for f in getattr(self, "_removing", []) if not f.done()]
                self._removing.append(remove_later(sandbox))
            else:
                try:
                    sandbox.remove()
                except InfraError as exc:  # the engine is gone: close() must still close
                    log.warning("%s", exc)
        if not background:
            for pending in getattr(self, "_removing", []):
                pending.result()  # logs its own failure
            self._removing = []
        self._done = True
