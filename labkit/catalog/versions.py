"""The shared tool catalog as an append-only log of versions 0, 1, 2, ..., on SQLite or PostgreSQL.

Version 0 is the genesis record. The head (largest version) *is* the committed watermark:
there is no second counter that could drift from it. `CatalogReader` is the independent
reader that remembers the last head it saw and refuses to accept a head that fell.
Every function takes a sqlite3 or a psycopg connection, or a store handle (`labkit.store`), and
wraps a connection once. Every statement is written here once, in SQLite's placeholder style;
where the backends differ, both are here side by side (the tables, how a schema is made and
checked, the reader's row lock), and what only PostgreSQL does around them (the schema lock,
the key added to old logs) is in `labkit.catalog.versions_pg`. Every store's schema is made by
`making`, which first refuses a table of one of the store's names that is someone else's
(`require_columns`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import labkit.catalog.tables as tables
import labkit.catalog.versions_pg as versions_pg
from labkit import store, validation
from labkit.backend import Connection
from labkit.db import immediate
from labkit.schema import Table
from labkit.store import Store

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Schema:
    """A store's tables (specs, `labkit.catalog.tables`: each renders both backends' DDL, its
    indexes' too) and the key of the lock PostgreSQL makes them under. `making` makes them, and
    refuses a table of the same name that is already there with other columns; on PostgreSQL
    it then runs `upgrade`, if any, on a store an older labkit made."""

    tables: tuple[Table, ...]
    lock: str
    upgrade: Callable[[Any], None] | None = None

    def ddl(self, s: Store) -> tuple[str, ...]:
        """The statements that make these tables on `s`'s backend, each table's indexes after it."""
        return tuple(statement for t in self.tables for statement in t.statements(s.name))

    def names(self, s: Store) -> tuple[str, ...]:
        """Every table and index the statements make on `s`'s backend."""
        return tuple(name for t in self.tables for name in t.names(s.name))

    def require_own(self, conn: Connection | Store) -> None:
        """`require_columns` for these tables alone, read-only: what a store opening several
        schemas checks first, so a foreign table is refused before anything is made."""
        s = store.of(conn)
        with s.reading():
            require_columns(s, self.tables)


class ForeignTableError(RuntimeError):
    """A table a store makes is already there without the columns the store declares: someone
    else's table of that name, which the store's statements cannot use."""


# The columns the tables named have, one row each (table, column); none for a missing table
# (`require_columns`). SQLite: one table; PostgreSQL: every table named, in one statement.
SQLITE_COLUMNS_SQL = "SELECT ?, name FROM pragma_table_info(?)"
PG_COLUMNS_SQL = (
    "SELECT t.name, a.attname FROM unnest(CAST(? AS text[])) AS t (name)"
    " JOIN pg_attribute AS a ON a.attrelid = to_regclass(t.name)"
    " WHERE a.attnum > 0 AND NOT a.attisdropped"
)
# Every SQLite table and the text of the statement that made it (kept without IF NOT EXISTS).
SQLITE_TABLES_SQL = "SELECT name, sql FROM sqlite_master WHERE type = 'table'"

READER = Schema((tables.CATALOG_READER_STATE,), lock="labkit.catalog.versions:")
# The reader's table on SQLite, made by one statement of its own (`CatalogReader`).
READER_TABLE = tables.CATALOG_READER_STATE.ddl("sqlite")
# PostgreSQL also gives a log made before the base's key that key (`versions_pg.add_base_key`).
CATALOG = Schema(
    (tables.CATALOG_VERSIONS, tables.CATALOG_READER_STATE),
    lock=READER.lock,
    upgrade=versions_pg.add_base_key,
)
# Every insert is written INSERT ... SELECT, so that a guarded write (`labkit.catalog.loop`)
# can make it select FROM its guard.
APPEND_SQL = (
    "INSERT INTO catalog_versions (version, tools, tools_hash, ballot_id, base_version,"
    " committed_at)\n    SELECT ?, ?, ?, ?, ?, ?"
)
GENESIS_SQL = (
    "INSERT INTO catalog_versions (version, tools, tools_hash, ballot_id, base_version,"
    " committed_at) VALUES (0, ?, ?, NULL, NULL, ?) ON CONFLICT (version) DO NOTHING"
)
HEAD_SQL = "SELECT MAX(version) FROM catalog_versions"
HEAD_HASH_SQL = "SELECT version, tools_hash FROM catalog_versions ORDER BY version DESC LIMIT 1"
_RECORDS = (
    "SELECT version, tools, tools_hash, ballot_id, base_version, committed_at FROM catalog_versions"
)
READ_VERSION_SQL = _RECORDS + " WHERE version = ?"
HISTORY_SQL = _RECORDS + " ORDER BY version"
READER_SEEN_SQL = "SELECT last_seen FROM catalog_reader_state WHERE reader = ?"
# A poll's check and record: PostgreSQL locks the reader's row, so two pollers under one name
# cannot interleave; SQLite's BEGIN IMMEDIATE already holds the file's write lock.
READER_CHECK_SQL = {"sqlite": READER_SEEN_SQL, "postgres": READER_SEEN_SQL + " FOR UPDATE"}
READER_RECORD_SQL = (
    "INSERT INTO catalog_reader_state (reader, last_seen) VALUES (?, ?)"
    " ON CONFLICT (reader) DO UPDATE SET last_seen = excluded.last_seen"
)


