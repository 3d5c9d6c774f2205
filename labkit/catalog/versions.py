"""The shared tool catalog as an append-only log of versions 0, 1, 2, ... in SQLite.

Version 0 is the genesis record. The head (largest version) *is* the committed watermark:
there is no second counter that could drift from it. `CatalogReader` is the independent
reader that remembers the last head it saw and refuses to accept a head that fell.
Every function also takes a psycopg connection: the PostgreSQL statements live in
`labkit.catalog.versions_pg` (imported on first use, so SQLite-only work never loads psycopg).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from labkit.db import atomic, immediate

if TYPE_CHECKING:
    import pandas as pd

_SCHEMA = """
CREATE TABLE IF NOT EXISTS catalog_versions (
    version      INTEGER PRIMARY KEY CHECK (version >= 0),
    tools        TEXT    NOT NULL,
    tools_hash   TEXT    NOT NULL,
    ballot_id    INTEGER UNIQUE,
    base_version INTEGER,
    committed_at REAL    NOT NULL,
    CHECK ((version = 0 AND base_version IS NULL AND ballot_id IS NULL)
        OR (version > 0 AND base_version = version - 1 AND ballot_id IS NOT NULL))
);
CREATE TABLE IF NOT EXISTS catalog_reader_state (
    reader    TEXT    PRIMARY KEY,
    last_seen INTEGER NOT NULL
);
"""
APPEND_SQL = (
    "INSERT INTO catalog_versions"
    " (version, tools, tools_hash, ballot_id, base_version, committed_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
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


def _pg(conn: object):
    """`labkit.catalog.versions_pg` when `conn` is not a sqlite3 connection (psycopg), else None."""
    if isinstance(conn, sqlite3.Connection):
        return None
    import labkit.catalog.versions_pg as catalog_pg

    return catalog_pg


def _reading(conn: object):
    """Reads on PostgreSQL end the transaction they open (`catalog_pg.reading`); else nothing."""
    pg = _pg(conn)
    return nullcontext(conn) if pg is None else pg.reading(conn)


def create_schema(
    conn: sqlite3.Connection, genesis_tools: Sequence[Any] = (), *, now: float | None = None
) -> None:
    """Create the catalog tables (idempotent) and the genesis version 0 if it is missing."""
    if (pg := _pg(conn)) is not None:
        return pg.create_schema(conn, tools_json(genesis_tools), tools_hash(genesis_tools), _now(now))
    with immediate(conn):
        for stmt in _SCHEMA.split(";"):
            if stmt.strip():
                conn.execute(stmt)
        conn.execute(
            "INSERT OR IGNORE INTO catalog_versions"
            " (version, tools, tools_hash, ballot_id, base_version, committed_at)"
            " VALUES (0, ?, ?, NULL, NULL, ?)",
            (tools_json(genesis_tools), tools_hash(genesis_tools), _now(now)),
        )


def head(conn: sqlite3.Connection) -> int:
    """The committed head version (the watermark); -1 if the log has no genesis yet."""
    with _reading(conn):
        row = conn.execute("SELECT MAX(version) FROM catalog_versions").fetchone()
    return head_of(row[0])


def head_of(value: Any) -> int:
    """The head from `MAX(version)` read inside another statement (None before genesis)."""
    return -1 if value is None else int(value)


def head_hash(conn: sqlite3.Connection) -> tuple[int, str]:
    """The head version and its tools' hash in one read ((-1, "") before genesis)."""
    with _reading(conn):
        row = conn.execute(
            "SELECT version, tools_hash FROM catalog_versions ORDER BY version DESC LIMIT 1"
        ).fetchone()
    return (-1, "") if row is None else (int(row[0]), str(row[1]))


