"""The seams of terminal-env as ``typing.Protocol``s, in one place: what a harness, a model
backend, a verifier and an executor must provide. Anything with these methods plugs in (a
harness from another package, a backend for a new server, a verifier of a task's own, a new place
to run trials); the built-in ones are implementations, not base classes to inherit from.

This module imports nothing of terminal-env at run time, so every layer can name these types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .actions import Command, Keys, Submit
    from .harness.base import ActionResult, CommandRecord, FormatError, HarnessAction
    from .models.base import Completion, SamplingParams
    from .sandbox import Sandbox
    from .scale.executor import TrialJob
    from .task import TaskSpec
    from .trial import TrialOutcome
    from .verify.result import VerifierResult


@runtime_checkable
class ModelBackend(Protocol):
    """Anything that answers chat messages. ``name`` identifies the model in trajectories.
    (A backend that needs to see each episode start also has ``start_episode(env, harness)``.)"""

    name: str

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion: ...


@runtime_checkable
class ChatTokenizer(Protocol):
    """A model's chat template and tokenizer, as the token-exact rollout needs them
    (:mod:`terminal_env.models.tokens`)."""

    #: the ids that end an assistant turn (the template's end-of-turn token among them)
    eos_token_ids: list[int]

    def chat_text(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                  add_generation_prompt: bool, thinking: bool = False) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


@runtime_checkable
class TokenBackend(Protocol):
    """A backend that samples from token ids and says which tokens it sampled: the agent loop
    then keeps the episode as one token sequence, extended turn by turn, never re-rendered
    (:class:`terminal_env.models.tokens.TokenRecorder`). ``weights_version`` names the weights
    that answer now (it changes when ``load_weights`` swaps them)."""

    name: str
    chat_tokenizer: ChatTokenizer
    weights_version: str | None

    def complete_tokens(
        self,
        prompt_ids: list[int],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion: ...


class Harness(Protocol):
    """Turns the episode into messages for a model and the model's answers into actions: what the
    agent loop (:func:`terminal_env.agent.run_agent`) calls, in order."""

    name: ClassVar[str]

    def reset(self) -> None: ...

    def tools(self) -> list[dict[str, Any]] | None: ...

    def initial_messages(self, instruction: str, observation: str) -> list[dict[str, Any]]: ...

    def parse(self, completion: Completion) -> list[HarnessAction]: ...

    def compile(self, action: HarnessAction) -> list[Command | Keys | Submit]: ...

    def observe(self, action: HarnessAction, commands: list[CommandRecord]) -> str: ...

    def result_messages(self, results: list[ActionResult], completion: Completion) -> list[dict[str, Any]]: ...

    def error_messages(self, error: FormatError, completion: Completion) -> list[dict[str, Any]]: ...


class Verifier(Protocol):
    """Judges an episode once the agent is done: called with the episode's sandbox and task spec
    (``TerminalEnv(verifier=...)``). The protected verifier is
    :class:`terminal_env.verify.runner.ProtectedVerifier`."""

    def __call__(self, sandbox: Sandbox, spec: TaskSpec) -> VerifierResult: ...


class Executor(Protocol):
    """Where trials run (:mod:`terminal_env.scale.executor`). ``play`` blocks until the trial ends
    and may be called from many threads at once; it never raises for what happens inside a trial
    (the outcome says it)."""

    def check_backend(self, backend: Any, options: dict[str, Any]) -> None: ...

    def play(self, job: TrialJob) -> TrialOutcome: ...

    def abort(self, run_id: str | None = None) -> Any: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
