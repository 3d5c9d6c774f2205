"""The SQLite/PostgreSQL seam: one dialect per connection, statements written once."""

from __future__ import annotations

import sqlite3

import pytest

from labkit import backend


def test_a_sqlite_connection_gets_the_sqlite_dialect_and_statements_unchanged() -> None:
    conn = sqlite3.connect(":memory:")
    d = backend.dialect(conn)
    assert d is backend.SQLITE and not d.is_postgres
    text = "SELECT ? WHERE x = :key AND y LIKE '%?%'"
    assert d.sql(text) is text


@pytest.mark.parametrize(
    ("written", "rendered"),
    [
        ("SELECT a FROM t WHERE k = ? AND i > ?", "SELECT a FROM t WHERE k = %s AND i > %s"),
        ("SELECT :key, :base, :key", "SELECT %(key)s, %(base)s, %(key)s"),
        # literals and quoted names keep their ? and :name; every % is doubled for psycopg,
        # inside a literal too (psycopg reads the whole text for placeholders)
        (
            "SELECT '?', 'it''s :x', \"a?b\" WHERE s LIKE 'x%'",
            "SELECT '?', 'it''s :x', \"a?b\" WHERE s LIKE 'x%%'",
        ),
        ("SELECT 5 % 2, x::bigint", "SELECT 5 %% 2, x::bigint"),
    ],
)
def test_postgres_renders_placeholders_and_nothing_else(written: str, rendered: str) -> None:
    assert backend.POSTGRES.sql(written) == rendered


def test_by_position_numbers_the_names_and_changes_nothing_else() -> None:
    written = "SELECT :key, ':key', \"a:base\", x::bigint, 5 % 2 WHERE k = :key AND i > :base"
    numbered = backend.by_position(written, ("key", "base"))
    assert numbered == "SELECT ?1, ':key', \"a:base\", x::bigint, 5 % 2 WHERE k = ?1 AND i > ?2"
    conn = sqlite3.connect(":memory:")
    text = "SELECT :b - :a, ':a', :a"
    assert conn.execute(backend.by_position(text, ("a", "b")), (2, 7)).fetchone() == (
        conn.execute(text, {"a": 2, "b": 7}).fetchone()
    )
    for bad, names in (("SELECT ?", ("a",)), ("SELECT :a, :c", ("a",))):
        with pytest.raises(ValueError, match=r"^by_position: '(\?|:c)' in the statement"):
            backend.by_position(bad, names)


def test_anything_else_is_refused_in_one_line_naming_its_type() -> None:
    with pytest.raises(backend.UnsupportedBackend, match=r"got builtins\.dict") as info:
        backend.dialect({})
    assert "\n" not in str(info.value)


def test_require_names_the_function_and_the_backend() -> None:
    conn = sqlite3.connect(":memory:")
    assert backend.require(conn, "f", "sqlite", "postgres") is backend.SQLITE
    with pytest.raises(backend.UnsupportedBackend, match=r"^g works on postgres only; .* sqlite"):
        backend.require(conn, "g", "postgres")


def test_one_statement_runs_on_sqlite_through_the_dialect() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    d = backend.dialect(conn)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT)")
    new = d.insert_returning_id(conn, "INSERT INTO t (k) VALUES (?)", ("a",))
    d.executemany(conn, "INSERT INTO t (k) VALUES (?)", [("b",), ("c",)])
    assert new == 1
    assert d.execute(conn, "SELECT COUNT(*) FROM t WHERE k > :low", {"low": "a"}).fetchone() == (2,)


@pytest.mark.postgres
def test_a_literal_percent_runs_on_postgres_with_parameters(pg_dsn: str) -> None:
    """psycopg reads placeholders in the whole text, quotes or not: an undoubled % inside a
    literal was refused ("only '%s', '%b', '%t' are allowed as placeholders")."""
    from labkit.pg import instance as pg

    with pg.connect(pg_dsn) as conn:
        row = backend.POSTGRES.execute(
            conn, "SELECT 'answer 5' LIKE 'answer%', 7 % 2, CAST(:v AS int)", {"v": 3}
        ).fetchone()
    assert row == (True, 1, 3)
