"""Keys and values for the sampler (:mod:`terminal_env.models.hf_sampling`): the running batch's
buffers, and the transformers caches over them.

A running batch keeps, per layer, buffers ``[rows, kv_heads, capacity, head_dim]`` whose first
``width`` positions are filled; each row's tokens are the last of those (left padding). Where the
installed transformers builds caches from layer objects (5.x), a step writes the fed tokens' keys
and values into the buffers in place (:func:`growing_layer`); otherwise the cache concatenates and
the batch takes the new tensors (a copy of the whole cache per step).

torch and transformers are the optional extra [hf]; only the transformers backend imports this.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


class Batch:
    """The running rows' keys and values: per layer, buffers ``[rows, kv_heads, capacity,
    head_dim]`` filled up to ``width``; row i's tokens are the last of those positions (left
    padding). A step writes the fed tokens' keys and values in place where the installed
    transformers lets a cache layer do so, and copies them into new buffers otherwise."""

    def __init__(self, layers: list[list[Any]], width: int, ready_masks: bool = False):
        self.layers = layers
        self.width = width
        #: whether its steps pass the attention mask ready (see the sampler's ``_ready_masks``)
        self.ready_masks = ready_masks

    @classmethod
    def of(cls, rows: list[list[tuple[Any, Any]]], lengths: list[int], room: int,
           ready_masks: bool = False) -> Batch:
        """A batch of ``rows`` (each row's keys and values per layer, ``[kv_heads, n, head_dim]``,
        ``n`` its length), with ``room`` free positions after the widest."""
        width = max(lengths)
        layers = []
        for layer in range(len(rows[0])):
            buffers = []
            for part in (0, 1):
                first = rows[0][layer][part]
                buffer = first.new_zeros((len(rows), first.shape[0], width + room, first.shape[-1]))
                for i, (row, n) in enumerate(zip(rows, lengths)):
                    buffer[i, :, width - n:width] = row[layer][part]
                buffers.append(buffer)
            layers.append(buffers)
        return cls(layers, width, ready_masks)

    def join(self, lengths: list[int], rows: list[list[tuple[Any, Any]]], added: list[int], room: int) -> Batch:
        """This batch (its rows' ``lengths``) and new ``rows`` of lengths ``added`` after them."""
        width = max(self.width, *added)
        layers = []
        for old in self.layers:
            buffers = []
            for part, b in enumerate(old):
                buffer = b.new_zeros((b.shape[0] + len(rows), b.shape[1], width + room, b.shape[-1]))
                buffer[:b.shape[0], :, width - self.width:width] = b[:, :, :self.width]  # one copy for all
                for i, (row, n) in enumerate(zip(rows, added)):
                    buffer[b.shape[0] + i, :, width - n:width] = row[len(layers)][part]
                buffers.append(buffer)
            layers.append(buffers)
        return Batch(layers, width, self.ready_masks)

    def keep(self, which: list[int], lengths: list[int], room: int) -> Batch:
        """A batch of the rows ``which`` only (``lengths``: theirs), without the padding that
        none of them needs."""
        width = max(lengths)
        start = self.width - width
        index = self.layers[0][0].new_tensor(which).long()
        layers = []
        for old in self.layers:
            buffers = []
            for b in old:
                buffer = b.new_zeros((len(which), b.shape[1], width + room, b.shape[-1]))
                buffer[:, :, :width] = b[index, :, start:self.width]
                buffers.append(buffer)
            layers.append(buffers)
        return Batch(layers, width, self.ready_masks)

    def rows(self, lengths: list[int]) -> list[list[tuple[Any, Any]]]:
        """Each row's keys and values (views of the buffers), given the rows' lengths."""
        w = self.width
        return [[(k[i, :, w - n:w], v[i, :, w - n:w]) for k, v in self.layers] for i, n in enumerate(lengths)]

    def cache(self) -> Any:
        """A transformers cache over the filled positions, for the next forward pass."""
        grow = growing_layer()
        if grow is not None:
            layer_class, cache_class = grow
            return cache_class(layers=[layer_class(k, v, self.width) for k, v in self.layers])
        return plain_cache([(k[:, :, :self.width], v[:, :, :self.width]) for k, v in self.layers])

    def advance(self, cache: Any) -> None:
        """Take the cache back after a step that fed one token per row."""
        if growing_layer() is not None:
            self.layers = [list(layer.buffers) for layer in cache.layers]
        else:
            self.layers = [[k, v] for k, v in cache_layers(cache)]
        self.width += 1


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
        def __init__(self, keys: Any, values: Any, filled: int):
            super().__init__()
            self.buffers = [keys, values]
            self.filled = filled
            self.keys, self.values = keys[:, :, :filled], values[:, :, :filled]
            self.device = keys.device
            self.is_initialized = True

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            end = self.filled + key_states.shape[-2]
            if end > self.buffers[0].shape[-2]:  # out of room: twice the size
                grown = []
                for b in self.buffers:
                    bigger = b.new_zeros((*b.shape[:2], 2 * end, b.shape[-1]))
                    bigger[:, :, :self.filled] = b[:, :, :self.filled]
                    grown.append(bigger)
                self.buffers = grown
            self.buffers[0][:, :, self.filled:end] = key_states
            self.buffers[1][:, :, self.filled:end] = value_states
            self.filled = end
            self.keys, self.values = self.buffers[0][:, :, :end], self.buffers[1][:, :, :end]
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
