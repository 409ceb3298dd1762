"""An OpenAI-compatible gateway in front of any backend, recording exact tokens per call.

An agent the project did not write (mini-swe-agent, a coding CLI, anything that speaks the
OpenAI chat API) is pointed at the gateway's URL; every request it makes is answered by a backend
of this project (``hf:PATH`` in this process, ``openai:MODEL`` in front of vLLM, ...) and recorded:
the messages and tools as the agent sent them, the **prompt token ids the model actually saw**,
the completion's token ids and its sampling log-probs. Each call is then one token-exact
(prompt, completion) sample for a trainer, whatever the agent did with the text in between.

::

    from terminal_env.integrations.gateway import Gateway
    from terminal_env.models.registry import make_backend

    with Gateway(make_backend("hf:/models/qwen3-0.6b"), record="calls.jsonl") as gw:
        run_your_agent(base_url=gw.url, api_key="unused", model=gw.model)   # e.g. OPENAI_BASE_URL
    gw.calls    # [GatewayCall(prompt_token_ids=..., completion_token_ids=..., sampling_logprobs=...)]

or, for an agent in another process, from the shell (the calls go to the JSONL file)::

    python -m terminal_env.integrations.gateway --model hf:/models/qwen3-0.6b --port 8100 --record calls.jsonl

A call is **exact** when the backend gave the ids of the prompt and of the completion and the
log-probs they were sampled with; otherwise it is recorded with ``exact=False`` and the reason
(an upstream server that returns no ids), or refused with HTTP 502 when the gateway was made
with ``require_tokens=True``. ``extends_previous`` says whether a call's prompt starts with the
previous call's prompt and completion token for token: an agent that re-sends its conversation
as text can make the model see different tokens than it sampled (a retokenization drift), which
a trainer must know before it concatenates calls into one sequence.

The gateway listens on 127.0.0.1 unless told otherwise; it serves ``POST /v1/chat/completions``
(``n = 1``; with ``stream=true`` the finished completion comes as server-sent events: one chunk
with the text and tool calls, one with the finish reason, the usage when ``stream_options``
asks for it, then ``[DONE]``) and ``GET /v1/models``. Bad requests get OpenAI-style errors with the
reason (HTTP 400), the backend's failures HTTP 502.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ..errors import ConfigError, TerminalEnvError
from ..models.base import ContextOverflowError, ModelError, SamplingParams
from ..models.registry import make_backend

#: request fields the gateway reads; others (user, metadata, ...) are accepted and ignored
SAMPLING_FIELDS = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop")


class GatewayCall(BaseModel):
    """One chat completion the gateway served, as the model saw and made it."""

    index: int
    started: float
    model: str
    #: the request as the agent sent it
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    #: the tokens of the prompt as the model saw them (after the backend's chat template)
    prompt_token_ids: list[int] | None = None
    #: the sampled tokens (the end-of-turn token included) and their log-probs under the
    #: distribution they were drawn from (``log_softmax(logits / T)``), and under the raw model
    completion_token_ids: list[int] | None = None
    sampling_logprobs: list[float] | None = None
    logprobs: list[float] | None = None
    #: what the agent received
    text: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    finish_reason: str | None = None
    weights: str | None = None
    latency: float = 0.0
    exact: bool = False
    #: why the call is not exact (None when it is)
    not_exact: str | None = None
    #: the prompt starts with the previous call's prompt + completion, token for token
    extends_previous: bool | None = None


class Gateway:
    """The server: ``Gateway(backend).start()`` (or ``with``), ``url``, ``calls``, ``stop()``."""

    def __init__(self, backend: Any, *, host: str = "127.0.0.1", port: int = 0, record: str | Path | None = None,
                 require_tokens: bool = False, model: str | None = None, params: SamplingParams | None = None):
        self.backend = backend
        self.model = model or getattr(backend, "name", None) or type(backend).__name__
        self.require_tokens = require_tokens
        self.defaults = params or SamplingParams(temperature=1.0)
        self.record = Path(record) if record is not None else None
        self.calls: list[GatewayCall] = []
        self._lock = threading.Lock()
        self._host, self._port = host, port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        """The OpenAI base URL (ends in ``/v1``)."""
        if self._server is None:
            raise ConfigError("the gateway is not started: call start() or use it in a with block")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> Gateway:
        if self._server is not None:
            return self
        handler = type("GatewayHandler", (_Handler,), {"gateway": self})
        try:
            self._server = ThreadingHTTPServer((self._host, self._port), handler)
        except OSError as exc:
            raise ConfigError(f"the gateway cannot listen on {self._host}:{self._port}: {exc}") from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="gateway", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ one call
    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat-completion request body (what the HTTP handler calls)."""
        messages, tools, params = self._read(body)
        started = time.time()
        completion = self.backend.complete(messages, tools=tools, params=params)
        prompt_ids, ids, slp = completion.prompt_token_ids, completion.token_ids, completion.sampling_logprobs
        not_exact = None
        if prompt_ids is None:
            not_exact = "the backend did not give the prompt's token ids"
        elif ids is None:
            not_exact = "the backend did not give the completion's token ids"
        elif slp is None or len(slp) != len(ids):
            not_exact = ("the backend gave no sampling log-probs (greedy decoding, temperature 0)" if slp is None
                         else "the backend's log-probs do not match its token ids one for one")
        if not_exact and self.require_tokens:
            raise _UpstreamError(f"{not_exact}; this gateway requires exact tokens (require_tokens=True)")
        calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                 for c in completion.tool_calls]
        with self._lock:
            previous = self.calls[-1] if self.calls else None
            extends = None
            if previous is not None and prompt_ids is not None and previous.prompt_token_ids is not None \
                    and previous.completion_token_ids is not None:
                before = previous.prompt_token_ids + previous.completion_token_ids
                extends = prompt_ids[:len(before)] == before
            call = GatewayCall(
                index=len(self.calls), started=started, model=self.model, messages=messages, tools=tools,
                params=params.model_dump(exclude_none=True), prompt_token_ids=prompt_ids,
                completion_token_ids=ids, sampling_logprobs=slp, logprobs=completion.logprobs,
                text=completion.text, tool_calls=calls, finish_reason=completion.finish_reason,
                weights=completion.weights, latency=completion.latency, exact=not_exact is None,
                not_exact=not_exact, extends_previous=extends,
            )
            self.calls.append(call)
            if self.record is not None:
                with self.record.open("a") as f:
                    f.write(call.model_dump_json() + "\n")
        message: dict[str, Any] = {"role": "assistant", "content": completion.text}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(started),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(completion.finish_reason, calls)}],
            "usage": {"prompt_tokens": completion.usage.prompt_tokens or 0,
                      "completion_tokens": completion.usage.completion_tokens or 0,
                      "total_tokens": (completion.usage.prompt_tokens or 0) + (completion.usage.completion_tokens or 0)},
        }

    def _read(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, SamplingParams]:
        if not isinstance(body, dict):
            raise ConfigError("the request body must be a JSON object")
        if body.get("n", 1) != 1:
            raise ConfigError(f"n={body.get('n')!r}: the gateway answers one choice per request (n=1)")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ConfigError("'messages' must be a non-empty list of message objects")
        messages = [_plain(m) for m in messages]
        tools = body.get("tools") or None
        if tools is not None and not isinstance(tools, list):
            raise ConfigError("'tools' must be a list of tool objects")
        update: dict[str, Any] = {}
        for name in ("temperature", "top_p", "seed"):
            if body.get(name) is not None:
                update[name] = body[name]
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        if limit is not None:
            update["max_new_tokens"] = limit
        if body.get("stop") is not None:
            update["stop"] = [body["stop"]] if isinstance(body["stop"], str) else body["stop"]
        try:
            params = SamplingParams.model_validate({**self.defaults.model_dump(), **update})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"bad sampling parameters: {problems}") from None
        return messages, tools, params


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    """A message with list-of-parts content joined to text (what chat templates render)."""
    content = message.get("content")
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise ConfigError(f"only text content is supported, got a part {str(part)[:80]}")
            parts.append(str(part.get("text", "")))
        message = {**message, "content": "".join(parts)}
    return message


