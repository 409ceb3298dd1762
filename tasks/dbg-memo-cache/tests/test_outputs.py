# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
"""Drives memo.memoize through hidden call sequences (fake clock) and compares every result,
call count and cache_info with a reference model of the documented semantics."""

import json
import random
import subprocess
from collections import OrderedDict

DRIVER = r"""
import json, sys
sys.path.insert(0, "/app/memo")
from memo import memoize, clear_all

spec = json.loads(sys.stdin.read())
now = [0.0]
calls = {}

BODIES = {
    "poly": lambda x, scale=1, offset=0: x * scale + offset,
    "none_even": lambda x: None if x % 2 == 0 else x,
    "ident": lambda x: x * 7 + 1,
}

def make(name, kind, maxsize, ttl):
    body = BODIES[kind]
    @memoize(maxsize=maxsize, ttl=ttl, clock=lambda: now[0])
    def f(*args, **kwargs):
        calls[name] = calls.get(name, 0) + 1
        return body(*args, **kwargs)
    return f

funcs = {name: make(name, kind, maxsize, ttl) for name, kind, maxsize, ttl in spec["funcs"]}
out = []
for op in spec["ops"]:
    if op[0] == "call":
        out.append(["call", funcs[op[1]](*op[2], **op[3]), calls.get(op[1], 0)])
    elif op[0] == "tick":
        now[0] += op[1]
    elif op[0] == "info":
        out.append(["info", funcs[op[1]].cache_info()])
    elif op[0] == "clear":
        funcs[op[1]].cache_clear()
    elif op[0] == "clear_all":
        clear_all()
print(json.dumps(out))
"""

BODIES = {
    "poly": lambda x, scale=1, offset=0: x * scale + offset,
    "none_even": lambda x: None if x % 2 == 0 else x,
    "ident": lambda x: x * 7 + 1,
}


class Ref:
    def __init__(self, kind, maxsize, ttl):
        self.body, self.maxsize, self.ttl = BODIES[kind], maxsize, ttl
        self.cache, self.hits, self.misses, self.calls = OrderedDict(), 0, 0, 0

    def call(self, now, args, kwargs):
        key = (tuple(args), tuple(sorted(kwargs.items())))
        if key in self.cache and (self.ttl is None or now - self.cache[key][1] <= self.ttl):
            self.hits += 1
            self.cache.move_to_end(key)
            return self.cache[key][0]
        self.misses += 1
        self.calls += 1
        r = self.body(*args, **kwargs)
        self.cache[key] = (r, now)
        self.cache.move_to_end(key)
        while len(self.cache) > self.maxsize:
            self.cache.popitem(last=False)
        return r

    def clear(self):
        self.cache.clear()
        self.hits = self.misses = 0


def reference(spec):
    refs = {name: Ref(kind, m, t) for name, kind, m, t in spec["funcs"]}
    now, out = 0.0, []
    for op in spec["ops"]:
        if op[0] == "call":
            r = refs[op[1]].call(now, op[2], op[3])
            out.append(["call", r, refs[op[1]].calls])
        elif op[0] == "tick":
            now += op[1]
        elif op[0] == "info":
            ref = refs[op[1]]
            out.append(["info", {"hits": ref.hits, "misses": ref.misses, "size": len(ref.cache)}])
        elif op[0] == "clear":
            refs[op[1]].clear()
        elif op[0] == "clear_all":
            for ref in refs.values():
                ref.clear()
    return out


def drive(spec):
    r = subprocess.run(["python3", "-c", DRIVER], input=json.dumps(spec), capture_output=True,
                       text=True, timeout=60, cwd="/tmp")
    assert r.returncode == 0, r.stderr[-1500:]
    return json.loads(r.stdout)


def compare(spec, project):
    got, want = drive(spec), reference(spec)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert project(g) == project(w), f"step {i}: got {g}, expected {w}"


def test_distinct_arguments():
    rng = random.Random(6101)
    ops = []
    for _ in range(400):
        kw = {}
        if rng.random() < 0.6:
            kw["scale"] = rng.randint(1, 3)
        if rng.random() < 0.3:
            kw["offset"] = rng.choice([0, 5, -5])
        ops.append(["call", "f", [rng.randint(-4, 6)], kw])
    spec = {"funcs": [["f", "poly", 10000, None]], "ops": ops}
    compare(spec, lambda step: step[1])                       # the returned values


def test_none_results_cached():
    rng = random.Random(6102)
    ops = [["call", "g", [rng.randint(1, 30)], {}] for _ in range(300)] + [["info", "g"]]
    spec = {"funcs": [["g", "none_even", 10000, None]], "ops": ops}
    compare(spec, lambda step: step[1:])                      # values, call counts, info


def test_lru_eviction():
    rng = random.Random(6103)
    ops = []
    for i in range(300):
        x = rng.choice([1, 1, 2, 2, 3]) if rng.random() < 0.5 else rng.randint(1, 10)
        ops.append(["call", "h", [x], {}])
        if i % 50 == 49:
            ops.append(["info", "h"])
    spec = {"funcs": [["h", "ident", 4, None]], "ops": ops}
    compare(spec, lambda step: step[1:])


def test_functions_have_own_cache():
    rng = random.Random(6104)
    ops = []
    for phase in range(3):
        for _ in range(60):
            x = rng.randint(1, 12)
            ops.append(["call", rng.choice(["a", "b"]), [x], {}])
        ops += [["info", "a"], ["info", "b"]]
        ops.append(["clear", "a"] if phase == 0 else ["clear_all"])
        ops += [["info", "a"], ["info", "b"]]
    spec = {"funcs": [["a", "poly", 100, None], ["b", "ident", 100, None]], "ops": ops}
    compare(spec, lambda step: step[1:])


def test_ttl_expiry():
    rng = random.Random(6105)
    ops = []
    for _ in range(300):
        ops.append(["call", "t", [rng.randint(1, 4)], {}])
        ops.append(["tick", rng.choice([0, 0.5, 1, 2, 3, 4])])
    spec = {"funcs": [["t", "ident", 1000, 10.0]], "ops": ops}
    compare(spec, lambda step: step[1:])
