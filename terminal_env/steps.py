"""Multi-step tasks (Harbor's ``[[steps]]``): what happens between two steps of one episode, and
how the steps' verdicts make the episode's.

One sandbox runs every step. A step ends when the agent submits (or its time budget runs out);
its own tests then run in the protected verifier (:meth:`Task.step_task` is the step as a task),
and the next step begins only if the step reached its ``min_reward``, nothing was tampered with
and the verification did not fail for the infrastructure's reasons. Between two steps
(:func:`between_steps`) the verifier's files are removed (so no step's agent sees an earlier
step's tests), the next step's ``workdir/`` is copied into the working directory and its
``setup.sh`` run there, as the agent's user. The episode's verdict (:func:`combine`) follows
``multi_step_reward_strategy``: ``mean`` (the default, Harbor's) over the steps that were
verified, per metric, a missing metric counting 0, or ``final`` (the last verified step's); the
steps an early end of the episode left unreached count as failed.
"""

from __future__ import annotations

import math
import posixpath
import shlex
import time
from typing import Any

from .errors import ConfigError, InfraError
from .task import Healthcheck
from .tasks.model import TaskStep, tree_files
from .verify import guard
from .verify.result import Outcome, VerifierResult


def min_reward_failure(result: VerifierResult, min_reward: float | dict[str, float] | None) -> str | None:
    """Why the step's result stops the episode under ``min_reward`` (Harbor's rule: a number gates
    the ``reward`` metric, a table each named metric, a missing one counting as -inf), or None."""
    if min_reward is None:
        return None
    gates = {"reward": float(min_reward)} if isinstance(min_reward, (int, float)) else dict(min_reward)
    values = step_metrics(result)
    for key, threshold in gates.items():
        actual = values.get(key, -math.inf)
        if actual < threshold:
            return f"{key} = {actual:g} is below min_reward {threshold:g}"
    return None


def step_metrics(result: VerifierResult) -> dict[str, float]:
    """A step's named rewards, as Harbor reads them: reward.json's numbers, else ``reward``."""
    if result.metrics:
        return dict(result.metrics)
    if result.reward_reported is not None:
        return {"reward": float(result.reward_reported)}
    return {"reward": 1.0 if result.strict_success else 0.0} if result.outcome != Outcome.infra_error else {}


def combine(steps: list[tuple[str, VerifierResult, float]], strategy: str | None, total: int,
            stopped: str | None, *, cut_short: bool = False) -> tuple[VerifierResult, float]:
    """The episode's verdict and reward from its verified steps ``(name, result, reward)`` (the
    reward under the environment's reward function). ``total``: how many steps the task has;
    ``stopped``: why the later steps did not run (None when all ran). ``cut_short``: they did
    not run because the episode ended before them (a final submit, the step budget, a dead
    sandbox, a full disk): then they count, each a failed step (under ``final`` the episode
    scores 0), so that ending early after a good step is never worth more than going on. Steps
    a ``min_reward`` stopped do not count, as in Harbor (the step that stopped them does)."""
    strategy = strategy or "mean"
    rows = [{"name": name, "outcome": r.outcome.value, "reward": round(reward, 6), "progress": r.progress,
             "metrics": step_metrics(r), "strict_success": r.strict_success, "message": r.message,
             "tests_digest": r.tests_digest, "duration": r.duration} for name, r, reward in steps]
    note = f"{len(steps)} of {total} steps verified" + (f"; {stopped}" if stopped else "") + (
        f"; the {total - len(steps)} not reached count as failed" if cut_short and len(steps) < total else "")
    checks = [c.model_copy(update={"name": f"{name}/{c.name}"}) for name, r, _ in steps for c in r.checks]
    common = {"steps": rows, "checks": checks, "tests_digest": steps[-1][1].tests_digest if steps else "",
              "duration": sum(r.duration for _, r, _ in steps)}
    # what no strategy averages away: a tampered step, or one the infrastructure failed
    for name, r, _ in steps:
        if r.outcome == Outcome.tampered:
            return VerifierResult.tampered(r.tampered_paths, f"step {name}: {r.message}", **common), 0.0
    if steps and steps[-1][1].outcome == Outcome.infra_error:
        name, r, _ = steps[-1]
        return VerifierResult.infra_error(f"step {name}: {r.message}", **common), 0.0
    missing = total - len(steps) if cut_short else 0
    if strategy == "final":
        chosen = [] if missing else steps[-1:]
    else:
        chosen = steps
    if not chosen:
        return VerifierResult(outcome="failed", message=note, **common), 0.0
    n = len(chosen) + (missing if strategy != "final" else 0)
    keys = {k for _, r, _ in chosen for k in step_metrics(r)}
    metrics = {k: sum(step_metrics(r).get(k, 0.0) for _, r, _ in chosen) / n for k in sorted(keys)}
    progress = sum(r.progress for _, r, _ in chosen) / n
    reward = sum(w for _, _, w in chosen) / n
    everything = len(steps) == total and all(r.strict_success for _, r, _ in chosen)
    outcome = "passed" if everything and progress == 1.0 else ("partial" if progress > 0 else "failed")
    reported = metrics.get("reward")
    return VerifierResult(
        outcome=outcome, progress=1.0 if outcome == "passed" else (progress if outcome == "partial" else 0.0),
        metrics=metrics, reward_reported=min(1.0, max(0.0, reported)) if reported is not None else None,
        source="steps", message=f"{strategy} over {note}", **common), reward


