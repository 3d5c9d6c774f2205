"""The message log, its status transitions and the gap-free delivery frontier, on SQLite or
PostgreSQL.

A shard's rows are dispatched `ORDER BY priority, id`, so they finish out of id order. The
safe checkpoint is a low watermark over still-open rows (`delivered_frontier`); the tempting
`MAX(id) WHERE status = 'delivered'` (`max_delivered_watermark`) is kept only to show its damage.
Every SQL text below is a module constant so tests and notebooks can EXPLAIN exactly what runs,
written once in SQLite's placeholder style; `labkit.backend` renders it for psycopg, and what
PostgreSQL needs written its own way (dispatch's row lock, the xmin horizon wait, the id
triggers) is in `labkit.frontier.log_pg`. The tables are specs (`labkit.frontier.tables`), each
written once for both backends. Every function takes a connection or a store handle
(`labkit.store`). Shard keys are always bound parameters, never spliced into SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import labkit.backend as backend
import labkit.frontier.log_pg as fpg
import labkit.frontier.tables as tables
from labkit import db, schema, store, validation
from labkit.frontier.log_pg import HorizonError as HorizonError  # defined beside the wait
from labkit.frontier.log_pg import HorizonReading
from labkit.frontier.rule import POLICIES as POLICIES  # the one list, in the log's API
from labkit.frontier.tables import NON_TERMINAL as NON_TERMINAL
from labkit.frontier.tables import STATUSES as STATUSES
from labkit.frontier.tables import TERMINAL as TERMINAL
from labkit.validation import INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    import psycopg

# The log's tables are specs (`labkit.frontier.tables`), rendered here as SQLite runs them.
SCHEMA_SQL = "\n" + schema.script(tables.LOG, "sqlite")

# Frontier step 1: smallest open id above the base. Served by the partial index idx_conv_active,
# which covers it; the status list must match the index's WHERE clause for SQLite to use it.
FRONTIER_SQL = (
    "SELECT MIN(id) FROM conversations "
    "WHERE channel_key = ? AND id > ? AND status IN ('pending','running')"
)
# Frontier step 2 (nothing open above the base): the largest id above it, via idx_conv_shard_id.
FALLBACK_SQL = "SELECT MAX(id) FROM conversations WHERE channel_key = ? AND id > ?"
# Both steps in one statement, which is what `delivered_frontier` runs on SQLite (and
# `id_order_frontier` on both): COALESCE evaluates the fallback subquery only when step 1 finds
# nothing open, and one execute instead of two keeps the lookup near a primary-key read
# (benchmarks/frontier_lookup). Each step is the same seek on the same index as above, written
# as the first row in id order (`ORDER BY id LIMIT 1`) rather than as MIN or MAX: SQLite then
# runs no aggregate step, about a tenth of the lookup. The column is named, so the driver does
# not copy the whole expression as its name on every execute.
FRONTIER_LOOKUP_SQL = (
    "SELECT COALESCE("
    "(SELECT id FROM conversations"
    " WHERE channel_key = :key AND id > :base AND status IN ('pending','running')"
    " ORDER BY id LIMIT 1) - 1, "
    "(SELECT id FROM conversations WHERE channel_key = :key AND id > :base"
    " ORDER BY id DESC LIMIT 1), "
    ":base) AS frontier"
)
# What `delivered_frontier` runs on SQLite: the same statement, its two values bound by position.
LOOKUP_BY_POSITION_SQL = backend.by_position(FRONTIER_LOOKUP_SQL, ("key", "base"))
# The xmin horizon wait's poll, one statement so both answers come from one snapshot: has every
# transaction older than :xact ended, and Article 1's rule over what is visible now (PostgreSQL
# only; the horizon test and the loop that asks it are in log_pg).
_RULE_COLUMNS = FRONTIER_LOOKUP_SQL.removeprefix("SELECT ")  # Article 1's rule, one column
HORIZON_CHECK_SQL = f"SELECT {fpg.HORIZON_PASSED}, " + _RULE_COLUMNS
# The xmin horizon wait's lookup (PostgreSQL, idle connection), one statement so every answer
# comes from one snapshot: the next transaction id (read, not taken), whether nothing holding one
# was in flight, the preconditions' test, the largest visible id, and Article 1's rule.
HORIZON_LOOKUP_SQL = f"SELECT {fpg.HORIZON_NOW}, " + _RULE_COLUMNS
# The wrong rule. No index is claimed for it: it exists to be shown failing.
MAX_DELIVERED_SQL = (
    "SELECT MAX(id) FROM conversations WHERE channel_key = ? AND status = 'delivered'"
)
ENQUEUE_SQL = (
    "INSERT INTO conversations (channel_key, direction, status, priority) "
    "VALUES (?, ?, 'pending', ?)"
)
STATUS_SQL = "SELECT status FROM conversations WHERE id = ?"
TRANSITION_SQL = "UPDATE conversations SET status = ? WHERE id = ? AND status IN (?, ?)"
REDRIVE_READ_SQL = "SELECT channel_key, direction, status, priority FROM conversations WHERE id = ?"
REDRIVE_SQL = (
    "INSERT INTO conversations (channel_key, direction, status, priority, redrive_of) "
    "VALUES (?, ?, 'pending', ?, ?)"
)

# Pick and claim in one statement, so no other worker can claim the same row in between.
PICK_SQL = "SELECT id FROM conversations WHERE status = 'pending' ORDER BY priority, id LIMIT 1"
PICK_SHARD_SQL = (
    "SELECT id FROM conversations WHERE channel_key = ? AND status = 'pending' "
    "ORDER BY priority, id LIMIT 1"
)

# Filled only with the picks above (constants): marks the picked row running, returns its id.
CLAIM_SQL = "UPDATE conversations SET status = 'running' WHERE id = ({pick}) RETURNING id"
DISPATCH_SQL = CLAIM_SQL.format(pick=PICK_SQL)
DISPATCH_SHARD_SQL = CLAIM_SQL.format(pick=PICK_SHARD_SQL)
# Per backend, (any shard, one shard): PostgreSQL's pick is row-locked (see log_pg.SKIP_LOCKED).
DISPATCH = {
    "sqlite": (DISPATCH_SQL, DISPATCH_SHARD_SQL),
    "postgres": tuple(
        CLAIM_SQL.format(pick=pick + fpg.SKIP_LOCKED) for pick in (PICK_SQL, PICK_SHARD_SQL)
    ),
}


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


MAX_SHARD_KEY_BYTES = 1024
PRIORITY_MIN, PRIORITY_MAX = -(2**31), 2**31 - 1  # PostgreSQL's `integer`; SQLite's is 64-bit


def shard_key(value: Any, where: str) -> str:
    """A shard key handed to `where`, checked before it reaches a driver (`validation.text_arg`:
    a str of at most `MAX_SHARD_KEY_BYTES` UTF-8 bytes, no NUL, no lone surrogate); quotes and
    any other Unicode are fine."""
    # text_arg's fast path, here so a hot lookup pays one call: an ASCII str has no surrogate
    # and one byte per character. Anything else, and every refusal, is text_arg's.
    if (
        type(value) is str
        and value.isascii()
        and len(value) <= MAX_SHARD_KEY_BYTES
        and "\x00" not in value
    ):
        return value
    return validation.text_arg(value, "channel_key", where, MAX_SHARD_KEY_BYTES)


def whole(value: Any, name: str, where: str) -> int:
    """An id or a coverage base handed to `where` (`validation.int_arg`: an int in 64-bit range).
    A plain int in range passes at once; anything else, and every refusal, is int_arg's."""
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    return validation.int_arg(value, name, where)


