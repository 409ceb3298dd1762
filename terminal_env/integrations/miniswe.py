"""mini-swe-agent, unmodified, acting in a task's sandbox (extra ``[miniswe]``).

mini-swe-agent's agents run commands through an *environment* object with one method that
matters, ``execute(action, cwd, timeout)``. :class:`SandboxEnvironment` is one: each command runs
in the task's sandbox through this project's session (``TerminalEnv.step``, so the same budgets,
guards and output handling as every other episode), and when the agent signals that it is done
(its own convention: a command whose output starts with ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``)
the protected verifier scores the sandbox. Point the agent's model at a
:class:`~terminal_env.integrations.gateway.Gateway` and every model call is recorded token for
token::

    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

    with Gateway(backend) as gw, SandboxEnvironment("tasks/some-task") as env:
        model = LitellmTextbasedModel(model_name=f"openai/{gw.model}", cost_tracking="ignore_errors",
                                      model_kwargs={"api_base": gw.url, "api_key": "unused"}, ...)
        DefaultAgent(model, env, **agent_config).run(env.instruction)
        reward = env.finish()          # verified once (now, if the agent never submitted)
    gw.calls                           # the token-exact record of every call

mini-swe-agent runs each command in a fresh subshell (its prompts say so); this environment keeps
one shell for the episode, which is a superset of that behaviour (``cd`` persists). A ``cwd``
given with an action runs it in that directory, in a subshell.
"""

from __future__ import annotations

import platform
import shlex
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .episode import EpisodeRecord, ToolEpisode

#: what mini-swe-agent's prompts ask the agent to print when it is done
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

class SandboxEnvironment:
    """A mini-swe-agent environment over one task's sandbox. ``task``: a task directory or a
    bundled task's name; ``reward``: a reward of :mod:`terminal_env.rewards`; ``config``:
    :class:`~terminal_env.env.EnvConfig`'s fields; ``timeout``: a command's default time limit."""

    def __init__(self, task: Any, *, reward: str = "binary", config: dict[str, Any] | None = None,
                 timeout: float | None = None, on_episode: Callable[[EpisodeRecord], Any] | None = None):
        try:
            # imported here: importing mini-swe-agent prints a banner and makes its config folder
            from minisweagent.exceptions import Submitted  # the optional extra [miniswe]
        except ImportError:
            raise ConfigError("SandboxEnvironment needs mini-swe-agent: pip install 'terminal-env[miniswe]'") from None
        self._submitted = Submitted
        self.timeout = timeout
        self._episode = ToolEpisode(reward=reward, config=config, on_episode=on_episode)
        self.observation = self._episode.start(task)
        env = self._episode.env
        #: the task's instruction (what the agent is given to solve)
        self.instruction = env.task.instruction.rstrip() if env is not None else ""

    # ------------------------------------------------------------------ mini-swe-agent's API
    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "") if isinstance(action, dict) else ""
        if not isinstance(command, str) or not command.strip():
            return {"output": "", "returncode": -1, "exception_info": "the action has no command to run"}
        if cwd:
            command = f"(cd {shlex.quote(cwd)} && {command})"
        if self._episode.over:
            record = self._episode.record
            why = record.error if record is not None and record.masked else "the episode is over"
            return {"output": "", "returncode": -1, "exception_info": f"not run: {why}"}
        limit = timeout or self.timeout
        output = self._episode.command(command, float(limit) if limit else None)
        code = self._episode.last_exit_code
        result = {"output": output, "returncode": code if code is not None else -1,
                  "exception_info": "" if code is not None else "the command did not finish (timed out or interrupted)"}
        lines = output.lstrip().splitlines()
        if lines and lines[0].strip() == SUBMIT_MARKER and code == 0:
            self.finish()
            submission = "\n".join(lines[1:])
            raise self._submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission}})
        return result

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        env = self._episode.env
        host = platform.uname()  # the sandbox runs on this machine's kernel and architecture
        return {"system": "Linux", "release": host.release, "version": host.version, "machine": host.machine,
                "cwd": getattr(getattr(env, "task", None), "workdir", "/app") or "/app", "timeout": self.timeout,
                "task": self.instruction, **kwargs}

    def serialize(self) -> dict[str, Any]:
        record = self._episode.record
        return {"info": {"config": {"environment": {"task": record.task if record else None},
                                    "environment_type": f"{type(self).__module__}.{type(self).__name__}"}}}

    # ------------------------------------------------------------------ the episode
    def finish(self) -> float | None:
        """Verify once (now, if the agent stopped without submitting) and return the reward;
        None when the episode failed for a reason that is not the agent's."""
        return self._episode.finish()

    @property
    def record(self) -> EpisodeRecord | None:
        return self._episode.record

    def close(self) -> None:
        self._episode.close()

    def __enter__(self) -> SandboxEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
