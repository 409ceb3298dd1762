"""Rollouts for training: the current actor plays tasks through the rollout pool (this host's
Docker engine, or Ray workers with ``ray_address``), every episode verified by the protected
verifier and recorded token by token.

    trajectories = collect(backend, tasks, attempts=4, params=SamplingParams(temperature=1.0), seed=step)
    batch, skipped = episodes(trajectories, weights=backend.weights_version)
    report = trainer.update(batch)
    backend.load_weights(pair.actor.state_dict(), version=pair_version(pair.meta["actor"], step + 1))  # weight_sync

Training rollouts sample the untruncated policy: top-p below 1, and a backend whose requests
carry top-k, min-p or penalties (an OpenAI backend's ``extra_body``), are refused before any
episode is played (PPO's ratio would be taken against a distribution the tokens were not drawn
from).

Each attempt gets a seed of its own (``seed``, ``seed + 1``, ...), which reaches the sampler, so a
rollout with the same weights, task and seed is reproducible.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ConfigError
from ..models.base import SamplingParams
from ..models.tokens import is_token_backend
from ..scale.rollout import RolloutPool
from ..trajectory import Trajectory


async def acollect(pool: RolloutPool, backend: Any, tasks: list[Any], *, attempts: int = 1,
                   harness: str = "generic", params: SamplingParams | None = None, max_turns: int = 20,
                   reward: str = "strict_success_first", seed: int = 0) -> list[Trajectory]:
    """``attempts`` episodes of each task played by ``backend`` through ``pool``, in order
    (task by task, attempt by attempt)."""
    if not is_token_backend(backend):
        raise ConfigError(f"{getattr(backend, 'name', backend)!r} keeps no token record: training rollouts need a "
                          f"token-level backend (the local transformers backend, or the OpenAI backend with "
                          f"token_ids=True)")
    if attempts < 1:
        raise ConfigError(f"attempts must be at least 1, not {attempts}")
    refuse_reshaped(backend, params or SamplingParams())
    jobs = [(task, seed + i) for i, task in enumerate(t for t in tasks for _ in range(attempts))]
    return list(await asyncio.gather(*(
        pool.rollout(backend, task, harness, params=params, max_turns=max_turns, reward=reward, seed=s)
        for task, s in jobs)))


def refuse_reshaped(backend: Any, params: SamplingParams) -> None:
    """:class:`ConfigError` when training rollouts would sample another distribution than
    ``softmax(logits / T)``: top-p below 1, or what the backend adds to its requests (top-k,
    min-p, penalties: :meth:`OpenAIBackend.reshaping`)."""
    reshaping = backend.reshaping(params) if callable(getattr(backend, "reshaping", None)) else []
    if params.top_p is not None and params.top_p < 1 and f"top_p={params.top_p}" not in reshaping:
        reshaping.insert(0, f"top_p={params.top_p}")
    if reshaping:
        raise ConfigError(f"training rollouts would sample with {', '.join(reshaping)}, which PPO does not model "
                          f"(its ratio is against the untruncated policy at the sampling temperature): play them "
                          f"with SamplingParams(top_p=None) and no top_k/min_p/penalties in the backend's extra_body")


def collect(backend: Any, tasks: list[Any], *, attempts: int = 1, harness: str = "generic",
            params: SamplingParams | None = None, max_turns: int = 20, reward: str = "strict_success_first",
            seed: int = 0, **pool_options: Any) -> list[Trajectory]:
    """:func:`acollect` with a pool of its own (``pool_options``: :class:`RolloutPool`'s, e.g.
    ``max_concurrency``, ``warm``, ``ray_address``)."""

    async def play() -> list[Trajectory]:
        async with RolloutPool(**pool_options) as pool:
            return await acollect(pool, backend, tasks, attempts=attempts, harness=harness, params=params,
                                  max_turns=max_turns, reward=reward, seed=seed)

    return asyncio.run(play())