def create_schema(conn: backend.Connection | store.Store) -> None:
    """Create the log table, its indexes and the checkpoint tables; safe to call twice."""
    s = store.of(conn)
    s.pick(_CREATE_ON)(s.conn)


def _create_on_sqlite(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA_SQL)


def _create_on_postgres(conn: psycopg.Connection[Any]) -> None:
    """In one transaction, then the horizon wait's preconditions checked."""
    with conn.transaction():
        conn.execute(fpg.SCHEMA_SQL)
    fpg.check_preconditions(conn)


_CREATE_ON: dict[str, Callable[[Any], None]] = {
    "sqlite": _create_on_sqlite,
    "postgres": _create_on_postgres,
}


def connect(
    path: str | Path = ":memory:", *, timeout_ms: int = db.BUSY_TIMEOUT_MS
) -> sqlite3.Connection:
    """`db.connect` with the log's schema in place: by default a fresh in-memory log.

    On a file shared by several workers, a writer waits up to `timeout_ms` for the lock.
    """
    conn = db.connect(path, timeout_ms=timeout_ms)
    create_schema(conn)
    return conn


# --- the log ---------------------------------------------------------------------------------


def fetch(
    conn: backend.Connection | store.Store, statement: str, params: Any = ()
) -> list[tuple[Any, ...]]:
    """Every row of one read written once (SQLite's placeholder style), on either backend. On
    PostgreSQL a transaction the read opened is ended, so the session never idles inside one."""
    return _FETCH[type(conn)](conn, statement, params)


