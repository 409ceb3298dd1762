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

torch and transformers are the optional extra [hf]; only the transformers backend imports this.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


class Batch:
    """The running rows' keys and values (see the module's notes): per layer, buffers ``[slots,
    kv_heads, capacity, head_dim]``; rows ``0 .. n-1`` run, row i's tokens are its last length
    positions before column ``width``, and no row uses a column before ``start``."""

    def __init__(self, layers: list[list[Any]], n: int, start: int, width: int, ready_masks: bool = False):
        self.layers = layers
        self.n = n
        self.start = start
        self.width = width
        #: whether its steps pass the attention mask ready (see the sampler's ``_ready_masks``)
        self.ready_masks = ready_masks

    @classmethod
    def of(cls, rows: list[list[tuple[Any, Any]]], lengths: list[int], room: int, slots: int = 1,
           ready_masks: bool = False) -> Batch:
        """A batch of ``rows`` (each row's keys and values per layer, ``[kv_heads, n, head_dim]``,
        ``n`` its length) with at least ``slots`` slots, and ``room`` free columns after its end.
        Slots are added as rows join and kept when they end: memory follows the most rows the
        batch has run at once."""
        first = rows[0][0][0]
        width = _with_headroom(max(lengths))
        layers = [[first.new_zeros((max(slots, len(rows)), first.shape[0], width + room, first.shape[-1]))
                   for _ in (0, 1)] for _ in rows[0]]
        batch = cls(layers, 0, width, width, ready_masks)
        batch.join([], rows, lengths, room)
        return batch

    @property
    def span(self) -> int:
        """The columns some row uses: ``width - start``."""
        return self.width - self.start

    def join(self, lengths: list[int], rows: list[list[tuple[Any, Any]]], added: list[int], room: int) -> Batch:
        """Add ``rows`` of lengths ``added`` after the running ones (``lengths``: theirs), keeping
        ``room`` free columns after the end."""
        longest = max(added)
        buffer = self.layers[0][0]
        if longest > self.width or self.n + len(rows) > buffer.shape[0] or self.width + room > buffer.shape[2]:
            self._move(max(self.n + len(rows), buffer.shape[0]), max(self.width, _with_headroom(longest)), room)
        w = self.width
        for i, (row, m) in enumerate(zip(rows, added)):
            for layer, parts in zip(self.layers, row):
                for b, part in zip(layer, parts):
                    b[self.n + i, :, w - m:w] = part
        self.n += len(rows)
        self.start = w - max([*lengths, *added])
        return self

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
            self.start = self.width - max(lengths[j] for j in order)
        return order

    def rows(self, lengths: list[int]) -> list[list[tuple[Any, Any]]]:
        """Each running row's keys and values (views of the buffers), given the rows' lengths."""
        w = self.width
        return [[(k[i, :, w - n:w], v[i, :, w - n:w]) for k, v in self.layers] for i, n in enumerate(lengths)]

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


def _with_headroom(length: int) -> int:
    """Where a batch's rows end when its longest is ``length`` tokens: a quarter more, so that the
    next turns of its episodes (longer prompts) fit without moving the batch."""
    return length + max(length // 4, 64)


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