def wait_healthy(sandbox: Any, check: Healthcheck | None, user: str | None, where: str = "the task") -> None:
    """Run ``check`` (Harbor's, Docker's meaning) until it succeeds; an :class:`InfraError`
    naming the command and its last output when it does not."""
    if check is None:
        return
    start_period_end = time.monotonic() + check.start_period_sec
    failures = 0
    while True:
        in_start_period = time.monotonic() < start_period_end
        run = sandbox.exec(check.command, user=user, timeout=check.timeout_sec)
        if run.exit_code == 0:
            return
        if in_start_period:
            time.sleep(check.start_interval_sec)
            continue
        failures += 1
        if failures >= check.retries:
            raise InfraError(f"the healthcheck of {where} failed {failures} times in a row: "
                             f"{check.command!r} (exit {run.exit_code}): {run.output[-500:]}")
        time.sleep(check.interval_sec)


#: $1 parent directories (top down), then the files: links and non-directories among the
#: parents removed, links and directories where the files go removed
_CLEAR = """n=$1; shift; i=0
for p in "$@"; do
  i=$((i+1))
  [ "$p" = / ] && continue
  if [ $i -le $n ]; then
    if [ -L "$p" ] || { [ -e "$p" ] && [ ! -d "$p" ]; }; then rm -f -- "$p"; fi
  elif [ -L "$p" ]; then rm -f -- "$p"
  elif [ -d "$p" ]; then rm -rf -- "$p"
  fi
done"""


def _parents(path: str, root: str) -> list[str]:
    """The directories below ``root`` down to ``path``'s parent (``root`` itself is the image's:
    a link there may be the image's own, and only root could have put another there)."""
    out = []
    parent = posixpath.dirname(path)
    while parent.startswith(root.rstrip("/") + "/") and parent not in out:
        out.append(parent)
        parent = posixpath.dirname(parent)
    return [p for p in out if p != (root.rstrip("/") or "/")]


def between_steps(sandbox: Any, step: TaskStep, workdir: str, user: str | None, *, first: bool = False) -> None:
    """Make the sandbox ready for ``step``: after the verifier of the one before (not ``first``),
    remove what the verifier put there (its tests, results and guard); then copy the step's
    ``workdir/`` into ``workdir`` and run its ``setup.sh`` there as the agent's ``user``. A failing
    setup is the task's fault: a :class:`ConfigError` naming the step."""
    if not first:
        clean = sandbox.exec(["sh", "-c", guard.cleanup_script()], user="root", timeout=60)
        if clean.exit_code != 0:
            raise InfraError(f"could not remove the verifier's files before step {step.name!r}: "
                             f"{clean.output[-500:]}")
    files = tree_files(step.workdir_dir) if step.workdir_dir is not None else {}
    if not files:
        wait_healthy(sandbox, step.healthcheck, user, f"step {step.name}")
        return
    targets = [posixpath.join(workdir, rel) for rel in files]
    # the files are written as root: nothing the agent left may redirect them (a link, or a file
    # where a directory goes, is removed first, top down; a directory where a file goes too)
    parents = sorted({p for t in targets for p in _parents(t, workdir)}, key=lambda p: (p.count("/"), p))
    clear = sandbox.exec(["sh", "-c", _CLEAR, "sh", str(len(parents)), *parents, *targets], user="root", timeout=60)
    if clear.exit_code != 0:
        raise InfraError(f"could not clear the way for step {step.name!r}'s files: {clear.output[-500:]}")
    sandbox.write_files({t: src.read_bytes() for t, src in zip(targets, files.values())}, mode=0o755)
    if user:
        paths = " ".join(shlex.quote(t) for t in targets)
        sandbox.exec(["sh", "-c", f"chown -h {shlex.quote(user)} {paths}"], user="root", timeout=60)
    if "setup.sh" in files:
        run = sandbox.exec(["bash", posixpath.join(workdir, "setup.sh")], user=user or "root", timeout=600,
                           workdir=workdir)
        if run.exit_code != 0:
            raise ConfigError(f"step {step.name!r}: steps/{step.name}/workdir/setup.sh failed (exit "
                              f"{run.exit_code}): {run.output[-1000:]}")
    wait_healthy(sandbox, step.healthcheck, user, f"step {step.name}")
