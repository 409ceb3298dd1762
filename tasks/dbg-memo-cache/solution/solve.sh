#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/memo
python3 - <<'PY'
from pathlib import Path
p = Path("memo.py")
s = p.read_text()
head = s[: s.index("import time")]
p.write_text(head + '''import time
from collections import OrderedDict
from functools import wraps

_MISSING = object()
_CLEARERS: list = []


def clear_all() -> None:
    for clear in _CLEARERS:
        clear()


def memoize(maxsize: int = 128, ttl: float | None = None, clock=time.monotonic):
    if maxsize < 1:
        raise ValueError("maxsize must be at least 1")

    def decorate(func):
        # one cache per function: key -> (result, time computed)
        cache: "OrderedDict[tuple, tuple[object, float]]" = OrderedDict()
        stats = {"hits": 0, "misses": 0}

        @wraps(func)
        def wrapper(*args, **kwargs):
            # the arguments themselves (compared with ==), not their hash; keywords included
            key = (args, tuple(sorted(kwargs.items())))
            now = clock()
            entry = cache.get(key, _MISSING)
            if entry is not _MISSING and (ttl is None or now - entry[1] <= ttl):
                stats["hits"] += 1
                cache.move_to_end(key)            # LRU: a hit is a use
                return entry[0]
            stats["misses"] += 1
            result = func(*args, **kwargs)
            cache[key] = (result, now)            # expiry counts from computation
            cache.move_to_end(key)
            while len(cache) > maxsize:
                cache.popitem(last=False)
            return result

        def cache_info():
            return {"hits": stats["hits"], "misses": stats["misses"], "size": len(cache)}

        def cache_clear():
            cache.clear()
            stats["hits"] = stats["misses"] = 0

        wrapper.cache_info = cache_info
        wrapper.cache_clear = cache_clear
        _CLEARERS.append(cache_clear)
        return wrapper

    return decorate
''')
PY
python3 demo.py
