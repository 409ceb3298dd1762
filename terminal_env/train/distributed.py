"""The scale path: the same SFT, critic and PPO code under ``torchrun`` with PyTorch FSDP2.

Launch one process per device; each initialises the process group from torchrun's environment,
shards the actor and the critic, and calls the ordinary training functions::

    torchrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port 29500 -m my_project.train_sft

    # my_project/train_sft.py
    from terminal_env.train import distributed
    from terminal_env.train.models import Pair
    from terminal_env.train.sft import sft

    distributed.init_from_env()            # gloo on CPU, nccl on CUDA; a no-op without torchrun
    pair = Pair.load("ckpt/base")          # every rank loads the same weights ...
    distributed.shard(pair.actor)          # ... then shards them (each decoder layer, then the root)
    distributed.shard(pair.critic)
    report = sft(pair, samples, config)    # every rank passes the same samples, in the same order
    distributed.finish()                   # every rank waits for the others, then leaves the group

Every rank reads the whole batch list and the same seeds, so every rank draws the same minibatches;
each then trains on its share of each minibatch (:func:`rank_share`). On CPU set
``GLOO_SOCKET_IFNAME=lo`` to keep gloo on loopback. ``Pair.save`` on a sharded pair is a
collective: every rank calls it, the full weights are gathered (:func:`full_state`) and rank 0
writes them (one filesystem that every rank sees, as with one machine).

**Loss normalisation.** The losses are token means over a minibatch, and FSDP averages the
gradients over ranks. A rank's loss is multiplied by :func:`loss_scale`, ``world * local tokens
/ global tokens`` (one all-reduce of the token count), so that the average of the ranks' gradients
is the gradient of the sum over every token of the minibatch divided by their global count: the
single-process gradient, by design rather than approximately, however unevenly the tokens fall.
Without a process group every function here is the identity (scale 1, share = everything).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence, TypeVar

import torch
import torch.distributed as dist

from ..errors import ConfigError
from .layouts import decoder_layers  # found through the model's own decoder, never by a name

T = TypeVar("T")


def launch(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """What torchrun's environment variables say: rank, world size and rendezvous address (None
    when the process was not launched distributed).

    >>> launch({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})
    {'rank': 1, 'world_size': 2, 'local_rank': 1, 'master': '127.0.0.1:29500'}
    >>> launch({}) is None
    True
    """
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return None
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in environ]
    if missing:
        raise ConfigError(f"RANK and WORLD_SIZE are set but not {' and '.join(missing)}: launch with torchrun "
                          f"(or set all four)")
    rank = int(environ["RANK"])
    return {"rank": rank, "world_size": int(environ["WORLD_SIZE"]),
            "local_rank": int(environ.get("LOCAL_RANK", rank)),
            "master": f"{environ['MASTER_ADDR']}:{environ['MASTER_PORT']}"}


def init_from_env() -> bool:
    """Initialise the default process group from torchrun's environment (gloo on CPU, nccl with
    CUDA, each rank on its ``LOCAL_RANK``'s device); True when distributed. A no-op, False, when
    not launched distributed; a group already initialised is kept."""
    found = launch(os.environ)
    if found is None:
        return is_distributed()
    if not dist.is_available():
        raise ConfigError("this torch was built without torch.distributed: it cannot run under torchrun")
    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(found["local_rank"])
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo", init_method="env://")
    return True


def finish() -> None:
    """Wait for every rank, then destroy the process group (a no-op without one); call it at the
    end of a run, so that no rank leaves while another still works (e.g. rank 0 still saving).

    With gloo a process can still, rarely, abort as Python shuts down ("terminate called without
    an active exception"): a gloo worker thread that is still releasing the last collective's
    tensors needs the interpreter's lock (pytorch/pytorch#179291; the sharded modules keep the
    group alive after it is destroyed). Where the exit code matters, end the process with
    ``os._exit(0)`` after this (the tests' workers do)."""
    if is_distributed():
        dist.barrier()
        dist.destroy_process_group()


def is_sharded(module: torch.nn.Module) -> bool:
    """Whether ``module`` is sharded (by :func:`shard`: FSDP2)."""
    from torch.distributed.fsdp import FSDPModule  # the optional extra [train] (torch)

    return isinstance(module, FSDPModule)


def full_state(module: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """``module``'s whole state dict, gathered on rank 0 (in CPU memory) from a sharded module: a
    collective, every rank calls it; other ranks get None. Unsharded: its own state dict."""
    if not is_sharded(module):
        return module.state_dict()
    from torch.distributed.checkpoint.state_dict import (  # torch, the optional extra [train]
        StateDictOptions,
        get_model_state_dict,
    )

    state = get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return state if rank() == 0 else None


def barrier() -> None:
    """Wait for every rank (a no-op without a process group)."""
    if is_distributed():
        dist.barrier()


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def shard(model: torch.nn.Module, layers: Sequence[torch.nn.Module] | None = None, *,
          mixed_precision: bool = False) -> torch.nn.Module:
    """Shard ``model`` in place with FSDP2: ``fully_shard`` on each decoder layer (its weights are
    gathered only while it runs), then on ``model`` itself (the embeddings, the final norm, the
    heads). ``model`` must be the module whose ``forward`` is called (the :class:`Critic`, not its
    body). Needs an initialised process group; create optimizers after sharding.

    The root too is resharded after each forward (FSDP2 otherwise keeps the root gathered until
    the backward, and a forward without gradient, as for PPO's targets or the critic's
    measurements, would leave it gathered, its parameters showing as whole tensors without
    gradients); this costs one more all-gather of the root's weights in each backward.

    ``mixed_precision``: the shards (the optimizer's master weights) stay float32, each layer is
    gathered and computes in bf16, and gradients are reduced in float32
    (``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # the optional extra [train] (torch)

    if not is_distributed():
        raise ConfigError("shard() needs a process group: call init_from_env() under torchrun first")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed_precision \
        else MixedPrecisionPolicy()
    for layer in layers if layers is not None else decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, reshard_after_forward=True, mp_policy=policy)
    return model


def require_sharded(*models: torch.nn.Module) -> None:
    """Refuse to train unsharded models in a process group: nothing would average their gradients,
    and each rank would step on its own share alone."""
    if not is_distributed():
        return
    if not all(is_sharded(m) for m in models):
        raise ConfigError("training under torchrun needs the models sharded: call "
                          "terminal_env.train.distributed.shard() on the actor and the critic first")


def rank_slice(items: Sequence[T], rank: int, world: int) -> list[T]:
    """Rank ``rank``'s contiguous share of ``items`` among ``world`` ranks (shares differ in size
    by at most one; empty when there are fewer items than ranks).

    >>> [rank_slice(list("abcde"), r, 2) for r in range(2)]
    [['a', 'b'], ['c', 'd', 'e']]
    >>> [rank_slice(["a"], r, 2) for r in range(2)]
    [[], ['a']]
    """
    n = len(items)
    return list(items[rank * n // world:(rank + 1) * n // world])


def rank_share(items: Sequence[T]) -> tuple[list[T], bool]:
    """This process's share of a minibatch, and whether it is real. FSDP needs every rank in every
    forward and backward, so a rank whose share is empty gets the minibatch's first item with
    ``real`` False: zero its loss mask (its :func:`loss_scale` is then 0, its gradient nothing)."""
    share = rank_slice(items, rank(), world_size())
    if share or not items:
        return share, True
    return list(items[:1]), False


def loss_scale(mask: torch.Tensor) -> torch.Tensor | float:
    """The factor for this rank's token-mean loss over ``mask`` that makes FSDP's average of the
    ranks' gradients the gradient of the token mean over the whole minibatch: ``world * local
    tokens / global tokens`` (1.0 without a process group). Every rank must call it (an
    all-reduce)."""
    if not is_distributed():
        return 1.0
    local = mask.detach().sum().float().reshape(1)
    total = local.clone()
    dist.all_reduce(total)
    return (world_size() * local / total.clamp(min=1))[0]


def mean_over_ranks(x: torch.Tensor) -> torch.Tensor:
    """The mean of ``x`` over the ranks (``x`` itself without a process group): of a loss times
    its :func:`loss_scale`, the minibatch's token mean, as one process would report it."""
    if not is_distributed():
        return x
    out = x.detach().clone()
    dist.all_reduce(out)
    return out / world_size()


def max_over_ranks(x: torch.Tensor) -> torch.Tensor:
    """The largest ``x`` of any rank (``x`` itself without a process group)."""
    if not is_distributed():
        return x
    out = x.detach().clone()
    dist.all_reduce(out, op=dist.ReduceOp.MAX)
    return out
