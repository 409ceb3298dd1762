"""Keys and values for the sampler (:mod:`terminal_env.models.hf_sampling`): the running batch's
buffers, and the transformers caches over them.

A running batch keeps, per layer, buffers ``[slots, kv_heads, capacity, head_dim]``. The running
rows are the first slots; every row's tokens end at one column, the batch's ``width`` (left
padding), and the columns from ``start`` on are those some row uses. Buffers have room on both
sides, so that the batch changes without copying it whole: a new row is written into a free slot
(the batch moves only when it is longer than ``width``, and then keeps room for the next ones), a
finished row's slot takes the last row, and a step writes one column. Where the installed
transformers builds caches from layer objects (5.x) the step writes that column in place
(:func:`growing_layer`); otherwise the cache concatenates, and the batch copies the new column
out of its result.

Rows that start with the same tokens (episodes of one task behind one system prompt, a group
sampled from one prompt) keep those tokens' keys and values once, outside the buffers, and a
step reads them once for all rows (:func:`shared_prefix_attention`, where the model attends with
torch's SDPA on transformers 5.x): on a CPU a decoding step is bound by reading keys and values,
so this is what batching long episodes gains most from.

torch and transformers are the optional extra [hf]; only the transformers backend imports this.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


class Batch:
    """The running rows' keys and values (see the module's notes): per layer, buffers ``[slots,
    kv_heads, capacity, head_dim]``; rows ``0 .. n-1`` run, row i's tokens are its last length
    positions before column ``width``, and no row uses a column before ``start``.

    When every running row starts with the same ``shared`` tokens (one task's system prompt and
    instruction, a group of episodes of one prompt), their keys and values are kept once, in
    ``prefix``, and a row's buffer holds only the tokens after them: each step then reads the
    shared part once for all rows instead of once per row (:func:`shared_prefix_attention`).
    Lengths given to its methods are whole rows', shared part included."""

    def __init__(self, layers: list[list[Any]], n: int, start: int, width: int, ready_masks: bool = False):
        self.layers = layers
        self.n = n
        self.start = start
        self.width = width
        #: whether its steps pass the attention mask ready (see the sampler's ``_ready_masks``)
        self.ready_masks = ready_masks
        #: how many leading tokens every running row shares, and their keys and values per layer
        #: (``[kv_heads, shared, head_dim]``), kept once
        self.shared = 0
        self.prefix: list[tuple[Any, Any]] | None = None

    @classmethod
    def of(cls, rows: list[list[tuple[Any, Any]]], lengths: list[int], room: int, slots: int = 1,
           ready_masks: bool = False, shared: int = 0) -> Batch:
        """A batch of ``rows`` (each row's keys and values per layer, ``[kv_heads, n, head_dim]``,
        ``n`` its length) with at least ``slots`` slots, and ``room`` free columns after its end;
        its rows' first ``shared`` tokens are the same. Slots are added as rows join and kept
        when they end: memory follows the most rows the batch has run at once."""
        first = rows[0][0][0]
        width = _with_headroom(max(lengths) - shared)
        layers = [[first.new_zeros((max(slots, len(rows)), first.shape[0], width + room, first.shape[-1]))
                   for _ in (0, 1)] for _ in rows[0]]
        batch = cls(layers, 0, width, width, ready_masks)
        if shared:
            batch.shared = shared
            batch.prefix = [(k[:, :shared].clone(), v[:, :shared].clone()) for k, v in rows[0]]
        batch.join([], rows, lengths, room)
        return batch

    @property
    def span(self) -> int:
        """The buffers' columns some row uses: ``width - start``."""
        return self.width - self.start

    def join(self, lengths: list[int], rows: list[list[tuple[Any, Any]]], added: list[int], room: int) -> Batch:
        """Add ``rows`` of lengths ``added``, which start with the batch's shared tokens, after
        the running ones (``lengths``: theirs), keeping ``room`` free columns after the end."""
        p = self.shared
        longest = max(added) - p
        buffer = self.layers[0][0]
        if longest > self.width or self.n + len(rows) > buffer.shape[0] or self.width + room > buffer.shape[2]:
            self._move(max(self.n + len(rows), buffer.shape[0]), max(self.width, _with_headroom(longest)), room)
        w = self.width
        for i, (row, m) in enumerate(zip(rows, added)):
            for layer, parts in zip(self.layers, row):
                for b, part in zip(layer, parts):
                    b[self.n + i, :, w - m + p:w] = part[:, p:]
        self.n += len(rows)
        self.start = w - max([*lengths, *added]) + p
        return self

    def share(self, shared: int, lengths: list[int]) -> None:
        """Make ``shared`` (at most every running row's length, ``lengths``) the number of
        leading tokens kept once: more are taken from the first row, fewer are written back into
        every row's buffer."""
        p = self.shared
        if shared == p:
            return
        w = self.width
        if shared > p:  # the rows' first columns become the prefix's (and go unused in the rows)
            n0 = lengths[0]
            more = [(k[0, :, w - n0 + p:w - n0 + shared], v[0, :, w - n0 + p:w - n0 + shared]) for k, v in self.layers]
            if self.prefix is None:
                self.prefix = [(k.clone(), v.clone()) for k, v in more]
            else:
                self.prefix = [(torch_cat(pk, k), torch_cat(pv, v)) for (pk, pv), (k, v) in zip(self.prefix, more)]
        else:  # the rows need the tokens the prefix no longer holds
            if max(lengths) - shared > w:
                self._move(self.layers[0][0].shape[0], _with_headroom(max(lengths) - shared), 1)
                w = self.width
            for i, n in enumerate(lengths):
                for layer, (pk, pv) in zip(self.layers, self.prefix or []):
                    layer[0][i, :, w - n + shared:w - n + p] = pk[:, shared:p]
                    layer[1][i, :, w - n + shared:w - n + p] = pv[:, shared:p]
            self.prefix = [(k[:, :shared], v[:, :shared]) for k, v in self.prefix] if shared else None
        self.shared = shared
        if lengths:
            self.start = w - max(lengths) + shared

    def _move(self, slots: int, width: int, room: int) -> None:
        """New buffers of ``slots`` rows, the rows' tokens ending at column ``width``, ``room``
        columns after it."""
        span = self.span
        layers = []
        for old in self.layers:
            buffers = []
            for b in old:
                moved = b.new_zeros((slots, b.shape[1], width + room, b.shape[-1]))
                moved[:self.n, :, width - span:width] = b[:self.n, :, self.start:self.width]
                buffers.append(moved)
            layers.append(buffers)
        self.layers, self.start, self.width = layers, width - span, width

    def remove(self, finished: list[int], lengths: list[int]) -> list[int]:
        """Take the rows ``finished`` out (``lengths``: every running row's): each freed slot takes
        the last running row. Returns, for each slot now running, the index its row had before."""
        order = list(range(self.n))
        for i in sorted(finished, reverse=True):
            last = len(order) - 1
            if i != last:
                for layer in self.layers:
                    for b in layer:
                        b[i, :, self.start:self.width] = b[last, :, self.start:self.width]
                order[i] = order[last]
            order.pop()
        self.n = len(order)
        if order:
            self.start = self.width - max(lengths[j] for j in order) + self.shared
        return order

    def row(self, i: int, length: int) -> list[tuple[Any, Any]]:
        """Running row ``i``'s keys and values (``length`` tokens, the shared ones included), per
        layer, in tensors of their own (not views of the buffers, which the batch reuses)."""
        w, p = self.width, self.shared
        own = [(k[i, :, w - length + p:w], v[i, :, w - length + p:w]) for k, v in self.layers]
        if self.prefix is None:
            return [(k.clone(), v.clone()) for k, v in own]
        return [(torch_cat(pk, k), torch_cat(pv, v)) for (pk, pv), (k, v) in zip(self.prefix, own)]

    def attention_kwargs(self) -> dict[str, Any]:
        """What the next forward pass passes to the attention (the shared prefix, if any)."""
        return {"shared_prefix": self.prefix} if self.prefix is not None else {}

    def cache(self) -> Any:
        """A transformers cache over the running rows' used columns, for the next forward pass
        (which feeds one token per row)."""
        if self.width + 1 > self.layers[0][0].shape[2]:  # out of columns: twice the room
            self._move(self.layers[0][0].shape[0], self.width, max(self.span, 16))
        grow = growing_layer()
        n = self.n
        if grow is not None:
            layer_class, cache_class = grow
            return cache_class(layers=[layer_class(k[:n], v[:n], self.start, self.width) for k, v in self.layers])
        return plain_cache([(k[:n, :, self.start:self.width], v[:n, :, self.start:self.width]) for k, v in self.layers])

    def advance(self, cache: Any) -> None:
        """Take the cache back after a step that fed one token per row."""
        if growing_layer() is None:  # the cache concatenated: its last column is the new one
            for layer, (k, v) in zip(self.layers, cache_layers(cache)):
                layer[0][:self.n, :, self.width] = k[:, :, -1]
                layer[1][:self.n, :, self.width] = v[:, :, -1]
        self.width += 1


