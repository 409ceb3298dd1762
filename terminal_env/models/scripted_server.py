"""A real OpenAI-compatible HTTP server whose answers follow a script, for tests and demos.

It speaks enough of the OpenAI API for the official ``openai`` client, vLLM-style clients and
``curl``: ``POST /v1/chat/completions``, ``POST /v1/completions`` and ``GET /v1/models``. It binds
to 127.0.0.1 on a free port and serves from a background thread, so a harness can be tested end
to end (HTTP, retries, timeouts, tool calls) without a model::

    with ScriptedServer(["ls -la", {"tool_calls": [{"name": "run", "arguments": {"cmd": "ls"}}]},
                         Fail(500), Stall(5.0), Disconnect()]) as server:
        backend = OpenAIBackend("scripted", base_url=server.base_url)
        ...
        server.requests   # the JSON bodies received, in order

**The script.** Each request takes the next *item*:

- a list: items in order, shared by every conversation (``per_conversation=True`` gives each
  conversation, keyed by the content of its first user message, its own cursor over the list);
- a dict mapping a conversation's first user message to its own list;
- a callable ``script(request_body) -> item``, asked for every request.

Items:

- ``str``: the assistant's text;
- ``dict``: ``{"content": ..., "tool_calls": [{"name": ..., "arguments": dict-or-str}],
  "reasoning_content": ..., "finish_reason": ...}`` (all keys optional);
- :class:`Fail`: an HTTP error status (with a body and headers such as ``Retry-After``);
- :class:`Stall`: wait, then answer (a client timeout test); closing the server wakes it;
- :class:`Disconnect`: close the connection without any response.

When the script runs out the server answers HTTP 500 with an error saying so, so a test that
asks more than it scripted fails loudly instead of passing on a made-up answer.

**Text completions** (``/v1/completions``, ``prompt`` a string or a list of token ids; list and
callable scripts) answer an item as the raw text a model writes: ``<think>`` block, content,
then one Hermes-style ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` per tool call.

**Token ids, as vLLM >= 0.10.2 gives them** (``token_ids=True``; off, the server answers without
ids, like a server that cannot). The fake tokenizer (:func:`fake_token_ids`) has one id per UTF-8
byte (0-255) and the special end-of-turn token ``<|eot|>``, id :data:`EOT_ID` (256). A chat prompt
is rendered by :func:`render_chat`; an answer is its raw text (as above) plus ``EOT_ID`` unless
``finish_reason`` is ``"length"`` (the text leaves it out, as vLLM's does). Asked
``return_token_ids``, chat answers carry ``prompt_token_ids`` and ``choices[0].token_ids``, text
completions ``choices[0].token_ids`` and ``choices[0].prompt_token_ids``; asked ``logprobs``, the
k-th answer token has the log-prob ``-0.05 - 0.1 * (k % 7)`` (chat: ``logprobs.content``; text:
``logprobs.tokens`` and ``token_logprobs``). Usage then counts these tokens. ``max_tokens`` is not
enforced: script ``finish_reason: "length"`` for a cut-off answer.

Standard library only: this module ships in the package for users testing their harnesses.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["EOT_ID", "EOT_TEXT", "Disconnect", "Fail", "RequestRecord", "ScriptedServer", "Stall",
           "fake_token_ids", "render_chat"]

#: the fake tokenizer's end-of-turn token and its id (the other ids are the bytes of the text)
EOT_TEXT, EOT_ID = "<|eot|>", 256


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error. ``body``: a dict is sent as JSON as it is, a str becomes the
    message of an OpenAI-style ``{"error": {...}}`` body, bytes are sent raw."""

    status: int = 500
    body: dict[str, Any] | str | bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stall:
    """Sleep ``seconds`` (``float('inf')`` for ever) before answering with ``then`` (any item;
    by default a short text). Closing the server ends the wait and drops the connection."""

    seconds: float
    then: Any = "(late answer after a stall)"


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without sending a response."""


Item = str | dict | Fail | Stall | Disconnect
Script = list | dict | Callable[[dict], Any]


@dataclass
class RequestRecord:
    """One request as the server received it."""

    time: float  #: ``time.monotonic()`` when the request was read
    method: str
    path: str
    headers: dict[str, str]
    body: Any  #: the decoded JSON body (``None`` for GET)


class _Exhausted(Exception):
    pass


_WORD = re.compile(r"\S+")
_PIECE = re.compile(r"\s*\S+|\s+$")


def _words(text: str) -> int:
    return len(_WORD.findall(text or ""))


def _message_text(message: dict) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    parts = [str(content)]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    return " ".join(parts)


def render_chat(messages: list[dict]) -> str:
    r"""The fake chat template: ``<|ROLE|>TEXT<|eot|>\n`` per message, then ``<|assistant|>``.

    >>> render_chat([{"role": "user", "content": "hi"}])
    '<|user|>hi<|eot|>\n<|assistant|>'
    """
    return "".join(f"<|{m.get('role')}|>{_message_text(m).strip()}{EOT_TEXT}\n"
                   for m in messages) + "<|assistant|>"


def fake_token_ids(text: str) -> list[int]:
    """The fake tokenizer: one id per UTF-8 byte, and ``EOT_ID`` for each ``<|eot|>``.

    >>> fake_token_ids("hé<|eot|>")
    [104, 195, 169, 256]
    """
    parts = text.split(EOT_TEXT)
    return [i for k, part in enumerate(parts) for i in [EOT_ID] * (k > 0) + list(part.encode())]


def _raw_text(item: dict) -> str:
    """What a model writes for an item, before a server parses out reasoning and tool calls."""
    think = item.get("reasoning_content") or item.get("reasoning")
    text = (f"<think>\n{think}\n</think>\n\n" if think else "") + (item.get("content") or "")
    for call in item.get("tool_calls") or ():
        text += "\n<tool_call>\n" + json.dumps({"name": call["name"],
                                                "arguments": call.get("arguments", {})}) + "\n</tool_call>"
    return text


def _tokens(text: str, as_bytes: bool, eot: bool) -> list[tuple[int, str]]:
    """(id, token text) pairs: bytes plus the end-of-turn id, or (no ids asked) word pieces."""
    if not as_bytes:
        return [(zlib.crc32(p.encode()) % 50_000, p) for p in _PIECE.findall(text.strip())]
    ids = fake_token_ids(text) + [EOT_ID] * eot
    return [(i, EOT_TEXT if i == EOT_ID else chr(i) if 32 <= i < 127 else f"<0x{i:02X}>") for i in ids]


def _logprob(k: int) -> float:
    return -0.05 - 0.1 * (k % 7)


def _first_user(body: dict) -> str:
    for m in body.get("messages") or ():
        if isinstance(m, dict) and m.get("role") == "user":
            return _message_text(m)
    return ""


class ScriptedServer:
    """Serve ``script`` on ``http://127.0.0.1:PORT/v1``; use as a context manager or call
    :meth:`close`. ``model`` is the id reported by ``/v1/models`` and in completions;
    ``token_ids`` makes it answer token ids as vLLM does (the module's docstring)."""

    def __init__(self, script: Script, *, model: str = "scripted", per_conversation: bool = False,
                 token_ids: bool = False, keep: int = 1000):
        if not (isinstance(script, (list, tuple, dict)) or callable(script)):
            raise TypeError("script must be a list of items, a dict of lists, or a callable")
        self.model = model
        self._script = list(script) if isinstance(script, tuple) else script
        self._per_conversation = per_conversation
        self.token_ids = token_ids
        self._lock = threading.Lock()
        self._cursors: dict[str, int] = {}
        #: the last ``keep`` requests (a server that runs for hours must not keep every one)
        self._log: deque[RequestRecord] = deque(maxlen=keep)
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._counter = 0

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.port: int = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"scripted-server-{self.port}", daemon=True,
        )
        self._thread.start()

    # -- public ---------------------------------------------------------------------------

    @property
    def requests(self) -> list[Any]:
        """The JSON bodies of the POST requests (chat and text completions) so far, the last
        ``keep`` of them (a copy)."""
        with self._lock:
            return [r.body for r in self._log if r.method == "POST"]

    @property
    def log(self) -> list[RequestRecord]:
        """Every request received (time, method, path, headers, body), the last ``keep``, a copy."""
        with self._lock:
            return list(self._log)

    def close(self) -> None:
        """Stop serving: wakes stalled handlers, drops open connections, frees the port."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- script ---------------------------------------------------------------------------

    def _next_item(self, body: dict) -> Any:
        script = self._script
        if callable(script) and not isinstance(script, (list, dict)):
            return script(body)
        with self._lock:
            if isinstance(script, dict):
                key = _first_user(body)
                if key not in script:
                    raise _Exhausted(f"no script for a conversation starting with {key[:80]!r}")
                items, cursor_key = script[key], key
            else:
                items = script
                cursor_key = _first_user(body) if self._per_conversation else ""
            i = self._cursors.get(cursor_key, 0)
            if i >= len(items):
                where = f" for the conversation {cursor_key[:80]!r}" if cursor_key else ""
                raise _Exhausted(f"the script is exhausted{where}: all {len(items)} items were used")
            self._cursors[cursor_key] = i + 1
            return items[i]

    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    # -- responses ------------------------------------------------------------------------

    def _completion(self, item: Any, body: dict) -> dict:
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, dict):
            raise TypeError(f"unsupported script item {item!r}")
        n = self._next_id()
        content = item.get("content")
        calls = []
        for j, call in enumerate(item.get("tool_calls") or ()):
            args = call.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args)
            calls.append({
                "id": call.get("id") or f"call_{n}_{j}",
                "type": "function",
                "function": {"name": call["name"], "arguments": args},
            })
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        for key in ("reasoning_content", "reasoning"):
            if key in item:
                message[key] = item[key]
        finish = item.get("finish_reason") or ("tool_calls" if calls else "stop")
        messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
        if self.token_ids:  # everything generated, reasoning and tool calls included
            tokens = _tokens(_raw_text(item), True, finish != "length")
            prompt_ids = fake_token_ids(render_chat(messages))
        else:
            out_text = " ".join([content or ""] + [c["function"]["name"] + " " + c["function"]["arguments"]
                                                   for c in calls])
            tokens, prompt_ids = _tokens(out_text, False, False), []
        prompt_tokens = len(prompt_ids) or sum(_words(_message_text(m)) for m in messages)
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            choice["logprobs"] = {"content": [
                {"token": f"token_id:{i}" if as_ids else t, "logprob": _logprob(k),
                 "bytes": [i] if self.token_ids and i < 256 else list(t.encode()), "top_logprobs": []}
                for k, (i, t) in enumerate(tokens)]}
        answer = {
            "id": f"chatcmpl-scripted-{n}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or self.model, "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens),
                      "total_tokens": prompt_tokens + len(tokens)},
        }
        if self.token_ids and body.get("return_token_ids"):
            answer["prompt_token_ids"] = prompt_ids
            choice["token_ids"] = [i for i, _ in tokens]
        return answer

    def _text_completion(self, item: Any, body: dict) -> dict:
        item = {"content": item} if isinstance(item, str) else item
        if not isinstance(item, dict):
            raise TypeError(f"unsupported script item {item!r}")
        prompt = body["prompt"]
        prompt_ids = fake_token_ids(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
        text, finish = _raw_text(item), item.get("finish_reason") or "stop"
        tokens = _tokens(text, self.token_ids, finish != "length")
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": [t for _, t in tokens],
                                  "token_logprobs": [_logprob(k) for k in range(len(tokens))],
                                  "top_logprobs": [{t: _logprob(k)} for k, (_, t) in enumerate(tokens)]}
        if self.token_ids and body.get("return_token_ids"):
            choice["token_ids"] = [i for i, _ in tokens]
            choice["prompt_token_ids"] = prompt_ids
        used = len(prompt_ids) if self.token_ids else _words(prompt if isinstance(prompt, str) else "")
        return {"id": f"cmpl-scripted-{self._next_id()}", "object": "text_completion",
                "created": int(time.time()), "model": body.get("model") or self.model,
                "choices": [choice], "usage": {"prompt_tokens": used, "completion_tokens": len(tokens),
                                               "total_tokens": used + len(tokens)}}

    # -- HTTP -----------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "ScriptedServer/1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests read .log instead

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle's algorithm and
                # the client's delayed ACK add ~40 ms to every answer
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with server._lock:
                    server._connections.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _record(self, body: Any) -> None:
                rec = RequestRecord(time.monotonic(), self.command, self.path,
                                    {k: v for k, v in self.headers.items()}, body)
                with server._lock:
                    server._log.append(rec)

            def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None,
                           raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, str(v))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:  # the client gave up (timeout) and closed the socket
                    self.close_connection = True

            def _error(self, status: int, message: str, headers: dict[str, str] | None = None,
                       kind: str | None = None) -> None:
                payload = {"error": {"message": message, "type": kind or _error_type(status),
                                     "param": None, "code": status}}
                self._send_json(status, payload, headers)

            def _drop(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def do_GET(self) -> None:
                self._record(None)
                path = self.path.split("?", 1)[0].rstrip("/")
                if path in ("/v1/models", "/models"):
                    self._send_json(200, {"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 0, "owned_by": "scripted"}]})
                elif path in ("/health", "/v1/health"):
                    self._send_json(200, {"status": "ok"})
                else:
                    self._error(404, f"no route GET {self.path}")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._record(raw.decode("utf-8", "replace"))
                    self._error(400, "the request body is not valid JSON")
                    return
                self._record(body)
                path = self.path.split("?", 1)[0].rstrip("/")
                if path in ("/v1/chat/completions", "/chat/completions"):
                    build = server._completion
                    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                        self._error(400, "'messages' is required and must be a list")
                        return
                elif path in ("/v1/completions", "/completions"):
                    build = server._text_completion
                    prompt = body.get("prompt") if isinstance(body, dict) else None
                    if not (isinstance(prompt, str) or isinstance(prompt, list) and prompt
                            and all(type(t) is int for t in prompt)):
                        self._error(400, "'prompt' must be a string or one non-empty list of token ids")
                        return
                else:
                    self._error(404, f"no route POST {self.path}")
                    return
                try:
                    item = server._next_item(body)
                except _Exhausted as e:
                    self._error(500, f"ScriptedServer: {e}", kind="script_exhausted")
                    return
                self._answer(item, body, build)

            def _answer(self, item: Any, body: dict, build: Callable[[Any, dict], dict]) -> None:
                if isinstance(item, Stall):
                    wait = None if item.seconds == float("inf") else max(0.0, item.seconds)
                    if server._closing.wait(wait):
                        self._drop()
                        return
                    self._answer(item.then, body, build)
                elif isinstance(item, Disconnect):
                    self._drop()
                elif isinstance(item, Fail):
                    headers = dict(item.headers)
                    if isinstance(item.body, bytes):
                        self._send_json(item.status, None, headers, raw=item.body)
                    elif isinstance(item.body, dict):
                        self._send_json(item.status, item.body, headers)
                    else:
                        self._error(item.status, item.body or f"scripted failure (HTTP {item.status})",
                                    headers)
                else:
                    try:
                        payload = build(item, body)
                    except (TypeError, KeyError) as e:
                        self._error(500, f"ScriptedServer: bad script item {item!r}: {e}",
                                    kind="script_error")
                        return
                    self._send_json(200, payload)

        return Handler


def _error_type(status: int) -> str:
    return {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 429: "rate_limit_error"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error")
