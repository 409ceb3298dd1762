"""Continuous batching for the transformers backend: one generation thread decodes every
running request together, one token per step, and a request joins the running batch at its
next step instead of waiting for the batch to end.

* **Admission.** A new request first runs its prompt alone, all but the last token, continuing
  from the longest remembered run of tokens it starts with (the prefix cache below): a
  token-exact episode's next prompt extends the last one, and episodes of one task share their
  first prompt, so only the new tokens run. Alone, a prompt takes the causal fast path (no
  padding mask). Its keys and values then join the batch's, left-padded to the batch's width, and
  its last prompt token is fed with the batch's next step.
* **Steps.** Each step feeds one token per row (a new row's last prompt token, the others'
  last sampled token) through one forward pass and samples the next token of every row. A row
  that finishes (end of sequence, a stop string, its token budget) leaves at once: its answer
  goes back to its caller, whose episode can step its environment while the others decode, and
  the padding no row needs any more is cut off. The keys and values live in buffers with room to
  grow, written in place each step (transformers >= 5 caches; older ones copy per step).
* **Prefix cache.** The keys and values of at most ``prefix_cache_tokens`` tokens are
  remembered (least recently used out first; a sequence that a newer one extends is dropped for
  it); ``forget()`` drops them when the weights change. Memory: a token costs
  ``2 * layers * kv_heads * head_dim`` numbers (about 128 KB for an 8B Llama in bfloat16), so
  size the budget to the device.
* **Weights.** :meth:`BatchSampler.exclusive` stops admitting, lets the running rows finish,
  and holds the model while its caller changes the weights: every answer comes from one version
  of the weights, which it names.

Each row samples with a ``torch.Generator`` of its own, so a seeded request gives the same
tokens whatever else is in its batch (up to float differences of batched arithmetic). Per
sampled token it records the raw log-prob (temperature 1) and the log-prob under the sampling
distribution (``logits / T``, before top-p).

torch is the optional extra [hf]; this module is only imported by the backend that needs it.
"""

from __future__ import annotations

import inspect
import itertools
import queue
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..errors import ConfigError
from . import hf_cache
from .hf_cache import Batch, cache_layers, plain_cache


@dataclass
class SampleRequest:
    """One sequence to sample, and where its answer goes."""

    prompt: list[int]
    temperature: float
    top_p: float
    seed: int
    max_new: int
    stops: list[str]
    future: Future = field(default_factory=Future)


@dataclass
class Sampled:
    token_ids: list[int]
    logprobs: list[float]
    sampling_logprobs: list[float] | None
    finish: str
    weights: str | None
    stops: list[str] = field(default_factory=list)


@dataclass
class _Row:
    """A request in the running batch."""

    request: SampleRequest
    generator: Any
    weights: str | None
    length: int  #: its tokens in the batch's keys and values
    pending: int  #: the token fed with the next step
    tokens: list[int] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    scaled: list[float] = field(default_factory=list)
    finish: str | None = None

    def result(self) -> Sampled:
        r = self.request
        return Sampled(token_ids=self.tokens, logprobs=self.raw,
                       sampling_logprobs=self.scaled if r.temperature > 0 else None,
                       finish=self.finish or "length", weights=self.weights, stops=r.stops)


