"""A loopback stand-in for a vLLM server, for tests and CPU runs of the trainer's vLLM path.

It serves a real local model (a :class:`~terminal_env.models.hf_backend.TransformersBackend`)
on 127.0.0.1 with what the trainer uses of vLLM:

* ``POST /v1/completions`` with a prompt of token ids, answering as vLLM does when asked
  ``return_token_ids`` and ``logprobs``: ``choices[0].token_ids``, ``prompt_token_ids``,
  ``logprobs.token_logprobs`` (raw, before temperature: vLLM's default ``raw_logprobs``),
  ``finish_reason`` and ``usage``; ``GET /v1/models``;
* vLLM's weight-transfer routes (those of ``VLLM_SERVER_DEV_MODE=1``): ``GET /get_world_size``,
  ``POST /init_weight_transfer_engine``, ``/start_weight_update``, ``/update_weights``,
  ``/finish_weight_update``, ``/pause`` and ``/resume``, with the same bodies. Its one worker
  joins the trainer's group at ``rank_offset`` and receives each tensor of ``update_info`` by
  broadcast from rank 0, over gloo (torch's CPU collectives) where vLLM uses NCCL; then the
  model's weights are replaced (``load_weights``) and the next completions sample from them.

Generation pauses while weights change, as vLLM's ``/pause?mode=`` does: ``abort`` (vLLM's
default) ends every in-flight request with ``finish_reason="abort"`` (here: a request whose
generation was under way when the pause came answers so when it ends), ``wait`` answers the pause
once in-flight requests are done; new requests wait for ``/resume`` (at most ``timeout``, then
503). ``keep`` (vLLM freezes requests mid-generation) is refused: this server cannot freeze one.

Like vLLM (``--generation-config auto``), a request that leaves ``top_p``, ``top_k``, ``min_p`` or
``repetition_penalty`` out gets the served model's ``generation_config`` value. It applies
``top_p``; any other setting that would reshape the distribution is refused (400), since this
server cannot apply it. ``applied`` records the settings each completion was sampled with.
:class:`~terminal_env.train.weight_sync.VLLMWeightSync` with ``transport="gloo"`` drives it. Not
vLLM: it has no scheduler of its own (the backend batches), no chat route, and one worker.

torch is the optional extra [train].
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from ..models.base import SamplingParams
from .weight_sync import GlooTransport


#: sampling settings that leave the distribution as it is (top_k 0 means "off" too)
_NEUTRAL: dict[str, Any] = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
                            "presence_penalty": 0.0, "frequency_penalty": 0.0}


class LoopbackVLLM:
    """Serves ``backend`` (see the module's notes) until closed; ``base_url`` ends in ``/v1``."""

    def __init__(self, backend: Any, *, model: str = "loopback", timeout: float = 300.0):
        self.backend = backend
        self.model = model
        self.timeout = timeout
        #: what the trainer asked, in order: (route, body)
        self.calls: list[tuple[str, Any]] = []
        #: the settings each completion was sampled with (the request's, else generation_config's)
        self.applied: list[dict[str, Any]] = []
        #: completions answered with finish_reason "abort" (a pause came while they ran)
        self.aborted = 0
        self.pushes = 0
        self._abort_epoch = 0  # bumped by every aborting pause
        self._inflight = 0
        self._inflight_changed = threading.Condition()
        self._transport: GlooTransport | None = None
        self._serving = threading.Event()
        self._serving.set()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-vllm", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._serving.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> LoopbackVLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- routes ---------------------------------------------------------------------------

    def _route(self, method: str, path: str, body: Any, query: dict[str, str] | None = None) -> tuple[int, Any]:
        self.calls.append((path, body))
        if method == "GET" and path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": self.model, "object": "model"}]}
        if method == "GET" and path == "/get_world_size":
            return 200, {"world_size": 1}
        if method != "POST":
            return 404, {"detail": "Not Found"}
        if path == "/v1/completions":
            return self._complete(body)
        if path == "/init_weight_transfer_engine":
            return self._init(body)
        if path == "/update_weights":
            return self._update(body)
        if path == "/pause":
            return self._pause((query or {}).get("mode", "abort"))
        if path == "/resume":
            with self._inflight_changed:
                self._serving.set()
                self._inflight_changed.notify_all()
            return 200, {"status": "resumed"}
        if path in ("/start_weight_update", "/finish_weight_update"):
            return 200, {"message": "ok"}
        return 404, {"detail": "Not Found"}

    def _pause(self, mode: str) -> tuple[int, Any]:
        if mode not in ("abort", "wait"):
            return 400, {"error": f"mode={mode!r}: the loopback server pauses with mode abort or wait only"}
        with self._inflight_changed:
            self._serving.clear()  # new requests wait from now on
            if mode == "abort":
                self._abort_epoch += 1
            elif not self._inflight_changed.wait_for(lambda: self._inflight == 0, timeout=self.timeout):
                return 500, {"error": f"in-flight requests did not finish within {self.timeout:g} s"}
        return 200, {"status": "paused"}

    def _settings(self, body: dict) -> tuple[dict[str, Any], str | None]:
        """The sampling settings of a request: its own, else those the model's generation_config
        sets (vLLM applies what the file sets, not transformers' defaults), and what this server
        cannot apply."""
        config = getattr(getattr(self.backend, "model", None), "generation_config", None)
        defaults = config.to_diff_dict() if config is not None else {}
        settings: dict[str, Any] = {}
        for name, neutral in _NEUTRAL.items():
            value = body.get(name)
            if value is None:
                value = defaults.get(name)
            settings[name] = neutral if value is None else value
        cannot = [f"{k}={v}" for k, v in settings.items()
                  if k != "top_p" and v != _NEUTRAL[k] and not (k == "top_k" and v == 0)]
        return settings, (", ".join(cannot) or None)

    def _init(self, body: dict) -> tuple[int, Any]:
        info = body.get("init_info")
        need = ("master_address", "master_port", "rank_offset", "world_size")
        if not isinstance(info, dict) or any(k not in info for k in need):
            return 400, {"detail": f"init_info needs {', '.join(need)}"}
        transport = GlooTransport()
        transport.connect(str(info["master_address"]), int(info["master_port"]), int(info["world_size"]),
                          self.timeout, rank=int(info["rank_offset"]))
        self._transport = transport
        return 200, {"message": "Weight transfer initialized"}

    def _update(self, body: dict) -> tuple[int, Any]:
        info = body.get("update_info")
        if not isinstance(info, dict) or not all(isinstance(info.get(k), list) for k in ("names", "dtype_names", "shapes")):
            return 400, {"detail": "update_info needs names, dtype_names and shapes"}
        if self._transport is None:
            return 400, {"detail": "call /init_weight_transfer_engine first"}
        state = {}
        for name, dtype, shape in zip(info["names"], info["dtype_names"], info["shapes"]):
            state[name] = self._transport.broadcast(torch.empty(shape, dtype=getattr(torch, dtype)))
        self.pushes += 1
        self.backend.load_weights(state, version=f"push-{self.pushes}")
        return 200, {"message": "Weights updated"}

    def _complete(self, body: dict) -> tuple[int, Any]:
        prompt = body.get("prompt")
        if not (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
            return 400, {"detail": "the loopback server takes prompts of token ids only"}
        settings, cannot = self._settings(body)
        if cannot:
            return 400, {"detail": f"the loopback server samples with top_p and temperature only; it cannot apply "
                                   f"{cannot} (sent, or the model's generation_config defaults that vLLM applies "
                                   f"to a request that leaves them out)"}
        with self._inflight_changed:
            # paused while the weights change: wait for the resume (bounded)
            while not self._serving.is_set():
                if not self._inflight_changed.wait(timeout=self.timeout) and not self._serving.is_set():
                    return 503, {"detail": f"paused for over {self.timeout:g} s"}
            self._inflight += 1
            epoch = self._abort_epoch
        try:
            stops = body.get("stop") or []
            params = SamplingParams(max_new_tokens=int(body.get("max_tokens") or 16),
                                    temperature=float(body.get("temperature", 1.0)),
                                    top_p=settings["top_p"] if settings["top_p"] < 1 else None, seed=body.get("seed"),
                                    stop=[stops] if isinstance(stops, str) else list(stops))
            c = self.backend.complete_tokens(prompt, params=params)
            self.applied.append({"temperature": params.temperature, **settings})
        finally:
            with self._inflight_changed:
                self._inflight -= 1
                aborted = epoch != self._abort_epoch
                self._inflight_changed.notify_all()
        if aborted:  # vLLM's default pause aborts what is in flight
            self.aborted += 1
            c.finish_reason = "abort"
        text = self.backend.chat_tokenizer.text(c.token_ids)
        for s in params.stop or []:
            text = text.split(s, 1)[0]
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": c.finish_reason}
        if body.get("return_token_ids"):
            choice.update(token_ids=c.token_ids, prompt_token_ids=list(prompt))
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": [f"token_id:{t}" for t in c.token_ids],
                                  "token_logprobs": c.logprobs}
        return 200, {"id": f"cmpl-{next(self._ids)}", "object": "text_completion", "created": int(time.time()),
                     "model": self.model, "choices": [choice],
                     "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(c.token_ids),
                               "total_tokens": len(prompt) + len(c.token_ids)}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                body: Any = None
                if method == "POST":
                    raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    try:
                        body = json.loads(raw or b"{}")
                    except ValueError:
                        self._send(400, {"detail": "Invalid JSON format"})
                        return
                path, _, query = self.path.partition("?")
                try:
                    status, payload = server._route(method, path, body, dict(urllib.parse.parse_qsl(query)))
                except Exception as e:  # noqa: BLE001 - the client sees it, as a server error
                    status, payload = 500, {"detail": f"{type(e).__name__}: {e}"}
                self._send(status, payload)

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        return Handler
