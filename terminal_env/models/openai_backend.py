"""A backend for any OpenAI-compatible chat-completions server: vLLM, SGLang, llama.cpp's
``llama-server``, Ollama, hosted APIs.

It uses the official ``openai`` client with the client's own retries switched off, and retries
here instead, so that every attempt, wait and failure is counted on the :class:`Completion`
(``retries``, ``latency``) and logged:

- retried: connection errors, timeouts (a stalled server), 408, 409, 429 (``Retry-After`` is
  honoured up to a cap), 5xx, and malformed answers; waits grow exponentially with jitter;
- not retried: 400/401/403/404/422 raise :class:`ConfigError` naming the model, the base URL
  and what to check; a 400 that says the prompt is longer than the context raises
  :class:`ContextOverflowError` (the harness trims and asks again);
- after the last attempt: :class:`ModelError` (an infrastructure error: the runner retries the
  trial and never scores it as the agent's failure).

The API key is the ``api_key`` argument, else the environment variable ``api_key_env``, else
the placeholder ``"EMPTY"`` that local servers accept. It is never logged, and it is masked out
of every error message (some servers echo the key they refused).

**Token trajectories** (``token_ids=True``, for RL) need vLLM >= 0.10.2: every request asks for
the token ids (``return_token_ids``) and the log-probs, and an answer without ids raises
:class:`ModelConfigError` at once (ids are never silently missing); ids and log-probs that do
not align are a malformed answer (retried). With a ``chat_tokenizer`` too, the backend is a
:class:`~terminal_env.protocols.TokenBackend`: :meth:`OpenAIBackend.complete_tokens` sends the
prompt as token ids to ``/v1/completions`` (the same retries), so the server samples from exactly
the tokens the trainer will score, and chat templates never re-render the episode.

**Sampling log-probs, and what they rely on.** vLLM returns the log-probs of its default
``--logprobs-mode raw_logprobs``: the model's own distribution, before temperature, penalties,
top-k and top-p. They are the log-probs of the distribution the tokens were drawn from exactly
when the temperature is 1 and nothing else reshapes it; then they also go to
``Completion.sampling_logprobs`` (what PPO's ratio and truncated importance sampling use). At any
other temperature, or with top-p/top-k/min-p/penalties, ``sampling_logprobs`` stays None: the
trainer recomputes the old log-probs itself. A server started with another ``--logprobs-mode``
breaks this (keep the default). Token requests send neutral sampling settings
(:data:`NEUTRAL_SAMPLING`, and ``top_p=1``) unless ``extra_body`` sets them, so vLLM does not apply
the model's ``generation_config`` defaults (e.g. ``top_k=20``) behind the caller's back;
:meth:`OpenAIBackend.reshaping` names whatever still reshapes the distribution.

A request the server aborts (``finish_reason="abort"``: vLLM's ``/pause`` aborts in-flight
requests by default while weights change) is retried, and so is one during which the
``weights_version`` changed: which weights sampled it is not known.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from ..protocols import ChatTokenizer
from .base import (
    Completion,
    ContextOverflowError,
    ModelConfigError,
    ModelError,
    SamplingParams,
    ToolCall,
    Usage,
    parse_tool_call_blocks,
    split_reasoning,
)

__all__ = ["OpenAIBackend", "RateLimiter"]

log = logging.getLogger(__name__)

#: longest wait between two attempts, whatever the backoff or the server's ``Retry-After`` says
MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 60.0

#: what servers say when the prompt does not fit (vLLM, SGLang, llama.cpp, OpenAI, Anthropic-style)
_CONTEXT_TOO_LONG = re.compile(
    r"context[ _-]?(length|size|window)|maximum context|max_model_len|prompt is too long"
    r"|input is too long|too many (input |prompt )?tokens|exceeds? the (available )?context"
    r"|longer than the model",
    re.IGNORECASE,
)
#: what a server says when it does not know the ``chat_template_kwargs`` field we added
_UNKNOWN_THINKING_FIELD = re.compile(r"chat_template_kwargs|enable_thinking", re.IGNORECASE)
_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
_RETRYABLE_STATUS = {408, 409, 425, 429}

#: vLLM's sampling settings that leave the model's distribution as it is (sent with token requests,
#: so that the defaults vLLM takes from the model's generation_config do not apply)
NEUTRAL_SAMPLING: dict[str, Any] = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                                    "presence_penalty": 0.0, "frequency_penalty": 0.0}


class RateLimiter:
    """Spaces calls at least ``60 / requests_per_minute`` seconds apart, across threads.

    Each caller reserves the next free slot under a lock and sleeps outside it, so callers are
    served in order and never in bursts.
    """

    def __init__(self, requests_per_minute: float):
        if not requests_per_minute or requests_per_minute <= 0:
            raise ConfigError(f"requests_per_minute must be > 0, not {requests_per_minute!r}")
        self.interval = 60.0 / float(requests_per_minute)
        self._lock = threading.Lock()
        self._next = 0.0

    def acquire(self) -> float:
        """Wait for a slot; returns the seconds waited."""
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        wait = slot - now
        if wait > 0:
            time.sleep(wait)
        return max(wait, 0.0)


class OpenAIBackend:
    """Chat completions from an OpenAI-compatible server.

    ``extra_body`` is merged into every request (e.g. vLLM's ``{"top_k": 20}`` or
    ``{"return_tokens_as_token_ids": True}``, which makes ``Completion.token_ids`` available
    when log-probs are asked). With ``send_thinking_flag`` the request carries
    ``chat_template_kwargs: {"enable_thinking": params.thinking}`` (vLLM and SGLang pass it to
    the chat template: Qwen3-style models then think only when asked); a server that rejects the
    unknown field is asked again without it, and the backend remembers not to send it again.

    ``token_ids=True`` asks vLLM for the ids of every prompt and answer and their log-probs.
    vLLM's log-probs are by default the raw ones (``--logprobs-mode raw_logprobs``: before
    temperature, top-p and penalties), so they go to ``Completion.logprobs``, and to
    ``sampling_logprobs`` too where they are the sampling distribution's: at temperature 1 with
    nothing reshaping it (see the module's notes; a server started with a ``processed_*`` mode
    would make both wrong: keep the default). Token requests carry :data:`NEUTRAL_SAMPLING`.
    ``weights_version`` (the caller's name for the served weights; it may update the attribute
    when they change) goes on every completion's ``weights``.

    Given a ``chat_tokenizer`` (a :class:`~terminal_env.protocols.ChatTokenizer` of the served
    model, or the path of its Hugging Face tokenizer) as well, the backend is token-level: :meth:`complete_tokens` works. Without one,
    ``chat_tokenizer`` is None and :meth:`complete_tokens` (always defined) raises
    :class:`ConfigError`: a caller tells the two apart by ``backend.chat_tokenizer is not None``.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 600.0,
        max_retries: int = 4,
        backoff: float = 1.0,
        requests_per_minute: float | None = None,
        extra_body: dict[str, Any] | None = None,
        name: str | None = None,
        send_thinking_flag: bool = True,
        max_backoff: float = MAX_BACKOFF,
        max_retry_after: float = MAX_RETRY_AFTER,
        token_ids: bool = False,
        chat_tokenizer: Any = None,
        weights_version: str | None = None,
    ):
        if not model:
            raise ConfigError("OpenAIBackend needs a model name (the id the server serves)")
        if timeout <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, not {timeout!r}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, not {max_retries!r}")
        if isinstance(chat_tokenizer, (str, os.PathLike)):  # the served model's directory
            from .hf_backend import HFChatTokenizer  # here: it needs the optional extra [hf]

            chat_tokenizer = HFChatTokenizer.load(chat_tokenizer)
        if chat_tokenizer is not None and not token_ids:
            raise ConfigError("a chat_tokenizer is for token trajectories: pass token_ids=True with it")
        if chat_tokenizer is not None and not isinstance(chat_tokenizer, ChatTokenizer):
            raise ConfigError(f"chat_tokenizer must follow terminal_env.protocols.ChatTokenizer "
                              f"(eos_token_ids, chat_text, encode, decode), not a "
                              f"{type(chat_tokenizer).__name__}")
        try:
            import openai  # the optional extra [openai]
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ConfigError(
                "the OpenAI backend needs the `openai` package: pip install openai"
            ) from e
        self._openai = openai
        self.model = model
        self.name = name or model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_retry_after = float(max_retry_after)
        self.extra_body = dict(extra_body or {})
        self.send_thinking_flag = send_thinking_flag
        self.api_key_env = api_key_env
        self.token_ids = bool(token_ids)
        self.chat_tokenizer = chat_tokenizer
        self.weights_version = weights_version

        if api_key:
            key, self._key_source = api_key, "the api_key argument"
        elif os.environ.get(api_key_env):
            key, self._key_source = os.environ[api_key_env], f"the environment variable {api_key_env}"
        else:
            key = "EMPTY"
            self._key_source = (f"nowhere: ${api_key_env} is unset, so the placeholder 'EMPTY' was "
                                f"sent (fine for local servers); set {api_key_env} or pass api_key")
        self._secret = key if key != "EMPTY" else None
        self._client = openai.OpenAI(base_url=base_url, api_key=key, timeout=self.timeout,
                                     max_retries=0)
        self.base_url = str(self._client.base_url).rstrip("/")
        self._limiter = RateLimiter(requests_per_minute) if requests_per_minute else None

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIBackend(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    # -- request --------------------------------------------------------------------------

    def _sampling(self, params: SamplingParams) -> dict[str, Any]:
        req: dict[str, Any] = {"model": self.model, "temperature": params.temperature,
                               "max_tokens": params.max_new_tokens}
        if params.top_p is not None:
            req["top_p"] = params.top_p
        elif self.token_ids:  # else vLLM takes top_p from the model's generation_config
            req["top_p"] = 1.0
        if params.seed is not None:
            req["seed"] = params.seed
        if params.stop:
            req["stop"] = list(params.stop)
        return req

    def _chat_request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      params: SamplingParams) -> dict[str, Any]:
        req = {"messages": messages, **self._sampling(params)}
        if tools:
            req["tools"] = tools
            req["tool_choice"] = "auto"
        if params.logprobs or self.token_ids:
            req["logprobs"] = True
        extra = dict(self.extra_body)
        if self.token_ids:
            extra = {**NEUTRAL_SAMPLING, **extra, "return_token_ids": True}
        if self.send_thinking_flag:
            kwargs = {"enable_thinking": params.thinking}
            kwargs.update(extra.get("chat_template_kwargs") or {})
            extra["chat_template_kwargs"] = kwargs
        req["extra_body"] = extra or None
        return req

    def _text_request(self, prompt_ids: list[int], params: SamplingParams) -> dict[str, Any]:
        # no chat template on /v1/completions, so no thinking flag: the prompt already says it
        return {"prompt": prompt_ids, **self._sampling(params), "logprobs": 1,
                "extra_body": {**NEUTRAL_SAMPLING, **self.extra_body, "return_token_ids": True}}

    def reshaping(self, params: SamplingParams | None = None) -> list[str]:
        """The settings of a request with ``params`` that make the sampled distribution other than
        ``softmax(logits / temperature)`` (top-p below 1, top-k, min-p, penalties), as
        ``name=value``: empty when the tokens come from the distribution the trainer models."""
        params = params or SamplingParams()
        found = []
        top_p = params.top_p if params.top_p is not None else self.extra_body.get("top_p")
        if top_p is not None and top_p < 1:
            found.append(f"top_p={top_p}")
        sent = {**NEUTRAL_SAMPLING, **self.extra_body} if self.token_ids else dict(self.extra_body)
        for name, neutral in NEUTRAL_SAMPLING.items():
            value = sent.get(name, neutral)
            if value is None or value == neutral or (name == "top_k" and value == 0):
                continue
            found.append(f"{name}={value}")
        return found

    def _sampling_logprobs(self, params: SamplingParams, logprobs: list[float] | None) -> list[float] | None:
        """The raw log-probs are the sampling ones when the tokens were drawn from the raw
        distribution: temperature 1 and nothing reshaping it (see the module's notes)."""
        if logprobs is None or params.temperature != 1.0 or self.reshaping(params):
            return None
        return list(logprobs)

    # -- errors ---------------------------------------------------------------------------

    def _redact(self, text: str) -> str:
        if self._secret and self._secret in text:
            text = text.replace(self._secret, "***")
        return text

    def _status_text(self, e: Any) -> str:
        body = getattr(e, "body", None)
        msg = None
        if isinstance(body, dict):
            msg = body.get("message") or body.get("detail") or body.get("error")
            if not isinstance(msg, str):
                msg = str(body)
        elif body:
            msg = str(body)
        return self._redact((msg or getattr(e, "message", None) or str(e))[:2000])

    def _retry_after(self, e: Any) -> float | None:
        response = getattr(e, "response", None)
        headers = getattr(response, "headers", None)
        if not headers:
            return None
        for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            value = headers.get(header)
            if value is None:
                continue
            try:
                seconds = float(value) * scale
            except ValueError:
                try:  # an HTTP date
                    seconds = parsedate_to_datetime(value).timestamp() - time.time()
                except (TypeError, ValueError, OverflowError):
                    continue
            if math.isfinite(seconds) and seconds >= 0:
                return min(seconds, self.max_retry_after)
        return None

    def _backoff(self, retry: int) -> float:
        base = min(self.max_backoff, self.backoff * (2 ** min(retry, 30)))
        return base * (0.5 + 0.5 * random.random())

    def _config_error(self, status: int, text: str) -> ModelConfigError:
        where = f"model {self.model!r} at {self.base_url}"
        if status in (401, 403):
            hint = (f"Check the API key and its access to this model; the key came from "
                    f"{self._key_source}.")
        elif status == 404:
            hint = (f"Check the model name against GET {self.base_url}/models and that the base "
                    f"URL ends in /v1 (e.g. http://HOST:8000/v1).")
        else:
            hint = ("Check the request settings: sampling parameters, tools, extra_body, and "
                    "max_new_tokens against the server's limits.")
        return ModelConfigError(f"the server refused the request for {where} (HTTP {status}: {text}). {hint}")

    # -- the calls ------------------------------------------------------------------------

    def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                 params: SamplingParams | None = None) -> Completion:
        params = params or SamplingParams()
        return self._call(self._client.chat.completions.create,
                          lambda: self._chat_request(messages, tools, params),
                          lambda response: self._with_sampling(self._parse(response), params))

    def complete_tokens(self, prompt_ids: list[int], *, tools: list[dict[str, Any]] | None = None,
                        params: SamplingParams | None = None) -> Completion:
        """Sample a continuation of exactly ``prompt_ids`` (rendered by the caller with ``chat_tokenizer``)
        from ``/v1/completions``. ``tools`` only says to read ``<tool_call>`` blocks out of the text
        (the prompt already shows the tools); the sampled ids, their raw log-probs and the prompt ids
        are on the completion. :class:`ConfigError` when built without a ``chat_tokenizer``."""
        if self.chat_tokenizer is None:
            raise ConfigError(
                f"{self!r} is not token-level: complete_tokens needs OpenAIBackend(..., "
                f"token_ids=True, chat_tokenizer=<the served model's ChatTokenizer>)")
        ids = [int(t) for t in prompt_ids]
        if not ids:
            raise ConfigError("complete_tokens needs at least one prompt token id")
        params = params or SamplingParams()
        return self._call(self._client.completions.create, lambda: self._text_request(ids, params),
                          lambda response: self._with_sampling(self._parse_text(response, ids, tools), params))

    def _with_sampling(self, completion: Completion, params: SamplingParams) -> Completion:
        if completion.finish_reason == "abort":  # vLLM's /pause aborted it (its default mode)
            raise _MalformedAnswer("the server aborted the request (finish_reason 'abort': generation was "
                                   "paused, e.g. for a weight update)")
        completion.sampling_logprobs = self._sampling_logprobs(params, completion.logprobs)
        return completion

    def _call(self, create: Callable[..., Any], build: Callable[[], dict[str, Any]],
              parse: Callable[[Any], Completion]) -> Completion:
        """The retry loop of every request: ``create(**build())`` (built again for every attempt),
        then ``parse`` the answer; the errors are sorted as the module's docstring says."""
        oa = self._openai
        start = time.monotonic()
        attempts = 0
        max_attempts = self.max_retries + 1
        dropped_flag = False
        while True:
            req = build()
            if self._limiter is not None:
                self._limiter.acquire()
            attempts += 1
            delay: float | None = None
            weights = self.weights_version  # read per attempt: the caller may update it
            try:
                completion = parse(create(**req))
                if self.weights_version != weights:  # a push during the request: whose sample is it?
                    raise _MalformedAnswer(f"the served weights changed from {weights!r} to "
                                           f"{self.weights_version!r} during the request")
            except oa.APIStatusError as e:
                status = e.status_code
                text = self._status_text(e)
                if (status in (400, 422) and not dropped_flag
                        and "chat_template_kwargs" in (req.get("extra_body") or {})
                        and _UNKNOWN_THINKING_FIELD.search(text)):
                    log.warning("%s at %s rejects chat_template_kwargs; asking again without it",
                                self.model, self.base_url)
                    self.send_thinking_flag = False
                    dropped_flag = True
                    attempts -= 1  # our request was at fault, not the server
                    continue
                if status in (400, 413, 422) and _CONTEXT_TOO_LONG.search(text):
                    raise ContextOverflowError(
                        f"the prompt does not fit the context of {self.model!r} at {self.base_url}: "
                        f"{text}") from None
                if status in _RETRYABLE_STATUS or status >= 500:
                    last = f"HTTP {status}: {text}"
                    delay = self._retry_after(e) if status in (429, 503) else None
                else:
                    raise self._config_error(status, text) from None
            except oa.APITimeoutError:
                last = f"no answer within the {self.timeout:g} s timeout"
            except oa.APIConnectionError as e:
                cause = e.__cause__ or e.__context__
                last = self._redact(f"connection error: {e.message}"
                                    + (f" ({type(cause).__name__}: {cause})" if cause else ""))
            except (oa.APIError, _MalformedAnswer, json.JSONDecodeError, ValidationError) as e:
                last = self._redact(f"malformed answer: {type(e).__name__}: {e}"[:2000])
            else:
                completion.latency = time.monotonic() - start
                completion.retries = attempts - 1
                completion.weights = weights
                if attempts > 1:
                    log.info("%s at %s answered after %d retries (%.1f s)", self.model,
                             self.base_url, attempts - 1, completion.latency)
                return completion

            if attempts >= max_attempts:
                raise ModelError(
                    f"model {self.model!r} at {self.base_url} failed after {attempts} attempt(s) "
                    f"in {time.monotonic() - start:.1f} s; last error: {last}")
            if delay is None:
                delay = self._backoff(attempts - 1)
            log.warning("%s at %s: attempt %d/%d failed (%s); retrying in %.2f s", self.model,
                        self.base_url, attempts, max_attempts, last, delay)
            time.sleep(delay)

    # -- answers --------------------------------------------------------------------------

    def _parse(self, response: Any) -> Completion:
        choice = _first_choice(response)
        msg = choice.message
        if msg is None:
            raise _MalformedAnswer("the first choice has no message")
        text = msg.content or ""
        reasoning_parts = []
        for field in ("reasoning_content", "reasoning"):  # vLLM's reasoning parsers, old and new
            value = getattr(msg, field, None)
            if isinstance(value, str) and value.strip():
                reasoning_parts.append(value.strip())
                break
        text, think = split_reasoning(text)
        if think:
            reasoning_parts.append(think)

        calls = []
        for i, call in enumerate(msg.tool_calls or ()):
            fn = getattr(call, "function", None)
            if fn is None:  # a custom (non-function) tool call: not used by harnesses
                continue
            calls.append(ToolCall(id=call.id or f"call_{i}", name=fn.name or "",
                                  arguments=fn.arguments or ""))

        logprobs = token_ids = None
        lp = getattr(choice, "logprobs", None)
        content = getattr(lp, "content", None) if lp is not None else None
        if content is not None:
            logprobs = [float(t.logprob) for t in content]
            ids = [_TOKEN_ID.match(t.token or "") for t in content]
            if content and all(ids):
                token_ids = [int(m.group(1)) for m in ids]  # type: ignore[union-attr]
        extra_ids = getattr(choice, "token_ids", None)  # vLLM's return_token_ids
        prompt_ids = getattr(response, "prompt_token_ids", None)
        if self.token_ids:
            token_ids, logprobs = self._token_fields(extra_ids, logprobs, prompt_ids)
        elif token_ids is None and isinstance(extra_ids, list):
            token_ids = [int(t) for t in extra_ids]

        return Completion(
            text=text, reasoning="\n".join(reasoning_parts) or None, tool_calls=calls,
            finish_reason=choice.finish_reason, model=getattr(response, "model", None) or self.model,
            usage=_usage(response), token_ids=token_ids, logprobs=logprobs,
            prompt_token_ids=[int(t) for t in prompt_ids] if isinstance(prompt_ids, list) else None)

    def _parse_text(self, response: Any, prompt_ids: list[int],
                    tools: list[dict[str, Any]] | None) -> Completion:
        choice = _first_choice(response)
        text, think = split_reasoning(getattr(choice, "text", None) or "")
        finish, calls = choice.finish_reason, []
        if tools and "<tool_call>" in text:
            text, calls = parse_tool_call_blocks(text)
            finish = "tool_calls" if calls else finish
        lp = getattr(choice, "logprobs", None)
        token_ids, logprobs = self._token_fields(getattr(choice, "token_ids", None),
                                                 getattr(lp, "token_logprobs", None), prompt_ids)
        echoed = getattr(choice, "prompt_token_ids", None)  # vLLM says what it read
        if isinstance(echoed, list) and [int(t) for t in echoed] != prompt_ids:
            raise ModelConfigError(f"model {self.model!r} at {self.base_url} read other prompt ids "
                                   f"than the {len(prompt_ids)} sent ({len(echoed)} ids): it does not take "
                                   f"token-id prompts as they are, so it cannot serve token trajectories")
        return Completion(text=text, reasoning=think, tool_calls=calls, finish_reason=finish,
                          model=getattr(response, "model", None) or self.model,
                          usage=_usage(response), token_ids=token_ids, logprobs=logprobs,
                          prompt_token_ids=list(prompt_ids))

    def _token_fields(self, ids: Any, logprobs: Any, prompt_ids: Any) -> tuple[list[int], list[float]]:
        """A token trajectory's ids and log-probs, checked: a server that answers without ids cannot
        serve token trajectories (retrying will not help); misaligned ones are a malformed answer."""
        missing = [n for n, v in (("token_ids", ids), ("prompt_token_ids", prompt_ids),
                                  ("logprobs", logprobs if ids else [])) if not isinstance(v, list)]
        if missing:
            raise ModelConfigError(
                f"model {self.model!r} at {self.base_url} answered without {' and '.join(missing)}, "
                f"which token trajectories (token_ids=True) need: serve the model with a vLLM "
                f"recent enough to return them when asked with return_token_ids (vLLM >= 0.10.2), "
                f"or turn token trajectories off (token_ids=False)")
        logprobs = logprobs or []
        if len(logprobs) != len(ids) or any(x is None for x in logprobs):
            raise _MalformedAnswer(f"{len(ids)} token ids but {len(logprobs)} log-probs "
                                   f"({sum(x is None for x in logprobs)} of them empty)")
        return [int(t) for t in ids], [float(x) for x in logprobs]


class _MalformedAnswer(Exception):
    pass


def _first_choice(response: Any) -> Any:
    choices = getattr(response, "choices", None)
    if not choices:
        raise _MalformedAnswer(f"no choices in the answer: {str(response)[:300]}")
    return choices[0]


def _usage(response: Any) -> Usage:
    usage = getattr(response, "usage", None)
    return Usage(prompt_tokens=getattr(usage, "prompt_tokens", None),
                 completion_tokens=getattr(usage, "completion_tokens", None))
