"""Generated task families of the git category (see :mod:`.base` for what a family is).

The repositories are written in pure Python (:mod:`.support.h3_gitrepo`) as files under /app, so
every commit's hash is known when the tests are written."""

from __future__ import annotations

import random

from .base import Family, Instance
from .support.h3_gitrepo import Repo

FAMILIES: list[Family] = []

_AUTHORS = [("Ana Lima", "ana@example.com"), ("Bo Chen", "bo@example.com"),
            ("Dara Okafor", "dara@example.com"), ("Eli Novak", "eli@example.com")]
_WORDS = ["retry", "backoff", "quota", "shard", "ledger", "tenant", "cursor", "batch", "token",
          "cache", "window", "budget", "replica", "epoch", "lease", "digest", "bucket", "queue"]


def _ident(rng: random.Random, used: set[str], upper: bool = True) -> str:
    while True:
        a, b, c = rng.sample(_WORDS, 3)
        name = f"{a}_{b}_{c}".upper() if upper else f"{a}_{b}_{c}"
        if name not in used:
            used.add(name)
            return name


def _render(state: dict[str, list[str]]) -> dict[str, str]:
    return {p: "\n".join(lines) + "\n" for p, lines in state.items()}


class _History:
    """A linear main line of commits over a dict of files (lists of lines), with fillers."""

    def __init__(self, rng: random.Random, files=("app/settings.py", "app/handlers.py", "app/util.py")):
        self.rng, self.repo, self.used = rng, Repo(), set()
        self.state = {p: [f'"""{p.split("/")[-1][:-3]} module."""', ""] for p in files}
        self.state["README.md"] = ["# orders-service", "", "Internal service."]
        self.tip: str | None = None
        self.counter = 0
        self.commit("Initial import")

    def commit(self, msg: str, author=None, parents=None) -> str:
        author = author or self.rng.choice(_AUTHORS)
        parents = parents if parents is not None else ([self.tip] if self.tip else [])
        sha = self.repo.commit(_render(self.state), msg, parents, author)
        kind = "commit (initial)" if not self.tip else ("commit (merge)" if len(parents) > 1 else "commit")
        self.repo.set_ref("main", sha, f"{kind}: {msg.splitlines()[0]}", author, log_head=True)
        self.tip = sha
        return sha

    def py_files(self) -> list[str]:
        return sorted(p for p in self.state if p.startswith("app/") and p.count("/") == 1
                      and p.endswith(".py") and p[4:-3] in ("settings", "handlers", "util"))

    def filler(self) -> str:
        rng = self.rng
        path = rng.choice(self.py_files())
        self.counter += 1
        name = _ident(rng, self.used, upper=False)
        kind = rng.choice(["def", "const"])
        if kind == "def":
            self.state[path] += ["", f"def {name}(value):", f"    return value * {rng.randint(2, 9)}"]
            return self.commit(f"Add {name} helper")
        self.state[path].append(f"{name.upper()} = {rng.randint(10, 900)}")
        return self.commit(f"Add {name.replace('_', ' ')} setting")


# ------------------------------------------------------------------ git-pickaxe
# A history with strings that were added, removed, re-added, renamed with their file, changed in
# value, and added on a merged side branch; questions ask for the commit of one event each.

def _q_first(h: _History, rng, trap):
    tok = _ident(rng, h.used)
    f1, f2 = rng.sample(h.py_files(), 2)
    yield
    h.state[f1].append(f'{tok} = "{rng.choice(_WORDS)}"')
    ans = h.commit(f"Introduce {tok.lower().replace('_', ' ')}")
    if trap:
        yield
        h.state[f1] = [x for x in h.state[f1] if tok not in x]
        h.commit(f"Drop unused settings from {f1}")
        yield
        h.state[f2].append(f"{tok} = {rng.randint(2, 99)}")
        h.commit(f"Bring back {tok.lower().replace('_', ' ')} for the importer")
    return f"Which commit first introduced the string `{tok}` into the repository?", ans


def _q_removal(h: _History, rng, trap):
    tok = _ident(rng, h.used)
    f1, f2 = rng.sample(h.py_files(), 2)
    yield
    h.state[f1].append(f"{tok} = True")
    if trap:
        h.state[f2].append(f"# see {tok}")
    h.commit(f"Add {tok.lower().replace('_', ' ')} flag")
    if trap:
        yield
        h.state[f1] = [x for x in h.state[f1] if tok not in x]
        h.commit(f"Remove flag from {f1}")
    yield
    for f in (f1, f2):
        h.state[f] = [x for x in h.state[f] if tok not in x]
    ans = h.commit("Clean up stale references" if trap else f"Remove {tok.lower().replace('_', ' ')} flag")
    return f"Which commit removed the last occurrence of the string `{tok}` from the repository?", ans


def _q_renamed(h: _History, rng, trap):
    tok = _ident(rng, h.used)
    mod = rng.choice(["billing", "shipping", "audit", "export", "pricing", "alerts"])
    old, new = f"lib/{mod}_helpers.py", f"app/{mod}/helpers.py"
    yield
    h.state[old] = [f'"""{mod} helpers."""', "", f"def {mod}_total(rows):", "    return sum(rows)"]
    h.commit(f"Add {mod} helpers")
    yield
    h.state[old] += ["", f"{tok} = {rng.randint(100, 999)}"]
    ans = h.commit(f"Tune {mod} limits")
    yield
    h.state[new] = h.state.pop(old)
    h.commit(f"Move {mod} helpers into the app package")
    if trap:
        return (f"Which commit added the line containing `{tok}` to the file now named `{new}`? "
                f"(the file had another name before)"), ans
    return f"Which commit added the string `{tok}` to the repository?", ans


