"""What the message log writes differently on PostgreSQL: its DDL, dispatch's row lock, and the
statements of the xmin horizon wait. `labkit.frontier.log` runs them when `backend.dialect` says a
connection is psycopg's; every other statement of the log is written once, there.

Two things differ from SQLite, where one writer at a time hides them:

* An id is taken from a sequence when a row is inserted, but the row becomes visible when its
  transaction commits. A smaller id can therefore appear *after* a larger one was delivered;
  Article 1's rule (`id_order_frontier`) then walks past it, and the row is orphaned.
* `delivered_frontier` here is the **xmin horizon wait** (`log.horizon_frontier`): it never
  passes an id that a transaction still in progress may yet commit. It polls with fresh
  snapshots, so it needs READ COMMITTED and refuses any other level; the summarizer sessions
  of part three (`labkit.pg.stress`, `labkit.pg.commit_order`) pin it when they open
  (`labkit.pg.instance.pin_settings`), so a change of the server's default cannot stop them.

`enqueue` never commits (the caller's transaction decides); the status changes commit on their
own when the connection is idle and nest as a savepoint inside a caller's transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import labkit.backend as backend

if TYPE_CHECKING:
    import psycopg

# Rules the PostgreSQL checkpoint table accepts: the two of part one plus Article 1's id order.
PG_POLICIES = ("frontier", "max", "id_order")
HORIZON_WAIT_S = 5.0
HORIZON_POLL_S = 0.002

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS conversations (
    id          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel_key text    NOT NULL,
    direction   text    NOT NULL,
    status      text    NOT NULL
                CHECK (status IN ('pending', 'running', 'delivered', 'failed')),
    priority    integer NOT NULL,
    redrive_of  bigint  REFERENCES conversations(id),
    xact_id     xid8    NOT NULL DEFAULT pg_current_xact_id()
);
CREATE OR REPLACE FUNCTION labkit_take_xact_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_current_xact_id();
    PERFORM set_config('labkit.id_seq',
        pg_get_serial_sequence(format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME), 'id'), true);
    PERFORM set_config('labkit.id_floor', COALESCE(pg_sequence_last_value(
        current_setting('labkit.id_seq')::regclass), 0)::text, true);
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER conversations_xact_id_first
    BEFORE INSERT ON conversations
    FOR EACH STATEMENT EXECUTE FUNCTION labkit_take_xact_id();
CREATE OR REPLACE FUNCTION labkit_id_taken_here() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    floor bigint := NULLIF(current_setting('labkit.id_floor', true), '')::bigint;
    given bigint;
BEGIN
    IF floor IS NULL THEN
        RAISE EXCEPTION 'conversations: the statement trigger conversations_xact_id_first did '
            'not run; run create_schema again' USING ERRCODE = 'check_violation';
    END IF;
    BEGIN
        given := currval(current_setting('labkit.id_seq'));
    EXCEPTION WHEN object_not_in_prerequisite_state THEN
        given := NULL;  -- this session never took an id: NEW.id came from elsewhere
    END;
    IF NEW.id <= floor OR NEW.id IS DISTINCT FROM given THEN
        RAISE EXCEPTION 'conversations: id % was not taken from the sequence by this INSERT; an '
            'id must come from the sequence inside the inserting statement (the xmin horizon '
            'wait relies on it)', NEW.id USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE TRIGGER conversations_id_taken_here
    BEFORE INSERT ON conversations
    FOR EACH ROW EXECUTE FUNCTION labkit_id_taken_here();
CREATE INDEX IF NOT EXISTS idx_conv_active
    ON conversations (channel_key, id) WHERE status IN ('pending','running');
CREATE INDEX IF NOT EXISTS idx_conv_shard_id
    ON conversations (channel_key, id);
CREATE INDEX IF NOT EXISTS idx_conv_pending
    ON conversations (priority, id) WHERE status = 'pending';
CREATE TABLE IF NOT EXISTS checkpoints (
    channel_key  text   NOT NULL,
    policy       text   NOT NULL CHECK (policy IN ('frontier', 'max', 'id_order')),
    coverage_end bigint NOT NULL,
    PRIMARY KEY (channel_key, policy)
);
CREATE TABLE IF NOT EXISTS summaries (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel_key text   NOT NULL,
    policy      text   NOT NULL CHECK (policy IN ('frontier', 'max', 'id_order')),
    start_id    bigint NOT NULL,
    end_id      bigint NOT NULL,
    CHECK (start_id <= end_id)
);
CREATE INDEX IF NOT EXISTS idx_summaries_shard
    ON summaries (channel_key, policy, start_id);
CREATE TABLE IF NOT EXISTS summary_items (
    summary_id      bigint NOT NULL REFERENCES summaries(id),
    conversation_id bigint NOT NULL REFERENCES conversations(id),
    PRIMARY KEY (summary_id, conversation_id)
);
CREATE INDEX IF NOT EXISTS idx_summary_items_conv
    ON summary_items (conversation_id);
"""
# Why the statement trigger: the identity's nextval() runs while the row is built, and a
# transaction gets its id only when it first writes. A BEFORE ... FOR EACH STATEMENT trigger fires
# before any row is built, so every id is taken by a transaction that already has its xact id,
# which the horizon wait relies on. It also notes the sequence's last value then, and the row
# trigger refuses an id at or below it (taken earlier: a `nextval()` of its own, then
# `OVERRIDING SYSTEM VALUE`, or handed out of a session's cache) and an id that is not the value
# the sequence just gave this row (any other explicit id, above the sequence too). A cached sequence is
# refused outright (`check_preconditions`): its ids are taken before the transaction that
# inserts them exists.

