"""Terminal tasks inside TRL's ``GRPOTrainer`` (extra ``[trl]``: ``pip install 'terminal-env[trl]'``).

::

    from functools import partial
    from trl import GRPOConfig, GRPOTrainer
    from terminal_env.integrations.trl import TerminalToolEnv, task_dataset

    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=GRPOConfig(...),
        train_dataset=task_dataset("pool:generated:train"),          # one row per task
        environment_factory=partial(TerminalToolEnv, reward="partial_progress"),
    )

TRL makes one :class:`TerminalToolEnv` per concurrent rollout and resets it with each dataset
row; the row's ``task`` (a task directory) is the task. The model acts through two tools, ``bash``
and ``keys`` (for interactive programs), which are ``TerminalEnv.step`` on the same session; when
its completion ends without a tool call, TRL calls :meth:`TerminalToolEnv.get_reward`, which runs
the protected verifier once. An episode that failed for a reason that is not the agent's gets
``None``, which TRL takes as "unscorable" (no advantage, no gradient), never 0.

The rows (:func:`task_rows`, :func:`task_dataset`) hold the instruction as the prompt, so TRL's logs
and the chat template see it; the environment adds the line saying where the shell is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .episode import EpisodeRecord, ToolEpisode, load_tasks

#: appended to the instruction by reset(): where the shell is and how the episode ends
HOW = ("Use the bash tool to run shell commands in the task's terminal (the keys tool sends keystrokes "
       "to interactive programs). When the task is done, answer without a tool call; your work is then "
       "checked.")


class TerminalToolEnv:
    """One terminal task per rollout, for ``GRPOTrainer(environment_factory=...)``.

    Every public method but ``reset`` and ``get_reward`` is a tool TRL shows the model, so this
    class has exactly two: :meth:`bash` and :meth:`keys`. Arguments: ``reward`` (a name from
    :mod:`terminal_env.rewards`: ``binary``, ``partial_progress``, ``strict_success_first``,
    ``metric:NAME``, ...), ``config`` (the episode's budgets, :class:`~terminal_env.env.EnvConfig`
    or its dict), ``pool`` (a shared :class:`~terminal_env.scale.warm.WarmPool`, so that resets
    take a started sandbox), ``on_episode`` (called with each finished
    :class:`~terminal_env.integrations.episode.EpisodeRecord`)."""

    def __init__(self, *, reward: str | Callable[[Any], float] = "binary",
                 config: Any = None, pool: Any = None, client: Any = None,
                 build_options: dict[str, Any] | None = None,
                 on_episode: Callable[[EpisodeRecord], Any] | None = None):
        self._episode = ToolEpisode(reward=reward, config=config, pool=pool, client=client,
                                    build_options=build_options, on_episode=on_episode)

    def reset(self, task: Any = None, prompt: Any = None, **row: Any) -> str:
        """Start the row's task; return what TRL appends to the prompt's last message."""
        if task is None:
            raise ConfigError(
                "TerminalToolEnv.reset needs a 'task' column (a task directory) in each dataset row; "
                f"this row has {sorted(['prompt', *row]) if prompt is not None else sorted(row)}. "
                "Build the rows with terminal_env.integrations.trl.task_rows(...)"
            )
        obs = self._episode.start(task)
        instruction = self._episode.env.task.instruction.rstrip() if self._episode.env is not None else ""
        if instruction and instruction in _last_text(prompt) and obs.startswith(instruction):
            obs = obs[len(instruction):]  # the row's prompt already holds the instruction
        return obs.rstrip() + " " + HOW

    def bash(self, command: str) -> str:
        """Run a shell command in the task's terminal and return what it printed.

        Args:
            command: The command line to run in bash, for example "ls -la".

        Returns:
            The command's output, with its exit code when it was not 0.
        """
        return self._episode.command(command)

    def keys(self, keys: list[str]) -> str:
        """Send keystrokes to the terminal, for interactive programs, and return the new output.

        Args:
            keys: Key names such as "C-c", "Enter", "Up", "Escape", or literal text to type, in order.

        Returns:
            What the terminal printed after the keystrokes.
        """
        return self._episode.keys(keys)

    def get_reward(self) -> float | None:
        """Verify the episode once (the protected verifier) and return its reward; None when the
        episode failed for a reason that is not the agent's, so that TRL drops the sample."""
        return self._episode.finish()

    @property
    def record(self) -> EpisodeRecord | None:
        """The current (or last) episode: task, actions, reward, verdict."""
        return self._episode.record

    # Not public methods (TRL would show them to the model as tools). A verified episode gives
    # its sandbox back at once; a ``with`` block also gives back one that was never finished.
    def __enter__(self) -> TerminalToolEnv:  # noqa: PYI034 (subclasses are not expected)
        return self

    def __exit__(self, *exc: object) -> None:
        self._episode.close()


def _last_text(prompt: Any) -> str:
    """The text of a prompt's last message (conversational or plain)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        content = prompt[-1].get("content", "")
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content if isinstance(content, str) else ""
    return ""


def task_rows(tasks: str | list[str], *, allow_test: bool = False) -> list[dict[str, Any]]:
    """One row per task, in the conversational form TRL reads: ``prompt`` (the instruction as a
    user message), ``task`` (the task directory, for :meth:`TerminalToolEnv.reset`), ``name`` and
    ``split``. ``tasks`` is what ``terminal-env run --tasks`` takes: task directories, folders of
    tasks, bundled task names, ``pool[:SPLITS]`` or ``pool:generated[:SPLITS]``. The protected
    test split needs ``allow_test=True`` (never train or select checkpoints on it)."""
    return [
        {"prompt": [{"role": "user", "content": t.instruction.rstrip()}], "task": str(t.path),
         "name": t.name, "split": t.split or ""}
        for t in load_tasks(tasks, allow_test=allow_test)
    ]


def task_dataset(tasks: str | list[str], *, allow_test: bool = False) -> Any:
    """:func:`task_rows` as a ``datasets.Dataset`` (the ``train_dataset`` of a GRPOTrainer)."""
    try:
        import datasets  # the optional extra [trl] (or [train])
    except ImportError:
        raise ConfigError("task_dataset needs the datasets package: pip install 'terminal-env[trl]'") from None
    return datasets.Dataset.from_list(task_rows(tasks, allow_test=allow_test))
