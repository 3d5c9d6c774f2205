"""The import graph of `labkit`: no cycles (function-level imports included), and nothing inside
the package imports `labkit.ballot`, which is the public face only."""

from __future__ import annotations

import ast
from pathlib import Path

import labkit

PACKAGE_DIR = Path(labkit.__file__).resolve().parent
PUBLIC_FACE = "labkit.ballot"
# Each part's face: the subpackage itself (its __init__) and the two top-level face modules.
# Code inside labkit imports the module that defines a name, never a face, so a face can
# gather names from anywhere without closing an import cycle.
FACES = (
    "labkit.frontier",
    "labkit.catalog",
    "labkit.designs",
    "labkit.pg",
    "labkit.docs",
    "labkit.arrivals",
    PUBLIC_FACE,
    "labkit.remote",
)


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, via __init__)."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = ["labkit", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The labkit modules `name` imports anywhere in its source (top level, functions, guards)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets.add(base)
            targets.update(f"{base}.{alias.name}" for alias in node.names)
    return {t for t in targets if t in known and t != name}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imported_modules(name, path, set(files)) for name, path in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One concrete cycle (as a path that returns to its start) per cyclic strongly
    connected component, found by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, comp) for comp in components]


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path start -> ... -> start inside one strongly connected component (breadth first)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle in component {sorted(component)}")


def test_the_package_has_no_import_cycle() -> None:
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles in labkit: " + "; ".join(" -> ".join(c) for c in cycles)


def test_nothing_inside_labkit_imports_a_face() -> None:
    graph = import_graph()
    for face in FACES:
        importers = sorted(name for name, targets in graph.items() if face in targets)
        assert importers == [], f"{face} is a public face only; imported by {importers}"


def test_each_subpackage_face_only_hands_names_on() -> None:
    """A part's __init__ defines nothing: it imports from its own modules and lists __all__."""
    for face in FACES[:5]:
        path = module_files()[face]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        kinds = {type(node).__name__ for node in tree.body}
        assert kinds <= {"Expr", "ImportFrom", "Assign"}, f"{face} defines code: {kinds}"
        sources = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
        assert all(s.startswith(face + ".") for s in sources), f"{face} imports {sources}"


def test_the_graph_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The checker itself: relative, function-level and `from package import module` imports
    are edges; a cycle is found and named; an acyclic graph passes."""
    source = tmp_path / "x.py"
    source.write_text(
        "from . import y\nimport labkit.db\n\ndef f():\n    from .z import thing\n"
        "    from labkit import catalog\n"
    )
    known = {"labkit.plots.y", "labkit.plots.z", "labkit.db", "labkit.catalog", "labkit"}
    assert imported_modules("labkit.plots.x", source, known) == known  # "labkit": the package
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    files = module_files()
    ballot = imported_modules("labkit.ballot", files["labkit.ballot"], set(files))
    assert {"labkit.catalog.loop", "labkit.designs.simulator"} <= ballot  # inside a function
    crashlab = imported_modules(
        "labkit.catalog.crashlab", files["labkit.catalog.crashlab"], set(files)
    )
    assert {"labkit.catalog.crash_child", "labkit.db", "labkit.catalog.loop"} <= crashlab


def test_no_benchmark_imports_from_tests() -> None:
    """Benchmarks measure the product and share helpers through `benchmarks/` (the browser
    tests import `benchmarks.lab`), never the other way round."""
    found = {}
    for path in sorted((PACKAGE_DIR.parent / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found.update({f"{path.name}: {n}": n for n in names})
    assert any(n == "benchmarks.lab" for n in found.values())  # the reader sees imports
    assert [k for k, n in found.items() if n.split(".")[0] == "tests"] == []
