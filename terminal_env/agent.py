"""The agent loop: a harness and a model backend play one episode of a TerminalEnv.

::

    traj = run_agent(env, get_harness("terminus"), backend)   # -> Trajectory (verified)

Per model turn: fit the conversation into the input budget, ask the backend, parse the reply with
the harness (a format error becomes the next observation), compile each harness action to generic
actions and step the environment with them, report the results back in the harness's format.
The trajectory is saved as the episode goes when a path is given: after a turn, unless the last
save is less than a second old (or less than twenty times as old as it took to write, so that
long episodes do not spend their time rewriting a big file); the first and the last save always
happen.

How it ends, and what the trajectory says:

* the agent submits, or the environment's step or time budget runs out: the protected verifier
  runs (``termination`` submitted / max_steps / time_limit);
* the loop's turn budget runs out, or the prompt cannot fit: the work so far is verified
  (max_turns / context_overflow);
* the model backend fails after its retries, or the sandbox or engine fails: no verification,
  ``masked=True`` (model_error / infra_error): an infrastructure failure is never the agent's.

Mistakes of the user (a bad config, a refused API key) are raised as :class:`ConfigError`.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .actions import Submit, action_to_text
from .context import fit_messages
from .errors import ConfigError, InfraError
from .harness import get_harness
from .harness.base import ActionResult, CommandRecord, FormatError, Harness
from .models.base import (
    Completion,
    ContextOverflowError,
    ModelError,
    SamplingParams,
    count_tokens_approx,
)
from .models.tokens import TokenRecorder, is_token_backend
from .protocols import ModelBackend
from .rewards import NEEDS_OPTIONS, REWARDS
from .trajectory import ContextEvent, ModelRef, TaskRef, Trajectory, Turn


def turn_seed(seed: int, turn: int) -> int:
    """The sampling seed of turn ``turn`` of an episode seeded ``seed``: a hash, so that the
    turns of neighbouring seeds do not share streams (seed 1's turn 1 is not seed 2's turn 0).

    >>> turn_seed(7, 0) == turn_seed(7, 0) != turn_seed(7, 1)
    True
    """
    digest = hashlib.sha256(f"terminal-env:{seed}:{turn}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def task_ref(env: Any) -> TaskRef:
    task = env.source_task
    if task is None:
        return TaskRef(name=env.task.name)
    return TaskRef(
        name=task.name, path=str(task.path), category=task.category, difficulty=task.difficulty,
        split=task.split, tests_digest=task.tests_digest,
    )


def _all_rewards(result: Any) -> dict[str, float]:
    out = {}
    for name, fn in REWARDS.items():
        if name in NEEDS_OPTIONS:  # the task's metrics are in the verification's ``metrics``
            continue
        try:
            out[name] = float(fn(result))
        except Exception:  # a reward that needs arguments; the chosen one is in `reward`
            continue
    return out


#: called after every environment step with (action, observation, info)
StepHook = Callable[[Any, str, dict[str, Any]], None]


class _Episode:
    """State of one run of the loop (kept small so run_agent reads top to bottom)."""

    def __init__(self, env: Any, traj: Trajectory, path: Path | None, on_step: StepHook | None,
                 seed: int | None = None, tokens: TokenRecorder | None = None):
        self.env, self.traj, self.path, self.on_step = env, traj, path, on_step
        self.seed = seed
        #: the token-exact record, for a token-level backend
        self.tokens = tokens
        self.done = False
        self.ratio = 1.0  # measured prompt tokens / estimate, from the last usage report
        self._saved_at = self._save_cost = 0.0

    def save(self, force: bool = False) -> None:
        """Write the trajectory; a turn's save waits while the last one is recent (see above)."""
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now - self._saved_at < max(1.0, 20 * self._save_cost):
            return
        self.traj.save(self.path)
        self._saved_at, self._save_cost = time.monotonic(), time.monotonic() - now

    def params_for(self, params: SamplingParams, turn: int) -> SamplingParams:
        """The sampling parameters of one turn: its seed derived from the episode's (the
        params' own seed, else the attempt's), so a seeded episode replays exactly."""
        base = params.seed if params.seed is not None else self.seed
        if base is None:
            return params
        return params.model_copy(update={"seed": turn_seed(base, turn)})

    def count(self, messages: list[dict[str, Any]], tools: Any) -> int:
        return int(count_tokens_approx(messages, tools) * self.ratio)

    def step(self, action: Any) -> CommandRecord:
        """One generic action through the environment."""
        t0 = time.monotonic()
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except ConfigError as exc:  # the model wrote an action the env refuses (e.g. too long)
            return CommandRecord(action=action.model_dump(), text=action_to_text(action),
                                 observation=f"[terminal-env] action refused: {exc}")
        if self.on_step is not None:
            self.on_step(action, obs, info)
        rec = CommandRecord(
            action=action.model_dump(), text=action_to_text(action), observation=obs,
            exit_code=info.get("exit_code"), duration=time.monotonic() - t0,
            timed_out=bool(info.get("timed_out")), truncated=bool(info.get("truncated")),
        )
        if "task_step" in info and ("next_step" in info or terminated or truncated):
            # a step of a multi-step task ended here: the boundary, in the trajectory
            self.traj.extra.setdefault("task_steps", []).append(
                {**info["task_step"], "after_turn": len(self.traj.turns)})
        if terminated or truncated:
            self.finish(info, "submitted" if terminated else self._truncation_reason(info))
            self.traj.reward = float(reward)
        return rec

    def _truncation_reason(self, info: dict[str, Any]) -> str:
        return "max_steps" if info.get("step", 0) >= self.env.config.max_steps else "time_limit"

    def finish(self, info: dict[str, Any], termination: str) -> None:
        self.done = True
        t = self.traj
        t.termination = termination  # type: ignore[assignment]
        result = info.get("verification")
        if result is not None:
            t.verification = result.model_dump(mode="json")
            t.rewards = _all_rewards(result)
            t.timings["verify"] = float(getattr(result, "duration", 0.0))
        t.masked = bool(info.get("masked"))
        if t.masked and t.termination == "submitted":
            t.error = f"verification failed for infrastructure reasons: {getattr(result, 'message', '')}"

    def verify_now(self, termination: str) -> None:
        """End the episode where it stands and verify the work so far (a multi-step task's later
        steps are not run)."""
        obs, reward, _, _, info = self.env.step(Submit(final=bool(getattr(self.env, "task_steps", None))))
        if self.on_step is not None:
            self.on_step(Submit(), obs, info)
        self.finish(info, termination)
        self.traj.reward = reward


