"""How PostgreSQL runs the ballot store: decisions that commit statement by statement, a write
that lost a race told from a failure, and the connection checked and pinned when a loop opens.

`labkit.catalog.loop` writes every statement of the store, both backends' side by side where
they differ, and its `WatermarkLoop` runs the one rule on either; this module holds only what
PostgreSQL does around them. What PostgreSQL adds is concurrency: many processes, each with its
own connection, share one store. No lock is held across a decision. The loop reads in one
statement, decides in Python, then writes in one statement whose first part is a guard: it
only changes rows that still hold what was read (`next_ballot = <read>`, `status =
'inflight'`), and every other part selects `FROM` that guard, so when the guard matches nothing
the statement writes nothing (`loop.Guarded`). A commit also inserts version head+1, which the
catalog's primary key refuses if another loop stored it first. Each statement runs on its own
(autocommit) at READ COMMITTED with synchronous commits, so it is atomic and durable when it
returns, and its guard is re-checked against the newest committed row; a write that lost
(guard matched nothing, `lost_race` error) is decided again from a fresh read.

What the loop's session is pinned to. Opening a loop refuses a session with
`synchronous_commit = off` or a default level above READ COMMITTED (`check_connection`), then
sets both for the rest of the session, committed before the loop opens: `synchronous_commit`
to the value it has (every value but off writes a commit's WAL to disk before reporting it)
and `default_transaction_isolation` to READ COMMITTED. A session's own setting outranks the
server's, a role's and a database's, so an `ALTER SYSTEM` and a reload while the loop runs
cannot reach it: with commits no longer durable, a server crash would lose commits already
reported and a new ballot would commit a version number already reported for another; at a
higher level, reads and abandons would fail with serialization errors. A `SET` or `RESET` on
the session itself after it opened is its caller's choice. The hold (`hold.create`) and a
`CatalogReader`'s record pin `synchronous_commit` the same way
(`versions_pg.require_durable_commits`). The server's `fsync` and `full_page_writes` no session
can pin: with either off, a crash of the machine (not of PostgreSQL alone) can still lose
commits.

Consequences worth knowing. A reserve may return a ballot whose fence a commit passed between
its read and its write (nothing the reserve writes says otherwise): safe, the ballot is
refused as stale, but its planner call is wasted; a lock on the whole store would prevent that
at the price of every worker waiting for every decision. `wm_responses.seq` numbers inserts,
not decisions: on PostgreSQL two decisions may commit in the other order, and a refused write
leaves a gap. A commit tried before the read (`WatermarkLoop.apply`) that is refused shows in
the server log as a duplicate-key error; `WatermarkLoop.commit_first_misses` counts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from labkit.backend import POSTGRES
from labkit.catalog.versions_pg import READ_COMMITTED, pin_settings, require_durable_commits

# The key a commit trips when another loop stored the same version first. (A foreign key on
# the log trips when the head went back below the commit's fence; any such key counts.)
VERSION_KEY = "catalog_versions_pkey"
ISOLATION_SQL = "SHOW default_transaction_isolation"


class LoopConnectionError(RuntimeError):
    """The connection cannot give a write the guarantees the loop promises (see the message)."""


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
    """Refuse, when a loop opens, a connection it cannot keep its promises on; pin the rest.

    It must have no transaction open: opening takes the schema's locks, which a caller's
    transaction would hold until it ends, stalling every other loop. Its statements must run
    at READ COMMITTED (READ UNCOMMITTED is the same level in PostgreSQL): the loop's writes are
    autocommit statements, so the session default applies to them, and psycopg's
    `isolation_level` applies to the reads it opens transactions for. Its commits must be
    durable when reported: a session with `synchronous_commit = off` is refused
    (`DurabilityError`). Both settings are then pinned for the session (see the module
    docstring), so no change of the server's reaches it.
    """
    import psycopg

    _require_idle(conn, "when it opens (it takes the schema's locks)")
    require_durable_commits(conn, "WatermarkLoop")
    allowed = (psycopg.IsolationLevel.READ_COMMITTED, psycopg.IsolationLevel.READ_UNCOMMITTED)
    level = conn.isolation_level
    if level is not None and level not in allowed:
        raise LoopConnectionError(
            "WatermarkLoop on PostgreSQL runs at READ COMMITTED; this connection asks for"
            f" {level.name.replace('_', ' ')} (set isolation_level to None or READ_COMMITTED)"
        )
    with POSTGRES.reading(conn):
        (default,) = conn.execute(ISOLATION_SQL).fetchone()
    if default not in ("read committed", "read uncommitted"):
        raise LoopConnectionError(
            "WatermarkLoop on PostgreSQL runs at READ COMMITTED; this session's"
            f" default_transaction_isolation is {default.upper()}"
        )
    pin_settings(conn, READ_COMMITTED)