def _q_side(h: _History, rng, trap):
    tok = _ident(rng, h.used)
    feat = rng.choice(["webhooks", "exports", "refunds", "coupons", "invoices"])
    yield
    base = h.tip
    side_state = {k: list(v) for k, v in h.state.items()}
    path = f"app/{feat}.py"
    side_state[path] = [f'"""{feat}."""', "", f"def handle_{feat}(event):", "    return event"]
    author = rng.choice(_AUTHORS)
    s1 = h.repo.commit(_render(side_state), f"Start {feat} support", [base], author)
    side_state[path] += ["", f"{tok} = {rng.randint(3, 30)}"]
    ans = h.repo.commit(_render(side_state), f"Limit {feat} retries", [s1], author)
    if trap:
        h.filler()
    h.state[path] = side_state[path]
    h.commit(f"Merge branch 'feature/{feat}'", parents=[h.tip, ans])
    return (f"Which commit introduced the string `{tok}`? (not a merge commit: the commit that "
            "first added it)"), ans


def _q_value(h: _History, rng, trap):
    tok = _ident(rng, h.used)
    f1 = rng.choice(h.py_files())
    yield
    h.state[f1].append(f"{tok} = {rng.randint(10, 50)}")
    h.commit(f"Add {tok.lower().replace('_', ' ')}")
    ans = None
    for _ in range(2):
        yield
        h.state[f1] = [f"{tok} = {rng.randint(51, 900)}" if x.startswith(tok + " =") else x
                       for x in h.state[f1]]
        ans = h.commit(f"Adjust limits after load test {rng.randint(2, 40)}")
    if trap:
        yield
        other = rng.choice([p for p in h.py_files() if p != f1])
        h.state[other].append(f"# {tok} is read by the scheduler")
        h.commit("Document scheduler settings")
    return f"Which commit last changed the value assigned to `{tok}`?", ans


_QUESTIONS = {"first-add": _q_first, "removal": _q_removal, "renamed": _q_renamed,
              "side-branch": _q_side, "value-change": _q_value}

_PICKAXE_TESTS = '''"""Checks the commit hashes in /app/answers.txt against the known history."""

import re
from pathlib import Path

import pytest

EXPECTED = __EXPECTED__


def answers():
    out = {}
    p = Path("/app/answers.txt")
    if p.is_file():
        for line in p.read_text().splitlines():
            m = re.match(r"\\s*(Q\\d+)\\s+([0-9a-fA-F]{40})\\s*$", line)
            if m:
                out[m[1]] = m[2].lower()
    return out
'''


def _pickaxe(rng: random.Random, index: int) -> Instance:
    kinds = sorted(rng.sample(sorted(_QUESTIONS), 4))
    rng.shuffle(kinds)
    traps = {k: rng.random() < 0.6 for k in kinds}
    h = _History(rng)
    gens = [(k, _QUESTIONS[k](h, rng, traps[k])) for k in kinds]
    results: dict[str, tuple[str, str]] = {}
    live = list(gens)
    for _ in range(rng.randint(2, 3)):
        h.filler()
    while live:  # interleave the events of the questions with fillers
        k, g = live.pop(rng.randrange(len(live)))
        try:
            next(g)
            live.append((k, g))
        except StopIteration as stop:
            results[k] = stop.value
        if rng.random() < 0.5:
            h.filler()
    h.filler()
    questions = [results[k] for k in kinds]
    expected = {f"Q{i + 1}": ans for i, (_, ans) in enumerate(questions)}
    qtext = "\n".join(f"{i + 1}. {q}" for i, (q, _) in enumerate(questions))
    instruction = f"""\
`/app/repo` is a git repository (branch `main`). Answer these questions about its history:

{qtext}

Write the answers to `/app/answers.txt`, one line per question, `Q<number> <commit>`, where
`<commit>` is the full 40-character hash of the commit, e.g. `Q1 0123456789abcdef0123456789abcdef01234567`.
Do not change the repository.
"""
    tests = _PICKAXE_TESTS.replace("__EXPECTED__", repr(expected))
    for i in range(len(questions)):
        tests += f'''

@pytest.mark.weight(1)
def test_question_{i + 1}():
    assert answers().get("Q{i + 1}") == EXPECTED["Q{i + 1}"], "wrong commit for question {i + 1}"
'''
    solution = "cat > /app/answers.txt <<'EOF'\n" + "".join(f"{q} {a}\n" for q, a in expected.items()) + "EOF\n"
    n_traps = sum(1 for k in kinds if traps[k] or k in ("side-branch", "value-change"))
    knowledge = 2 if any(k in ("value-change", "renamed") and traps[k] for k in kinds) else 1
    score = 1 + knowledge + (2 if n_traps >= 3 else 1)
    difficulty = "easy" if score <= 2 else "medium" if score <= 4 else "hard"
    omitted = sorted(set(_QUESTIONS) - set(kinds))[0]
    return Instance(
        instruction=instruction, tests=tests, solution=solution, difficulty=difficulty,
        variant=f"without-{omitted}", files=h.repo.write("repo", _render(h.state)),
        tags=("git", "history", "pickaxe"), oracle_turns=5,
    )


FAMILIES.append(Family("git-pickaxe", "git", "validation",
                       "find the commits where strings were first added, removed, changed in value, "
                       "added before a rename or on a merged side branch", _pickaxe))