# A read on each backend (its dialect's), found by the connection's type: lookups ask it.
_FETCH = store.ByBackend(sqlite=backend.SQLITE.fetchall, postgres=backend.POSTGRES.fetchall)


def enqueue(
    conn: backend.Connection | store.Store,
    channel_key: str,
    priority: int,
    direction: str = "inbound",
) -> int:
    """Append a pending row to a shard and return its id.

    On SQLite it commits; on PostgreSQL it never does (the caller's transaction decides when the
    row becomes visible, which is what part three's writers need).
    """
    s = store.of(conn)
    d = s.dialect
    channel_key = shard_key(channel_key, "enqueue")
    direction = validation.text_arg(direction, "direction", "enqueue")
    priority = whole(priority, "priority", "enqueue")
    if d.is_postgres and not PRIORITY_MIN <= priority <= PRIORITY_MAX:  # an `integer` column
        raise ValueError(
            f"enqueue: priority {priority} is outside [{PRIORITY_MIN}, {PRIORITY_MAX}]"
        )
    with s.pick(_ENQUEUE_IN)(s):
        return s.insert_returning_id(ENQUEUE_SQL, (channel_key, direction, priority))


# What an enqueue runs in, per backend: SQLite commits it at once; PostgreSQL leaves it to the
# caller's transaction (part three's writers decide when their rows become visible).
_ENQUEUE_IN: dict[str, Callable[[store.Store], AbstractContextManager[Any]]] = {
    "sqlite": store.Store.atomic,
    "postgres": lambda s: nullcontext(),
}


def status_of(conn: backend.Connection | store.Store, row_id: int) -> str:
    """Current status of one row; `TransitionError` if there is no such row."""
    rows = fetch(conn, STATUS_SQL, (whole(row_id, "row_id", "status_of"),))
    if not rows:
        raise TransitionError(f"conversation {row_id} does not exist")
    return str(rows[0][0])


def _transition(
    conn: backend.Connection | store.Store,
    row_id: int,
    allowed: tuple[str] | tuple[str, str],
    to: str,
) -> None:
    """Move `row_id` to `to` if its status is in `allowed`, else raise the precise reason."""
    first, last = allowed[0], allowed[-1]  # one or two allowed source statuses
    row_id = whole(row_id, "row_id", f"mark {to}")
    s = store.of(conn)
    with s.atomic():
        if s.execute(TRANSITION_SQL, (to, row_id, first, last)).rowcount == 1:
            return
        current = status_of(s, row_id)
    if current in TERMINAL:
        raise TerminalStateError(row_id, current, to)
    raise TransitionError(f"conversation {row_id} is {current!r}; cannot move it to {to!r}")


def mark_running(conn: backend.Connection, row_id: int) -> None:
    """pending -> running (a worker picked the row up)."""
    _transition(conn, row_id, ("pending",), "running")


def mark_delivered(conn: backend.Connection, row_id: int) -> None:
    """pending/running -> delivered (terminal)."""
    _transition(conn, row_id, NON_TERMINAL, "delivered")


def mark_failed(conn: backend.Connection, row_id: int) -> None:
    """pending/running -> failed, i.e. dead-lettered (terminal; never holds the frontier back)."""
    _transition(conn, row_id, NON_TERMINAL, "failed")


