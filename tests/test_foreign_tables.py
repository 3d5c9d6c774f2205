"""A store opened where a table of one of its names is already someone else's (issue 35): every
schema the catalog makes refuses it when it opens, in one line naming the table and the
columns it lacks, instead of failing later on a statement ("no such column: ballot_id")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from backends import BACKENDS, open_store, rows

import labkit.catalog.hold as hold
import labkit.catalog.loop as loop
import labkit.catalog.versions as catalog
from labkit import backend, db, store
from labkit.ballot import WatermarkLoop

SCHEMAS = {
    "catalog": catalog.CATALOG,
    "reader": catalog.READER,
    "ballots": loop.BALLOTS,
    "hold": hold.HELD_TABLE,
}
# Each table, and what opens it: the loop makes the log and the ballot store, then the hold.
OPENERS: dict[str, Callable[[Any], Any]] = {
    "catalog_versions": WatermarkLoop,
    "wm_ballots": WatermarkLoop,
    "wm_responses": WatermarkLoop,
    "wm_store": WatermarkLoop,
    "wm_held": hold.create,
    "catalog_reader_state": catalog.CatalogReader,
}


def _commit(conn: Any, statement: str) -> None:
    conn.execute(statement)
    if backend.dialect(conn).is_postgres:
        conn.commit()


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("table", list(OPENERS))
def test_someone_elses_table_is_refused_by_name(
    request: pytest.FixtureRequest, backend_name: str, table: str
) -> None:
    store = open_store(request, backend_name)
    conn = store.connect()
    if table == "wm_held":  # the hold sits beside a ballot store
        WatermarkLoop(conn)
    _commit(conn, f"CREATE TABLE {table} (id INTEGER, note TEXT)")
    _commit(conn, f"INSERT INTO {table} VALUES (7, 'theirs')")
    with pytest.raises(catalog.ForeignTableError) as info:
        OPENERS[table](conn)
    message = str(info.value)
    assert "\n" not in message
    assert f"table {table} is there but is not this store's: it has no column" in message
    wanted = next(
        t.columns_on(backend_name)
        for schema in SCHEMAS.values()
        for t in schema.tables
        if t.name == table
    )
    assert message.split("no column ")[1].split(";")[0] == ", ".join(c for c in wanted if c != "id")
    if backend_name == "sqlite":
        assert message.startswith(f"{request.getfixturevalue('tmp_path') / 'wm.db'}: ")
    assert rows(conn, f"SELECT * FROM {table}") == [(7, "theirs")]  # their table is untouched


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_a_table_with_every_column_made_by_other_text_still_opens(
    request: pytest.FixtureRequest, backend_name: str
) -> None:
    """A ballot table made by an older statement (other spacing, no CHECK) with a column more:
    not this statement's text, so its columns are read, and it has all of them."""
    conn = open_store(request, backend_name).connect()
    _commit(
        conn,
        "CREATE TABLE wm_ballots (ballot_id INTEGER PRIMARY KEY, observed_watermark INTEGER"
        " NOT NULL, base_version INTEGER NOT NULL, replay_of INTEGER, status TEXT NOT NULL,"
        " reason TEXT, reserved_at REAL NOT NULL, decided_at REAL, note TEXT)",
    )
    lp = WatermarkLoop(conn)
    b = lp.reserve()
    assert lp.apply(b.answer(["t"])).committed


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_both_backends_declare_the_same_columns_and_sqlite_keeps_the_statement(
    name: str,
) -> None:
    """The columns come from one spec per table, rendered for each backend: both have the same
    ones. On SQLite a table made by its statement passes on one read of the table list, which
    needs SQLite to keep that statement's text exactly as the spec renders it."""
    schema = SCHEMAS[name]
    assert schema.tables
    for t in schema.tables:
        assert t.columns_on("sqlite") == t.columns_on("postgres")
        assert len(t.columns_on("sqlite")) >= 2
    conn = db.connect()
    for statement in schema.ddl(store.Store(conn)):
        conn.execute(statement)
    kept = dict(conn.execute(catalog.SQLITE_TABLES_SQL).fetchall())
    rendered = {t.name: t.ddl("sqlite", if_not_exists=False) for t in schema.tables}
    assert rendered == {t.name: kept[t.name] for t in schema.tables}


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("table", ["wm_ballots", "wm_held"])
def test_a_foreign_ballot_or_hold_table_is_refused_before_anything_is_made(
    request: pytest.FixtureRequest, backend_name: str, table: str
) -> None:
    """The loop checks its ballot tables, and the pipelined loop its hold, before it makes the
    catalog: a refused open leaves the database as it found it."""
    from labkit.catalog.pipeline import PipelinedLoop

    store = open_store(request, backend_name)
    conn = store.connect()
    _commit(conn, f"CREATE TABLE {table} (id INTEGER, note TEXT)")
    with pytest.raises(catalog.ForeignTableError, match=f"table {table} is there"):
        PipelinedLoop(conn, 2)
    if backend_name == "sqlite":
        made = rows(conn, "SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        made = rows(conn, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    assert made == [(table,)]
