"""The ballot store on PostgreSQL: schema, statements and the lock every decision takes.

`labkit.watermark_loop.WatermarkLoop` dispatches here when it is handed a psycopg connection;
its rule is written once and runs these statements (same names as its SQLite ones). What
PostgreSQL adds is concurrency: many processes, each with its own connection, share one store.
Every write (reserve, apply, abandon) runs in one transaction that first takes a row lock on
the single `wm_store` row (`SELECT ... FOR UPDATE`). Under READ COMMITTED each later statement
of that transaction reads the latest commits, so the head a decision reads cannot move before
it commits: two workers can never both commit on one watermark. The catalog's primary key on
the version backs that up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from labkit.catalog_pg import APPEND_SQL, reading

__all__ = ["reading", "writing", "create_schema", "LoopConnectionError"]

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
    WHERE committed = 1;
INSERT INTO wm_store (id, next_ballot) VALUES (1, 1) ON CONFLICT (id) DO NOTHING
"""
SCHEMA_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('labkit.wm:' || current_schema()))"
# Taken first by every write: the one store row, locked until the transaction ends.
STORE_LOCK_SQL = (
    "SELECT current_setting('transaction_isolation') FROM wm_store WHERE id = 1 FOR UPDATE"
)
INFLIGHT_SQL = (
    "SELECT ballot_id, observed_watermark, base_version FROM wm_ballots"
    " WHERE status = 'inflight' ORDER BY ballot_id"
)
# The same steps as `labkit.watermark_loop`'s constants of the same names. The reads are
# statements of their own, sent after STORE_LOCK_SQL has returned: each takes its snapshot
# when it starts, so it sees every commit made before the lock was granted. (Read in the lock
# statement itself, they could come from the snapshot taken before it waited.)
RESERVE_READ_SQL = (
    "SELECT (SELECT COUNT(*) FROM wm_ballots WHERE status = 'inflight'),"
    " (SELECT next_ballot FROM wm_store WHERE id = 1),"
    " (SELECT MAX(version) FROM catalog_versions)"
)
DECISION_READ_SQL = (
    "SELECT (SELECT MAX(version) FROM catalog_versions),"
    " (SELECT observed_watermark FROM wm_ballots WHERE ballot_id = %s AND status = 'inflight')"
)
# Where SQLite runs a tuple of statements, one statement here: data-modifying CTEs, whose
# parameters come in the same order as SQLite's parts. They all see the same snapshot and
# touch different tables, so none depends on another's effect.
RESERVE_SQL = (
    "WITH ballot AS (INSERT INTO wm_ballots (ballot_id, observed_watermark, base_version,"
    " replay_of, status, reserved_at) VALUES (%s, %s, %s, %s, 'inflight', %s))"
    " UPDATE wm_store SET next_ballot = %s WHERE id = 1"
)
RESPONSE_SQL = (
    "INSERT INTO wm_responses (ballot_id, observed_watermark, base_version, tools_hash,"
    " committed, reason, received_at) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_DECIDE = "UPDATE wm_ballots SET status = %s, reason = %s, decided_at = %s WHERE ballot_id = %s"
DECIDE_SQL = f"WITH decision AS ({_DECIDE}) {RESPONSE_SQL}"
COMMIT_SQL = f"WITH version AS ({APPEND_SQL}), decision AS ({_DECIDE}) {RESPONSE_SQL}"
ABANDON_SQL = (
    "UPDATE wm_ballots SET status = 'abandoned', decided_at = %s"
    " WHERE ballot_id = %s AND status = 'inflight'"
)

class LoopConnectionError(RuntimeError):
    """The connection cannot give a write the guarantees the loop promises (see the message)."""


def create_schema(conn: Any) -> None:
    """Create the store, ballots and responses tables and the store row (idempotent, safe from
    many sessions at once: an advisory lock keyed on the schema serialises the DDL)."""
    with conn.transaction():
        conn.execute(SCHEMA_LOCK_SQL)
        conn.execute(SCHEMA_SQL)


@contextmanager
def writing(conn: Any) -> Iterator[Any]:
    """One write transaction holding the store row lock: committed when the block ends.

    Refused on a connection that already has a transaction open (a reserve must be durable
    when it returns, not a savepoint of someone else's transaction) or that is not READ
    COMMITTED (after the lock, each statement must see the commits that happened meanwhile).
    """
    from psycopg.pq import TransactionStatus

    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise LoopConnectionError(
            "WatermarkLoop on PostgreSQL needs a connection with no open transaction (a reserve"
            " or a decision is committed before it returns); commit or roll back first"
        )
    with conn.transaction():
        (isolation,) = conn.execute(STORE_LOCK_SQL).fetchone()
        if isolation != "read committed":
            raise LoopConnectionError(
                "WatermarkLoop on PostgreSQL needs READ COMMITTED (after taking the store lock,"
                f" each statement must read the latest commits); this connection is {isolation.upper()}"
            )
        yield conn