class RewindError(RuntimeError):
    """The catalog head a reader sees is lower than one it saw before."""


class CatalogCorruptError(RuntimeError):
    """The version log is not contiguous, a stored body is not valid JSON, or a hash is wrong."""


@dataclass(frozen=True)
class CatalogVersion:
    """One record of the append-only catalog log."""

    version: int
    tools: list[Any]
    tools_hash: str
    ballot_id: int | None
    base_version: int | None
    committed_at: float


def tools_json(tools: Sequence[Any]) -> str:
    """Canonical, standard JSON for a tool list, so equal lists always hash the same.

    NaN and infinities are refused (`ValueError`): they are not JSON, and no reader could
    load them back.
    """
    return json.dumps(list(tools), sort_keys=True, separators=(",", ":"), allow_nan=False)


def tools_hash(tools: Sequence[Any]) -> str:
    """SHA-256 content hash of a tool list (hex)."""
    return json_hash(tools_json(tools))


def json_hash(text: str) -> str:
    """SHA-256 of a body already in canonical JSON (`tools_json`): `tools_hash`, not re-encoded."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@contextmanager
def making(conn: Connection | Store, schema: Schema) -> Iterator[Store]:
    """One write transaction that makes `schema` if it is missing; it yields the store handle,
    for the caller to add its first rows with. SQLite: BEGIN IMMEDIATE, and its DDL says IF NOT
    EXISTS. PostgreSQL: under the schema's lock, and no DDL at all on a store that is there
    (`versions_pg.make`)."""
    s = store.of(conn)
    with s.pick(_SCHEMAS_ON).making(s, schema):
        yield s


class _SchemasOnSQLite:
    """How SQLite makes a store's schema and reads what a database already has."""

    @staticmethod
    @contextmanager
    def making(s: Store, schema: Schema) -> Iterator[None]:
        """BEGIN IMMEDIATE, then the DDL (IF NOT EXISTS)."""
        with immediate(s.conn):
            require_columns(s, schema.tables)
            for statement in schema.ddl(s):
                s.conn.execute(statement)
            yield

    @staticmethod
    def columns(s: Store, specs: Sequence[Table]) -> list[tuple[str, str]]:
        """(table, column) of each table of `specs` that is there, made by other text: one
        read of the table list, where a table made by its very statement passes."""
        kept = {name.lower(): sql for name, sql in s.conn.execute(SQLITE_TABLES_SQL)}
        others = [t.name for t in specs if kept.get(t.name.lower()) not in (None, _kept_as(t))]
        return [row for t in others for row in s.conn.execute(SQLITE_COLUMNS_SQL, (t, t))]

    @staticmethod
    def lead(s: Store) -> str:
        """The lead of an error message: the file's path and a colon."""
        main = (row[2] for row in s.conn.execute("PRAGMA database_list") if row[1] == "main")
        path = next(main, "")
        return f"{path}: " if path else ""


class _SchemasOnPostgres:
    """How PostgreSQL makes a store's schema (`versions_pg.make`) and reads what a database
    already has."""

    @staticmethod
    @contextmanager
    def making(s: Store, schema: Schema) -> Iterator[None]:
        """A transaction, the schema's lock, and no DDL on a store that is all there; then
        the schema's `upgrade`."""
        with s.conn.transaction():
            require_columns(s, schema.tables)
            versions_pg.make(s.conn, schema.ddl(s), schema.names(s), schema.lock)
            if schema.upgrade is not None:
                schema.upgrade(s.conn)
            yield

    @staticmethod
    def columns(s: Store, specs: Sequence[Table]) -> list[tuple[str, str]]:
        """(table, column) of each table of `specs` that is there: one read."""
        return s.execute(PG_COLUMNS_SQL, ([t.name for t in specs],)).fetchall()

    @staticmethod
    def lead(s: Store) -> str:
        return ""


