"""The packages of petastream form layers: no import cycle between them, and each format sits
on the I/O layer, not on another format.

The graph is built from the source's AST (no import): every ``import``/``from`` of a
petastream module, lazy ones inside functions included (a lazy import is still a dependency;
it only defers the cost). A node is a subpackage (``petastream.mds``) or a top-level module
(``petastream.sources``).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import petastream

ROOT = Path(petastream.__file__).parent


def _node(module: str) -> str | None:
    """The package or top-level module ``module`` belongs to (None: not one of petastream's)."""
    parts = [p for p in module.split(".") if p != "__init__"]
    if parts[0] != "petastream" or len(parts) < 2:
        return None  # petastream itself: its __init__ imports lazily, by name
    name = parts[1]
    return name if (ROOT / name).is_dir() or (ROOT / f"{name}.py").exists() else None


def _imports(path: Path) -> set[str]:
    """The petastream modules ``path`` imports (relative imports resolved)."""
    package = list(path.relative_to(ROOT.parent).parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}  # `from petastream import mds`
    return {m for m in out if m.startswith("petastream")}


def package_graph() -> dict[str, set[str]]:
    """``{node: the nodes it imports}`` over every module of the package."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        here = _node(".".join(path.relative_to(ROOT.parent).with_suffix("").parts))
        if here is None:
            continue
        graph[here] |= {n for n in map(_node, _imports(path)) if n is not None and n != here}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_cycle_between_packages():
    cycle = _cycle(package_graph())
    assert cycle is None, "import cycle between petastream's packages: " + " -> ".join(cycle or [])


def test_formats_sit_on_the_io_layer_not_on_each_other():
    graph = package_graph()
    assert "mds" not in graph["parquet"], "parquet/ imports petastream.mds: move what it needs to storage/ or columns/"
    assert {"mds", "parquet", "delta"}.isdisjoint(graph["storage"] | graph["columns"])
    # the I/O layer and the column values import no format, loader or adapter
    allowed = {"errors", "checks", "parent_death", "stream", "columns"}
    assert graph["storage"] <= allowed, graph["storage"] - allowed
    assert graph["columns"] <= {"errors"}, graph["columns"]


def test_the_check_finds_cycles_and_lazy_imports():
    # the check is only as good as its walk: an import inside a function counts ...
    assert "mds" in package_graph()["sources"]  # resolve_source imports MDSDataset lazily
    # ... and a cycle through several packages is found
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