def torch_cat(a: Any, b: Any) -> Any:
    """``a`` and ``b`` (``[kv_heads, n, head_dim]``) one after the other."""
    import torch  # the optional extra [hf]

    return torch.cat([a, b], dim=1)


def _with_headroom(length: int) -> int:
    """Where a batch's rows end when its longest is ``length`` tokens: a quarter more, so that the
    next turns of its episodes (longer prompts) fit without moving the batch."""
    return length + max(length // 4, 64)


#: the attention implementation the sampler gives a model whose attention is torch's SDPA:
#: SDPA, and a shared prefix read once for all rows when a step passes one
SHARED_PREFIX_ATTENTION = "terminal_env_sdpa_shared_prefix"


def use_shared_prefix_attention(model: Any) -> bool:
    """Let ``model`` (attending with SDPA, transformers 5.x) read a batch's shared prefix once per
    step: registers :func:`shared_prefix_attention` with transformers under
    :data:`SHARED_PREFIX_ATTENTION` and sets the model's attention implementation to it (plain
    SDPA whenever no prefix is passed, so every other use of the model is unchanged; the setting
    is not saved with the model's config). Returns whether it did."""
    config = getattr(model, "config", None)
    if growing_layer() is None or config is None:
        return False
    if getattr(config, "_attn_implementation", None) == SHARED_PREFIX_ATTENTION:
        return True
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    from transformers import AttentionInterface, AttentionMaskInterface  # the optional extra [hf]
    from transformers.masking_utils import sdpa_mask  # the optional extra [hf]

    AttentionInterface.register(SHARED_PREFIX_ATTENTION, shared_prefix_attention)
    AttentionMaskInterface.register(SHARED_PREFIX_ATTENTION, sdpa_mask)
    config._attn_implementation = SHARED_PREFIX_ATTENTION
    return True


def shared_prefix_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                            dropout: float = 0.0, scaling: float | None = None,
                            shared_prefix: list[tuple[Any, Any]] | None = None, **kwargs: Any) -> tuple[Any, None]:
    """Attention for a decoding step (one query per row) whose rows all start with the same
    tokens: their keys and values ``shared_prefix[layer]`` (``[kv_heads, shared, head_dim]``) are
    attended to once for every row's queries together, the rows' own tokens (``key``, ``value``,
    ``attention_mask`` a ready ``[rows, 1, 1, columns]`` boolean mask) per row, and the two parts
    are merged by their log-sum-exp. Equal to attention over the whole rows up to rounding;
    without ``shared_prefix`` it is transformers' SDPA attention."""
    from transformers.integrations.sdpa_attention import (
        sdpa_attention_forward,  # the optional extra [hf]
    )

    if shared_prefix is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    import torch  # the optional extra [hf]

    rows, heads, steps, dim = query.shape
    if steps != 1:
        raise ValueError(f"a shared prefix is read once per decoding step (one query per row), not for {steps}")
    kv_heads = key.shape[1]
    group = heads // kv_heads  # the queries that share a key/value head, per row
    scale = scaling if scaling is not None else dim ** -0.5
    prefix_k, prefix_v = shared_prefix[module.layer_idx]
    q = query.reshape(rows, kv_heads, group, dim)
    mask = torch.zeros(attention_mask.shape, dtype=query.dtype, device=query.device).masked_fill(
        ~attention_mask, float("-inf"))
    own, own_lse = _attend(q, key, value, mask, scale)
    together = q.transpose(0, 1).reshape(1, kv_heads, rows * group, dim)
    shared, shared_lse = _attend(together, prefix_k[None], prefix_v[None], None, scale)
    shared = shared[0].reshape(kv_heads, rows, group, dim).transpose(0, 1)
    shared_lse = shared_lse[0].reshape(kv_heads, rows, group).transpose(0, 1)
    weight = torch.sigmoid(shared_lse - own_lse)[..., None].to(own.dtype)  # the prefix's share
    out = shared * weight + own * (1 - weight)
    return out.reshape(rows, heads, steps, dim).transpose(1, 2).contiguous(), None


