"""The seam between a harness and whatever produces text: a model server, a local model, a script.

A backend receives chat messages (OpenAI chat format: dicts with ``role`` and ``content``, plus
``tool_calls``/``tool_call_id`` where a harness uses tools) and returns a :class:`Completion`.
Everything a trainer needs later is kept on the completion: the token ids and log-probs when the
backend can give them, the token usage, the latency.

Backends raise :class:`ModelError` (an infrastructure error: the runner retries the trial and
never scores it as the agent's failure) when the model cannot be reached after its retries, and
:class:`ContextOverflowError` when the prompt cannot be made to fit.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, InfraError, TerminalEnvError


class ModelError(InfraError):
    """The model backend failed (server down, stalled, refused) after its retries."""


class ModelConfigError(ConfigError):
    """The backend refused the configuration (bad key, unknown model, bad URL): a mistake of the
    user that retrying cannot fix; a runner stops the whole run."""


class ContextOverflowError(TerminalEnvError):
    """The prompt does not fit the input budget even after trimming old observations."""


class SamplingParams(BaseModel):
    """Generation settings. The defaults are the paper's evaluation protocol."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.6, ge=0, le=5)
    top_p: float | None = Field(None, gt=0, le=1)
    max_new_tokens: int = Field(8192, ge=1, description="Per turn.")
    max_input_tokens: int = Field(96_000, ge=256, description="Per request, after trimming.")
    thinking: bool = Field(False, description="Ask reasoning models to think (off by default).")
    seed: int | None = None
    stop: list[str] | None = None
    logprobs: bool = Field(False, description="Ask for per-token log-probs (for training).")


class ToolCall(BaseModel):
    """One OpenAI-style function call; ``arguments`` is the raw JSON text the model wrote."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: str = ""


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Completion(BaseModel):
    """What a backend returns for one request."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    reasoning: str | None = Field(None, description="Thinking text, kept apart from the answer.")
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    #: ids of the generated tokens and their log-probs, when the backend gives them.
    #: ``logprobs``: under the model's raw distribution (temperature 1, no top-p)
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    #: log-probs under the distribution the tokens were drawn from: ``log_softmax(logits / T)``
    #: at the sampling temperature T, before top-p (None for greedy decoding, or when the
    #: backend cannot say). This is what the trainer's importance ratios use.
    sampling_logprobs: list[float] | None = None
    #: ids of the prompt as the model saw it (local backends), for exact re-scoring
    prompt_token_ids: list[int] | None = None
    #: which weights produced this completion (the backend's ``weights_version``), if it says
    weights: str | None = None
    latency: float = Field(0.0, ge=0, description="Seconds spent in the backend, retries included.")
    retries: int = 0

    def assistant_message(self) -> dict[str, Any]:
        """The chat message to append to the conversation."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return msg


_THINK = re.compile(r"<think>(.*?)</think>\s*", re.S)


def split_thinking(text: str) -> tuple[str, str | None]:
    """Separate ``<think>...</think>`` blocks (Qwen-style reasoning) from the answer.

    >>> split_thinking("<think>hmm</think>ls -la")
    ('ls -la', 'hmm')
    >>> split_thinking("plain")
    ('plain', None)
    """
    found = _THINK.findall(text)
    if not found:
        return text, None
    return _THINK.sub("", text), "\n".join(t.strip() for t in found)


class EpisodeAware:
    """Mixin for backends that need to see the environment when an episode starts (the oracle
    copies the solution in; replay and scripted backends rewind)."""

    #: the harness this backend writes for, when it only speaks one (oracle, nop, human)
    native_harness: str | None = None

    def start_episode(self, env: Any, harness: Any) -> None:  # noqa: B027 - optional hook
        pass


def count_tokens_approx(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """A tokenizer-free estimate: about 3.5 characters per token plus a few per message, which
    overestimates for English and code (safe for budgets).

    >>> count_tokens_approx([{"role": "user", "content": "x" * 700}])
    204
    """
    chars = 0
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):  # multi-part content
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        chars += len(content)
        for call in m.get("tool_calls") or ():
            chars += len(json.dumps(call))
    if tools:
        chars += len(json.dumps(tools))
    return int(chars / 3.5) + 4 * len(messages)


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_call_blocks(text: str) -> tuple[str, list[ToolCall]]:
    """Hermes/Qwen-style ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks out of
    raw model text (for backends that sample text themselves); the text is returned unchanged,
    with no calls, when a block is not a JSON object with a name.

    >>> parse_tool_call_blocks('ok <tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>')
    ('ok', [ToolCall(id='call_0', name='bash', arguments='{"command": "ls"}')])
    """
    calls = []
    for i, block in enumerate(_TOOL_CALL.findall(text)):
        try:
            obj = json.loads(block)
        except ValueError:
            return text, []
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return text, []
        args = obj.get("arguments", obj.get("parameters", {}))
        calls.append(ToolCall(id=f"call_{i}", name=obj["name"],
                              arguments=args if isinstance(args, str) else json.dumps(args)))
    return _TOOL_CALL.sub("", text).strip(), calls


def split_reasoning(text: str) -> tuple[str, str | None]:
    """``<think>`` blocks out of the answer; also a lone ``...</think>`` prefix, which is what
    Qwen3-style templates produce when the prompt already opened the ``<think>`` block."""
    text, think = split_thinking(text)
    if "</think>" in text and "<think>" not in text:
        head, _, tail = text.partition("</think>")
        extra = head.strip()
        think = "\n".join(t for t in (think, extra) if t) or None
        text = tail.lstrip()
    return text, think
