"""The ballot store on PostgreSQL: schema, statements, and how a write that lost a race is told.

`labkit.catalog.loop.WatermarkLoop` dispatches here when it is handed a psycopg connection;
its rule is written once and runs these statements (same names as its SQLite ones). What
PostgreSQL adds is concurrency: many processes, each with its own connection, share one store.
No lock is held across a decision. The loop reads in one statement, decides in Python, then
writes in one statement whose first part is a guard: it only changes rows that still hold what
was read (`next_ballot = <read>`, `status = 'inflight'`), and every other part selects `FROM`
that guard, so when the guard matches nothing the statement writes nothing. A commit also
inserts version head+1, which the catalog's primary key refuses if another loop stored it
first. Each statement runs on its own (autocommit) at READ COMMITTED (checked when the loop
opens), so it is atomic and durable when it returns, and its guard is re-checked against the
newest committed row; a write that lost (guard matched nothing, `lost_race` error) is decided
again from a fresh read.

Consequences worth knowing. A reserve may return a ballot whose fence a commit passed between
its read and its write (nothing the reserve writes says otherwise): safe, the ballot is
refused as stale, but its planner call is wasted; the old design's store lock prevented that
at the price of every worker waiting for every decision. `wm_responses.seq` numbers inserts,
not decisions: on PostgreSQL two decisions may commit in the other order, and a refused write
leaves a gap. A commit tried before the read (`WatermarkLoop.apply`) that is refused shows in
the server log as a duplicate-key error; `WatermarkLoop.commit_first_misses` counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from labkit.catalog.versions_pg import reading

__all__ = [
    "reading",
    "deciding",
    "lost_race",
    "check_connection",
    "create_schema",
    "LoopConnectionError",
]

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS wm_store (
    id          integer PRIMARY KEY CHECK (id = 1),
    next_ballot bigint  NOT NULL
);
CREATE TABLE IF NOT EXISTS wm_ballots (
    ballot_id          bigint PRIMARY KEY,
    observed_watermark bigint NOT NULL,
    base_version       bigint NOT NULL,
    replay_of          bigint,
    status             text   NOT NULL
        CHECK (status IN ('inflight', 'committed', 'rejected', 'abandoned')),
    reason             text,
    reserved_at        double precision NOT NULL,
    decided_at         double precision
);
CREATE INDEX IF NOT EXISTS wm_ballots_inflight ON wm_ballots (ballot_id)
    WHERE status = 'inflight';
CREATE TABLE IF NOT EXISTS wm_responses (
    seq                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ballot_id          bigint NOT NULL,
    observed_watermark bigint NOT NULL,
    base_version       bigint NOT NULL,
    tools_hash         text   NOT NULL,
    committed          smallint NOT NULL CHECK (committed IN (0, 1)),
    reason             text,
    received_at        double precision NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS wm_responses_one_commit ON wm_responses (ballot_id)
    WHERE committed = 1
"""
# Whether every object exists: opening an existing store then runs no DDL (CREATE INDEX IF NOT
# EXISTS locks its table even when the index is there, in an order a running loop's prepared
# statements can deadlock against).
SCHEMA_PRESENT_SQL = (
    "SELECT to_regclass('wm_store') IS NOT NULL AND to_regclass('wm_ballots') IS NOT NULL"
    " AND to_regclass('wm_ballots_inflight') IS NOT NULL"
    " AND to_regclass('wm_responses') IS NOT NULL"
    " AND to_regclass('wm_responses_one_commit') IS NOT NULL"
)
STORE_INIT_SQL = "INSERT INTO wm_store (id, next_ballot) VALUES (1, 1) ON CONFLICT (id) DO NOTHING"
SCHEMA_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('labkit.wm:' || current_schema()))"
INFLIGHT_SQL = (
    "SELECT ballot_id, observed_watermark, base_version FROM wm_ballots"
    " WHERE status = 'inflight' ORDER BY ballot_id"
)
# The same steps as `labkit.catalog.loop`'s constants of the same names. Each read is one
# statement, so one snapshot: the head, the ballots and the next id it returns belong together.
RESERVE_READ_SQL = (
    "SELECT (SELECT COUNT(*) FROM wm_ballots WHERE status = 'inflight'),"
    " (SELECT next_ballot FROM wm_store WHERE id = 1),"
    " (SELECT MAX(version) FROM catalog_versions)"
)
DECISION_READ_SQL = (
    "SELECT (SELECT MAX(version) FROM catalog_versions),"
    " (SELECT observed_watermark FROM wm_ballots WHERE ballot_id = %s AND status = 'inflight')"
)
# Where SQLite runs a tuple of statements, one statement here: the first part (the guard) is a
# data-modifying CTE and every later part selects FROM it, with parameters in the order of
# SQLite's parts. The statement's row count is 1 if the guard matched, 0 if it lost the race.
RESERVE_SQL = (
    "WITH guard AS (UPDATE wm_store SET next_ballot = %s WHERE id = 1 AND next_ballot = %s"
    " RETURNING 1)\nINSERT INTO wm_ballots (ballot_id, observed_watermark, base_version,"
    " replay_of, status, reserved_at)\n    SELECT %s, %s, %s, %s, 'inflight', %s FROM guard"
)
RESPONSE_SQL = (
    "INSERT INTO wm_responses (ballot_id, observed_watermark, base_version, tools_hash,"
    " committed, reason, received_at) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_GUARDED_RESPONSE = (
    "INSERT INTO wm_responses (ballot_id, observed_watermark, base_version, tools_hash,"
    " committed, reason, received_at)\n    SELECT %s, %s, %s, %s, %s, %s, %s FROM guard"
)
_DECIDE = (
    "UPDATE wm_ballots SET status = %s, reason = %s, decided_at = %s\n"
    "    WHERE ballot_id = %s AND status = 'inflight'"
)
DECIDE_SQL = f"WITH guard AS ({_DECIDE} RETURNING 1)\n{_GUARDED_RESPONSE}"
# A commit's guard also names the fence it commits on, so the write can be tried before any
# read (`WatermarkLoop.apply`): it lands only if the ballot is in flight on that fence and
# version fence+1 is free. The log's keys make that mean "the head is the fence": the primary
# key refuses a second fence+1, and each version's base must exist (a foreign key in
# `catalog_pg`), so nothing can sit above a free fence+1.
_COMMIT_DECIDE = f"{_DECIDE} AND observed_watermark = %s RETURNING 1"
_APPEND = (
    "INSERT INTO catalog_versions (version, tools, tools_hash, ballot_id, base_version,"
    " committed_at)\n    SELECT %s, %s, %s, %s, %s, %s FROM guard"
)
COMMIT_SQL = f"WITH guard AS ({_COMMIT_DECIDE}),\nversion AS ({_APPEND})\n{_GUARDED_RESPONSE}"
ABANDON_SQL = (
    "UPDATE wm_ballots SET status = 'abandoned', decided_at = %s"
    " WHERE ballot_id = %s AND status = 'inflight'"
)
# The key a commit trips when another loop stored the same version first. (A foreign key on
# the log trips when the head went back below the commit's fence; any such key counts.)
VERSION_KEY = "catalog_versions_pkey"
ISOLATION_SQL = "SHOW default_transaction_isolation"


