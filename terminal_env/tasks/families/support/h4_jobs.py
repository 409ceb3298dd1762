"""Reference of the job-runner family: job graphs, their order (Kahn, ready jobs by name), the
failure policies, and the graphs written as JSON or INI."""

import heapq
import json


def simulate(jobs, codes, policy):
    """(log lines, exit status, names run in order) for jobs {name: deps} with exit codes."""
    for n, deps in jobs.items():
        for d in deps:
            if d not in jobs:
                return [], 2, []
    indeg = {n: len(set(d)) for n, d in jobs.items()}
    users = {n: [] for n in jobs}
    for n, deps in jobs.items():
        for d in sorted(set(deps)):
            users[d].append(n)
    ready = [n for n, k in indeg.items() if k == 0]
    heapq.heapify(ready)
    state, log, ran, order = {}, [], [], []
    while ready:
        n = heapq.heappop(ready)
        order.append(n)
        if any(state[d] != "ok" for d in jobs[n]):
            state[n] = "skipped"
            log.append(f"{n} skipped")
        else:
            ran.append(n)
            state[n] = "ok" if codes[n] == 0 else "failed"
            log.append(f"{n} ok" if codes[n] == 0 else f"{n} failed {codes[n]}")
            if codes[n] and policy == "stop":
                return log, 1, ran
        for u in users[n]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(jobs):
        return [], 2, []
    return log, 1 if any(s == "failed" for s in state.values()) else 0, ran


def make_graph(rng, n, cycle=False, fail_rate=0.2):
    names = rng.sample(["fetch", "lint", "build", "test", "docs", "pack", "sign", "push", "index",
                        "clean", "gen", "audit", "bench", "stage"], n)
    jobs = {}
    for i, name in enumerate(names):
        jobs[name] = sorted(rng.sample(names[:i], min(i, rng.randint(0, 2))))
    if cycle and n >= 3:
        jobs[names[1]] = sorted(set(jobs[names[1]]) | {names[-1]})
        jobs[names[-1]] = sorted(set(jobs[names[-1]]) | {names[1]})
    codes = {name: (rng.choice([1, 3, 7]) if rng.random() < fail_rate else 0) for name in names}
    return jobs, codes


def cmd(name, code):
    return f"echo {name} >> trace.txt; exit {code}"


def to_json(jobs, codes, rng):
    items = list(jobs.items())
    rng.shuffle(items)
    return json.dumps({"jobs": {n: {"cmd": cmd(n, codes[n]), "deps": d} for n, d in items}}, indent=2) + "\n"


def to_ini(jobs, codes, rng):
    items = list(jobs.items())
    rng.shuffle(items)
    out = []
    for n, d in items:
        out.append(f"[{n}]\ncmd = {cmd(n, codes[n])}\n" + (f"deps = {', '.join(d)}\n" if d else ""))
    return "\n".join(out)


def to_txt(jobs, codes, rng):
    items = list(jobs.items())
    rng.shuffle(items)
    return "".join(f"{n}:{''.join(' ' + x for x in d)}\n\t{cmd(n, codes[n])}\n\n" for n, d in items)