_SCHEMAS_ON: dict[str, type[_SchemasOnSQLite | _SchemasOnPostgres]] = {
    "sqlite": _SchemasOnSQLite,
    "postgres": _SchemasOnPostgres,
}


@functools.cache
def _kept_as(table: Table) -> str:
    """The text SQLite keeps for `table` once its statement made it (no IF NOT EXISTS)."""
    return table.ddl("sqlite", if_not_exists=False)


def require_columns(conn: Connection | Store, specs: Sequence[Table]) -> None:
    """Refuse, in one line naming the table and the columns it lacks, a table of `specs` that
    is already there without every column its spec declares on this backend
    (`ForeignTableError`). A missing table passes: its statement makes it. Cheap, as it runs
    at every open: on SQLite one read of the table list, where a table made by its very
    statement passes (any other has its columns read); on PostgreSQL one read of the columns."""
    s = store.of(conn)
    on = s.pick(_SCHEMAS_ON)
    present: dict[str, set[str]] = {}
    for table, column in on.columns(s, specs):
        present.setdefault(table, set()).add(str(column).lower())
    for spec in specs:
        have = present.get(spec.name)
        missing = [c for c in spec.columns_on(s.name) if have and c.lower() not in have]
        if missing:
            raise ForeignTableError(
                f"{on.lead(s)}table {spec.name} is there but is not this store's:"
                f" it has no column {', '.join(missing)}; open another database or rename"
                " that table"
            )


def _read(conn: Connection | Store, statement: str, params: Sequence[Any] = ()) -> list[Any]:
    """Every row of one read; on PostgreSQL the transaction the read opened is ended."""
    return store.of(conn).fetchall(statement, params)


def create_schema(
    conn: Connection | Store, genesis_tools: Sequence[Any] = (), *, now: float | None = None
) -> None:
    """Create the catalog tables (idempotent, safe from many sessions at once) and the genesis
    version 0 if it is missing; on PostgreSQL give a log made before the base's key that key."""
    genesis = (tools_json(genesis_tools), tools_hash(genesis_tools), _now(now))
    with making(conn, CATALOG) as s:
        s.execute(GENESIS_SQL, genesis)


def head(conn: Connection | Store) -> int:
    """The committed head version (the watermark); -1 if the log has no genesis yet."""
    return head_of(_read(conn, HEAD_SQL)[0][0])


def head_of(value: Any) -> int:
    """The head from `MAX(version)` read inside another statement (None before genesis)."""
    return -1 if value is None else int(value)


def head_hash(conn: Connection | Store) -> tuple[int, str]:
    """The head version and its tools' hash in one read ((-1, "") before genesis)."""
    rows = _read(conn, HEAD_HASH_SQL)
    return (-1, "") if not rows else (int(rows[0][0]), str(rows[0][1]))


def append(
    conn: Connection | Store,
    tools: Sequence[Any],
    ballot_id: int,
    base_version: int,
    *,
    now: float | None = None,
) -> int:
    """Append version `base_version + 1`; the caller must hold the write transaction.

    The table's primary key and CHECK refuse a second record for the same version or a
    record whose base is not its predecessor, so a bug here cannot fork the log.
    """
    row = version_row(tools_json(tools), ballot_id, base_version, _now(now))
    store.of(conn).execute(APPEND_SQL, row)
    return row[0]


def version_row(text: str, ballot_id: int, base_version: int, now: float) -> tuple[Any, ...]:
    """The parameters of `APPEND_SQL` for the version after `base_version`, from a body
    already in canonical JSON (`tools_json`): version first, its hash third."""
    return (base_version + 1, text, json_hash(text), ballot_id, base_version, now)


def read_version(conn: Connection | Store, version: int) -> CatalogVersion | None:
    """One record of the log, or None if that version does not exist."""
    rows = _read(conn, READ_VERSION_SQL, (version,))
    return _record(rows[0]) if rows else None


def history(conn: Connection | Store) -> list[CatalogVersion]:
    """Every record of the log in version order."""
    return [_record(r) for r in _read(conn, HISTORY_SQL)]


def history_frame(conn: Connection | Store) -> pd.DataFrame:
    """`history` as a table for reading: integer ballot and base columns, hashes shortened."""
    import pandas as pd

    frame = pd.DataFrame(history(conn))
    frame = frame.astype({"ballot_id": "Int64", "base_version": "Int64"})
    frame["tools_hash"] = frame["tools_hash"].str[:12]
    return frame[["version", "tools", "tools_hash", "ballot_id", "base_version"]]


