"""One spec per table (issue 32): every table a store makes is a `labkit.schema.Table`, written
once, that renders both backends' DDL; where the backends differ the spec says so in one place.

The scans read labkit's source (never importing it): no `CREATE TABLE` is written by hand outside
the renderer (`labkit/schema.py`) but a lesson's scratch tables, and each table is specified once.
The rendering is checked on a small table of its own, and each real spec is made on SQLite and
on PostgreSQL and compared with what the spec says."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import labkit
import labkit.catalog.hold as hold
import labkit.catalog.loop as loop
import labkit.catalog.tables as catalog_tables
import labkit.catalog.versions as catalog
import labkit.frontier.log as fr
import labkit.frontier.log_pg as fpg
import labkit.frontier.tables as log_tables
from labkit import db, schema, store
from labkit.remote import head_row
from labkit.schema import FLAG, INTEGER, REAL, SERIAL_KEY, TEXT, XID8, Both, Column, Index, Table

LABKIT = Path(labkit.__file__).resolve().parent
RENDERER = "schema.py"
# The tables the workbook's stores make, each from one spec.
SPECIFIED = {
    "conversations",
    "checkpoints",
    "summaries",
    "summary_items",
    "catalog_versions",
    "catalog_reader_state",
    "wm_store",
    "wm_ballots",
    "wm_responses",
    "wm_held",
    "remote_head",
}
# DDL written by hand on purpose: a lesson's own scratch tables, shown to the learner as they are.
LESSONS = "exercises/"  # the exercises build scratch databases of their own (a `conversations`
# with more statuses, a two-tenant log, lesson 08's `tenant_catalog`)
LESSON_TABLES = {"naive_catalog"}  # part three's naive design (labkit.pg.ballots), shown failing
CREATE_TABLE = re.compile(
    r"^\s*CREATE\s+(?:TEMP(?:ORARY)?\s+|UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w*)",
    re.IGNORECASE | re.MULTILINE,
)
# Every spec, and the schema each store makes from them.
SPECS = (
    *log_tables.LOG,
    *catalog.CATALOG.tables,
    *loop.BALLOTS.tables,
    *hold.HELD_TABLE.tables,
    head_row.MIRROR,
)


def _sources() -> list[tuple[str, ast.AST]]:
    """(path inside labkit, syntax tree) of every module."""
    return [
        (p.relative_to(LABKIT).as_posix(), ast.parse(p.read_text(encoding="utf-8"), str(p)))
        for p in sorted(LABKIT.rglob("*.py"))
    ]


def hand_written_tables(sources: list[tuple[str, ast.AST]]) -> list[str]:
    """`path:line table` of every `CREATE TABLE` in a string of the source that is neither the
    renderer's nor a lesson's."""
    found = []
    for path, tree in sources:
        if path == RENDERER or path.startswith(LESSONS):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in CREATE_TABLE.findall(node.value):
                    if name not in LESSON_TABLES:
                        found.append(f"{path}:{node.lineno} {name or '(a formatted name)'}")
    return found


def specified_tables(sources: list[tuple[str, ast.AST]]) -> Counter[str]:
    """How often each table is specified: `Table("name", ...)` calls in the source."""
    names: Counter[str] = Counter()
    for _, tree in sources:
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Table"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names[node.args[0].value] += 1
    return names


def test_no_table_s_ddl_is_written_outside_the_specs() -> None:
    assert hand_written_tables(_sources()) == []


def test_each_table_is_specified_once() -> None:
    names = specified_tables(_sources())
    assert {n: c for n, c in names.items() if c > 1} == {}
    assert set(names) == SPECIFIED
    assert {t.name for t in SPECS} == SPECIFIED and len(SPECS) == len(SPECIFIED)


def test_the_scans_find_a_hand_written_table_and_a_second_spec(tmp_path: Path) -> None:
    """The checkers themselves: DDL in a constant, a script and an f-string is found, prose that
    names the statement and a lesson's table are not; a second spec of a table is counted."""
    source = (
        'ONE = "CREATE TABLE IF NOT EXISTS wm_store (id INTEGER)"\n'
        'SCRIPT = """\\nCREATE INDEX i ON t (a);\\ncreate temp table scratch (a);\\n"""\n'
        'def f(name):\n    return f"CREATE TABLE {name} (a)"\n'
        'DOC = "What a `CREATE TABLE` statement makes"\n'
        'NAIVE = "CREATE TABLE naive_catalog (id integer)"\n'
        'A = Table("wm_store", ())\nB = schema.Table("wm_store", ())\n'
    )
    tree = ast.parse(source)
    assert hand_written_tables([("catalog/x.py", tree)]) == [
        "catalog/x.py:1 wm_store",
        "catalog/x.py:2 scratch",
        "catalog/x.py:4 (a formatted name)",
    ]
    assert hand_written_tables([("exercises/x.py", tree), (RENDERER, tree)]) == []
    assert specified_tables([("x.py", tree)]) == Counter({"wm_store": 2})


