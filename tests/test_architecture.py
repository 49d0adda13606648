"""The package's shape (docs/README.md "Architecture"): imports point one way, down the layers,
with no import cycles, deferred and TYPE_CHECKING imports included (a dependency is a
dependency); engine.py stays a facade (<= 300 lines) and no module passes 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "src" / "contextwright"

# Highest first; a module may import its own layer and the layers below it, never one above.
LAYERS: dict[str, tuple[str, ...]] = {
    "interfaces": (
        "cli", "server", "mcp", "integrations", "demo", "evals", "importers", "testing",
    ),
    "facade": ("engine", "__init__"),
    "features": ("sessions", "tasks", "vectors", "vector_source"),
    "assembly": ("assembly", "traces", "rules", "recordbook", "agents"),
    "adapters": ("stores", "embedders", "summarizers"),  # behind the ports: core only
    "core": (
        "records", "tokens", "budget", "roles", "text", "errors", "ids", "settings", "ports",
        "gate", "heap",
    ),
}  # fmt: skip
RANK = {part: len(LAYERS) - i for i, parts in enumerate(LAYERS.values()) for part in parts}


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = modules()


def imports(name: str) -> set[str]:
    """Every module of the package that `name` imports, wherever the import statement is."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            mod = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            targets = [f"{mod}.{a.name}" for a in node.names] + [mod or ""]
        for t in targets:
            while t and t not in MODULES and "." in t:
                t = t.rpartition(".")[0]
            if t in MODULES and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


GRAPH = {name: imports(name) for name in MODULES}


def layer_part(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer() -> None:
    assert sorted({layer_part(m) for m in MODULES} - set(RANK)) == []


def test_imports_point_down_the_layers() -> None:
    up = sorted(
        f"{m} ({layer_part(m)}) imports {t} ({layer_part(t)})"
        for m, targets in GRAPH.items()
        for t in targets
        if RANK[layer_part(t)] > RANK[layer_part(m)]
    )
    assert up == []


def test_no_import_cycles() -> None:
    # Tarjan's strongly connected components; any of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
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
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_graph_counts_every_import() -> None:
    """The graph builder counts deferred and TYPE_CHECKING imports (else the tests above could
    pass on a package full of cycles)."""
    assert "contextwright.engine" not in GRAPH["contextwright.sessions.manager"]
    assert "contextwright.assembly.run" in GRAPH["contextwright.sessions.host"]  # TYPE_CHECKING
    assert "contextwright.sessions" in GRAPH["contextwright.engine"]


def test_engine_is_a_facade() -> None:
    assert len((ROOT / "engine.py").read_text().splitlines()) <= 300


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_over_500_lines(name: str) -> None:
    assert len(MODULES[name].read_text().splitlines()) <= 500