class LoopConnectionError(RuntimeError):
    """The connection cannot give a write the guarantees the loop promises (see the message)."""


def create_schema(conn: Any) -> None:
    """Create the store, ballots and responses tables and the store row (idempotent, safe from
    many sessions at once: an advisory lock keyed on the schema serialises the DDL, and a store
    that exists is left alone)."""
    with conn.transaction():
        conn.execute(SCHEMA_LOCK_SQL)
        if not conn.execute(SCHEMA_PRESENT_SQL).fetchone()[0]:
            conn.execute(SCHEMA_SQL)
        conn.execute(STORE_INIT_SQL)


def _require_idle(conn: Any, why: str) -> None:
    """`LoopConnectionError` if `conn` is closed or has a transaction open; `why` says why not."""
    from psycopg.pq import TransactionStatus

    if conn.closed:
        raise LoopConnectionError("WatermarkLoop on PostgreSQL: the connection is closed or broken")
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise LoopConnectionError(
            f"WatermarkLoop on PostgreSQL needs a connection with no open transaction {why};"
            " commit or roll back first"
        )


@contextmanager
def deciding(conn: Any) -> Iterator[Any]:
    """Run one read-decide-write with each statement committed on its own (autocommit).

    Refused on a connection that already has a transaction open: a reserve or a decision must
    be durable when it returns, not part of someone else's transaction. The connection's
    autocommit setting is put back afterwards.
    """
    _require_idle(conn, "(a reserve or a decision is committed before it returns)")
    if conn.autocommit:
        yield conn
        return
    conn.autocommit = True
    try:
        yield conn
    finally:
        if not conn.closed:
            conn.autocommit = False


def lost_race(exc: BaseException) -> bool:
    """True if `exc` means what this write assumed is no longer true: read and decide again.

    Under READ COMMITTED a guard re-checked against the newest row simply matches nothing; the
    errors here are the other ways of losing: the next version was stored first (primary key),
    the head went back below the fence a commit assumed (the log's foreign key), or the server
    broke a deadlock by cancelling this statement. Each write is one autocommit statement, so
    a statement that failed wrote nothing. (A serialization failure, possible only if the
    session's level was raised after the loop opened, is retried the same way.)
    """
    import psycopg

    errors = psycopg.errors
    if isinstance(exc, errors.SerializationFailure | errors.DeadlockDetected):
        return True
    if isinstance(exc, errors.UniqueViolation):
        return exc.diag.constraint_name == VERSION_KEY
    return isinstance(exc, errors.ForeignKeyViolation) and exc.diag.table_name == "catalog_versions"


def check_connection(conn: Any) -> None:
    """Refuse, when a loop opens, a connection it cannot keep its promises on.

    It must have no transaction open: opening takes the schema's locks, which a caller's
    transaction would hold until it ends, stalling every other loop. Its statements must run
    at READ COMMITTED (READ UNCOMMITTED is the same level in PostgreSQL): the loop's writes are
    autocommit statements, so the session default applies to them, and psycopg's
    `isolation_level` applies to the reads it opens transactions for. A later `SET` is not
    noticed; the writes stay correct then (they retry serialization failures), but reads and
    abandons may raise them.
    """
    import psycopg

    _require_idle(conn, "when it opens (it takes the schema's locks)")
    allowed = (psycopg.IsolationLevel.READ_COMMITTED, psycopg.IsolationLevel.READ_UNCOMMITTED)
    level = conn.isolation_level
    if level is not None and level not in allowed:
        raise LoopConnectionError(
            "WatermarkLoop on PostgreSQL runs at READ COMMITTED; this connection asks for"
            f" {level.name.replace('_', ' ')} (set isolation_level to None or READ_COMMITTED)"
        )
    with reading(conn):
        (default,) = conn.execute(ISOLATION_SQL).fetchone()
    if default not in ("read committed", "read uncommitted"):
        raise LoopConnectionError(
            "WatermarkLoop on PostgreSQL runs at READ COMMITTED; this session's"
            f" default_transaction_isolation is {default.upper()}"
        )
