"""Batched sampling from a causal LM for the transformers backend: one generation thread takes
every request waiting (up to ``max_batch``) and decodes them together.

* **Prefill** continues each prompt from the longest remembered run of tokens it starts with: a
  token-exact episode's next prompt extends the last one, and episodes of one task share their
  first prompt, so only the new tokens are run. The new tokens of every row go through one
  forward pass together (left-padded); a row with more than ``batch_prefill`` (512) new tokens
  runs them alone first (the causal fast path: padded into the batch they would make the
  attention materialise a mask of every row's length squared). The keys and values of at most
  ``prefix_cache_tokens`` tokens are remembered (least recently used out first; a sequence
  that a newer one extends is dropped for it); ``forget()`` drops them when the weights change.
  Memory: a token costs ``2 * layers * kv_heads * head_dim`` numbers (about 128 KB for an 8B
  Llama in bfloat16), so size the budget to the device.
* **Batches** form from the requests waiting when the thread is free; since the episodes of one
  batch come back together, a few ms apart, the thread waits up to ``batch_wait`` (20 ms) for as
  many requests as the last batch had before it starts (never with ``max_batch=1``).
* **Decoding** stacks the rows' keys and values (left-padded) into one cache and runs one
  forward pass per step for every row still going; a row that finishes stops sampling (its
  positions are masked) while the others go on.

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
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ConfigError


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


class BatchSampler:
    """Serves sampling requests for one model (see the module's notes). ``lock`` is held while a
    batch is decoded: hold it to change the model's weights between batches."""

    def __init__(self, torch: Any, model: Any, *, pad_token_id: int, eos_token_ids: list[int],
                 text: Callable[[list[int]], str], max_batch: int = 8, name: str = "model",
                 prefix_cache_tokens: int = 32768, batch_wait: float = 0.02, batch_prefill: int = 512):
        if max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, not {max_batch!r}")
        self._torch = torch
        self.model = model
        self.pad_token_id = pad_token_id
        self.eos_token_ids = list(eos_token_ids)
        self.text = text
        self.max_batch = int(max_batch)
        self.name = name
        self.weights_version: str | None = None  # set by the backend; stamped on each result
        #: new prompt tokens up to this many run in the batch's one forward pass; more run alone
        self.batch_prefill = int(batch_prefill)
        #: at most this long (s) a batch waits for the requests the last batch suggests will come
        self.batch_wait = float(batch_wait) if max_batch > 1 else 0.0
        self._last_batch = 1
        #: how many tokens' keys and values are remembered for the next turns of their episodes
        self.prefix_cache_tokens = int(prefix_cache_tokens)
        self._prefixes: OrderedDict[int, tuple[list[int], list[tuple[Any, Any]]]] = OrderedDict()
        self._prefix_lock = threading.Lock()
        self._keys = itertools.count()
        #: tokens run through prefill, and tokens whose keys and values were reused instead
        self.stats = {"prefill_tokens": 0, "reused_tokens": 0, "batches": 0, "rows": 0}
        self.lock = threading.Lock()
        self._queue: queue.Queue[SampleRequest | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        # the KV cache's name in forward() and its output: `cache` since transformers 5.x
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def sample(self, request: SampleRequest) -> Sampled:
        """Queue ``request`` and wait for its tokens."""
        self._submit(request)
        return request.future.result()

    def close(self) -> None:
        """Stop the generation thread (requests still waiting fail)."""
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=30)
            self._thread = None

    def _submit(self, request: SampleRequest) -> None:
        if self._closed:
            raise ConfigError(f"the backend {self.name!r} is closed")
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=f"generate-{self.name}",
                                                daemon=True)
                self._thread.start()
        self._queue.put(request)

    def _serve(self) -> None:
        """Take every waiting request (up to max_batch) and decode them together, until closed."""
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            # The episodes of the last batch come back together, a few ms apart: wait a little
            # for as many (never longer than batch_wait), then take whatever else is waiting.
            expected = min(self.max_batch, self._last_batch)
            deadline = time.monotonic() + self.batch_wait
            while len(batch) < self.max_batch:
                wait = deadline - time.monotonic() if len(batch) < expected else 0.0
                try:
                    more = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(more)
            self._last_batch = len(batch)
            try:
                with self.lock:
                    results = self._decode(batch)
                    self.stats["batches"] += 1
                    self.stats["rows"] += len(batch)
            except BaseException as e:  # noqa: BLE001 - every caller of the batch sees it
                for r in batch:
                    r.future.set_exception(e)
                continue
            for r, out in zip(batch, results):
                r.future.set_result(out)
        while True:  # closed: fail what is still waiting
            try:
                left = self._queue.get_nowait()
            except queue.Empty:
                return
            if left is not None:
                left.future.set_exception(ConfigError(f"the backend {self.name!r} is closed"))

    def _decode(self, batch: list[SampleRequest]) -> list[Sampled]:
        """Sample every request of the batch: one forward pass runs the new tokens of every
        prompt (after the longest remembered prefix of each), then one forward pass per step
        serves every row still going."""
        torch = self._torch
        device = self.model.device
        version = self.weights_version
        with torch.inference_mode():
            starts = [self._start(r.prompt) for r in batch]
            n = len(batch)
            width = max(done for done, _ in starts)
            q = max(len(r.prompt) - done for r, (done, _) in zip(batch, starts))
            cache = self._stacked([layers for _, layers in starts], width) if width else None
            mask = torch.zeros((n, width + q), dtype=torch.long, device=device)
            ids = torch.full((n, q), self.pad_token_id, dtype=torch.long, device=device)
            positions = torch.zeros((n, q), dtype=torch.long, device=device)
            for i, (r, (done, _)) in enumerate(zip(batch, starts)):
                new = r.prompt[done:]  # left padding: every row's last prompt token is aligned
                mask[i, width - done:width] = 1
                mask[i, width + q - len(new):] = 1
                ids[i, q - len(new):] = torch.tensor(new, dtype=torch.long, device=device)
                positions[i, q - len(new):] = torch.arange(done, len(r.prompt), device=device)
                self.stats["prefill_tokens"] += len(new)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                             **{self._cache_arg: cache})
            cache = getattr(out, self._cache_arg)
            logits = out.logits[:, -1, :].float()
            positions = torch.tensor([[len(r.prompt)] for r in batch], dtype=torch.long, device=device)
            generators = [torch.Generator(device=device).manual_seed(r.seed) for r in batch]
            eos = set(self.eos_token_ids)
            tokens: list[list[int]] = [[] for _ in batch]
            raw: list[list[float]] = [[] for _ in batch]
            scaled: list[list[float]] = [[] for _ in batch]
            finish: list[str | None] = [None] * n
            for _ in range(max(r.max_new for r in batch)):
                active = [i for i in range(n) if finish[i] is None]
                picked = self._pick(logits, active, [batch[i] for i in active], [generators[i] for i in active])
                nxt, fed = [self.pad_token_id] * n, [0] * n
                for i, (tok, lp, lq) in zip(active, picked):
                    r = batch[i]
                    tokens[i].append(tok)
                    raw[i].append(lp)
                    if lq is not None:
                        scaled[i].append(lq)
                    if tok in eos:
                        finish[i] = "stop"
                    elif r.stops and self._hit_stop(tokens[i], r.stops):
                        finish[i] = "stop"
                    elif len(tokens[i]) >= r.max_new:
                        finish[i] = "length"
                    nxt[i] = tok
                    fed[i] = 0 if finish[i] is not None else 1  # a row's last token is not fed
                if all(f is not None for f in finish):
                    break
                step = torch.tensor(nxt, dtype=torch.long, device=device)[:, None]
                mask = torch.cat([mask, torch.tensor(fed, dtype=torch.long, device=device)[:, None]], dim=-1)
                out = self.model(input_ids=step, attention_mask=mask, position_ids=positions,
                                 use_cache=True, **{self._cache_arg: cache})
                cache = getattr(out, self._cache_arg)
                logits = out.logits[:, -1, :].float()
                positions = positions + 1
            self._remember(batch, tokens, cache, mask)
        return [Sampled(token_ids=tokens[i], logprobs=raw[i],
                        sampling_logprobs=scaled[i] if r.temperature > 0 else None,
                        finish=finish[i] or "length", weights=version, stops=r.stops)
                for i, r in enumerate(batch)]

    def _pick(self, logits: Any, active: list[int], rows: list[SampleRequest],
              generators: list[Any]) -> list[tuple[int, float, float | None]]:
        """One token for each row still going (``active``: their places in the batch's
        ``logits``), drawn at its temperature and top-p with its own generator
        (greedy at temperature 0): (token, raw log-prob, sampling log-prob or None). Inverse-CDF
        sampling on one uniform draw per row, the arithmetic done for all rows at once."""
        torch = self._torch
        device = logits.device
        x = logits.index_select(0, torch.tensor(active, device=device))
        logp = torch.log_softmax(x, dim=-1)
        temps = torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in rows], device=device)
        logq = torch.log_softmax(x / temps[:, None], dim=-1)
        probs = logq.exp()
        for j, r in enumerate(rows):
            if r.temperature > 0 and r.top_p < 1.0:
                probs[j] = _top_p(torch, probs[j], r.top_p)
        cdf = probs.cumsum(-1)
        u = torch.cat([torch.rand(1, generator=g, device=device) for g in generators])
        drawn = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)[:, 0].clamp(max=x.shape[-1] - 1)
        greedy = torch.tensor([r.temperature <= 0 for r in rows], device=device)
        tok = torch.where(greedy, x.argmax(-1), drawn)
        lp = logp.gather(1, tok[:, None])[:, 0].tolist()
        lq = logq.gather(1, tok[:, None])[:, 0].tolist()
        return [(t, a, None if r.temperature <= 0 else b) for t, a, b, r in zip(tok.tolist(), lp, lq, rows)]

    # -- the KV cache: prefill, stacking, and the prefix cache ---------------------------------

    def _start(self, prompt: list[int]) -> tuple[int, list[tuple[Any, Any]] | None]:
        """Where the batch's forward pass starts for ``prompt``: the keys and values of its
        longest remembered prefix (each ``[kv_heads, done, head_dim]``) and how many tokens they
        cover. More than ``batch_prefill`` new tokens (a first prompt, a trimmed context) are run
        alone first, all but the last (the causal fast path: padded into the batch they would
        make the attention materialise a mask of every row's length squared)."""
        torch = self._torch
        device = self.model.device
        done, layers = self._lookup(prompt) or (0, None)
        self.stats["reused_tokens"] += done
        if len(prompt) - done <= max(self.batch_prefill, 1):  # one new token always goes in the batch
            return done, layers
        cache = self._new_cache([(k[None], v[None]) for k, v in layers]) if layers is not None else None
        rest = torch.tensor([prompt[done:-1]], dtype=torch.long, device=device)
        positions = torch.arange(done, len(prompt) - 1, device=device)[None]
        out = self.model(input_ids=rest, position_ids=positions, use_cache=True, **{self._cache_arg: cache})
        self.stats["prefill_tokens"] += len(prompt) - 1 - done
        return len(prompt) - 1, [(k[0], v[0]) for k, v in _layers(getattr(out, self._cache_arg))]

    def _stacked(self, rows: list[list[tuple[Any, Any]] | None], width: int) -> Any:
        """One cache for the batch: every row's keys and values left-padded to ``width`` (a row
        with none is all padding)."""
        torch = self._torch
        shaped = next(layers for layers in rows if layers is not None)
        stacked = []
        for layer in range(len(shaped)):
            keys, values = [], []
            for layers in rows:
                if layers is None:
                    k = v = shaped[layer][0].new_zeros((shaped[layer][0].shape[0], 0, shaped[layer][0].shape[2]))
                else:
                    k, v = layers[layer]
                pad = width - k.shape[1]
                keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)))
                values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)))
            stacked.append((torch.stack(keys), torch.stack(values)))
        return self._new_cache(stacked)

    def _new_cache(self, layers: list[tuple[Any, Any]]) -> Any:
        import transformers  # the optional extra [hf]

        cache = transformers.DynamicCache()
        for i, (k, v) in enumerate(layers):
            cache.update(k, v, i)
        return cache

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

    def _remember(self, batch: list[SampleRequest], tokens: list[list[int]], cache: Any, mask: Any) -> None:
        """Keep each row's keys and values (its prompt and the tokens fed after it) for the next
        turn of its episode, whose prompt extends them, within ``prefix_cache_tokens``."""
        if self.prefix_cache_tokens <= 0:
            return
        layers = _layers(cache)
        for i, r in enumerate(batch):
            valid = mask[i].bool()
            ids = list(r.prompt) + tokens[i][:-1]
            if len(ids) > self.prefix_cache_tokens:
                continue
            kept = [(k[i][:, valid, :], v[i][:, valid, :]) for k, v in layers]
            if kept and kept[0][0].shape[1] != len(ids):  # not the shape expected: keep nothing
                continue
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

    def _hit_stop(self, tokens: list[int], stops: list[str]) -> bool:
        """Whether the generated text now contains a stop string (checked on a tail of tokens)."""
        window = 2 * max(len(s) for s in stops) + 8
        text = self.text(tokens[-window:])
        return any(s in text for s in stops)



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


def _layers(cache: Any) -> list[tuple[Any, Any]]:
    """Per-layer (keys, values) of a transformers cache, whatever its version's layout."""
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]


def _top_p(torch: Any, probs: Any, top_p: float) -> Any:
    """Keep the smallest set of most likely tokens whose mass reaches ``top_p`` (renormalised
    by multinomial); the most likely token always stays."""
    if top_p >= 1.0:
        return probs
    ordered, order = torch.sort(probs, descending=True)
    before = ordered.cumsum(-1) - ordered  # mass of the tokens ranked above each one
    ordered = torch.where(before < top_p, ordered, torch.zeros_like(ordered))
    return torch.zeros_like(probs).scatter(0, order, ordered)
