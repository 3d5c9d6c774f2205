"""Where an unguarded design's catalog lives for other processes to read: one mutable row.

`callback` and `lww` overwrite the head in place (that is their flaw), so their store is a
single row holding the head version and its tools' hash, written after every delivery. The
safe designs need no mirror: their store is the catalog log itself.
"""

from __future__ import annotations

from labkit import store
from labkit.backend import Connection
from labkit.schema import INT32, TEXT, Column, Table
from labkit.store import Store

# The one row (a spec, `labkit.schema`): INTEGER is PostgreSQL's 32-bit `integer` here.
MIRROR = Table(
    "remote_head",
    (
        Column("id", INT32, ("PRIMARY KEY", "CHECK (id = 1)")),
        Column("version", INT32, ("NOT NULL",)),
        Column("tools_hash", TEXT, ("NOT NULL",)),
    ),
)
PUBLISH_SQL = (
    "INSERT INTO remote_head (id, version, tools_hash) VALUES (1, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET version = excluded.version, tools_hash = excluded.tools_hash"
)
READ_SQL = "SELECT version, tools_hash FROM remote_head WHERE id = 1"


def create(conn: Connection | Store, version: int, digest: str) -> None:
    """Make the head row (if missing) and set it to `version` with `digest`."""
    s = store.of(conn)
    with s.atomic():
        s.execute(MIRROR.ddl(s.name))
        s.execute(PUBLISH_SQL, (version, digest))


def publish(conn: Connection | Store, version: int, digest: str) -> None:
    """Overwrite the head row, as the unguarded design just overwrote its head."""
    s = store.of(conn)
    with s.atomic():
        s.execute(PUBLISH_SQL, (version, digest))


def read(conn: Connection | Store) -> tuple[int, str]:
    """The head row: version and tools hash."""
    ((version, digest),) = store.of(conn).fetchall(READ_SQL)
    return int(version), str(digest)
