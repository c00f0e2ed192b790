"""The rooms' import graph: no module cycle (imports inside functions count), no module importing
another module's `_private` name, and the layering the project is built on (docs/contributing.md):
spec/ imports nothing of the project; impl/ never imports spec/ or checkers/; checkers/ never
import impl/; traces/ imports neither.

Read with `ast`, so every `import` statement counts wherever it stands: one inside a function
hides a cycle from the interpreter, not from this test."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spec", "impl", "checkers", "traces", "kafkaverify", "benchmarks")

# room -> rooms it must never import
FORBIDDEN = {
    "spec": {"impl", "checkers", "traces", "kafkaverify", "benchmarks"},
    "impl": {"spec", "checkers", "kafkaverify", "benchmarks"},
    "checkers": {"impl", "kafkaverify", "benchmarks"},
    "traces": {"spec", "impl", "checkers", "kafkaverify", "benchmarks"},
    "kafkaverify": {"benchmarks"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]):
    """(imported module, imported name or None, line) for every import statement of the module."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in modules:
                    yield submodule, None, node.lineno
                else:
                    yield target, alias.name, node.lineno


def _graph():
    modules = _modules()
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    private, layering = [], []
    for name, path in modules.items():
        room = name.split(".")[0]
        for target, imported, line in _imports(name, path, modules):
            top = target.split(".")[0]
            where = f"{path.relative_to(ROOT)}:{line}"
            if top in FORBIDDEN.get(room, ()):
                layering.append(f"{where}: {room}/ imports {target}")
            if target in modules and target != name:
                graph.add_edge(name, target)
                own_package = target == name.rsplit(".", 1)[0]   # a package's private parts are its own
                if imported and imported.startswith("_") and not imported.startswith("__") \
                        and not own_package:
                    private.append(f"{where}: imports {target}.{imported}")
    return graph, private, layering


@pytest.fixture(scope="module")
def import_graph():
    return _graph()


def test_the_rooms_have_no_import_cycle(import_graph):
    graph, _, _ = import_graph
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    described = [" <-> ".join(c) + f" (e.g. {' -> '.join(nx.find_cycle(graph.subgraph(c))[0])})"
                 for c in sorted(circles)]
    assert not circles, "import cycles:\n" + "\n".join(described)


def test_no_module_imports_another_modules_private_name(import_graph):
    _, private, _ = import_graph
    assert not private, "private names imported across modules:\n" + "\n".join(private)


def test_the_layering_holds(import_graph):
    _, _, layering = import_graph
    assert not layering, "layering broken:\n" + "\n".join(layering)


def test_the_graph_sees_imports_inside_functions(tmp_path):
    """The reader counts an import inside a function body (the test would pass vacuously if it
    read only module-level statements)."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from spec.model import _advance_hw\n")
    found = list(_imports("spec.m", module, {"spec.model": module}))
    assert found == [("spec.model", "_advance_hw", 2)]
