"""Where the actor plays: a generator serves the actor's weights to the episodes that sample from
it, and takes new weights after each update.

- :class:`LocalGenerator`: a copy of the actor in this process
  (:class:`~terminal_env.models.hf_backend.TransformersBackend`).
- :class:`ServedGenerator`: a vLLM server, asked through the OpenAI backend with token ids, the
  new weights pushed by :class:`~terminal_env.train.weight_sync.VLLMWeightSync`.
- :class:`Seat`: the loop's view of either: "let this checkpoint's actor play", for each
  candidate, each RSR round and each RPR stage (the loop config's ``[generator]``).

torch and transformers are the optional extra [train].
"""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..models.hf_backend import HFChatTokenizer, TransformersBackend
from .models import Pair
from .weight_sync import VLLMWeightSync, pair_version


class LocalGenerator:
    """The actor served in this process (:class:`TransformersBackend` over a copy of its weights:
    the trainer's weights reach it only through :meth:`push`)."""

    def __init__(self, pair: Pair, version: str, *, max_batch: int = 8, name: str = "actor"):
        self.backend = TransformersBackend(copy.deepcopy(pair.actor).eval(), pair.tokenizer, name=name,
                                           max_batch=max_batch, weights_version=version)

    def push(self, pair: Pair, version: str) -> None:
        self.backend.load_weights({k: v.detach().clone() for k, v in pair.actor.state_dict().items()},
                                  version=version)

    def close(self) -> None:
        self.backend.close()


class ServedGenerator:
    """The actor served by a vLLM server (:class:`~terminal_env.models.openai_backend.OpenAIBackend`
    with ``token_ids=True``), its new weights pushed by a
    :class:`~terminal_env.train.weight_sync.VLLMWeightSync` (which also names the version on the
    backend's later turns). The server and the sync belong to the caller, who closes them."""

    def __init__(self, backend: Any, sync: Any):
        self.backend, self.sync = backend, sync

    def push(self, pair: Pair, version: str) -> None:
        self.sync.push(pair.actor, version)

    def close(self) -> None:
        pass


class Seat:
    """Where a loop's checkpoints play, from its config's ``[generator]``
    (:class:`~terminal_env.train.loop_config.Generator`).

    ``local``: each checkpoint's actor is loaded into this process while it plays. ``vllm``: one
    client and one weight sync for the whole loop; before a checkpoint plays, its actor is pushed
    into the server as ``<actor id>@0``, so every turn names the weights that sampled it."""

    def __init__(self, generator: Any, *, concurrency: int = 2):
        self.config, self.concurrency = generator, concurrency
        self._client: Any = None
        self._sync: Any = None
        self.pushed: list[str] = []  # the versions pushed into the server, in order

    @property
    def served(self) -> bool:
        return self.config.kind == "vllm"

    def _server(self, pair: Pair) -> tuple[Any, Any]:
        if self._client is None:
            from ..models.openai_backend import OpenAIBackend  # here: it needs the optional extra [openai]

            g = self.config
            self._client = OpenAIBackend(g.model, base_url=g.url, api_key=g.api_key, token_ids=True,
                                         chat_tokenizer=HFChatTokenizer(pair.tokenizer, "actor"), name="actor")
            self._sync = VLLMWeightSync(g.url, transport=g.transport, master_address=g.master_address,
                                        backends=[self._client], timeout=g.timeout, pause_mode=g.pause_mode)
        return self._client, self._sync

    def push(self, pair: Pair) -> str:
        """Put ``pair``'s actor into the server (served only); returns its version."""
        _, sync = self._server(pair)
        version = pair_version(pair.meta["actor"], 0)
        sync.push(pair.actor, version)
        self.pushed.append(version)
        return version

    @contextmanager
    def playing(self, checkpoint: Path, pair: Pair | None = None) -> Iterator[Any]:
        """A backend that samples from the actor of ``checkpoint`` (``pair``: that checkpoint,
        already loaded)."""
        if self.served:
            pair = pair or Pair.load(checkpoint)
            self.push(pair)
            yield self._client
            return
        if pair is not None:
            generator = LocalGenerator(pair, pair_version(pair.meta["actor"], 0), max_batch=self.concurrency)
            try:
                yield generator.backend
            finally:
                generator.close()
            return
        actor_id = json.loads((checkpoint / "pair.json").read_text())["actor"]
        backend = TransformersBackend(str(checkpoint / "actor"), name="actor", max_batch=self.concurrency,
                                      weights_version=pair_version(actor_id, 0))
        try:
            yield backend
        finally:
            backend.close()

    def collector(self, checkpoint: Path, params: dict[str, Any]) -> dict[str, Any]:
        """RSR's collector role for ``checkpoint``'s actor (served: its weights pushed first)."""
        if self.served:
            self.push(Pair.load(checkpoint))
            g = self.config
            # token ids over /v1/completions, with the checkpoint's own chat template (the server
            # may render another one): what the loop's other players ask, too
            return {"spec": f"openai:{g.model}", "params": params,
                    "options": {"base_url": g.url, "api_key": g.api_key, "token_ids": True,
                                "chat_tokenizer": str(checkpoint / "actor")}}
        return {"spec": f"hf:{checkpoint / 'actor'}", "options": {"max_batch": self.concurrency}, "params": params}

    def ppo_generator(self, pair: Pair) -> ServedGenerator | None:
        """What a PPO run pushes its steps into: the server, or None (the run's own local copy)."""
        if not self.served:
            return None
        client, sync = self._server(pair)
        return ServedGenerator(client, sync)

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
        if self._client is not None:
            self._client.close()
        self._client = self._sync = None