def stream_events(response: dict[str, Any], *, include_usage: bool = False) -> bytes:
    """A finished chat completion as the server-sent events of a streamed one (OpenAI's chunk
    format): the message in one delta, the finish reason, the usage when asked, ``[DONE]``."""
    choice = response["choices"][0]
    message = choice["message"]
    head = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"]}
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    chunks = [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}]
    if include_usage:
        chunks.append({**head, "choices": [], "usage": response["usage"]})
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


def _finish(reason: str | None, calls: list[Any]) -> str:
    if calls:
        return "tool_calls"
    return reason if reason in ("stop", "length") else "stop"


class _UpstreamError(Exception):
    """The backend could not answer (HTTP 502)."""


class _Handler(BaseHTTPRequestHandler):
    gateway: Gateway
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the calls are the record
        return

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json")

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [
                {"id": self.gateway.model, "object": "model", "owned_by": "terminal-env"}]})
        else:
            self._error(404, f"no route GET {self.path}; the gateway serves POST /v1/chat/completions",
                        "invalid_request_error")

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route POST {self.path}; the gateway serves POST /v1/chat/completions",
                        "invalid_request_error")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
        except (ValueError, json.JSONDecodeError) as exc:
            self._error(400, f"the request body is not JSON: {exc}", "invalid_request_error")
            return
        try:
            response = self.gateway.complete(body)
            if body.get("stream"):
                options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
                self._send_bytes(200, stream_events(response, include_usage=bool(options.get("include_usage"))),
                                 "text/event-stream")
            else:
                self._send(200, response)
        except ContextOverflowError as exc:
            self._error(400, str(exc), "context_length_exceeded")
        except ConfigError as exc:
            self._error(400, str(exc), "invalid_request_error")
        except (_UpstreamError, ModelError) as exc:
            self._error(502, str(exc), "upstream_error")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m terminal_env.integrations.gateway",
                                 description="An OpenAI-compatible gateway that records the exact tokens of every call.")
    ap.add_argument("--model", required=True, help="a model spec as `terminal-env run --model` takes (hf:PATH, openai:NAME, ...)")
    ap.add_argument("--record", required=True, help="append every call to this JSONL file")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--require-tokens", action="store_true", help="refuse (HTTP 502) calls that cannot be exact")
    args = ap.parse_args(argv)
    try:
        gw = Gateway(make_backend(args.model), host=args.host, port=args.port, record=args.record,
                     require_tokens=args.require_tokens).start()
    except TerminalEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Ctrl-C, kill and process managers stop it the same way. SIGINT is set here, not inherited:
    # a process started in the background of a script (``gateway ... &``) inherits SIGINT ignored,
    # and Python then never turns it into KeyboardInterrupt.
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"gateway for {gw.model} at {gw.url} (OPENAI_BASE_URL={gw.url}); recording to {args.record}; "
          "Ctrl-C or SIGTERM stops it", file=sys.stderr)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        gw.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
