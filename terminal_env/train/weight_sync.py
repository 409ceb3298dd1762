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
3. Per push: ``POST /pause?mode=abort``, ``POST /start_weight_update {"is_checkpoint_format": true}``,
   ``POST /update_weights {"update_info": {"names", "dtype_names", "shapes", "packed": false}}``
   while the trainer broadcasts each tensor, in that order, from rank 0; then
   ``POST /finish_weight_update`` and ``POST /resume``. Servers older than the four-phase
   protocol have no start, finish, pause or resume route: a 404 from one of those is skipped.

``/pause`` takes vLLM's ``mode``: ``"abort"`` (vLLM's default: in-flight requests end at once with
``finish_reason="abort"``; the OpenAI backend retries them, and they are served after the resume
by the new weights), ``"wait"`` (the pause returns once in-flight requests have finished, sampled
by the old weights) or ``"keep"`` (frozen, resumed on ``/resume``; a request that straddles the
push is then sampled by both, so the backend retries any request during which its
``weights_version`` changed). The backends' ``weights_version`` changes before ``/resume``.

**Versions.** :func:`pair_version` names what is pushed after the pair's own weights:
``"<actor id>@<step>"`` (the pair's actor id, a digest of its saved weights, then the number of
updates made since it was saved; ``@0`` is the pair's weights as saved). An actor id never holds
``@``, so a version says which checkpoint it grew from and how far. ``episodes(..., weights=<actor
id>)`` and ``train ppo/critic --pair`` accept the id itself and ``<id>@0``: only those are the
pair's weights.

Every wait is bounded by ``timeout`` (seconds): each HTTP call, the group's rendezvous, and our side
of each collective; what timed out is named in a :class:`WeightSyncTimeout`.

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

from ..errors import ConfigError, InfraError
from .lora import served_state

#: routes a server older than vLLM's four-phase weight transfer may lack (a 404 there is skipped)
OPTIONAL_ROUTES = ("pause", "resume", "start_weight_update", "finish_weight_update")
#: vLLM's ``/pause?mode=``: abort in-flight requests (its default), wait for them, or keep them frozen
PAUSE_MODES = ("abort", "wait", "keep")


class WeightSyncTimeout(InfraError, TimeoutError):
    """A step of a weight push did not finish within the sync's ``timeout`` (the message names it)."""


def pair_version(actor_id: str, step: int = 0) -> str:
    """The version name of the weights ``step`` updates after the checkpoint whose actor id is
    ``actor_id`` (``Pair.meta["actor"]``); step 0 is that checkpoint's weights.

    >>> pair_version("3f9a1c0d2b4e5f60", 2)
    '3f9a1c0d2b4e5f60@2'
    """
    if not actor_id or "@" in actor_id:
        raise ConfigError(f"pair_version needs a pair's actor id (Pair.meta['actor'], a digest), not {actor_id!r}")
    if step < 0:
        raise ConfigError(f"the step of a version counts updates: at least 0, not {step}")
    return f"{actor_id}@{int(step)}"


def versions_of(actor_id: str) -> set[str]:
    """The version names under which the pair whose actor id is ``actor_id`` may have sampled: the
    id itself (its checkpoint served as it is) and ``<id>@0`` (its weights pushed unchanged)."""
    return {actor_id, pair_version(actor_id, 0)}


class VLLMWeightSync:
    """Pushes weights into the vLLM server at ``base_url`` (the server's root, with or without
    ``/v1``) over ``transport`` (``"nccl"`` or ``"gloo"``), the group's rendezvous at
    ``master_address:master_port`` (a free port when None). ``backends``: model backends serving
    from that server whose ``weights_version`` a push updates, so every turn records the
    weights that sampled it."""

    def __init__(self, base_url: str, *, transport: str = "nccl", master_address: str = "127.0.0.1",
                 master_port: int | None = None, backends: Iterable[Any] = (), timeout: float = 300.0,
                 pause_mode: str = "abort"):
        if transport not in TRANSPORTS:
            raise ConfigError(f"unknown weight transport {transport!r}: use one of {sorted(TRANSPORTS)}")
        if pause_mode not in PAUSE_MODES:
            raise ConfigError(f"unknown pause mode {pause_mode!r}: vLLM's /pause takes one of {list(PAUSE_MODES)}")
        if not timeout or timeout <= 0:
            raise ConfigError(f"timeout must be a number of seconds above 0, not {timeout!r}")
        root = base_url.rstrip("/")
        self.base_url = root[:-3] if root.endswith("/v1") else root
        self.transport_name = transport
        self.master_address = master_address
        self.master_port = master_port or _free_port(master_address)
        self.backends = list(backends)
        self.timeout = float(timeout)
        self.pause_mode = pause_mode
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
                       lambda: transport.connect(self.master_address, self.master_port, world, self.timeout),
                       f"joining the weight-transfer group of {world} at {self.master_address}:{self.master_port}")
        self._transport = transport

    def push(self, weights: Any, version: str) -> str:
        """Send ``weights`` (a model or a state dict of tensors) to the server as they are now and
        name them ``version``; returns it. The server pauses generation meanwhile. A model sharded
        under torchrun is pushed from rank 0 as its gathered state,
        ``distributed.full_state(actor)`` (which every rank calls)."""
        # a model with a LoRA adapter goes as its merged weights, under the served model's names
        state = served_state(weights) if hasattr(weights, "state_dict") else dict(weights)
        _refuse_shards(state)
        self.init()
        tensors = [(name, t.detach()) for name, t in state.items()]
        info = {"names": [n for n, _ in tensors],
                "dtype_names": [str(t.dtype).removeprefix("torch.") for _, t in tensors],
                "shapes": [list(t.shape) for _, t in tensors], "packed": False}
        self._optional(f"pause?mode={self.pause_mode}")
        try:
            self._optional("start_weight_update", {"is_checkpoint_format": True})
            self._together(lambda: self._call("POST", "update_weights", {"update_info": info}),
                           lambda: [self._transport.broadcast(t) for _, t in tensors],
                           f"broadcasting {len(tensors)} tensors to the server's workers")
            self._optional("finish_weight_update")
            self.version = version
            for backend in self.backends:  # before the resume: a request served after it is the new weights'
                backend.weights_version = version
        finally:
            self._optional("resume")
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
        name = route.split("?", 1)[0]
        if name in self._skipped:
            return
        try:
            self._call("POST", route, body or {})
        except _NotFound:
            self._skipped.add(name)  # a server before the four-phase protocol

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
            if e.code == 404 and route.split("?", 1)[0] in OPTIONAL_ROUTES:
                raise _NotFound(route) from None
            if e.code == 404:
                raise ConfigError(
                    f"the server at {self.base_url} has no /{route}: vLLM serves its weight-transfer routes "
                    f"only when started with VLLM_SERVER_DEV_MODE=1 and --weight-transfer-config "
                    f"'{{\"backend\": \"{self.transport_name}\"}}'") from None
            raise ConfigError(f"{method} {url} failed with HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError) or isinstance(e, TimeoutError):
                raise WeightSyncTimeout(f"{method} {url}: no answer within the weight sync's timeout of "
                                        f"{self.timeout:g} s") from None
            raise ConfigError(f"{method} {url} failed: {e}") from None
        try:
            return json.loads(text)
        except ValueError:
            raise ConfigError(f"{method} {url} answered what is not JSON: {text[:200]!r}") from None

    def _together(self, request: Any, local: Any, what: str) -> None:
        """Run the server's side (an HTTP call that returns when its workers are done) and ours
        at once: both meet inside the same collective calls. A refused request raises at once
        (our side, left waiting for peers that will not come, ends at its timeout); our side
        still running ``timeout`` seconds after the server answered is :class:`WeightSyncTimeout`."""
        failure: list[BaseException] = []

        def ours() -> None:
            try:
                local()
            except BaseException as e:  # noqa: BLE001 - raised below, in the caller's thread
                failure.append(e)

        thread = threading.Thread(target=ours, name="weight-sync-collective", daemon=True)
        thread.start()
        request()
        thread.join(self.timeout)
        if thread.is_alive():
            raise WeightSyncTimeout(f"{what}: our side did not finish within the weight sync's timeout of "
                                    f"{self.timeout:g} s after the server answered (VLLMWeightSync(timeout=...))")
        if failure:
            raise failure[0]


class _NotFound(Exception):
    pass


def _refuse_shards(state: dict[str, Any]) -> None:
    """A sharded (FSDP2) state holds DTensors: each rank's shard, not the weights."""
    from torch.distributed.tensor import DTensor  # torch, the optional extra [train]

    sharded = [name for name, t in state.items() if isinstance(t, DTensor)]
    if sharded:
        raise ConfigError(f"the weights to push are sharded ({len(sharded)} DTensors, e.g. {sharded[0]!r}): every "
                          f"rank gathers them with terminal_env.train.distributed.full_state(actor), then rank 0 "
                          f"pushes the full state dict it returns")


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
