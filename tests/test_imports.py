"""What the import contracts in pyproject.toml (`lint-imports`, run by `make lint` and `make test`)
cannot say: a part's face defines nothing, and nothing outside tests/ imports from tests/ (tests/
and site/ are no packages import-linter can read: tests/ is put on sys.path by pytest, and a
folder named `site` would shadow Python's own module)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# Everything that is not tests/: the package, the shared harness, the benchmarks, the site build.
OUTSIDE_TESTS = ("labkit", "harness", "benchmarks", "site")
# labkit.remote's face imports each name on first use (a module `__getattr__`), so that the reader
# process starts without loading the service: it defines that one function.
LAZY_FACES = {"labkit.remote"}


def faces() -> list[str]:
    """The faces the import contract forbids code inside labkit to import (pyproject.toml)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "forbidden" and c["source_modules"] == ["labkit.**"]
    ]
    return contract["forbidden_modules"]


def test_each_subpackage_face_only_hands_names_on() -> None:
    """A part's __init__ defines nothing: it imports from its own modules and lists __all__."""
    packages = [f for f in faces() if (ROOT / f.replace(".", "/") / "__init__.py").is_file()]
    assert {"labkit.frontier", "labkit.catalog", "labkit.exercises"} <= set(packages)
    for face in sorted(set(packages) - LAZY_FACES):
        path = ROOT / face.replace(".", "/") / "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        kinds = {type(node).__name__ for node in tree.body}
        assert kinds <= {"Expr", "ImportFrom", "Assign", "AnnAssign"}, f"{face} defines {kinds}"
        sources = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
        sources.discard("__future__")
        assert all(s == face or s.startswith(face + ".") for s in sources), (face, sources)


def modules_in_tests() -> set[str]:
    """The names a module in tests/ is imported by: `tests...`, or its bare name (tests/ on
    sys.path), e.g. `backends` or `browser`."""
    names = {"tests"}
    for path in TESTS.iterdir():
        if path.suffix == ".py" or (path.is_dir() and any(path.glob("*.py"))):
            names.add(path.stem)
    return names


def reaches_into_tests(source: str, filename: str, names: set[str]) -> list[str]:
    """Each import in `source` (top level, functions, guards) of a module that lives in tests/,
    and each `sys.path` change that names the tests folder, as `file:line: what`."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            modules = [node.module or ""]
        found += [
            f"{filename}:{node.lineno}: imports {m}" for m in modules if m.split(".")[0] in names
        ]
        if isinstance(node, ast.Call) and "sys.path" in ast.unparse(node.func):
            if any(isinstance(n, ast.Constant) and n.value == "tests" for n in ast.walk(node)):
                found.append(f"{filename}:{node.lineno}: puts tests/ on sys.path")
    return found


def test_nothing_outside_tests_imports_from_tests() -> None:
    """Harness code the site, the benchmarks and the tests share lives in harness/, which any of
    them may import; tests/ holds what only tests use."""
    names = modules_in_tests()
    assert {"conftest", "backends", "browser", "tests"} <= names
    found = [
        hit
        for folder in OUTSIDE_TESTS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for hit in reaches_into_tests(
            path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), names
        )
    ]
    assert found == [], "code outside tests/ imports from tests/:\n" + "\n".join(found)


def test_the_scan_sees_every_way_into_tests() -> None:
    """The checker itself: plain, `from`, function-level and package imports, and a sys.path
    change, are each found; an import of the harness or of labkit is not."""
    source = (
        "import sys\nfrom pathlib import Path\nimport backends\nfrom tests.browser import jlab\n"
        "from harness.nbrun import execute_notebook\nimport labkit.db\n\ndef f():\n"
        "    from worked_answers import OPEN\n"
        "    sys.path.append(str(Path(__file__).parent.parent / 'tests'))\n"
    )
    found = reaches_into_tests(source, "x.py", {"tests", "backends", "worked_answers"})
    assert found == [
        "x.py:3: imports backends",
        "x.py:4: imports tests.browser",
        "x.py:9: imports worked_answers",
        "x.py:10: puts tests/ on sys.path",
    ]
