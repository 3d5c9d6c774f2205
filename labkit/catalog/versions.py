"""The shared tool catalog as an append-only log of versions 0, 1, 2, ..., on SQLite or PostgreSQL.

Version 0 is the genesis record. The head (largest version) *is* the committed watermark:
there is no second counter that could drift from it. `CatalogReader` is the independent
reader that remembers the last head it saw and refuses to accept a head that fell.
Every function takes a sqlite3 or a psycopg connection and picks its dialect when it is entered
(`labkit.backend`). Every statement is written here once, in SQLite's placeholder style; where
the backends differ, both are here side by side (the tables, the reader's row lock), and what
only PostgreSQL does around them (the schema lock, the key added to old logs) is in
`labkit.catalog.versions_pg`. Every store's schema is made by `making`, which first refuses a
table of one of the store's names that is someone else's (`require_columns`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import labkit.catalog.versions_pg as versions_pg
from labkit import backend
from labkit.backend import Connection, Dialect
from labkit.db import immediate

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Schema:
    """A store's tables and indexes on each backend, side by side (`making` makes them, and
    refuses a table of the same name that is already there with other columns)."""

    sqlite: tuple[str, ...]
    postgres: versions_pg.Tables

    def require_own(self, conn: Connection) -> None:
        """`require_columns` for these tables alone, read-only: what a store opening several
        schemas checks first, so a foreign table is refused before anything is made."""
        d = backend.dialect(conn)
        with d.reading(conn):
            require_columns(conn, self.postgres.ddl if d.is_postgres else self.sqlite)


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
_CREATE_TABLE = re.compile(r"\s*CREATE TABLE IF NOT EXISTS (\w+) \((.*)\)\s*\Z", re.DOTALL)
# What a table's definition may list besides columns.
_TABLE_CONSTRAINTS = frozenset({"CHECK", "CONSTRAINT", "EXCLUDE", "FOREIGN", "PRIMARY", "UNIQUE"})


READER_TABLE = """CREATE TABLE IF NOT EXISTS catalog_reader_state (
    reader    TEXT    PRIMARY KEY,
    last_seen INTEGER NOT NULL
)"""
READER = Schema(
    sqlite=(READER_TABLE,),
    postgres=versions_pg.Tables(
        ddl=(
            """CREATE TABLE IF NOT EXISTS catalog_reader_state (
    reader    text   PRIMARY KEY,
    last_seen bigint NOT NULL
)""",
        ),
        names=("catalog_reader_state",),
        lock="labkit.catalog.versions:",
    ),
)
CATALOG = Schema(
    sqlite=(
        """CREATE TABLE IF NOT EXISTS catalog_versions (
    version      INTEGER PRIMARY KEY CHECK (version >= 0),
    tools        TEXT    NOT NULL,
    tools_hash   TEXT    NOT NULL,
    ballot_id    INTEGER UNIQUE,
    base_version INTEGER,
    committed_at REAL    NOT NULL,
    CHECK ((version = 0 AND base_version IS NULL AND ballot_id IS NULL)
        OR (version > 0 AND base_version = version - 1 AND ballot_id IS NOT NULL))
)""",
        READER_TABLE,
    ),
    # PostgreSQL's log also refuses a version whose base is missing: a commit tried before any
    # read relies on it (`labkit.catalog.loop.COMMIT`).
    postgres=versions_pg.LogTables(
        ddl=(
            f"""CREATE TABLE IF NOT EXISTS catalog_versions (
    version      bigint PRIMARY KEY CHECK (version >= 0),
    tools        text   NOT NULL,
    tools_hash   text   NOT NULL,
    ballot_id    bigint UNIQUE,
    base_version bigint CONSTRAINT {versions_pg.BASE_KEY} REFERENCES catalog_versions (version),
    committed_at double precision NOT NULL,
    CHECK ((version = 0 AND base_version IS NULL AND ballot_id IS NULL)
        OR (version > 0 AND base_version = version - 1 AND ballot_id IS NOT NULL))
)""",
            *READER.postgres.ddl,
        ),
        names=("catalog_versions", *READER.postgres.names),
        lock=READER.postgres.lock,
    ),
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
    """SHA-256 of a body already in canonical JSON (`tools_json`): `tools_hash` without re-encoding."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@contextmanager
