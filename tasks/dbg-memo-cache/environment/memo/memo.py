"""memo: a memoizing decorator with LRU eviction and optional expiry.

    from memo import memoize, clear_all

    @memoize(maxsize=256, ttl=30.0)
    def price(symbol, currency="EUR"):
        ...

Semantics of memoize(maxsize=128, ttl=None, clock=time.monotonic):

- A call whose positional and keyword arguments are equal (==) to those of an earlier call
  returns the stored result of that call without calling the function again. Every result is
  stored, including None, 0 and other false values. Exceptions are not stored.
- Every decorated function has its own cache.
- A cache holds at most maxsize results. When a new result must be stored into a full cache, the
  least recently used result is evicted (a result is used when it is stored and whenever it is
  returned from the cache).
- With ttl (seconds), a result expires ttl seconds after it was computed, as measured by
  clock(); a call that finds only an expired result calls the function again.
- wrapper.cache_info() returns {"hits": H, "misses": M, "size": S} for this function (a miss is a
  call that called the function); wrapper.cache_clear() empties this function's cache and resets
  its counters; clear_all() does that for every memoized function.
"""

import time
from collections import OrderedDict
from functools import wraps

_RESULTS: "OrderedDict[int, object]" = OrderedDict()
_STAMPS: dict[int, float] = {}
_COUNTERS: list[dict] = []


def clear_all() -> None:
    _RESULTS.clear()
    _STAMPS.clear()
    for stats in _COUNTERS:
        stats["hits"] = stats["misses"] = 0


def memoize(maxsize: int = 128, ttl: float | None = None, clock=time.monotonic):
    if maxsize < 1:
        raise ValueError("maxsize must be at least 1")

    def decorate(func):
        stats = {"hits": 0, "misses": 0}
        _COUNTERS.append(stats)

        def expired(key, now):
            return ttl is not None and now - _STAMPS[key] > ttl

        @wraps(func)
        def wrapper(*args, **kwargs):
            key = hash(args)
            now = clock()
            result = _RESULTS.get(key)
            if result is not None and not expired(key, now):
                stats["hits"] += 1
                _STAMPS[key] = now
                return result
            stats["misses"] += 1
            result = func(*args, **kwargs)
            _RESULTS[key] = result
            _STAMPS[key] = now
            while len(_RESULTS) > maxsize:
                old, _ = _RESULTS.popitem(last=False)
                del _STAMPS[old]
            return result

        def cache_info():
            return {"hits": stats["hits"], "misses": stats["misses"], "size": len(_RESULTS)}

        def cache_clear():
            _RESULTS.clear()
            _STAMPS.clear()
            stats["hits"] = stats["misses"] = 0

        wrapper.cache_info = cache_info
        wrapper.cache_clear = cache_clear
        return wrapper

    return decorate
