"""Where an unguarded design's catalog lives for other processes to read: one mutable row.

`callback` and `lww` overwrite the head in place (that is their flaw), so their store is a
single row holding the head version and its tools' hash, written after every delivery. The
safe designs need no mirror: their store is the catalog log itself.
"""

from __future__ import annotations

from labkit import backend
from labkit.backend import Connection

MIRROR_DDL = (
    "CREATE TABLE IF NOT EXISTS remote_head (\n"
    "    id INTEGER PRIMARY KEY CHECK (id = 1),\n"
    "    version INTEGER NOT NULL,\n"
    "    tools_hash TEXT NOT NULL\n)"
)
PUBLISH_SQL = (
    "INSERT INTO remote_head (id, version, tools_hash) VALUES (1, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET version = excluded.version, tools_hash = excluded.tools_hash"
)
READ_SQL = "SELECT version, tools_hash FROM remote_head WHERE id = 1"


def create(conn: Connection, version: int, digest: str) -> None:
    """Make the head row (if missing) and set it to `version` with `digest`."""
    d = backend.dialect(conn)
    with d.atomic(conn):
        d.execute(conn, MIRROR_DDL)
        d.execute(conn, PUBLISH_SQL, (version, digest))


def publish(conn: Connection, version: int, digest: str) -> None:
    """Overwrite the head row, as the unguarded design just overwrote its head."""
    d = backend.dialect(conn)
    with d.atomic(conn):
        d.execute(conn, PUBLISH_SQL, (version, digest))


def read(conn: Connection) -> tuple[int, str]:
    """The head row: version and tools hash."""
    d = backend.dialect(conn)
    with d.reading(conn):
        row = d.execute(conn, READ_SQL).fetchone()
    return int(row[0]), str(row[1])
