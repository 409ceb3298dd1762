"""New weights into a vLLM server after each update, through vLLM's documented weight transfer.

vLLM serves the rollouts (token ids in and out through
:class:`~terminal_env.models.openai_backend.OpenAIBackend` with ``token_ids=True``); after each
PPO update the trainer pushes the actor's weights into it, without a restart, with the protocol
of vLLM's weight-transfer engine (its "RLHF" HTTP routes, served when vLLM runs with
``VLLM_SERVER_DEV_MODE=1`` and ``--weight-transfer-config '{"backend": "nccl"}'``):

1. ``GET /get_world_size``: how many inference workers there are. The trainer is rank 0 of a
   group of ``1 + workers``; the workers start at rank 1 (``rank_offset``).
2. ``POST /init_weight_transfer_engine {"init_info": {"master_address", "master_port",
   "rank_offset", "world_size"}}``, once: the workers join the group while the trainer does.
3. Per push: ``POST /pause``, ``POST /start_weight_update {"is_checkpoint_format": true}``,
   ``POST /update_weights {"update_info": {"names", "dtype_names", "shapes", "packed": false}}``
   while the trainer broadcasts each tensor, in that order, from rank 0; then
   ``POST /finish_weight_update`` and ``POST /resume``. Servers older than the four-phase
   protocol have no start, finish, pause or resume route: a 404 from one of those is skipped.

The data plane is a transport: ``"nccl"``, what vLLM's engine speaks (vLLM's own
``StatelessProcessGroup`` and ``PyNcclCommunicator``: a GPU and vLLM installed beside the
trainer), or ``"gloo"``, the same broadcasts over torch's CPU collectives, which the project's
loopback server (:mod:`terminal_env.train.loopback`) speaks. **Only the gloo transport against
the loopback server has run here**; the nccl transport and a real vLLM server have not (no GPU
on the machines this was written on), and vLLM has changed this interface between versions.

torch is the optional extra [train]; vLLM is needed only by the nccl transport.
"""

from __future__ import annotations

import datetime
import json
import socket
import threading
import urllib.error
import urllib.request
from typing import Any, Iterable

import torch
import torch.distributed as dist

from ..errors import ConfigError

#: routes a server older than vLLM's four-phase weight transfer may lack (a 404 there is skipped)
OPTIONAL_ROUTES = ("pause", "resume", "start_weight_update", "finish_weight_update")


