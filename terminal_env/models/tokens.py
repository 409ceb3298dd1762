"""Token-exact episodes: what a token-level backend sampled, kept as one token sequence.

A trainer must train on exactly the tokens the policy sampled. Re-rendering the conversation
from text each turn loses them (reasoning and stop tails are cut from the text, a trimmed
context changes the prefix), so for a :class:`~terminal_env.protocols.TokenBackend` the agent
loop keeps the episode as a sequence of token ids and builds each turn's prompt by
**extension**: the previous turn's prompt, the tokens it sampled, then the tokens of what came
after (the template's end of the assistant turn, the new observation messages, the next
generation prompt). Nothing before is re-tokenised.

The extension is computed from the chat template itself. With ``H`` the messages of the segment
up to and including the last assistant message and ``N`` the messages since::

    before = template(H)                      # no generation prompt
    after  = template(H + N, generation prompt)
    new text = close + after[len(before):]    # `close`: what the template writes after an
                                              # assistant message's content (minus the end-of-
                                              # turn token when the model sampled it)

A **new segment** starts (and is counted, with its reason) when this cannot hold:

* ``context_trimmed``: the agent loop cut the conversation to fit the input budget, so the
  prompt is no longer the previous one extended;
* ``template_rewrites_history``: ``after`` does not start with ``before`` (e.g. a template that
  drops the reasoning of earlier assistant turns once a new user message follows).

Each segment is one sequence a trainer can score in one forward pass: ``token_ids``,
``action_mask`` (1 exactly on the sampled tokens), the sampled log-probs aligned to it (0 where
the mask is 0), and per turn the span of its sampled tokens and the weights that produced them.
A trainer can accept multi-segment episodes (one sequence per segment) or refuse them
(``EpisodeTokens.num_segments == 1``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from .base import Completion

SegmentReason = Literal["first", "context_trimmed", "template_rewrites_history"]

#: a string no chat message contains, to find where a template puts an assistant's content
_MARK = "\u2063terminal-env-content\u2063"


class TurnSpan(BaseModel):
    """Where one model turn sits in its segment: its new prompt tokens are
    ``token_ids[prompt_start:start]``, its sampled tokens ``token_ids[start:end]``."""

    model_config = ConfigDict(extra="forbid")

    turn: int
    prompt_start: int
    start: int
    end: int
    weights: str | None = None


class TokenSegment(BaseModel):
    """One token sequence of an episode (see the module's notes)."""

    model_config = ConfigDict(extra="forbid")

    reason: SegmentReason
    token_ids: list[int] = Field(default_factory=list)
    #: 1 on tokens the policy sampled, 0 on prompt, observation and template tokens
    action_mask: list[int] = Field(default_factory=list)
    #: raw (temperature-1) log-probs of the sampled tokens, 0.0 where the mask is 0
    logprobs: list[float] = Field(default_factory=list)
    #: log-probs under the sampling distribution (what the trainer uses); None when a turn of
    #: the segment was decoded greedily or its backend could not say
    sampling_logprobs: list[float] | None = Field(default_factory=list)
    turns: list[TurnSpan] = Field(default_factory=list)

    def _append(self, ids: list[int], sampled: bool, logprobs: list[float] | None = None,
                sampling: list[float] | None = None) -> None:
        self.token_ids.extend(ids)
        self.action_mask.extend([1 if sampled else 0] * len(ids))
        self.logprobs.extend(logprobs if sampled and logprobs is not None else [0.0] * len(ids))
        if self.sampling_logprobs is not None:
            if sampled and sampling is None:
                self.sampling_logprobs = None
            else:
                self.sampling_logprobs.extend(sampling if sampled else [0.0] * len(ids))


class EpisodeTokens(BaseModel):
    """An episode's tokens: one segment, or more where the prompt could not be extended."""

    model_config = ConfigDict(extra="forbid")

    segments: list[TokenSegment] = Field(default_factory=list)

    @property
    def num_segments(self) -> int:
        return len(self.segments)


class TokenRecorder:
    """Builds each turn's prompt by extension and records what was sampled (used by the agent
    loop for a token-level backend; one per episode)."""

    def __init__(self, tokenizer: Any, *, tools: list[dict[str, Any]] | None = None,
                 thinking: bool = False):
        self.tok = tokenizer
        self.tools = tools
        self.thinking = thinking
        self.tokens = EpisodeTokens()
        self._history: list[dict[str, Any]] | None = None  # the segment's messages so far
        self._pending: tuple[list[int], SegmentReason | None, int] | None = None

    def prompt(self, sent: list[dict[str, Any]]) -> list[int]:
        """The prompt ids for the messages ``sent`` this turn: the current segment extended,
        or the whole conversation rendered as a new segment."""
        segment = self.tokens.segments[-1] if self.tokens.segments else None
        reason: SegmentReason | None = None
        new_ids: list[int] | None = None
        if segment is None or self._history is None:
            reason = "first"
        elif sent[: len(self._history)] != self._history or len(sent) <= len(self._history):
            reason = "context_trimmed"
        else:
            new_ids = self._extension(self._history, sent)
            if new_ids is None:
                reason = "template_rewrites_history"
        if reason is not None:
            new_ids = self.tok.encode(self.tok.chat_text(sent, self.tools, add_generation_prompt=True,
                                                         thinking=self.thinking))
            self._pending = (new_ids, reason, 0)
            return list(new_ids)
        assert segment is not None and new_ids is not None
        self._pending = (new_ids, None, len(segment.token_ids))
        return segment.token_ids + new_ids

    def record(self, turn: int, sent: list[dict[str, Any]], completion: Completion) -> None:
        """Add this turn's prompt tokens and sampled tokens to the episode."""
        if self._pending is None:
            raise ConfigError("TokenRecorder.record() without a prompt() before it")
        new_ids, reason, prompt_start = self._pending
        self._pending = None
        ids, logprobs = completion.token_ids, completion.logprobs
        if ids is None or logprobs is None or len(ids) != len(logprobs):
            raise ConfigError(
                f"the token-level backend {completion.model!r} returned no token ids or log-probs "
                "(or not one per token) for a token-exact rollout")
        sampling = completion.sampling_logprobs
        if sampling is not None and len(sampling) != len(ids):
            raise ConfigError("the backend's sampling log-probs are not one per sampled token")
        if reason is not None:
            segment = TokenSegment(reason=reason)
            self.tokens.segments.append(segment)
        segment = self.tokens.segments[-1]
        segment._append(new_ids, sampled=False)
        start = len(segment.token_ids)
        segment._append(list(ids), sampled=True, logprobs=list(logprobs),
                        sampling=list(sampling) if sampling is not None else None)
        segment.turns.append(TurnSpan(turn=turn, prompt_start=prompt_start,
                                      start=start, end=len(segment.token_ids), weights=completion.weights))
        self._history = list(sent) + [completion.assistant_message()]

    # -- the extension ---------------------------------------------------------------------

    def _extension(self, history: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[int] | None:
        """The ids that follow the last sampled token, or None when the template rewrites what
        came before (see the module's notes)."""
        chat = self.tok.chat_text
        before = chat(history, self.tools, add_generation_prompt=False, thinking=self.thinking)
        after = chat(sent, self.tools, add_generation_prompt=True, thinking=self.thinking)
        if not after.startswith(before):
            return None
        return self.tok.encode(self._close(history) + after[len(before):])

    def _close(self, history: list[dict[str, Any]]) -> str:
        """What the template writes after the last assistant message's content, without the
        end-of-turn token when the model sampled it (it is already in the sequence)."""
        close = closing_text(self.tok, history[:-1], self.tools, thinking=self.thinking)
        segment = self.tokens.segments[-1]
        last = segment.token_ids[segment.turns[-1].end - 1]  # the last token the model sampled
        if last in self.tok.eos_token_ids:
            eos_text = self.tok.decode([last])
            if eos_text and close.startswith(eos_text):
                close = close[len(eos_text):]
        return close


def closing_text(tok: Any, history: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 thinking: bool = False) -> str:
    """What the chat template writes after the content of an assistant message that follows
    ``history`` (e.g. ``<|im_end|>\n``): rendered with a marker for the content."""
    marked = history + [{"role": "assistant", "content": _MARK}]
    text = tok.chat_text(marked, tools, add_generation_prompt=False, thinking=thinking)
    return text[text.rindex(_MARK) + len(_MARK):] if _MARK in text else ""


def is_token_backend(backend: Any) -> bool:
    """Whether the agent loop can keep a token-exact record with ``backend``."""
    return getattr(backend, "chat_tokenizer", None) is not None and callable(
        getattr(backend, "complete_tokens", None))