class BatchSampler:
    """Serves sampling requests for one model (see the module's notes)."""

    def __init__(self, torch: Any, model: Any, *, eos_token_ids: list[int],
                 text: Callable[[list[int]], str], max_batch: int = 8, name: str = "model",
                 prefix_cache_tokens: int = 32768, min_shared: int = 64):
        if max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, not {max_batch!r}")
        self._torch = torch
        self.model = model
        self.eos_token_ids = list(eos_token_ids)
        self.text = text
        self.max_batch = int(max_batch)
        self.name = name
        self.weights_version: str | None = None  # set by the backend; stamped on each result
        #: how many tokens' keys and values are remembered for the next turns of their episodes
        self.prefix_cache_tokens = int(prefix_cache_tokens)
        #: running rows that all start with at least this many same tokens keep their keys and
        #: values once, read once per step (0: never; only where the model attends with SDPA on
        #: transformers 5.x, see hf_cache.use_shared_prefix_attention)
        self.min_shared = int(min_shared) if min_shared and hf_cache.use_shared_prefix_attention(model) else 0
        self._prefixes: OrderedDict[int, tuple[list[int], list[tuple[Any, Any]]]] = OrderedDict()
        self._prefix_lock = threading.Lock()
        self._keys = itertools.count()
        #: prompt tokens run and reused from the prefix cache; requests; decoding steps and the
        #: rows they served (``row_steps / steps`` is the mean batch), and the steps that read a
        #: shared prefix once for all rows; seconds the generation thread spent admitting
        #: requests (prefill included) and decoding
        self.stats: dict[str, float] = {"prefill_tokens": 0, "reused_tokens": 0, "requests": 0, "steps": 0,
                                        "row_steps": 0, "shared_steps": 0, "admit_seconds": 0.0,
                                        "decode_seconds": 0.0}
        #: held by the generation thread while rows run (see ``exclusive``)
        self.lock = threading.Lock()
        self._exclusive = 0
        self._turn = threading.Condition()
        self._queue: queue.Queue[SampleRequest | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        forward = inspect.signature(model.forward).parameters
        # the KV cache's name in forward() and its output: `cache` since transformers 5.x
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"
        # a prefill needs no logits: where forward() can, it computes the last position's only
        self._prefill_args = {"logits_to_keep": 1} if "logits_to_keep" in forward else {}

    def sample(self, request: SampleRequest) -> Sampled:
        """Queue ``request`` and wait for its tokens."""
        self._submit(request)
        return request.future.result()

    def close(self) -> None:
        """Stop the generation thread: the running rows finish, requests still waiting fail."""
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            with self._turn:
                self._turn.notify_all()
            self._thread.join(timeout=30)
            self._thread = None

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the model with nothing running on it (to change its weights): no request is
        admitted from now on, the running rows finish, then the block runs; requests that arrive
        meanwhile wait and run after it."""
        with self._turn:
            self._exclusive += 1
        try:
            with self.lock:
                yield
        finally:
            with self._turn:
                self._exclusive -= 1
                self._turn.notify_all()

    def _submit(self, request: SampleRequest) -> None:
        if self._closed:
            raise ConfigError(f"the backend {self.name!r} is closed")
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=f"generate-{self.name}",
                                                daemon=True)
                self._thread.start()
        self._queue.put(request)

    # -- the generation thread -----------------------------------------------------------------

    def _serve(self) -> None:
        """Admit waiting requests while there is room, and step the running rows, until closed."""
        waiting: deque[SampleRequest] = deque()
        rows: list[_Row] = []
        batch: Batch | None = None
        held = closing = False
        try:
            while True:
                if not rows and held:  # nothing runs: the weights may change
                    self.lock.release()
                    held = False
                block = not rows and not waiting and not closing  # nothing to do but wait
                while True:
                    try:
                        item = self._queue.get() if block else self._queue.get_nowait()
                    except queue.Empty:
                        break
                    block = False
                    if item is None:
                        closing = True
                    else:
                        waiting.append(item)
                if closing:
                    self._fail(waiting)
                    if not rows:
                        return
                with self._turn:
                    paused = self._exclusive > 0
                if paused and not rows:  # the weights change now: wait for the holder to finish
                    with self._turn:
                        self._turn.wait_for(lambda: self._exclusive == 0 or self._closed, timeout=1.0)
                    continue
                try:
                    if waiting and not paused and len(rows) < self.max_batch:
                        if not held:
                            self.lock.acquire()
                            held = True
                        room = self.max_batch - len(rows)
                        t0 = time.perf_counter()
                        batch = self._admit(batch, rows, [waiting.popleft() for _ in range(min(room, len(waiting)))])
                        self.stats["admit_seconds"] += time.perf_counter() - t0
                    if rows:
                        t0 = time.perf_counter()
                        batch = self._step(batch, rows)
                        self.stats["decode_seconds"] += time.perf_counter() - t0
                except BaseException as e:  # noqa: BLE001 - every running row's caller sees it
                    for row in rows:
                        if not row.request.future.done():
                            row.request.future.set_exception(e)
                    rows.clear()
                    batch = None
        finally:
            if held:
                self.lock.release()
            self._fail(waiting)
            while True:  # requests queued after the close
                try:
                    left = self._queue.get_nowait()
                except queue.Empty:
                    break
                if left is not None:
                    self._fail([left])

    def _fail(self, requests: deque[SampleRequest] | list[SampleRequest]) -> None:
        for r in requests:
            if not r.future.done():
                r.future.set_exception(ConfigError(f"the backend {self.name!r} is closed"))
        if isinstance(requests, deque):
            requests.clear()

    def _admit(self, batch: Batch | None, rows: list[_Row], requests: list[SampleRequest]) -> Batch | None:
        """Run each new prompt alone (all but its last token, after its longest remembered
        prefix) and join its keys and values to the batch's."""
        torch = self._torch
        joined: list[list[tuple[Any, Any]]] = []
        for r in requests:
            try:
                layers, length = self._prefill(r.prompt)
            except BaseException as e:  # noqa: BLE001 - this request's caller sees it
                r.future.set_exception(e)
                continue
            generator = torch.Generator(device=self.model.device).manual_seed(r.seed)
            rows.append(_Row(r, generator, self.weights_version, length, r.prompt[-1]))
            joined.append(layers)
            self.stats["requests"] += 1
        if not joined:
            return batch
        added = [row.length for row in rows[len(rows) - len(joined):]]
        shared = self._shared(rows)
        if batch is None:
            return Batch.of(joined, added, self._room(rows), ready_masks=self._ready_masks(), shared=shared)
        running = [row.length for row in rows[:len(rows) - len(joined)]]
        batch.share(shared, running)
        return batch.join(running, joined, added, self._room(rows))

    def _shared(self, rows: list[_Row]) -> int:
        """How many leading tokens in the keys and values all ``rows`` have in common, if at
        least ``min_shared`` and there are two rows or more; else 0."""
        if not self.min_shared or len(rows) < 2:
            return 0
        first = rows[0].request.prompt + rows[0].tokens
        n = min(row.length for row in rows)
        for row in rows[1:]:
            n = _common_prefix(first, row.request.prompt + row.tokens, n)
            if n < self.min_shared:
                return 0
        return n

    def _step(self, batch: Batch, rows: list[_Row]) -> Batch | None:
        """One token for every running row; the rows that finish leave the batch."""
        torch = self._torch
        device = self.model.device
        with torch.inference_mode():
            lengths = torch.tensor([row.length for row in rows], dtype=torch.long, device=device)
            span = batch.span + 1  # the buffers' columns attended to, the one fed now included
            # row i's tokens after the shared ones, the one fed now included, are its last
            # length - shared + 1 of them
            mask = torch.arange(span, device=device)[None, :] >= (span - 1 - lengths + batch.shared)[:, None]
            # the mask as the attention takes it, where the model takes it ready (else it is built
            # from the padding mask each step, which costs as much as the attention here)
            mask = mask[:, None, None, :] if batch.ready_masks else mask.long()
            ids = torch.tensor([[row.pending] for row in rows], dtype=torch.long, device=device)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=lengths[:, None],
                             use_cache=True, **{self._cache_arg: batch.cache()}, **batch.attention_kwargs())
            batch.advance(getattr(out, self._cache_arg))
            picked = self._pick(out.logits[:, -1, :].float(), rows)
        self.stats["steps"] += 1
        self.stats["row_steps"] += len(rows)
        self.stats["shared_steps"] += batch.shared > 0
        eos = self.eos_token_ids
        finished = []
        for i, (row, (tok, lp, lq)) in enumerate(zip(rows, picked)):
            row.length += 1
            row.tokens.append(tok)
            row.raw.append(lp)
            if lq is not None:
                row.scaled.append(lq)
            r = row.request
            if tok in eos or (r.stops and self._hit_stop(row.tokens, r.stops)):
                row.finish = "stop"
            elif len(row.tokens) >= r.max_new:
                row.finish = "length"
            else:
                row.pending = tok
                continue
            finished.append(i)
        if not finished:
            return batch
        lengths = [row.length for row in rows]
        for i in finished:
            self._remember(rows[i], batch.row(i, lengths[i]))
            rows[i].request.future.set_result(rows[i].result())
        rows[:] = [rows[i] for i in batch.remove(finished, lengths)]
        return batch if rows else None

    def _ready_masks(self) -> bool:
        """Whether a step may pass the attention mask ready, ``[rows, 1, 1, width]`` booleans:
        where the model attends with torch's SDPA and its transformers takes a 4-D mask as it is
        (the versions whose caches write in place, 5.x)."""
        config = getattr(self.model, "config", None)
        return hf_cache.growing_layer() is not None and getattr(config, "_attn_implementation", None) in (
            "sdpa", hf_cache.SHARED_PREFIX_ATTENTION)

    @staticmethod
    def _room(rows: list[_Row]) -> int:
        """Positions the batch's buffers keep free: the most tokens any row may still feed."""
        return max(row.request.max_new - len(row.tokens) for row in rows) + 1

    def _pick(self, logits: Any, rows: list[_Row]) -> list[tuple[int, float, float | None]]:
        """One token for each row, drawn at its temperature and top-p with its own generator
        (greedy at temperature 0): (token, raw log-prob, sampling log-prob or None). Inverse-CDF
        sampling on one uniform draw per row, the arithmetic done for all rows at once."""
        torch = self._torch
        device = logits.device
        requests = [row.request for row in rows]
        logp = torch.log_softmax(logits, dim=-1)
        temps = torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in requests], device=device)
        logq = torch.log_softmax(logits / temps[:, None], dim=-1)
        probs = logq.exp()
        for j, r in enumerate(requests):
            if r.temperature > 0 and r.top_p < 1.0:
                probs[j] = _top_p(torch, probs[j], r.top_p)
        cdf = probs.cumsum(-1)
        u = torch.cat([torch.rand(1, generator=row.generator, device=device) for row in rows])
        drawn = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0].clamp(max=logits.shape[-1] - 1)
        greedy = torch.tensor([r.temperature <= 0 for r in requests], device=device)
        tok = torch.where(greedy, logits.argmax(-1), drawn)
        lp = logp.gather(1, tok[:, None])[:, 0].tolist()
        lq = logq.gather(1, tok[:, None])[:, 0].tolist()
        return [(t, a, None if r.temperature <= 0 else b) for t, a, b, r in zip(tok.tolist(), lp, lq, requests)]

    def _hit_stop(self, tokens: list[int], stops: list[str]) -> bool:
        """Whether the generated text now contains a stop string (checked on a tail of tokens)."""
        window = 2 * max(len(s) for s in stops) + 8
        text = self.text(tokens[-window:])
        return any(s in text for s in stops)

    # -- prefill and the prefix cache ----------------------------------------------------------

    def _prefill(self, prompt: list[int]) -> tuple[list[tuple[Any, Any]], int]:
        """The keys and values (per layer, ``[kv_heads, n, head_dim]``) of all but the last token
        of ``prompt``: its longest remembered prefix, and the rest run alone (the causal fast
        path, no padding mask). A one-token prompt runs its token to learn the cache's shape and
        keeps none of it."""
        torch = self._torch
        done, layers = self._lookup(prompt) or (0, None)
        self.stats["reused_tokens"] += done
        end = len(prompt) - 1
        if layers is not None and done == end:
            return layers, end
        run = prompt[done:end] or prompt[:1]
        cache = plain_cache([(k[None], v[None]) for k, v in layers]) if layers is not None else None
        ids = torch.tensor([run], dtype=torch.long, device=self.model.device)
        positions = torch.arange(done, done + len(run), device=self.model.device)[None]
        with torch.inference_mode():
            out = self.model(input_ids=ids, position_ids=positions, use_cache=True,
                             **{self._cache_arg: cache}, **self._prefill_args)
        self.stats["prefill_tokens"] += end - done
        layers = [(k[0, :, :end], v[0, :, :end]) for k, v in cache_layers(getattr(out, self._cache_arg))]
        if end > done:
            # remembered now, not only when the row ends: requests admitted meanwhile that start
            # the same way (a group of episodes of one task, sent at once) run only what differs
            self._store(prompt[:end], layers)
        return layers, end

    def _lookup(self, prompt: list[int]) -> tuple[int, list[tuple[Any, Any]]] | None:
        """The keys and values of the longest remembered run of tokens that ``prompt`` starts
        with (the previous turn of its episode, or another episode of the same task: keys and
        values of a prefix are a prefix of the keys and values), at most all but its last token."""
        best: tuple[int, Any, int] | None = None
        with self._prefix_lock:
            for key, (ids, layers) in self._prefixes.items():
                n = _common_prefix(ids, prompt, len(prompt) - 1)
                if n > 0 and (best is None or n > best[0]):
                    best = (n, layers, key)
            if best is None:
                return None
            self._prefixes.move_to_end(best[2])
        n, layers, _ = best
        return n, [(k[:, :n, :], v[:, :n, :]) for k, v in layers]

    def _remember(self, row: _Row, layers: list[tuple[Any, Any]]) -> None:
        """Keep a finished row's keys and values (its prompt and the tokens fed after it, in
        tensors of their own) for the next turn of its episode, whose prompt extends them,
        within ``prefix_cache_tokens``."""
        ids = list(row.request.prompt) + row.tokens[:-1]
        if layers[0][0].shape[1] == len(ids):
            self._store(ids, layers)

    def _store(self, ids: list[int], kept: list[tuple[Any, Any]]) -> None:
        """Remember the keys and values ``kept`` of the tokens ``ids``, in place of any shorter
        run they extend, within ``prefix_cache_tokens`` (least recently used out first)."""
        if not 0 < len(ids) <= self.prefix_cache_tokens:
            return
        with self._prefix_lock:
            for key, (old, _) in list(self._prefixes.items()):
                if _common_prefix(old, ids, len(old)) == len(old):  # the same episode, before
                    del self._prefixes[key]
            self._prefixes[next(self._keys)] = (ids, kept)
            total = sum(len(old) for old, _ in self._prefixes.values())
            while total > self.prefix_cache_tokens:
                _, (old, _) = self._prefixes.popitem(last=False)
                total -= len(old)

    def forget(self) -> None:
        """Drop every remembered prefix (new weights make them stale)."""
        with self._prefix_lock:
            self._prefixes.clear()


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:

    """How many leading tokens ``a`` and ``b`` share, at most ``limit`` (a binary search over
    slice comparisons, which run in C).

    >>> _common_prefix([1, 2, 3, 4], [1, 2, 9], 10), _common_prefix([1, 2], [1, 2, 3], 1)
    (2, 1)
    """
    lo, hi = 0, min(len(a), len(b), limit)
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi - 1:  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _top_p(torch: Any, probs: Any, top_p: float) -> Any:
    """Keep the smallest set of most likely tokens whose mass reaches ``top_p`` (renormalised
    by multinomial); the most likely token always stays."""
    if top_p >= 1.0:
        return probs
    ordered, order = torch.sort(probs, descending=True)
    before = ordered.cumsum(-1) - ordered  # mass of the tokens ranked above each one
    ordered = torch.where(before < top_p, ordered, torch.zeros_like(ordered))
    return torch.zeros_like(probs).scatter(0, order, ordered)