def test_each_store_runs_the_ddl_its_specs_render() -> None:
    assert fr.SCHEMA_SQL == "\n" + schema.script(log_tables.LOG, "sqlite")
    assert fpg.SCHEMA_SQL.startswith("\n" + schema.script(log_tables.LOG, "postgres"))
    assert "CREATE TABLE" not in fpg.SCHEMA_SQL.split(schema.script(log_tables.LOG, "postgres"))[1]
    lite = store.Store(db.connect())
    assert catalog.CATALOG.ddl(lite) == (
        catalog_tables.CATALOG_VERSIONS.ddl("sqlite"),
        catalog_tables.CATALOG_READER_STATE.ddl("sqlite"),
    )
    assert catalog.READER_TABLE == catalog_tables.CATALOG_READER_STATE.ddl("sqlite")
    assert loop.BALLOTS.names(lite) == (
        "wm_store",
        "wm_ballots",
        "wm_ballots_inflight",
        "wm_responses",
        "wm_responses_one_commit",
    )


# --- the rendering, on a table of its own -------------------------------------------------------

SAMPLE = Table(
    "sample",
    (
        Column("id", INTEGER, (SERIAL_KEY,)),
        Column("name", TEXT, ("NOT NULL", "UNIQUE")),
        Column("ratio", REAL),
        Column("flag", FLAG, ("NOT NULL", "CHECK (flag IN (0, 1))")),
        Column(
            "state",
            TEXT,
            ("NOT NULL", "CHECK (state IN ('one', 'two', 'three', 'four', 'five', 'six'))"),
        ),
        Column("parent", INTEGER, (Both("", "REFERENCES sample (id)"),)),
        Column("xact_id", XID8, ("NOT NULL", "DEFAULT pg_current_xact_id()")),
    ),
    ("CHECK (ratio > 0)", Both("", "UNIQUE (name, parent)")),
    (
        Index("sample_by_name", "name, id", where="flag = 1"),
        Index("sample_one_state", "state", unique=True, only="postgres"),
    ),
)


def test_a_spec_renders_sqlite_s_ddl() -> None:
    assert SAMPLE.ddl("sqlite") == (
        "CREATE TABLE IF NOT EXISTS sample (\n"
        "    id     INTEGER PRIMARY KEY AUTOINCREMENT,\n"
        "    name   TEXT    NOT NULL UNIQUE,\n"
        "    ratio  REAL,\n"
        "    flag   INTEGER NOT NULL CHECK (flag IN (0, 1)),\n"
        "    state  TEXT    NOT NULL\n"
        "           CHECK (state IN ('one', 'two', 'three', 'four', 'five', 'six')),\n"
        "    parent INTEGER,\n"
        "    CHECK (ratio > 0)\n"
        ")"
    )
    assert SAMPLE.statements("sqlite")[1:] == (
        "CREATE INDEX IF NOT EXISTS sample_by_name\n    ON sample (name, id) WHERE flag = 1",
    )
    assert SAMPLE.columns_on("sqlite") == ("id", "name", "ratio", "flag", "state", "parent")
    assert SAMPLE.names("sqlite") == ("sample", "sample_by_name")
    assert SAMPLE.ddl("sqlite", if_not_exists=False).startswith("CREATE TABLE sample (\n")


