"""The message log, its status transitions and the gap-free delivery frontier.

A shard's rows are dispatched `ORDER BY priority, id`, so they finish out of id order. The
safe checkpoint is a low watermark over still-open rows (`delivered_frontier`); the tempting
`MAX(id) WHERE status = 'delivered'` (`max_delivered_watermark`) is kept only to show its damage.
Every SQL text below is a module constant so tests and notebooks can EXPLAIN exactly what runs.
Shard keys are always bound parameters, never spliced into SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path

from labkit import db
from labkit.db import atomic

NON_TERMINAL = ("pending", "running")
TERMINAL = ("delivered", "failed")
STATUSES = NON_TERMINAL + TERMINAL
POLICIES = ("frontier", "max")

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS conversations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel_key TEXT    NOT NULL,
    direction   TEXT    NOT NULL,
    status      TEXT    NOT NULL
                CHECK (status IN ('pending', 'running', 'delivered', 'failed')),
    priority    INTEGER NOT NULL,
    redrive_of  INTEGER REFERENCES conversations(id)
);
CREATE INDEX IF NOT EXISTS idx_conv_active
    ON conversations(channel_key, id) WHERE status IN ('pending','running');
CREATE INDEX IF NOT EXISTS idx_conv_shard_id
    ON conversations(channel_key, id);
CREATE TABLE IF NOT EXISTS checkpoints (
    channel_key  TEXT    NOT NULL,
    policy       TEXT    NOT NULL CHECK (policy IN ('frontier', 'max')),
    coverage_end INTEGER NOT NULL,
    PRIMARY KEY (channel_key, policy)
);
CREATE TABLE IF NOT EXISTS summaries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    channel_key TEXT    NOT NULL,
    policy      TEXT    NOT NULL CHECK (policy IN ('frontier', 'max')),
    start_id    INTEGER NOT NULL,
    end_id      INTEGER NOT NULL,
    CHECK (start_id <= end_id)
);
CREATE INDEX IF NOT EXISTS idx_summaries_shard
    ON summaries(channel_key, policy, start_id);
CREATE TABLE IF NOT EXISTS summary_items (
    summary_id      INTEGER NOT NULL REFERENCES summaries(id),
    conversation_id INTEGER NOT NULL REFERENCES conversations(id),
    PRIMARY KEY (summary_id, conversation_id)
);
CREATE INDEX IF NOT EXISTS idx_summary_items_conv
    ON summary_items(conversation_id);
"""

# Frontier step 1: smallest open id above the base. Served by the partial index idx_conv_active;
# the status list must match the index's WHERE clause for SQLite to use it.
FRONTIER_SQL = (
    "SELECT MIN(id) FROM conversations "
    "WHERE channel_key = ? AND id > ? AND status IN ('pending','running')"
)
# Frontier step 2 (nothing open above the base): the largest id above it, via idx_conv_shard_id.
FALLBACK_SQL = "SELECT MAX(id) FROM conversations WHERE channel_key = ? AND id > ?"
# Both steps in one statement, which is what `delivered_frontier` runs: COALESCE evaluates the
# fallback subquery only when step 1 finds nothing open, and one execute instead of two keeps a
# fully settled shard's lookup within ~1.5x of a primary-key read (benchmarks/frontier_lookup).
FRONTIER_LOOKUP_SQL = (
    "SELECT COALESCE("
    "(SELECT MIN(id) FROM conversations"
    " WHERE channel_key = ?1 AND id > ?2 AND status IN ('pending','running')) - 1, "
    "(SELECT MAX(id) FROM conversations WHERE channel_key = ?1 AND id > ?2), "
    "?2)"
)
# The wrong rule. No index is claimed for it: it exists to be shown failing.
MAX_DELIVERED_SQL = (
    "SELECT MAX(id) FROM conversations WHERE channel_key = ? AND status = 'delivered'"
)


class TransitionError(ValueError):
    """A status change the log refuses (unknown row, or not allowed from its current status)."""


class TerminalStateError(TransitionError):
    """A row that is `delivered` or `failed` was asked to change status: terminal is forever."""

    def __init__(self, row_id: int, current: str, requested: str) -> None:
        self.row_id, self.current, self.requested = row_id, current, requested
        super().__init__(
            f"conversation {row_id} is {current!r}, a terminal status; refusing "
            f"{current!r} -> {requested!r} (terminal is forever; redrive a failed row instead)"
        )


