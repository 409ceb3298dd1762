"""The structure docs/architecture.md describes: no import circle inside terminal_env/, and the
sandbox layer imports nothing above it. Read from the source with ast (imports under
``if TYPE_CHECKING:`` are for type checkers only and do not count)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "terminal_env"


def modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _targets(name: str, node: ast.AST, is_package: bool, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        found = [a.name for a in node.names if a.name.startswith("terminal_env")]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            base = name.split(".")
            base = base if is_package else base[:-1]
            base = base[: len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        if not mod.startswith("terminal_env"):
            return []
        found = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
    return [t if t in known else t.rsplit(".", 1)[0] for t in found]


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text())
        skip: set[int] = set()
        for node in ast.walk(tree):
            test = getattr(node, "test", None)
            if isinstance(node, ast.If) and getattr(test, "id", getattr(test, "attr", "")) == "TYPE_CHECKING":
                skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
            # The package root's module __getattr__ (PEP 562) hands the verifiers package its
            # taskset on demand, once the package has finished importing: not an import circle.
            if name == "terminal_env" and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                skip |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
                graph[name] |= {t for t in _targets(name, node, path.name == "__init__.py", known) if t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_inside_terminal_env():
    graph = import_graph()
    assert len(graph) > 50 and graph["terminal_env.trial"]  # the graph was really read
    assert cycles(graph) == []


def test_the_sandbox_layer_imports_nothing_above_it():
    graph = import_graph()
    below = {"terminal_env.errors", "terminal_env.output"}
    for name, deps in graph.items():
        if name.startswith("terminal_env.sandbox"):
            above = {d for d in deps if not d.startswith("terminal_env.sandbox") and d not in below}
            assert not above, (name, above)


#: the optional extras: the only imports a module may make inside a function (so that the core
#: installs and imports without them), each with a comment naming its extra; and vLLM, which no
#: extra installs (the trainer's nccl weight transport uses the user's own)
OPTIONAL = ("openai", "torch", "transformers", "ray", "peft", "datasets", "trl", "omegaconf", "skyrl_gym", "openenv", "uvicorn", "minisweagent", "terminal_env.integrations.verifiers", "terminal_env.models.openai_backend",
            "terminal_env.models.hf_backend", "terminal_env.train", "vllm")


def test_imports_inside_functions_are_only_of_the_optional_extras_and_say_so():
    known = modules()
    found = []
    for name, path in known.items():
        source = path.read_text()
        lines = source.splitlines()
        for fn in ast.walk(ast.parse(source)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                targets = ([a.name for a in node.names] if isinstance(node, ast.Import)
                           else _targets(name, node, path.name == "__init__.py", known) or [node.module or ""])
                optional = all(any(t == o or t.startswith(o + ".") for o in OPTIONAL) for t in targets)
                said = any("optional extra" in line for line in lines[node.lineno - 1:node.end_lineno])
                said = said or any("the user's vLLM" in line for line in lines[node.lineno - 1:node.end_lineno])
                found.append((name, node.lineno, targets, optional, said))
    assert len(found) >= 5  # the lazy imports of the extras were really read
    wrong = [(n, line, t) for n, line, t, optional, said in found if not (optional and said)]
    assert wrong == [], "an import inside a function that is not of an optional extra, or does not say so"


def test_every_module_over_500_lines_is_named_in_the_architecture_with_its_reason():
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    named = doc.split("## Modules over 500 lines, and why", 1)[1]
    long = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
            for path in modules().values() if len(path.read_text().splitlines()) > 500}
    assert long, "no module over 500 lines: drop this section of docs/architecture.md and this test"
    unexplained = {m: n for m, n in long.items() if f"`{m}`" not in named}
    assert unexplained == {}, "name each in docs/architecture.md under 'Modules over 500 lines' with the reason"
