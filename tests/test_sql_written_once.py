"""No SQL statement is written twice in labkit: each is a constant written once, in SQLite's
placeholder style, and `labkit.backend` renders it for psycopg (issue 17). Two statements that
are the same once placeholders (`?`, `?1`, `:name`, `%s`, `%(name)s`) and white space are
folded are one statement written twice, so a fix to one can miss the other.

Read with `ast`, never imported: module- and class-level assignments (a string, a tuple, list or
dict of strings, `+` of strings and of the module's own string constants) and every string
literal passed to a call (`conn.execute("...")`). A statement is data or schema SQL (SELECT,
INSERT, UPDATE, DELETE, CREATE, ALTER, DROP, WITH, EXPLAIN, in capitals); transaction control
and PRAGMA/VACUUM commands are one or two words with nothing to drift apart, and are not.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import labkit

PACKAGE_DIR = Path(labkit.__file__).resolve().parent
STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH|EXPLAIN)\b")
# psycopg's named and positional placeholders, SQLite's numbered, named and bare ones.
PLACEHOLDER = re.compile(r"%\(\w+\)s|%s|\?\d*|(?<![:\w]):[A-Za-z_]\w*")


def normalise(sql: str) -> str:
    """`sql` with every placeholder written `?`, `%%` as `%`, and white space folded."""
    return " ".join(PLACEHOLDER.sub("?", sql).replace("%%", "%").split())


def _strings(node: ast.expr, constants: dict[str, str]) -> Iterator[str]:
    """The strings an assigned value holds: literals, containers of them, `+` folded."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for item in node.elts:
            yield from _strings(item, constants)
    elif isinstance(node, ast.Dict):
        for value in node.values:
            yield from _strings(value, constants)
    elif isinstance(node, ast.BinOp) and (folded := _fold(node, constants)) is not None:
        yield folded  # a name alone is a use of a statement, not a second writing of it


def _fold(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The value of a `+` chain of string literals and the module's string constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left, constants), _fold(node.right, constants)
        return None if left is None or right is None else left + right
    return None


def statements_in(source: str, where: str) -> list[tuple[str, str]]:
    """(statement, "file:line") for every SQL statement written in one module's source."""
    tree = ast.parse(source)
    constants: dict[str, str] = {}
    found: list[tuple[str, str]] = []
    bodies = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in bodies:
        for node in body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if value is None:
                continue
            texts = list(_strings(value, constants))
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(texts) == 1 and isinstance(targets[0], ast.Name):
                constants[targets[0].id] = texts[0]
            found += [(t, f"{where}:{node.lineno}") for t in texts]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append((arg.value, f"{where}:{arg.lineno}"))
    return [(text, at) for text, at in found if STATEMENT.match(text)]


def written_twice(package: Path) -> dict[str, list[str]]:
    """Each statement written more than once under `package`, with every place it stands."""
    places: dict[str, list[str]] = defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        where = str(path.relative_to(package.parent))
        for text, at in statements_in(path.read_text(encoding="utf-8"), where):
            places[normalise(text)].append(at)
    return {sql: at for sql, at in places.items() if len(at) > 1}


def test_no_statement_is_written_twice_in_labkit() -> None:
    twice = written_twice(PACKAGE_DIR)
    lines = [f"{', '.join(at)}: {sql[:90]}" for sql, at in sorted(twice.items())]
    assert not twice, "statements written more than once:\n" + "\n".join(lines)


def test_the_scan_folds_every_placeholder_style_and_finds_each_kind_of_place(
    tmp_path: Path,
) -> None:
    """The checker itself: a constant, a class-level tuple, a `+` chain and a literal passed to
    execute are all read; the five placeholder styles and white space fold; a different
    statement, a sentence and a transaction command are not reported."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "lite.py").write_text(
        'BY_KEY = "SELECT v FROM t WHERE k = ? AND n > ?1"\n'
        'HEAD = "SELECT v FROM t "\n'
        'JOINED = HEAD + "WHERE k = :k AND n = :n"\n'
        'OTHER = "SELECT w FROM t WHERE k = ?"\n'
        "PLANS = (OTHER, BY_KEY)\n"
        'MESSAGE = "Select a shard first"\n'
        "def f(conn):\n"
        '    conn.execute("BEGIN IMMEDIATE")\n'
    )
    (package / "pg.py").write_text(
        "class Store:\n"
        '    SQL = ("SELECT v FROM t\\n WHERE k = %(k)s AND n > %s", "SELECT 1")\n'
        "def g(conn):\n"
        '    conn.execute("SELECT v FROM t WHERE k = %s AND n = %(n)s", {})\n'
        '    print("Select a shard first")\n'
        '    conn.execute("BEGIN IMMEDIATE")\n'
    )
    assert written_twice(package) == {
        "SELECT v FROM t WHERE k = ? AND n > ?": ["pkg/lite.py:1", "pkg/pg.py:2"],
        "SELECT v FROM t WHERE k = ? AND n = ?": ["pkg/lite.py:3", "pkg/pg.py:4"],
    }