def _pg(conn: object):
    """`labkit.frontier.log_pg` when `conn` is not a sqlite3 connection (psycopg), else None.

    Imported on first use, so SQLite-only work never loads psycopg.
    """
    if isinstance(conn, sqlite3.Connection):
        return None
    import labkit.frontier.log_pg as frontier_pg

    return frontier_pg


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the log table, both indexes and the checkpoint tables; safe to call twice."""
    if (pg := _pg(conn)) is not None:
        return pg.create_schema(conn)
    conn.executescript(SCHEMA_SQL)


def connect(path: str | Path = ":memory:", *, timeout_ms: int = db.BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """`db.connect` with the log's schema in place: by default a fresh in-memory log.

    On a file shared by several workers, a writer waits up to `timeout_ms` for the lock.
    """
    conn = db.connect(path, timeout_ms=timeout_ms)
    create_schema(conn)
    return conn


# --- the log ---------------------------------------------------------------------------------


def enqueue(
    conn: sqlite3.Connection, channel_key: str, priority: int, direction: str = "inbound"
) -> int:
    """Append a pending row to a shard and return its id (on PostgreSQL: never commits)."""
    if (pg := _pg(conn)) is not None:
        return pg.enqueue(conn, channel_key, priority, direction)
    with atomic(conn):
        cur = conn.execute(
            "INSERT INTO conversations (channel_key, direction, status, priority) "
            "VALUES (?, ?, 'pending', ?)",
            (channel_key, direction, int(priority)),
        )
    return int(cur.lastrowid)


def status_of(conn: sqlite3.Connection, row_id: int) -> str:
    """Current status of one row; `TransitionError` if there is no such row."""
    row = conn.execute("SELECT status FROM conversations WHERE id = ?", (row_id,)).fetchone()
    if row is None:
        raise TransitionError(f"conversation {row_id} does not exist")
    return str(row[0])


def _transition(
    conn: sqlite3.Connection, row_id: int, allowed: tuple[str] | tuple[str, str], to: str
) -> None:
    """Move `row_id` to `to` if its status is in `allowed`, else raise the precise reason."""
    first, last = allowed[0], allowed[-1]  # one or two allowed source statuses
    if (pg := _pg(conn)) is not None:
        moved, current = pg.transition(conn, row_id, allowed, to)
        if moved:
            return
        if current is None:
            raise TransitionError(f"conversation {row_id} does not exist")
        _refuse(row_id, current, to)
    with atomic(conn):
        cur = conn.execute(
            "UPDATE conversations SET status = ? WHERE id = ? AND status IN (?, ?)",
            (to, row_id, first, last),
        )
        if cur.rowcount == 1:
            return
        current = status_of(conn, row_id)
    _refuse(row_id, current, to)


def _refuse(row_id: int, current: str, to: str) -> None:
    """Raise the precise reason `row_id` (now `current`) may not move to `to`."""
    if current in TERMINAL:
        raise TerminalStateError(row_id, current, to)
    raise TransitionError(f"conversation {row_id} is {current!r}; cannot move it to {to!r}")


def mark_running(conn: sqlite3.Connection, row_id: int) -> None:
    """pending -> running (a worker picked the row up)."""
    _transition(conn, row_id, ("pending",), "running")


def mark_delivered(conn: sqlite3.Connection, row_id: int) -> None:
    """pending/running -> delivered (terminal)."""
    _transition(conn, row_id, NON_TERMINAL, "delivered")


def mark_failed(conn: sqlite3.Connection, row_id: int) -> None:
    """pending/running -> failed, i.e. dead-lettered (terminal; never holds the frontier back)."""
    _transition(conn, row_id, NON_TERMINAL, "failed")


# Pick and claim in one statement, so no other worker can claim the same row in between.
DISPATCH_SQL = (
    "UPDATE conversations SET status = 'running' WHERE id = ("
    "SELECT id FROM conversations WHERE status = 'pending' ORDER BY priority, id LIMIT 1"
    ") RETURNING id"
)
DISPATCH_SHARD_SQL = (
    "UPDATE conversations SET status = 'running' WHERE id = ("
    "SELECT id FROM conversations WHERE channel_key = ? AND status = 'pending' "
    "ORDER BY priority, id LIMIT 1"
    ") RETURNING id"
)


def dispatch_next(conn: sqlite3.Connection, channel_key: str | None = None) -> int | None:
    """Claim the next pending row `ORDER BY priority, id`: mark it running, return its id.

    Safe with several workers on one file: each row is handed out exactly once, and a worker
    that finds the log locked waits for it (see `atomic`). On PostgreSQL: FOR UPDATE SKIP LOCKED.
    """
    if (pg := _pg(conn)) is not None:
        return pg.dispatch_next(conn, channel_key)
    with atomic(conn):
        if channel_key is None:
            row = conn.execute(DISPATCH_SQL).fetchone()
        else:
            row = conn.execute(DISPATCH_SHARD_SQL, (channel_key,)).fetchone()
    return None if row is None else int(row[0])


def redrive(conn: sqlite3.Connection, row_id: int) -> int:
    """Retry a dead letter as a NEW pending row (same shard, priority, direction); return its id.

    The failed row stays failed, so a frontier that already passed it never has to move back.
    """
    with atomic(conn):
        row = conn.execute(
            "SELECT channel_key, direction, status, priority FROM conversations WHERE id = ?",
            (row_id,),
        ).fetchone()
        if row is None:
            raise TransitionError(f"conversation {row_id} does not exist")
        key, direction, status, priority = row
        if status != "failed":
            raise TransitionError(
                f"conversation {row_id} is {status!r}; only a 'failed' row can be redriven"
            )
        cur = conn.execute(
            "INSERT INTO conversations (channel_key, direction, status, priority, redrive_of) "
            "VALUES (?, ?, 'pending', ?, ?)",
            (key, direction, priority, row_id),
        )
    return int(cur.lastrowid)


# --- watermarks ------------------------------------------------------------------------------


def delivered_frontier(conn: sqlite3.Connection, channel_key: str, coverage_base: int = 0) -> int:
    """Gap-free frontier: the largest value such that every row of the shard in (base, value]
    is terminal.

    It stops just below the lowest open row past the base; when nothing past the base is open
    it is the highest id there, and with no rows past the base it stays at the base. At most
    two index seeks, no scan, in one statement (`FRONTIER_LOOKUP_SQL` = `FRONTIER_SQL` then
    `FALLBACK_SQL`).
    On PostgreSQL it is also commit-order safe: it never passes an id that a transaction still
    in progress may yet commit (`labkit.frontier.log_pg.delivered_frontier`).
    """
    if (pg := _pg(conn)) is not None:
        return pg.delivered_frontier(conn, channel_key, coverage_base)
    return int(conn.execute(FRONTIER_LOOKUP_SQL, (channel_key, coverage_base)).fetchone()[0])


def max_delivered_watermark(conn: sqlite3.Connection, channel_key: str) -> int | None:
    """THE WRONG RULE, kept on purpose: `MAX(id) WHERE status = 'delivered'`.

    With priority dispatch a large id finishes before smaller ones; a summarizer that trusts
    this value jumps past still-open rows, which then become orphans: terminal, yet in no
    summary, forever. Never use it as a checkpoint. None if nothing was delivered.
    """
    if (pg := _pg(conn)) is not None:
        return pg.max_delivered_watermark(conn, channel_key)
    value = conn.execute(MAX_DELIVERED_SQL, (channel_key,)).fetchone()[0]
    return None if value is None else int(value)


def id_order_frontier(conn: sqlite3.Connection, channel_key: str, base: int = 0) -> int:
    """Article 1's rule verbatim: one less than the smallest open id above `base`, else the
    largest id above it, else `base`, over the rows visible now.

    On SQLite (one writer, ids visible in id order) it equals `delivered_frontier`. On
    PostgreSQL it passes an id whose transaction has not committed yet: the row shows up later
    below the frontier and is orphaned (notebook 07).
    """
    if (pg := _pg(conn)) is not None:
        return pg.id_order_frontier(conn, channel_key, base)
    return int(conn.execute(FRONTIER_LOOKUP_SQL, (channel_key, base)).fetchone()[0])


# --- query plans -----------------------------------------------------------------------------


def explain(
    conn: sqlite3.Connection,
    sql: str,
    params: tuple | Mapping = (),
    authorizer: Callable[..., int] | None = None,
) -> list[str]:
    """The `EXPLAIN QUERY PLAN` detail lines for `sql` as it would run now.

    The schema version is folded into a trailing comment: Python's statement cache would
    otherwise replay a plan prepared before an index was created or dropped. `sql` is spliced
    in, so text that is not ours must come with an `authorizer`: it is set only around the
    EXPLAIN (after our own PRAGMA) and always lifted again.
    """
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    if authorizer is not None:
        conn.set_authorizer(authorizer)
    try:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {sql} /* schema {version} */", params).fetchall()
    finally:
        if authorizer is not None:
            conn.set_authorizer(None)
    return [str(row[3]) for row in rows]