def dispatch_next(
    conn: backend.Connection | store.Store, channel_key: str | None = None
) -> int | None:
    """Claim the next pending row `ORDER BY priority, id`: mark it running, return its id.

    Safe with several workers: each row is handed out exactly once. On a SQLite file a worker
    that finds the log locked waits for it (see `db.atomic`); on PostgreSQL the pick skips a
    row another worker holds (FOR UPDATE SKIP LOCKED).
    """
    s = store.of(conn)
    if channel_key is not None:
        channel_key = shard_key(channel_key, "dispatch_next")
    any_shard, one_shard = s.pick(DISPATCH)
    with s.atomic():
        if channel_key is None:
            row = s.execute(any_shard).fetchone()
        else:
            row = s.execute(one_shard, (channel_key,)).fetchone()
    return None if row is None else int(row[0])


def redrive(conn: backend.Connection | store.Store, row_id: int) -> int:
    """Retry a dead letter as a NEW pending row (same shard, priority, direction); return its id.

    The failed row stays failed, so a frontier that already passed it never has to move back.
    """
    s = store.of(conn)
    row_id = whole(row_id, "row_id", "redrive")
    with s.atomic():
        row = s.execute(REDRIVE_READ_SQL, (row_id,)).fetchone()
        if row is None:
            raise TransitionError(f"conversation {row_id} does not exist")
        key, direction, status, priority = row
        if status != "failed":
            raise TransitionError(
                f"conversation {row_id} is {status!r}; only a 'failed' row can be redriven"
            )
        return s.insert_returning_id(REDRIVE_SQL, (key, direction, priority, row_id))


# --- watermarks ------------------------------------------------------------------------------


def delivered_frontier(
    conn: backend.Connection | store.Store, channel_key: str, coverage_base: int = 0
) -> int:
    """Gap-free frontier: the largest value such that every row of the shard in (base, value]
    is terminal.

    It stops just below the lowest open row past the base; when nothing past the base is open
    it is the highest id there, and with no rows past the base it stays at the base. At most
    two index seeks, no scan, in one statement (`FRONTIER_LOOKUP_SQL` = `FRONTIER_SQL` then
    `FALLBACK_SQL`).
    On PostgreSQL it is also commit-order safe: it never passes an id that a transaction still
    in progress may yet commit (the xmin horizon wait, `horizon_frontier`).
    """
    if (  # the hot path: SQLite, arguments already right (`whole`'s and `shard_key`'s fast
        # paths, inline: a call each was a tenth of the lookup); anything else goes the long way
        type(conn) is sqlite3.Connection
        and type(coverage_base) is int
        and INT64_MIN <= coverage_base <= INT64_MAX
        and type(channel_key) is str
        and channel_key.isascii()
        and len(channel_key) <= MAX_SHARD_KEY_BYTES
        and "\x00" not in channel_key
    ):
        return conn.execute(LOOKUP_BY_POSITION_SQL, (channel_key, coverage_base)).fetchone()[0]
    channel_key = shard_key(channel_key, "delivered_frontier")
    coverage_base = whole(coverage_base, "coverage_base", "delivered_frontier")
    return _FRONTIER[type(conn)](conn, channel_key, coverage_base)


def _frontier_on_sqlite(conn: sqlite3.Connection, channel_key: str, base: int) -> int:
    """SQLite reads need no transaction: the one statement, straight (this is the hot path).
    Every value it can return (an id, or the base bound as an int) is already an int."""
    return conn.execute(LOOKUP_BY_POSITION_SQL, (channel_key, base)).fetchone()[0]


def _frontier_on_postgres(conn: psycopg.Connection[Any], channel_key: str, base: int) -> int:
    """The xmin horizon wait, without its evidence (`horizon_frontier` gives it)."""
    return fpg.horizon_wait(
        conn,
        channel_key,
        base,
        fpg.HORIZON_WAIT_S,
        HORIZON_LOOKUP_SQL,
        HORIZON_CHECK_SQL,
        largest=False,
    ).frontier