class VLLMWeightSync:
    """Pushes weights into the vLLM server at ``base_url`` (the server's root, with or without
    ``/v1``) over ``transport`` (``"nccl"`` or ``"gloo"``), the group's rendezvous at
    ``master_address:master_port`` (a free port when None). ``backends``: model backends serving
    from that server whose ``weights_version`` a push updates, so every turn records the
    weights that sampled it."""

    def __init__(self, base_url: str, *, transport: str = "nccl", master_address: str = "127.0.0.1",
                 master_port: int | None = None, backends: Iterable[Any] = (), timeout: float = 300.0):
        if transport not in TRANSPORTS:
            raise ConfigError(f"unknown weight transport {transport!r}: use one of {sorted(TRANSPORTS)}")
        root = base_url.rstrip("/")
        self.base_url = root[:-3] if root.endswith("/v1") else root
        self.transport_name = transport
        self.master_address = master_address
        self.master_port = master_port or _free_port(master_address)
        self.backends = list(backends)
        self.timeout = timeout
        self.version: str | None = None
        self._transport: Any = None
        self._skipped: set[str] = set()

    def init(self) -> None:
        """Form the group with the server's workers (``/init_weight_transfer_engine``)."""
        if self._transport is not None:
            return
        workers = int(self._call("GET", "get_world_size")["world_size"])
        world = 1 + workers
        info = {"master_address": self.master_address, "master_port": self.master_port,
                "rank_offset": 1, "world_size": world}
        transport = TRANSPORTS[self.transport_name]()
        self._together(lambda: self._call("POST", "init_weight_transfer_engine", {"init_info": info}),
                       lambda: transport.connect(self.master_address, self.master_port, world, self.timeout))
        self._transport = transport

    def push(self, weights: Any, version: str) -> str:
        """Send ``weights`` (a model or a state dict of tensors) to the server as they are now and
        name them ``version``; returns it. The server pauses generation meanwhile. A model sharded
        under torchrun is pushed from rank 0 as its gathered state,
        ``distributed.full_state(actor)`` (which every rank calls)."""
        self.init()
        state = weights.state_dict() if hasattr(weights, "state_dict") else dict(weights)
        tensors = [(name, t.detach()) for name, t in state.items()]
        info = {"names": [n for n, _ in tensors],
                "dtype_names": [str(t.dtype).removeprefix("torch.") for _, t in tensors],
                "shapes": [list(t.shape) for _, t in tensors], "packed": False}
        self._optional("pause")
        try:
            self._optional("start_weight_update", {"is_checkpoint_format": True})
            self._together(lambda: self._call("POST", "update_weights", {"update_info": info}),
                           lambda: [self._transport.broadcast(t) for _, t in tensors])
            self._optional("finish_weight_update")
        finally:
            self._optional("resume")
        self.version = version
        for backend in self.backends:
            backend.weights_version = version
        return version

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def __enter__(self) -> VLLMWeightSync:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP -----------------------------------------------------------------------------

    def _optional(self, route: str, body: dict | None = None) -> None:
        if route in self._skipped:
            return
        try:
            self._call("POST", route, body or {})
        except _NotFound:
            self._skipped.add(route)  # a server before the four-phase protocol

    def _call(self, method: str, route: str, body: dict | None = None) -> dict:
        url = f"{self.base_url}/{route}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's server
                text = response.read().decode() or "{}"
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            if e.code == 404 and route in OPTIONAL_ROUTES:
                raise _NotFound(route) from None
            if e.code == 404:
                raise ConfigError(
                    f"the server at {self.base_url} has no /{route}: vLLM serves its weight-transfer routes "
                    f"only when started with VLLM_SERVER_DEV_MODE=1 and --weight-transfer-config "
                    f"'{{\"backend\": \"{self.transport_name}\"}}'") from None
            raise ConfigError(f"{method} {url} failed with HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            raise ConfigError(f"{method} {url} failed: {e}") from None
        try:
            return json.loads(text)
        except ValueError:
            raise ConfigError(f"{method} {url} answered what is not JSON: {text[:200]!r}") from None

    @staticmethod
    def _together(request: Any, local: Any) -> None:
        """Run the server's side (an HTTP call that returns when its workers are done) and ours
        at once: both meet inside the same collective calls. A refused request raises at once
        (our side, left waiting for peers that will not come, ends at its timeout)."""
        failure: list[BaseException] = []

        def ours() -> None:
            try:
                local()
            except BaseException as e:  # noqa: BLE001 - raised below, in the caller's thread
                failure.append(e)

        thread = threading.Thread(target=ours, name="weight-sync-collective", daemon=True)
        thread.start()
        request()
        thread.join()
        if failure:
            raise failure[0]


class _NotFound(Exception):
    pass


class GlooTransport:
    """Broadcasts over torch's CPU collectives (gloo): a TCP store at the rendezvous address,
    held by rank 0 (the trainer), and a group of its own, so a process may hold several."""

    def __init__(self) -> None:
        self.group: Any = None
        self._store: Any = None

    def connect(self, address: str, port: int, world: int, timeout: float, rank: int = 0) -> None:
        wait = datetime.timedelta(seconds=timeout)
        self._store = dist.TCPStore(address, port, world, rank == 0, timeout=wait)
        self.group = dist.ProcessGroupGloo(self._store, rank, world, wait)

    def broadcast(self, tensor: Any) -> Any:
        options = dist.BroadcastOptions()
        options.rootRank = 0
        data = tensor.contiguous()
        self.group.broadcast([data], options).wait()
        return data

    def close(self) -> None:
        self.group = self._store = None


class NcclTransport:
    """Broadcasts with vLLM's own NCCL communicator, as its weight-transfer engine expects:
    vLLM's ``StatelessProcessGroup`` at the rendezvous and a ``PyNcclCommunicator`` on this
    process's current GPU. Needs vLLM installed beside the trainer. Not run here (no GPU)."""

    def __init__(self) -> None:
        self.communicator: Any = None

    def connect(self, address: str, port: int, world: int, timeout: float, rank: int = 0) -> None:
        try:
            from vllm.distributed.device_communicators.pynccl import (
                PyNcclCommunicator,  # the user's vLLM
            )
            from vllm.distributed.utils import StatelessProcessGroup  # the user's vLLM
        except ImportError as e:
            raise ConfigError(f"the nccl weight transport needs vLLM installed beside the trainer ({e}); "
                              f"without a GPU, use transport='gloo' against a server that speaks it") from None
        if not torch.cuda.is_available():
            raise ConfigError("the nccl weight transport needs a CUDA GPU in the trainer's process")
        group = StatelessProcessGroup.create(host=address, port=port, rank=rank, world_size=world)
        self.communicator = PyNcclCommunicator(group, device=torch.cuda.current_device())

    def broadcast(self, tensor: Any) -> Any:
        data = tensor.contiguous().cuda()
        self.communicator.broadcast(data, src=0, stream=torch.cuda.current_stream())
        torch.cuda.current_stream().synchronize()
        return data

    def close(self) -> None:
        self.communicator = None


TRANSPORTS = {"gloo": GlooTransport, "nccl": NcclTransport}


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])