#: torch's CPU flash attention, which returns the log-sum-exp beside the output
CPU_KERNEL = "_scaled_dot_product_flash_attention_for_cpu"


def _attend(q: Any, k: Any, v: Any, mask: Any, scale: float) -> tuple[Any, Any]:
    """Attention output and its log-sum-exp per query: torch's CPU flash kernel where there is
    one (it returns both), the same arithmetic written out elsewhere."""
    import torch  # the optional extra [hf]

    kernel = getattr(torch.ops.aten, CPU_KERNEL, None)
    if q.device.type == "cpu" and kernel is not None:
        out, lse = kernel(q, k, v, 0.0, False, attn_mask=mask, scale=scale)[:2]
        return out, lse
    scores = (q @ k.transpose(-1, -2)).float() * scale
    if mask is not None:
        scores = scores + mask.float()
    lse = torch.logsumexp(scores, dim=-1)
    return ((scores - lse[..., None]).exp().to(v.dtype) @ v), lse


@functools.cache
def growing_layer() -> tuple[type, type] | None:
    """A transformers cache layer that writes new keys and values into buffers with room to
    spare instead of concatenating (a copy of the whole cache per step), and the cache class that
    takes a list of layers; None where the installed transformers has no such layers (< 5)."""
    try:
        from transformers.cache_utils import Cache, DynamicLayer  # the optional extra [hf]
    except ImportError:
        return None
    if "layers" not in inspect.signature(Cache.__init__).parameters:
        return None

    class GrowingLayer(DynamicLayer):
        """Keys and values in buffers whose columns ``start .. filled-1`` are the cache; a step
        writes its tokens at ``filled``, in place, into room the batch made sure of."""

        def __init__(self, keys: Any, values: Any, start: int, filled: int):
            super().__init__()
            self.buffers = [keys, values]
            self.start, self.filled = start, filled
            self.keys, self.values = keys[:, :, start:filled], values[:, :, start:filled]
            self.device = keys.device
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            end = self.filled + key_states.shape[-2]
            if end > self.buffers[0].shape[-2]:
                raise RuntimeError(f"the batch's buffers have {self.buffers[0].shape[-2]} columns, "
                                   f"a step needs {end}")
            self.buffers[0][:, :, self.filled:end] = key_states
            self.buffers[1][:, :, self.filled:end] = value_states
            self.filled = end
            self.keys, self.values = self.buffers[0][:, :, self.start:end], self.buffers[1][:, :, self.start:end]
            return self.keys, self.values

    return GrowingLayer, Cache


def plain_cache(layers: list[tuple[Any, Any]]) -> Any:
    """A transformers DynamicCache holding ``layers`` (per layer, keys and values)."""
    import transformers  # the optional extra [hf]

    cache = transformers.DynamicCache()
    for i, (k, v) in enumerate(layers):
        cache.update(k, v, i)
    return cache


def cache_layers(cache: Any) -> list[tuple[Any, Any]]:
    """Per-layer (keys, values) of a transformers cache, whatever its version's layout."""
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]
