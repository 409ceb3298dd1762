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
from email.utils import parsedate_to_datetime
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from .base import (
    Completion,
    ContextOverflowError,
    ModelConfigError,
    ModelError,
    SamplingParams,
    ToolCall,
    Usage,
    split_thinking,
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
    ):
        if not model:
            raise ConfigError("OpenAIBackend needs a model name (the id the server serves)")
        if timeout <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, not {timeout!r}")
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, not {max_retries!r}")
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

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 params: SamplingParams) -> tuple[dict[str, Any], dict[str, Any]]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": params.temperature,
            "max_tokens": params.max_new_tokens,
        }
        if tools:
            req["tools"] = tools
            req["tool_choice"] = "auto"
        if params.top_p is not None:
            req["top_p"] = params.top_p
        if params.seed is not None:
            req["seed"] = params.seed
        if params.stop:
            req["stop"] = list(params.stop)
        if params.logprobs:
            req["logprobs"] = True
        extra = dict(self.extra_body)
        if self.send_thinking_flag:
            kwargs = {"enable_thinking": params.thinking}
            kwargs.update(extra.get("chat_template_kwargs") or {})
            extra["chat_template_kwargs"] = kwargs
        return req, extra

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

    # -- the call -------------------------------------------------------------------------

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        params: SamplingParams | None = None,
    ) -> Completion:
        params = params or SamplingParams()
        oa = self._openai
        start = time.monotonic()
        attempts = 0
        max_attempts = self.max_retries + 1
        dropped_flag = False
        while True:
            req, extra = self._request(messages, tools, params)
            if self._limiter is not None:
                self._limiter.acquire()
            attempts += 1
            delay: float | None = None
            try:
                response = self._client.chat.completions.create(**req, extra_body=extra or None)
                completion = self._parse(response)
            except oa.APIStatusError as e:
                status = e.status_code
                text = self._status_text(e)
                if (status in (400, 422) and not dropped_flag and "chat_template_kwargs" in extra
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

    # -- response -------------------------------------------------------------------------

    def _parse(self, response: Any) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices:
            raise _MalformedAnswer(f"no choices in the answer: {str(response)[:300]}")
        choice = choices[0]
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
        text, think = _split_reasoning(text)
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
        if content:
            logprobs = [float(t.logprob) for t in content]
            ids = [_TOKEN_ID.match(t.token or "") for t in content]
            if all(ids):
                token_ids = [int(m.group(1)) for m in ids]  # type: ignore[union-attr]
        extra_ids = getattr(choice, "token_ids", None)  # vLLM's return_token_ids
        if token_ids is None and isinstance(extra_ids, list):
            token_ids = [int(t) for t in extra_ids]
        prompt_ids = getattr(response, "prompt_token_ids", None)

        usage = getattr(response, "usage", None)
        return Completion(
            text=text,
            reasoning="\n".join(reasoning_parts) or None,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            model=getattr(response, "model", None) or self.model,
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", None),
                completion_tokens=getattr(usage, "completion_tokens", None),
            ),
            token_ids=token_ids,
            logprobs=logprobs,
            prompt_token_ids=[int(t) for t in prompt_ids] if isinstance(prompt_ids, list) else None,
        )


class _MalformedAnswer(Exception):
    pass


def _split_reasoning(text: str) -> tuple[str, str | None]:
    """``<think>`` blocks out of the answer; also a lone ``...</think>`` prefix, which is what
    Qwen3-style templates produce when the prompt already opened the ``<think>`` block."""
    text, think = split_thinking(text)
    if "</think>" in text and "<think>" not in text:
        head, _, tail = text.partition("</think>")
        extra = head.strip()
        think = "\n".join(t for t in (think, extra) if t) or None
        text = tail.lstrip()
    return text, think