def run_agent(
    env: Any,
    harness: Harness,
    backend: ModelBackend,
    *,
    params: SamplingParams | None = None,
    max_turns: int = 100,
    trajectory_path: str | Path | None = None,
    recorder: Any = None,
    on_turn: Callable[[Trajectory], None] | None = None,
    on_step: StepHook | None = None,
    seed: int | None = None,
) -> Trajectory:
    params = params or SamplingParams()
    native = getattr(backend, "native_harness", None)
    if native and native != harness.name:
        harness = get_harness(native)  # oracle, nop, human and replay speak one harness
    traj = Trajectory(
        terminal_env_version=__version__, task=TaskRef(name="?"), harness=harness.name,
        model=ModelRef(name=getattr(backend, "name", type(backend).__name__),
                       backend=type(backend).__name__, params=params.model_dump()),
        tools=harness.tools(),
    )
    tokens = (TokenRecorder(backend.chat_tokenizer, tools=harness.tools(), thinking=params.thinking)  # type: ignore[attr-defined]
              if is_token_backend(backend) else None)
    traj.tokens = tokens.tokens if tokens is not None else None
    ep = _Episode(env, traj, Path(trajectory_path) if trajectory_path else None, on_step, seed, tokens)
    t_start = time.monotonic()
    env.recorder = recorder
    try:
        harness.reset()
        t0 = time.monotonic()
        obs, info = env.reset(seed=seed)
        traj.timings["reset"] = time.monotonic() - t0
        traj.task = task_ref(env)
        if hasattr(backend, "start_episode"):
            backend.start_episode(env, harness)
        traj.messages = list(harness.initial_messages(env.task.instruction, obs))
        ep.save(force=True)
        for n in range(max_turns):
            _turn(ep, harness, backend, params, n)
            ep.save()
            if on_turn is not None:
                on_turn(traj)
            if ep.done:
                break
        if not ep.done:
            ep.verify_now("max_turns")
    except ContextOverflowError as exc:
        traj.error = str(exc)
        try:
            ep.verify_now("context_overflow")
        except InfraError as infra:
            traj.termination, traj.masked, traj.error = "infra_error", True, f"{type(infra).__name__}: {infra}"
    except ModelError as exc:
        traj.termination, traj.masked, traj.error = "model_error", True, str(exc)
    except InfraError as exc:
        traj.termination, traj.masked, traj.error = "infra_error", True, f"{type(exc).__name__}: {exc}"
    finally:
        env.recorder = None
        traj.timings["total"] = time.monotonic() - t_start
        traj.timings["model"] = sum(t.model_seconds for t in traj.turns)
        traj.timings["env"] = sum(t.env_seconds for t in traj.turns)
        ep.save(force=True)
    return traj