# `delivered_frontier` on each backend, side by side, found by the connection's type (the hot
# path makes no handle).
_FRONTIER = store.ByBackend(sqlite=_frontier_on_sqlite, postgres=_frontier_on_postgres)


def max_delivered_watermark(conn: backend.Connection | store.Store, channel_key: str) -> int | None:
    """THE WRONG RULE, kept on purpose: `MAX(id) WHERE status = 'delivered'`.

    With priority dispatch a large id finishes before smaller ones; a summarizer that trusts
    this value jumps past still-open rows, which then become orphans: terminal, yet in no
    summary, forever. Never use it as a checkpoint. None if nothing was delivered.
    """
    value = fetch(conn, MAX_DELIVERED_SQL, (shard_key(channel_key, "max_delivered_watermark"),))[0][
        0
    ]
    return None if value is None else int(value)


def id_order_frontier(
    conn: backend.Connection | store.Store, channel_key: str, base: int = 0
) -> int:
    """Article 1's rule verbatim: one less than the smallest open id above `base`, else the
    largest id above it, else `base`, over the rows visible now.

    On SQLite (one writer, ids visible in id order) it equals `delivered_frontier`. On
    PostgreSQL it passes an id whose transaction has not committed yet: the row shows up later
    below the frontier and is orphaned (notebook 07).
    """
    key = shard_key(channel_key, "id_order_frontier")
    base = whole(base, "base", "id_order_frontier")
    return int(fetch(conn, FRONTIER_LOOKUP_SQL, {"key": key, "base": base})[0][0])


# --- the xmin horizon wait (PostgreSQL) ------------------------------------------------------


def horizon_frontier(
    conn: psycopg.Connection[Any] | store.Store,
    channel_key: str,
    base: int = 0,
    wait: float = fpg.HORIZON_WAIT_S,
) -> HorizonReading:
    """`delivered_frontier` on PostgreSQL with its evidence: the xmin horizon wait
    (`labkit.frontier.log_pg.horizon_wait` says how it works and why it is sound).

    On an idle connection it reads the next transaction id without taking one and, with no
    writer in flight, answers in one statement; otherwise it waits until every transaction older
    than that id has ended. After `wait` seconds (a session idle in a transaction holds it
    forever) it returns `base`: it holds back, never skips. Inside a caller's transaction it
    needs READ COMMITTED and a transaction that has not written.

    Recording `pg_current_xact_id()` per row and capping below the smallest id whose xact is
    >= xmin is not enough on its own: a transaction with an OLDER xact id can commit a LARGER
    id while a younger one still holds a smaller id, and then nothing visible marks the hole.
    """
    s = store.require(conn, "horizon_frontier", "postgres")
    channel_key = shard_key(channel_key, "horizon_frontier")
    base = whole(base, "base", "horizon_frontier")
    return fpg.horizon_wait(s.conn, channel_key, base, wait, HORIZON_LOOKUP_SQL, HORIZON_CHECK_SQL)


# --- query plans -----------------------------------------------------------------------------


def explain(
    conn: sqlite3.Connection | store.Store,
    sql: str,
    params: tuple | Mapping = (),
    authorizer: Callable[..., int] | None = None,
) -> list[str]:
    """SQLite's `EXPLAIN QUERY PLAN` detail lines for `sql` as it would run now (PostgreSQL's
    plans: `labkit.frontier.log_pg.explain_json`; a psycopg connection is refused here).

    The schema version is folded into a trailing comment: Python's statement cache would
    otherwise replay a plan prepared before an index was created or dropped. `sql` is spliced
    in, so text that is not ours must come with an `authorizer`: it is set only around the
    EXPLAIN (after our own PRAGMA) and always lifted again.
    """
    lite: sqlite3.Connection = store.require(conn, "explain", "sqlite").conn
    version = int(lite.execute("PRAGMA schema_version").fetchone()[0])
    if authorizer is not None:
        lite.set_authorizer(authorizer)
    try:
        rows = lite.execute(f"EXPLAIN QUERY PLAN {sql} /* schema {version} */", params).fetchall()
    finally:
        if authorizer is not None:
            lite.set_authorizer(None)
    return [str(row[3]) for row in rows]