def making(conn: Connection, schema: Schema) -> Iterator[Dialect]:
    """One write transaction that makes `schema` if it is missing; it yields the connection's
    dialect, for the caller to add its first rows with. SQLite: BEGIN IMMEDIATE, and its DDL
    says IF NOT EXISTS. PostgreSQL: under the schema's lock, and no DDL at all on a store that
    is there (`versions_pg.Tables`)."""
    d = backend.dialect(conn)
    if d.is_postgres:
        with conn.transaction():
            require_columns(conn, schema.postgres.ddl)
            schema.postgres.make(conn)
            yield d
        return
    with immediate(conn):
        require_columns(conn, schema.sqlite)
        for statement in schema.sqlite:
            conn.execute(statement)
        yield d


@dataclass(frozen=True)
class Declared:
    """What one `CREATE TABLE IF NOT EXISTS` statement makes: the table, its columns, and the
    statement's text as SQLite keeps it in `sqlite_master` once it made the table."""

    table: str
    columns: tuple[str, ...]
    kept_as: str


@lru_cache(maxsize=64)
def declared(statement: str) -> Declared | None:
    """The table a `CREATE TABLE IF NOT EXISTS` statement makes and the columns it declares,
    read from the statement itself so the two cannot drift apart; None for other DDL."""
    found = _CREATE_TABLE.match(statement)
    if found is None:
        return None
    items, depth, quoted, start = [], 0, False, 0
    body = found.group(2)
    for i, ch in enumerate(body):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "()":
            depth += 1 if ch == "(" else -1
        elif not quoted and ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    names = (item.split()[0] for item in items if item.strip())
    columns = tuple(n for n in names if n.upper() not in _TABLE_CONSTRAINTS)
    kept_as = "CREATE TABLE " + statement.split(" IF NOT EXISTS ", 1)[1]
    return Declared(found.group(1), columns, kept_as)


def require_columns(conn: Connection, statements: Sequence[str]) -> None:
    """Refuse, in one line naming the table and the columns it lacks, a table that one of
    `statements` would make and that is already there without every column it declares
    (`ForeignTableError`). A missing table passes: its statement makes it. Cheap, as it runs
    at every open: on SQLite one read of the table list, where a table made by its very
    statement passes (any other has its columns read); on PostgreSQL one read of the columns."""
    d = backend.dialect(conn)
    specs = [spec for spec in map(declared, statements) if spec is not None]
    if d.is_postgres:
        found = d.execute(conn, PG_COLUMNS_SQL, ([spec.table for spec in specs],)).fetchall()
    else:
        kept = {name.lower(): sql for name, sql in conn.execute(SQLITE_TABLES_SQL)}
        others = [s.table for s in specs if kept.get(s.table.lower()) not in (None, s.kept_as)]
        found = [row for t in others for row in conn.execute(SQLITE_COLUMNS_SQL, (t, t))]
    present: dict[str, set[str]] = {}
    for table, column in found:
        present.setdefault(table, set()).add(str(column).lower())
    for spec in specs:
        have = present.get(spec.table)
        missing = [c for c in spec.columns if have and c.lower() not in have]
        if missing:
            raise ForeignTableError(
                f"{_store_name(conn, d)}table {spec.table} is there but is not this store's:"
                f" it has no column {', '.join(missing)}; open another database or rename"
                " that table"
            )


def _store_name(conn: Connection, d: Dialect) -> str:
    """The lead of an error message: a SQLite file's path and a colon, else nothing."""
    if d.is_postgres:
        return ""
    path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    return f"{path}: " if path else ""


def _read(conn: Connection, statement: str, params: Sequence[Any] = ()) -> list[Any]:
    """Every row of one read; on PostgreSQL the transaction the read opened is ended."""
    d = backend.dialect(conn)
    with d.reading(conn):
        return d.execute(conn, statement, params).fetchall()