def verify(conn: Connection | Store) -> int:
    """Check the log is 0..n with no hole, each base is its predecessor and each hash matches.

    Returns the head; raises `CatalogCorruptError` naming the first bad version.
    """
    records = history(conn)
    for expected, rec in enumerate(records):
        if rec.version != expected:
            raise CatalogCorruptError(f"version {expected} missing (found {rec.version})")
        if rec.tools_hash != tools_hash(rec.tools):
            raise CatalogCorruptError(f"version {rec.version}: tools_hash does not match tools")
        if expected > 0 and rec.base_version != expected - 1:
            raise CatalogCorruptError(f"version {rec.version}: base_version {rec.base_version}")
    return len(records) - 1


class CatalogReader:
    """An independent reader that persists the last head it saw and detects a fall.

    The last head lives in table `catalog_reader_state` under `name`, on `state` (a separate
    connection or file, of either backend) or else on `conn` itself, so the check survives
    process restarts. The check and the record are one transaction on `state`, so two pollers
    under one name cannot interleave. The record is durable when `poll` returns (on
    PostgreSQL a `state` with `synchronous_commit = off` is refused), so a crash of the server
    that holds it cannot roll the mark back: a fall that crash causes in the catalog is seen
    at the next poll. What no poll can see: a fall and a climb back between two polls.
    """

    def __init__(
        self,
        conn: Connection | Store,
        name: str = "reader",
        *,
        state: Connection | Store | None = None,
    ) -> None:
        self._catalog = store.of(conn)
        self._state = self._catalog if state is None else store.of(state)
        self.conn = self._catalog.conn
        self.state = self._state.conn
        self.name = validation.text_arg(name, "name", "CatalogReader")
        self._state.pick(_READER_STATE_ON)(self._state)

    def last_seen(self) -> int | None:
        """The highest head this reader has recorded, or None before its first poll."""
        rows = _read(self._state, READER_SEEN_SQL, (self.name,))
        return int(rows[0][0]) if rows else None

    def poll(self) -> int:
        """Read the head; raise `RewindError` if it is below the last head seen, else record it.

        A transaction the caller has open on either connection stays open and uncommitted:
        the record is then a savepoint inside it.
        """
        current = head(self._catalog)
        s = self._state
        with s.atomic():
            row = s.execute(s.pick(READER_CHECK_SQL), (self.name,)).fetchone()
            _refuse_fall(self.name, None if row is None else int(row[0]), current)
            s.execute(READER_RECORD_SQL, (self.name, current))
        return current


def _reader_state_on_sqlite(s: Store) -> None:
    """Make the reader's table: one statement, no transaction of ours, so if the table exists
    it takes no write lock."""
    require_columns(s, READER.tables)
    s.conn.execute(READER_TABLE)


def _reader_state_on_postgres(s: Store) -> None:
    """Make the reader's table under its lock, on a session whose commits are durable when
    reported, and refuse a table a crash would empty."""
    versions_pg.require_durable_commits(s.conn, "CatalogReader")
    with s.conn.transaction():
        require_columns(s, READER.tables)
        versions_pg.make(s.conn, READER.ddl(s), READER.names(s), READER.lock)
    versions_pg.require_logged_tables(s.conn, ["catalog_reader_state"], "CatalogReader")


# Where a reader keeps its mark, made when it opens: each backend's way, side by side.
_READER_STATE_ON = {"sqlite": _reader_state_on_sqlite, "postgres": _reader_state_on_postgres}


def _refuse_fall(name: str, seen: int | None, current: int) -> None:
    if seen is not None and current < seen:
        raise RewindError(
            f"catalog rewound: reader {name!r} saw version {seen}, now sees {current}"
        )


def _record(row: tuple[Any, ...]) -> CatalogVersion:
    try:
        tools = json.loads(row[1], parse_constant=_not_json)
    except (TypeError, ValueError) as exc:
        raise CatalogCorruptError(
            f"version {row[0]}: stored tools are not valid JSON ({exc})"
        ) from None
    if not isinstance(tools, list):
        raise CatalogCorruptError(
            f"version {row[0]}: stored tools are a {type(tools).__name__}, not a list"
        )
    return CatalogVersion(row[0], tools, row[2], row[3], row[4], row[5])


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")


def _now(now: float | None) -> float:
    return time.time() if now is None else now