def test_a_spec_renders_postgres_s_ddl() -> None:
    assert SAMPLE.ddl("postgres") == (
        "CREATE TABLE IF NOT EXISTS sample (\n"
        "    id      bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
        "    name    text     NOT NULL UNIQUE,\n"
        "    ratio   double precision,\n"
        "    flag    smallint NOT NULL CHECK (flag IN (0, 1)),\n"
        "    state   text     NOT NULL\n"
        "            CHECK (state IN ('one', 'two', 'three', 'four', 'five', 'six')),\n"
        "    parent  bigint   REFERENCES sample (id),\n"
        "    xact_id xid8     NOT NULL DEFAULT pg_current_xact_id(),\n"
        "    CHECK (ratio > 0),\n"
        "    UNIQUE (name, parent)\n"
        ")"
    )
    assert SAMPLE.statements("postgres")[1:] == (
        "CREATE INDEX IF NOT EXISTS sample_by_name\n    ON sample (name, id) WHERE flag = 1",
        "CREATE UNIQUE INDEX IF NOT EXISTS sample_one_state\n    ON sample (state)",
    )
    assert SAMPLE.columns_on("postgres")[-1] == "xact_id"
    assert SAMPLE.names("postgres") == ("sample", "sample_by_name", "sample_one_state")


def test_a_spec_with_a_column_twice_or_none_on_a_backend_is_refused() -> None:
    with pytest.raises(ValueError, match=r"table t: its columns on sqlite are \('a', 'a'\)"):
        Table("t", (Column("a", TEXT), Column("a", INTEGER)))
    with pytest.raises(ValueError, match=r"table t: its columns on sqlite are \(\)"):
        Table("t", (Column("x", XID8),))


def test_the_types_that_differ_are_named_once_for_both_backends() -> None:
    assert [(t.on("sqlite"), t.on("postgres")) for t in (INTEGER, TEXT, REAL, FLAG, XID8)] == [
        ("INTEGER", "bigint"),
        ("TEXT", "text"),
        ("REAL", "double precision"),
        ("INTEGER", "smallint"),
        (None, "xid8"),
    ]
    assert schema.on(SERIAL_KEY, "sqlite") == "PRIMARY KEY AUTOINCREMENT"
    assert schema.on("NOT NULL", "postgres") == "NOT NULL"


# --- each real spec, made on each backend ----------------------------------------------------


def _made_on_sqlite() -> Any:
    conn = db.connect()
    conn.executescript(schema.script(SPECS, "sqlite"))
    return conn


@pytest.mark.parametrize("table", SPECS, ids=lambda t: t.name)
def test_sqlite_makes_each_table_as_its_spec_says(table: Table) -> None:
    conn = _made_on_sqlite()
    columns = conn.execute(f"SELECT name, type FROM pragma_table_info('{table.name}')").fetchall()
    assert columns == [(c.name, c.type.sqlite) for c in table.columns if c.on("sqlite")]
    (kept,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table.name,)).fetchone()
    assert kept == table.ddl("sqlite", if_not_exists=False)
    indexes = {row[1] for row in conn.execute(f"PRAGMA index_list('{table.name}')")}
    assert {i.name for i in table.indexes_on("sqlite")} <= indexes


@pytest.mark.postgres
def test_postgres_makes_each_table_as_its_spec_says(pg_connect: Any) -> None:
    conn = pg_connect()
    with conn.transaction():
        for t in SPECS:  # the log's tables are already there (pg_connect made them)
            for statement in t.statements("postgres"):
                conn.execute(statement)
    for t in SPECS:
        columns = conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (t.name,),
        ).fetchall()
        assert columns == [(c.name, c.type.postgres) for c in t.columns if c.on("postgres")]
        for name in t.names("postgres"):
            assert conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is not None
    identity = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES' ORDER BY 1"
    ).fetchall()
    assert identity == [("conversations", "id"), ("summaries", "id"), ("wm_responses", "seq")]
    conn.rollback()