def append(
    conn: sqlite3.Connection,
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
    if (pg := _pg(conn)) is not None:
        pg.append(conn, row)
    else:
        conn.execute(APPEND_SQL, row)
    return row[0]


def version_row(text: str, ballot_id: int, base_version: int, now: float) -> tuple[Any, ...]:
    """The parameters of `APPEND_SQL` (either backend) for the version after `base_version`,
    from a body already in canonical JSON (`tools_json`): version first, its hash third."""
    return (base_version + 1, text, json_hash(text), ballot_id, base_version, now)


def read_version(conn: sqlite3.Connection, version: int) -> CatalogVersion | None:
    """One record of the log, or None if that version does not exist."""
    if (pg := _pg(conn)) is not None:
        with pg.reading(conn):
            row = pg.read_version(conn, version)
        return None if row is None else _record(row)
    row = conn.execute(
        "SELECT version, tools, tools_hash, ballot_id, base_version, committed_at"
        " FROM catalog_versions WHERE version = ?",
        (version,),
    ).fetchone()
    return None if row is None else _record(row)


def history(conn: sqlite3.Connection) -> list[CatalogVersion]:
    """Every record of the log in version order."""
    with _reading(conn):
        rows = conn.execute(
            "SELECT version, tools, tools_hash, ballot_id, base_version, committed_at"
            " FROM catalog_versions ORDER BY version"
        ).fetchall()
    return [_record(r) for r in rows]


def history_frame(conn: sqlite3.Connection) -> pd.DataFrame:
    """`history` as a table for reading: integer ballot and base columns, hashes shortened."""
    import pandas as pd

    frame = pd.DataFrame(history(conn))
    frame = frame.astype({"ballot_id": "Int64", "base_version": "Int64"})
    frame["tools_hash"] = frame["tools_hash"].str[:12]
    return frame[["version", "tools", "tools_hash", "ballot_id", "base_version"]]


def verify(conn: sqlite3.Connection) -> int:
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
    connection or file) or else on `conn` itself, so the check survives process restarts.
    On PostgreSQL (psycopg connections) the check and the record are one transaction on
    `state`, with the reader's row locked, so two pollers under one name cannot interleave.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        name: str = "reader",
        *,
        state: sqlite3.Connection | None = None,
    ) -> None:
        self.conn = conn
        self.state = conn if state is None else state
        self.name = name
        if (pg := _pg(self.state)) is not None:
            pg.create_reader_table(self.state)
            return
        # One statement, no transaction of ours: if the table exists it takes no write lock.
        self.state.execute(
            "CREATE TABLE IF NOT EXISTS catalog_reader_state ("
            " reader TEXT PRIMARY KEY, last_seen INTEGER NOT NULL)"
        )

    def last_seen(self) -> int | None:
        """The highest head this reader has recorded, or None before its first poll."""
        if (pg := _pg(self.state)) is not None:
            return pg.reader_last_seen(self.state, self.name)
        row = self.state.execute(
            "SELECT last_seen FROM catalog_reader_state WHERE reader = ?", (self.name,)
        ).fetchone()
        return None if row is None else int(row[0])

    def poll(self) -> int:
        """Read the head; raise `RewindError` if it is below the last head seen, else record it.

        A transaction the caller has open on either connection stays open and uncommitted:
        the record is then a savepoint inside it.
        """
        if (pg := _pg(self.state)) is not None:
            current, seen = pg.reader_poll(self.conn, self.state, self.name, head)
            _refuse_fall(self.name, seen, current)
            return current
        current = head(self.conn)
        with atomic(self.state):
            seen = self.last_seen()
            _refuse_fall(self.name, seen, current)
            self.state.execute(
                "INSERT INTO catalog_reader_state (reader, last_seen) VALUES (?, ?)"
                " ON CONFLICT(reader) DO UPDATE SET last_seen = excluded.last_seen",
                (self.name, current),
            )
        return current


def _refuse_fall(name: str, seen: int | None, current: int) -> None:
    if seen is not None and current < seen:
        raise RewindError(f"catalog rewound: reader {name!r} saw version {seen}, now sees {current}")


def _record(row: tuple[Any, ...]) -> CatalogVersion:
    try:
        tools = json.loads(row[1], parse_constant=_not_json)
    except (TypeError, ValueError) as exc:
        raise CatalogCorruptError(f"version {row[0]}: stored tools are not valid JSON ({exc})") from None
    if not isinstance(tools, list):
        raise CatalogCorruptError(f"version {row[0]}: stored tools are a {type(tools).__name__}, not a list")
    return CatalogVersion(row[0], tools, row[2], row[3], row[4], row[5])


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")


def _now(now: float | None) -> float:
    return time.time() if now is None else now
