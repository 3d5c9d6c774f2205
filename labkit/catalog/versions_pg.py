"""The catalog log on PostgreSQL: its schema and the statements whose SQL differs from SQLite's.

`labkit.catalog.versions` dispatches here when it is handed a psycopg connection. The log is the same:
versions 0, 1, 2, ... with a primary key on the version, a CHECK that each base is its
predecessor and a foreign key that the predecessor exists, so two writers can never both store
a version and no version can sit above a missing one, whatever the code above does.
Bodies are stored as the same canonical JSON text SQLite stores, so their hashes agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS catalog_versions (
    version      bigint PRIMARY KEY CHECK (version >= 0),
    tools        text   NOT NULL,
    tools_hash   text   NOT NULL,
    ballot_id    bigint UNIQUE,
    base_version bigint CONSTRAINT catalog_versions_base_exists REFERENCES catalog_versions (version),
    committed_at double precision NOT NULL,
    CHECK ((version = 0 AND base_version IS NULL AND ballot_id IS NULL)
        OR (version > 0 AND base_version = version - 1 AND ballot_id IS NOT NULL))
);
CREATE TABLE IF NOT EXISTS catalog_reader_state (
    reader    text   PRIMARY KEY,
    last_seen bigint NOT NULL
)
"""
# CREATE TABLE IF NOT EXISTS is not safe against itself in two sessions at once (both may try
# to create the type); a transaction-level advisory lock keyed on the schema serialises them.
SCHEMA_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('labkit.catalog.versions:' || current_schema()))"
# A store made before the base's foreign key existed gets it when it is next opened. Any
# foreign key on the log counts (an earlier version of this module left it unnamed).
BASE_KEY = "catalog_versions_base_exists"
HAS_BASE_KEY_SQL = (
    "SELECT 1 FROM pg_constraint WHERE conrelid = 'catalog_versions'::regclass AND contype = 'f'"
)
ADD_BASE_KEY_SQL = (
    "ALTER TABLE catalog_versions ADD CONSTRAINT catalog_versions_base_exists"
    " FOREIGN KEY (base_version) REFERENCES catalog_versions (version)"
)
# Whether the tables exist: opening an existing store then runs no DDL, which would take
# table locks that a running loop's statements can deadlock against.
SCHEMA_PRESENT_SQL = (
    "SELECT to_regclass('catalog_versions') IS NOT NULL"
    " AND to_regclass('catalog_reader_state') IS NOT NULL"
)
GENESIS_SQL = (
    "INSERT INTO catalog_versions"
    " (version, tools, tools_hash, ballot_id, base_version, committed_at)"
    " VALUES (0, %s, %s, NULL, NULL, %s) ON CONFLICT (version) DO NOTHING"
)
APPEND_SQL = (
    "INSERT INTO catalog_versions"
    " (version, tools, tools_hash, ballot_id, base_version, committed_at)"
    " VALUES (%s, %s, %s, %s, %s, %s)"
)
READ_VERSION_SQL = (
    "SELECT version, tools, tools_hash, ballot_id, base_version, committed_at"
    " FROM catalog_versions WHERE version = %s"
)
READER_SEEN_SQL = "SELECT last_seen FROM catalog_reader_state WHERE reader = %s"
READER_RECORD_SQL = (
    "INSERT INTO catalog_reader_state (reader, last_seen) VALUES (%s, %s)"
    " ON CONFLICT (reader) DO UPDATE SET last_seen = excluded.last_seen"
)


@contextmanager
def reading(conn: Any) -> Iterator[Any]:
    """Run reads; if the connection had no transaction open, end the one they opened.

    psycopg opens a transaction on a connection's first statement unless it is in autocommit;
    a read left open would sit "idle in transaction". Inside a caller's transaction nothing
    is ended.
    """
    from psycopg.pq import TransactionStatus

    idle = conn.info.transaction_status == TransactionStatus.IDLE
    try:
        yield conn
    finally:
        if idle and conn.info.transaction_status != TransactionStatus.IDLE:
            conn.rollback()  # only reads ran: nothing to keep


def create_schema(conn: Any, genesis_text: str, genesis_hash: str, now: float) -> None:
    """Create the log and the reader table (idempotent, safe from many sessions) and version 0;
    give a log made before the base's foreign key that key."""
    import psycopg

    with conn.transaction():
        conn.execute(SCHEMA_LOCK_SQL)
        if not conn.execute(SCHEMA_PRESENT_SQL).fetchone()[0]:
            conn.execute(SCHEMA_SQL)
        if conn.execute(HAS_BASE_KEY_SQL).fetchone() is None:
            try:
                with conn.transaction():
                    conn.execute(ADD_BASE_KEY_SQL)
            except psycopg.errors.ForeignKeyViolation:
                pass  # a broken log: left as it is, for `catalog.verify` to name what is wrong
        conn.execute(GENESIS_SQL, (genesis_text, genesis_hash, now))


def append(conn: Any, row: tuple[Any, ...]) -> None:
    """Insert one record (`catalog.version_row`); the caller holds the transaction."""
    conn.execute(APPEND_SQL, row)


def read_version(conn: Any, version: int) -> tuple[Any, ...] | None:
    """The raw row of one version, or None."""
    return conn.execute(READ_VERSION_SQL, (version,)).fetchone()


def create_reader_table(conn: Any) -> None:
    """The reader's state table on its own (a reader may keep its state on another server)."""
    with conn.transaction():
        conn.execute(SCHEMA_LOCK_SQL)
        conn.execute(SCHEMA_SQL.split(";")[1])


def reader_poll(conn: Any, state: Any, name: str, read_head) -> tuple[int, int | None]:
    """Read the head with `read_head(conn)`, then, in one transaction on `state`, the last head
    `name` saw (row locked); record the new head only if it did not fall.

    Returns (head, seen before); the caller raises on a fall, and nothing is recorded then.
    """
    with reading(conn):
        current = read_head(conn)
    with state.transaction():
        row = state.execute(READER_SEEN_SQL + " FOR UPDATE", (name,)).fetchone()
        seen = None if row is None else int(row[0])
        if seen is None or current >= seen:
            state.execute(READER_RECORD_SQL, (name, current))
    return current, seen


def reader_last_seen(conn: Any, name: str) -> int | None:
    """The highest head `name` has recorded, or None."""
    with reading(conn):
        row = conn.execute(READER_SEEN_SQL, (name,)).fetchone()
    return None if row is None else int(row[0])