def create_schema(
    conn: Connection, genesis_tools: Sequence[Any] = (), *, now: float | None = None
) -> None:
    """Create the catalog tables (idempotent, safe from many sessions at once) and the genesis
    version 0 if it is missing; on PostgreSQL give a log made before the base's key that key."""
    genesis = (tools_json(genesis_tools), tools_hash(genesis_tools), _now(now))
    with making(conn, CATALOG) as d:
        d.execute(conn, GENESIS_SQL, genesis)


def head(conn: Connection) -> int:
    """The committed head version (the watermark); -1 if the log has no genesis yet."""
    return head_of(_read(conn, HEAD_SQL)[0][0])


def head_of(value: Any) -> int:
    """The head from `MAX(version)` read inside another statement (None before genesis)."""
    return -1 if value is None else int(value)


def head_hash(conn: Connection) -> tuple[int, str]:
    """The head version and its tools' hash in one read ((-1, "") before genesis)."""
    rows = _read(conn, HEAD_HASH_SQL)
    return (-1, "") if not rows else (int(rows[0][0]), str(rows[0][1]))


def append(
    conn: Connection,
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
    backend.dialect(conn).execute(conn, APPEND_SQL, row)
    return row[0]


def version_row(text: str, ballot_id: int, base_version: int, now: float) -> tuple[Any, ...]:
    """The parameters of `APPEND_SQL` for the version after `base_version`, from a body
    already in canonical JSON (`tools_json`): version first, its hash third."""
    return (base_version + 1, text, json_hash(text), ballot_id, base_version, now)


def read_version(conn: Connection, version: int) -> CatalogVersion | None:
    """One record of the log, or None if that version does not exist."""
    rows = _read(conn, READ_VERSION_SQL, (version,))
    return _record(rows[0]) if rows else None


def history(conn: Connection) -> list[CatalogVersion]:
    """Every record of the log in version order."""
    return [_record(r) for r in _read(conn, HISTORY_SQL)]


def history_frame(conn: Connection) -> pd.DataFrame:
    """`history` as a table for reading: integer ballot and base columns, hashes shortened."""
    import pandas as pd

    frame = pd.DataFrame(history(conn))
    frame = frame.astype({"ballot_id": "Int64", "base_version": "Int64"})
    frame["tools_hash"] = frame["tools_hash"].str[:12]
    return frame[["version", "tools", "tools_hash", "ballot_id", "base_version"]]


def verify(conn: Connection) -> int:
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
        self, conn: Connection, name: str = "reader", *, state: Connection | None = None
    ) -> None:
        self.conn = conn
        self.state = conn if state is None else state
        self.name = backend.text_arg(name, "name", "CatalogReader")
        self._d = backend.dialect(self.state)
        if self._d.is_postgres:
            versions_pg.require_durable_commits(self.state, "CatalogReader")
            with self.state.transaction():
                require_columns(self.state, READER.postgres.ddl)
                READER.postgres.make(self.state)
            versions_pg.require_logged_tables(self.state, ["catalog_reader_state"], "CatalogReader")
        else:
            # One statement, no transaction of ours: if the table exists it takes no write lock.
            require_columns(self.state, READER.sqlite)
            self.state.execute(READER_TABLE)

    def last_seen(self) -> int | None:
        """The highest head this reader has recorded, or None before its first poll."""
        rows = _read(self.state, READER_SEEN_SQL, (self.name,))
        return int(rows[0][0]) if rows else None

    def poll(self) -> int:
        """Read the head; raise `RewindError` if it is below the last head seen, else record it.

        A transaction the caller has open on either connection stays open and uncommitted:
        the record is then a savepoint inside it.
        """
        current = head(self.conn)
        with self._d.atomic(self.state):
            check = READER_CHECK_SQL[self._d.name]
            row = self._d.execute(self.state, check, (self.name,)).fetchone()
            _refuse_fall(self.name, None if row is None else int(row[0]), current)
            self._d.execute(self.state, READER_RECORD_SQL, (self.name, current))
        return current


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
