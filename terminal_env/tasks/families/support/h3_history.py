"""The history builder of the git families (generator side only): a main line of commits over
a dict of files, with fillers, branches, resets and snapshots, on top of :mod:`.h3_gitrepo`."""

from __future__ import annotations

import random
from dataclasses import dataclass

from .h3_gitrepo import Repo

_AUTHORS = [("Ana Lima", "ana@example.com"), ("Bo Chen", "bo@example.com"),
            ("Dara Okafor", "dara@example.com"), ("Eli Novak", "eli@example.com")]
_WORDS = ["retry", "backoff", "quota", "shard", "ledger", "tenant", "cursor", "batch", "token",
          "cache", "window", "budget", "replica", "epoch", "lease", "digest", "bucket", "queue"]



@dataclass(frozen=True)
class Project:
    """What a history's repository is about: its package, modules, vocabulary and config, so that
    families of different splits can ship repositories that share no file (the cross-split rule)."""
    name: str
    package: str
    modules: tuple[str, ...]
    words: tuple[str, ...]
    blurb: str
    config: str = ""


ORDERS = Project("orders-service", "app", ("settings", "handlers", "util"), tuple(_WORDS),
                 "Internal service.")


def _ident(rng: random.Random, used: set[str], upper: bool = True, words=_WORDS) -> str:
    while True:
        a, b, c = rng.sample(list(words), 3)
        name = f"{a}_{b}_{c}".upper() if upper else f"{a}_{b}_{c}"
        if name not in used:
            used.add(name)
            return name


def _render(state: dict[str, list[str]]) -> dict[str, str]:
    return {p: "\n".join(lines) + "\n" for p, lines in state.items()}


class _History:
    """A linear main line of commits over a dict of files (lists of lines), with fillers."""

    def __init__(self, rng: random.Random, project: Project = ORDERS):
        self.rng, self.repo, self.used, self.project = rng, Repo(), set(), project
        self.state = {f"{project.package}/{m}.py": [f'"""{m} module."""', ""] for m in project.modules}
        self.state["README.md"] = [f"# {project.name}", "", project.blurb]
        self.tip: str | None = None
        self.counter = 0
        self.branch = "main"
        self.snap: dict[str, dict[str, list[str]]] = {}
        self.commit("Initial import")

    def commit(self, msg: str, author=None, parents=None, kind=None) -> str:
        author = author or self.rng.choice(_AUTHORS)
        parents = parents if parents is not None else ([self.tip] if self.tip else [])
        sha = self.repo.commit(_render(self.state), msg, parents, author)
        kind = kind or ("commit (initial)" if not self.tip else
                        "commit (merge)" if len(parents) > 1 else "commit")
        self.repo.set_ref(self.branch, sha, f"{kind}: {msg.splitlines()[0]}", author, log_head=True)
        self.tip = sha
        self.snap[sha] = {k: list(v) for k, v in self.state.items()}
        return sha

    def move(self, branch: str, sha: str, msg: str) -> None:
        """Point the current branch at sha (a reset) and check its files out."""
        self.repo.set_ref(branch, sha, msg, log_head=True)
        self.tip = sha
        self.state = {k: list(v) for k, v in self.snap[sha].items()}

    def checkout(self, branch: str) -> None:
        ref = f"refs/heads/{branch}"
        sha = self.repo.refs.get(ref) or self.tip
        if ref not in self.repo.refs:
            self.repo.set_ref(branch, sha, f"branch: Created from {self.branch}")
        self.repo.log_head(self.tip, sha, f"checkout: moving from {self.branch} to {branch}")
        self.branch, self.tip = branch, sha
        self.state = {k: list(v) for k, v in self.snap[sha].items()}

    def py_files(self) -> list[str]:
        pkg = self.project.package
        return sorted(p for p in self.state if p.startswith(pkg + "/") and p.count("/") == 1
                      and p.endswith(".py") and p[len(pkg) + 1:-3] in self.project.modules)

    def ident(self, upper: bool = True) -> str:
        """A fresh identifier from the project's vocabulary."""
        return _ident(self.rng, self.used, upper, self.project.words)

    def write(self, prefix: str = "repo") -> dict:
        """The instance files of the repository with HEAD's files checked out."""
        return self.repo.write(prefix, _render(self.state), self.project.config)

    def filler(self, author=None) -> str:
        rng = self.rng
        path = rng.choice(self.py_files())
        self.counter += 1
        name = self.ident(upper=False)
        kind = rng.choice(["def", "const"])
        if kind == "def":
            self.state[path] += ["", f"def {name}(value):", f"    return value * {rng.randint(2, 9)}"]
            return self.commit(f"Add {name} helper", author)
        self.state[path].append(f"{name.upper()} = {rng.randint(10, 900)}")
        return self.commit(f"Add {name.replace('_', ' ')} setting", author)


def _tree_of(state: dict[str, list[str]]) -> str:
    return Repo().tree(_render(state))
