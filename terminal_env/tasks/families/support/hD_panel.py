"""Four small machines driven by typed commands (water tanks, coupled dials, a lamp grid, discs on
pegs): their states, the commands' effects, a text rendering, the goal test, and a shortest command
sequence (breadth-first search). The panel program embeds this module; the tests replay its
journal with it."""

from __future__ import annotations

import hashlib
import hmac
from collections import deque


def commands(kind: str, p: dict) -> list[str]:
    """Every command that changes the state."""
    if kind == "tanks":
        names = p["names"]
        return ([f"fill {a}" for a in names] + [f"drain {a}" for a in names]
                + [f"pour {a} {b}" for a in names for b in names if a != b])
    if kind == "dials":
        return [f"{v} {i + 1}" for i in range(len(p["links"])) for v in ("up", "down")]
    if kind == "lamps":
        return [f"press {r + 1} {c + 1}" for r in range(p["rows"]) for c in range(p["cols"])]
    return [f"move {a} {b}" for a in "LMR" for b in "LMR" if a != b]


def step(kind: str, p: dict, s: tuple, cmd: str):
    """The state after ``cmd``, or an error message (a string) if it cannot be done."""
    w = cmd.split()
    if cmd not in commands(kind, p):
        return "unknown command (type help)"
    if kind == "tanks":
        i = {n: k for k, n in enumerate(p["names"])}
        lv = list(s)
        if w[0] == "fill":
            lv[i[w[1]]] = p["caps"][i[w[1]]]
        elif w[0] == "drain":
            lv[i[w[1]]] = 0
        else:
            a, b = i[w[1]], i[w[2]]
            m = min(lv[a], p["caps"][b] - lv[b])
            lv[a], lv[b] = lv[a] - m, lv[b] + m
        return tuple(lv)
    if kind == "dials":
        d, n, sign = list(s), len(s), 1 if w[0] == "up" else -1
        k = int(w[1]) - 1
        d[k] = (d[k] + sign) % 10
        d[(k + 1) % n] = (d[(k + 1) % n] + sign * p["links"][k]) % 10
        return tuple(d)
    if kind == "lamps":
        r0, c0 = int(w[1]) - 1, int(w[2]) - 1
        grid = list(s)
        for dr, dc in p["shape"]:
            r, c = r0 + dr, c0 + dc
            if 0 <= r < p["rows"] and 0 <= c < p["cols"]:
                grid[r * p["cols"] + c] ^= 1
        return tuple(grid)
    pegs = {n: list(t) for n, t in zip("LMR", s)}
    src, dst = pegs[w[1]], pegs[w[2]]
    if not src:
        return f"peg {w[1]} is empty"
    if dst and dst[-1] < src[-1]:
        return "a disc cannot go on a smaller one"
    dst.append(src.pop())
    return tuple(tuple(pegs[n]) for n in "LMR")


def render(kind: str, p: dict, s: tuple) -> str:
    if kind == "tanks":
        return "  ".join(f"{n}: {v}/{c} l" for n, v, c in zip(p["names"], s, p["caps"]))
    if kind == "dials":
        return "dials: " + " ".join(str(v) for v in s)
    if kind == "lamps":
        rows = ["".join("#" if s[r * p["cols"] + c] else "." for c in range(p["cols"]))
                for r in range(p["rows"])]
        return "\n".join(f"  {r + 1} {row}" for r, row in enumerate(rows))
    return "\n".join(f"  {n} | " + " ".join(str(x) for x in t) for n, t in zip("LMR", s))


def reached(kind: str, p: dict, s: tuple, goal) -> bool:
    if kind == "tanks":
        return s[p["names"].index(goal[0])] == goal[1]
    return tuple(s) == tuple(goal)


def shortest(kind: str, p: dict, start: tuple, goal) -> list[str]:
    seen, todo = {start: None}, deque([start])
    while todo:
        s = todo.popleft()
        if reached(kind, p, s, goal):
            path = []
            while seen[s] is not None:
                s, cmd = seen[s]
                path.append(cmd)
            return path[::-1]
        for cmd in commands(kind, p):
            t = step(kind, p, s, cmd)
            if not isinstance(t, str) and t not in seen:
                seen[t] = (s, cmd)
                todo.append(t)
    raise ValueError("goal not reachable")


def chain(key: str, log: list[str]) -> str:
    """The journal's seal: an HMAC chained over the commands in order."""
    mac = "start"
    for cmd in log:
        mac = hmac.new(key.encode(), (mac + "|" + cmd).encode(), hashlib.sha256).hexdigest()
    return mac


def replay(kind: str, p: dict, start: tuple, log: list[str]):
    """The state after the journal's commands (``reset`` goes back to the start); None if one of
    them could not have been accepted."""
    s = start
    for cmd in log:
        if cmd == "seal":
            continue
        if cmd == "reset":
            s = start
            continue
        s = step(kind, p, s, cmd)
        if isinstance(s, str):
            return None
    return s