def run_episode(
    env: Any, backend: ModelBackend, *, seed: int | None = None, on_step: StepHook | None = None,
) -> tuple[float, dict[str, Any]]:
    """Play one episode with ``backend`` in its own harness (generic for the scripted, oracle and
    nop agents) and return the final reward and the environment's last ``info``, whose
    ``verification`` is the :class:`VerifierResult`. For tests and task checks that look at the
    environment's own view; it is :func:`run_agent`, so there is one loop. An episode that ended
    on an infrastructure or model error (no verification) raises it instead of returning."""
    last: dict[str, Any] = {}

    def keep(action: Any, observation: str, info: dict[str, Any]) -> None:
        last.clear()
        last.update(info)
        if on_step is not None:
            on_step(action, observation, info)

    traj = run_agent(env, get_harness("generic"), backend, seed=seed, on_step=keep)
    if traj.termination in ("infra_error", "model_error"):
        raise (InfraError if traj.termination == "infra_error" else ModelError)(traj.error or traj.termination)
    return float(traj.reward or 0.0), last


def _turn(ep: _Episode, harness: Harness, backend: ModelBackend, params: SamplingParams, n: int) -> None:
    traj = ep.traj
    turn = Turn(index=n, started=time.time())
    traj.turns.append(turn)
    marker = getattr(ep.env.recorder, "marker", None)
    if marker is not None:
        marker(f"turn {n}")
    tools = harness.tools()
    budget = params.max_input_tokens
    sent, event = fit_messages(traj.messages, budget, count=lambda ms: ep.count(ms, tools))
    if event is not None:
        traj.context_events.append(ContextEvent(turn=n, **event))
    turn.prompt_messages = len(sent)
    turn.prompt_tokens_estimate = ep.count(sent, tools)
    t0 = time.monotonic()
    turn_params = ep.params_for(params, n)
    try:
        if ep.tokens is not None:  # the episode's token sequence, extended (models/tokens.py)
            prompt = ep.tokens.prompt(sent)
            completion: Completion = backend.complete_tokens(prompt, tools=tools, params=turn_params)  # type: ignore[attr-defined]
            ep.tokens.record(n, sent, completion)
        else:
            completion = backend.complete(sent, tools=tools, params=turn_params)
    finally:
        turn.model_seconds = time.monotonic() - t0
    turn.completion = completion
    if completion.usage.prompt_tokens and turn.prompt_tokens_estimate:
        raw = turn.prompt_tokens_estimate / ep.ratio
        ep.ratio = min(3.0, max(0.5, completion.usage.prompt_tokens / raw))
    traj.messages.append(completion.assistant_message())
    turn.message_index = len(traj.messages) - 1
    t0 = time.monotonic()
    results, messages, turn.format_error = apply_completion(harness, completion, ep.step, lambda: ep.done)
    turn.actions = results
    turn.env_seconds = time.monotonic() - t0
    traj.messages.extend(messages)


def apply_completion(harness: Harness, completion: Completion, step: Callable[[Any], CommandRecord],
                     done: Callable[[], bool]) -> tuple[list[ActionResult], list[dict[str, Any]], str | None]:
    """What one model reply does, in ``harness``'s terms: parse it, compile each action to generic
    actions and run them through ``step`` (until ``done()``), and the messages that report back.
    Returns (the results, the messages, the format error's feedback or None). The agent loop and
    every trainer adapter that takes the model's text (``terminal_env.integrations``) go through
    here, so a reply means the same everywhere."""
    try:
        actions = harness.parse(completion)
    except FormatError as err:
        return [], list(harness.error_messages(err, completion)), err.feedback
    results: list[ActionResult] = []
    for action in actions:
        if done():
            break
        try:
            generic = harness.compile(action)
        except FormatError as err:
            results.append(ActionResult(action=action, error=err.feedback, observation=err.feedback))
            continue
        records = []
        for g in generic:
            records.append(step(g))
            if done():
                break
        results.append(ActionResult(action=action, commands=records, observation=harness.observe(action, records)))
    return results, list(harness.result_messages(results, completion)), None