# Dispatch's pick, row-locked: a second dispatcher skips the row the first one holds instead of
# waiting for it and then claiming it a second time (SQLite's single writer needs no lock).
SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"

# The xmin horizon wait, step 1, one statement: the largest visible id of the shard (read from
# the statement's snapshot) and a fresh transaction id, taken after that snapshot.
HORIZON_OPEN_SQL = (
    "SELECT (SELECT MAX(id) FROM conversations WHERE channel_key = :key), "
    "pg_current_xact_id(), current_setting('transaction_isolation')"
)
# Step 2's test: has the snapshot's xmin horizon passed that transaction id, i.e. has every
# older transaction ended? (`log.HORIZON_CHECK_SQL` asks it with Article 1's rule, one snapshot.)
HORIZON_PASSED = "pg_snapshot_xmin(pg_current_snapshot()) >= CAST(:xact AS xid8)"
OWN_XACT_SQL = "SELECT pg_current_xact_id_if_assigned()"
# What the horizon wait relies on, in one row: the id sequence's name and how many ids a session
# caches, and whether both triggers are in place and enabled.
PRECONDITIONS_SQL = (
    "SELECT s.seqrelid::regclass::text, s.seqcache,"
    " (SELECT COUNT(*) FROM pg_trigger AS t WHERE t.tgrelid = CAST('conversations' AS regclass)"
    "  AND t.tgenabled <> 'D'"
    "  AND t.tgname IN ('conversations_xact_id_first', 'conversations_id_taken_here'))"
    " FROM pg_sequence AS s"
    " WHERE s.seqrelid = CAST(pg_get_serial_sequence('conversations', 'id') AS regclass)"
)


class PreconditionError(RuntimeError):
    """The log on PostgreSQL is set up in a way the xmin horizon wait cannot be sound on."""


def check_preconditions(conn: psycopg.Connection[Any]) -> None:
    """Refuse, in one line naming the sequence, a log whose ids could be taken outside the
    transaction that inserts them: a sequence that caches ids per session, or a missing or
    disabled id trigger. One catalog read, on every frontier lookup: a long-lived summarizer
    sees an `ALTER SEQUENCE` made after it connected."""
    with backend.POSTGRES.reading(conn):
        row = conn.execute(PRECONDITIONS_SQL).fetchone()
    if row is None:
        raise PreconditionError("conversations.id has no sequence: make the log with create_schema")
    sequence, cache, triggers = row
    if cache != 1:
        raise PreconditionError(
            f"sequence {sequence} caches {cache} ids per session, so an id can be taken before "
            f"the transaction that inserts it exists and the xmin horizon wait would pass it: "
            f"ALTER SEQUENCE {sequence} CACHE 1"
        )
    if triggers != 2:
        raise PreconditionError(
            f"the id triggers on conversations (sequence {sequence}) are missing or disabled, so "
            "an id can be taken before its transaction has an xact id: run create_schema again"
        )


def transaction_open(conn: psycopg.Connection[Any]) -> bool:
    """Whether the psycopg connection `conn` is inside a transaction (not idle)."""
    from psycopg.pq import TransactionStatus

    return conn.info.transaction_status != TransactionStatus.IDLE


def explain_json(
    conn: psycopg.Connection[Any], statement: str, params: Any = None
) -> dict[str, Any]:
    """The root plan node of PostgreSQL's `EXPLAIN (FORMAT JSON)` for one statement written in
    SQLite's placeholder style (the log's plans on PostgreSQL; SQLite's: `log.explain`)."""
    d = backend.require(conn, "explain_json", "postgres")
    row = d.execute(conn, "EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
    return row[0][0]["Plan"]


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a JSON plan, depth first (InitPlans and SubPlans included)."""
    out = [plan]
    for child in plan.get("Plans", []):
        out += plan_nodes(child)
    return out
