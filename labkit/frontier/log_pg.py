"""The message log on PostgreSQL: schema, SQL and the commit-order-safe frontier.

`labkit.frontier.log` dispatches here when it is handed a psycopg connection; the SQLite code never
comes here. Two things differ from SQLite, where one writer at a time hides them:

* An id is taken from a sequence when a row is inserted, but the row becomes visible when its
  transaction commits. A smaller id can therefore appear *after* a larger one was delivered;
  Article 1's rule (`id_order_frontier`) then walks past it, and the row is orphaned.
* `delivered_frontier` here is a snapshot fence (see its docstring): it never passes an id that a
  transaction still in progress may yet commit.

`enqueue` never commits (the caller's transaction decides); the status changes commit on their
own when the connection is idle and nest as a savepoint inside a caller's transaction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

NON_TERMINAL = ("pending", "running")
# Rules the PostgreSQL checkpoint table accepts: the two of part one plus Article 1's id order.
PG_POLICIES = ("frontier", "max", "id_order")
FENCE_WAIT_S = 5.0
FENCE_POLL_S = 0.002

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
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER conversations_xact_id_first
    BEFORE INSERT ON conversations
    FOR EACH STATEMENT EXECUTE FUNCTION labkit_take_xact_id();
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
# which the fence relies on. (Ids taken by hand with nextval() bypass it: don't.)

ENQUEUE_SQL = (
    "INSERT INTO conversations (channel_key, direction, status, priority) "
    "VALUES (%s, %s, 'pending', %s) RETURNING id"
)
TRANSITION_SQL = "UPDATE conversations SET status = %s WHERE id = %s AND status = ANY(%s)"
STATUS_SQL = "SELECT status FROM conversations WHERE id = %s"
DISPATCH_SQL = (
    "UPDATE conversations SET status = 'running' WHERE id = ("
    "SELECT id FROM conversations WHERE status = 'pending' ORDER BY priority, id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED) RETURNING id"
)
DISPATCH_SHARD_SQL = (
    "UPDATE conversations SET status = 'running' WHERE id = ("
    "SELECT id FROM conversations WHERE channel_key = %s AND status = 'pending' "
    "ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id"
)
# Article 1's rule, the same two seeks as on SQLite: the smallest open id above the base (partial
# index idx_conv_active), else the largest id above it (idx_conv_shard_id), else the base.
FRONTIER_LOOKUP_SQL = (
    "SELECT COALESCE("
    "(SELECT MIN(id) FROM conversations"
    " WHERE channel_key = %(key)s AND id > %(base)s AND status IN ('pending','running')) - 1, "
    "(SELECT MAX(id) FROM conversations WHERE channel_key = %(key)s AND id > %(base)s), "
    "%(base)s)"
)
MAX_DELIVERED_SQL = (
    "SELECT MAX(id) FROM conversations WHERE channel_key = %s AND status = 'delivered'"
)
# Fence, step 1, one statement: the largest visible id of the shard (read from the statement's
# snapshot) and a fresh transaction id, taken after that snapshot.
FENCE_OPEN_SQL = (
    "SELECT (SELECT MAX(id) FROM conversations WHERE channel_key = %(key)s), "
    "pg_current_xact_id(), current_setting('transaction_isolation')"
)
# Fence, step 2, one statement so both answers come from one snapshot: has every transaction
# older than the fence ended, and Article 1's rule over what is visible now.
FENCE_CHECK_SQL = (
    "SELECT pg_snapshot_xmin(pg_current_snapshot()) >= %(fence)s::xid8, " + FRONTIER_LOOKUP_SQL[7:]
)
OWN_XACT_SQL = "SELECT pg_current_xact_id_if_assigned()"


class FenceError(RuntimeError):
    """`delivered_frontier` on PostgreSQL was called where its fence cannot be sound."""


def create_schema(conn: Any) -> None:
    """Create the log, its indexes, the xact-id-first trigger and the checkpoint tables."""
    with conn.transaction():
        conn.execute(SCHEMA_SQL)


def enqueue(conn: Any, channel_key: str, priority: int, direction: str = "inbound") -> int:
    """Insert a pending row in the caller's transaction and return its id; never commits."""
    return int(conn.execute(ENQUEUE_SQL, (channel_key, direction, int(priority))).fetchone()[0])


def transition(conn: Any, row_id: int, allowed: tuple[str, ...], to: str) -> tuple[bool, str | None]:
    """Move `row_id` to `to` if its status is in `allowed`: (moved, current status or None)."""
    with conn.transaction():
        if conn.execute(TRANSITION_SQL, (to, row_id, list(allowed))).rowcount == 1:
            return True, to
        row = conn.execute(STATUS_SQL, (row_id,)).fetchone()
    return False, None if row is None else str(row[0])


def dispatch_next(conn: Any, channel_key: str | None = None) -> int | None:
    """Claim the next pending row `ORDER BY priority, id` (SKIP LOCKED: each row exactly once)."""
    with conn.transaction():
        if channel_key is None:
            row = conn.execute(DISPATCH_SQL).fetchone()
        else:
            row = conn.execute(DISPATCH_SHARD_SQL, (channel_key,)).fetchone()
    return None if row is None else int(row[0])


def id_order_frontier(conn: Any, channel_key: str, base: int = 0) -> int:
    """Article 1's rule verbatim over the rows visible now; passes ids still being committed."""
    row = conn.execute(FRONTIER_LOOKUP_SQL, {"key": channel_key, "base": base}).fetchone()
    return int(row[0])


def max_delivered_watermark(conn: Any, channel_key: str) -> int | None:
    """THE WRONG RULE of part one, on PostgreSQL: `MAX(id) WHERE status = 'delivered'`."""
    value = conn.execute(MAX_DELIVERED_SQL, (channel_key,)).fetchone()[0]
    return None if value is None else int(value)


@dataclass(frozen=True)
class FenceReading:
    """One fenced lookup: the frontier, whether the fence let it move, and what it waited for.

    `fence` is the transaction id the lookup took; `visible_max` the largest id it could see
    when it took it; `waited_s` how long older transactions kept it waiting.
    """

    frontier: int
    settled: bool
    visible_max: int | None
    fence: int | None
    waited_s: float


def fenced_frontier(
    conn: Any, channel_key: str, base: int = 0, wait: float = FENCE_WAIT_S
) -> FenceReading:
    """The snapshot fence, with its evidence (see `delivered_frontier`)."""
    from psycopg.pq import TransactionStatus

    outer = conn.info.transaction_status != TransactionStatus.IDLE
    if outer and conn.execute(OWN_XACT_SQL).fetchone()[0] is not None:
        raise FenceError(
            "delivered_frontier on PostgreSQL needs a transaction that has not written yet "
            "(its fence is a fresh transaction id); call it before writing, or commit first"
        )
    params: dict[str, Any] = {"key": channel_key, "base": base}
    visible_max, fence, isolation = conn.execute(FENCE_OPEN_SQL, params).fetchone()
    if not outer:
        conn.commit()
    if isolation != "read committed":
        raise FenceError(
            f"delivered_frontier on PostgreSQL polls with fresh snapshots, which needs READ "
            f"COMMITTED; this transaction is {isolation.upper()}"
        )
    if visible_max is None or visible_max <= base:
        return FenceReading(base, True, visible_max, int(str(fence)), 0.0)
    params["fence"] = str(fence)
    start = time.monotonic()
    while True:
        settled, frontier = conn.execute(FENCE_CHECK_SQL, params).fetchone()
        if not outer:
            conn.commit()
        waited = time.monotonic() - start
        if settled:
            value = max(base, min(int(frontier), int(visible_max)))
            return FenceReading(value, True, int(visible_max), int(str(fence)), waited)
        if waited >= wait:
            return FenceReading(base, False, int(visible_max), int(str(fence)), waited)
        time.sleep(FENCE_POLL_S)


def delivered_frontier(
    conn: Any, channel_key: str, base: int = 0, wait: float = FENCE_WAIT_S
) -> int:
    """Gap-free frontier that is commit-order safe: never passes an id that may yet commit.

    Step 1, one statement: `v` = the largest id the statement's snapshot sees, and a fresh
    transaction id `g`. Every id <= v was taken before that snapshot, by a transaction that
    already had its xact id (the statement trigger makes sure), so by one with xact id < g.
    Step 2 polls until `pg_snapshot_xmin(pg_current_snapshot()) >= g`, i.e. every transaction
    older than g has ended; then Article 1's rule over that same snapshot, capped at v, is final.
    After `wait` seconds (a session idle in a transaction holds it forever) it returns `base`:
    it holds back, never skips. Needs READ COMMITTED and a transaction that has not written.

    Recording `pg_current_xact_id()` per row and capping below the smallest id whose xact is
    >= xmin is not enough on its own: a transaction with an OLDER xact id can commit a LARGER
    id while a younger one still holds a smaller id, and then nothing visible marks the hole.
    """
    return fenced_frontier(conn, channel_key, base, wait).frontier


# --- checkpoints and summaries (the summarizer of part one, on PostgreSQL) -------------------

COVERAGE_SQL = "SELECT coverage_end FROM checkpoints WHERE channel_key = %s AND policy = %s"
TERMINAL_IN_RANGE_SQL = (
    "SELECT id FROM conversations WHERE channel_key = %s AND id > %s AND id <= %s "
    "AND status IN ('delivered','failed') ORDER BY id"
)
INSERT_SUMMARY_SQL = (
    "INSERT INTO summaries (channel_key, policy, start_id, end_id) VALUES (%s, %s, %s, %s) "
    "RETURNING id"
)
INSERT_ITEMS_SQL = (
    "INSERT INTO summary_items (summary_id, conversation_id) SELECT %s, unnest(%s::bigint[])"
)
UPSERT_CHECKPOINT_SQL = (
    "INSERT INTO checkpoints (channel_key, policy, coverage_end) VALUES (%s, %s, %s) "
    "ON CONFLICT (channel_key, policy) DO UPDATE SET coverage_end = excluded.coverage_end"
)
ORPHANS_SQL = (
    "SELECT c.id FROM conversations AS c "
    "WHERE c.channel_key = %s AND c.id <= %s AND c.status IN ('delivered','failed') "
    "AND NOT EXISTS (SELECT 1 FROM summary_items AS si JOIN summaries AS s "
    "  ON s.id = si.summary_id WHERE si.conversation_id = c.id AND s.policy = %s) "
    "ORDER BY c.id"
)


@dataclass(frozen=True)
class PgSummary:
    """One digest written on PostgreSQL: rows of the shard in [start_id, end_id]."""

    summary_id: int
    start_id: int
    end_id: int
    item_ids: tuple[int, ...]


def coverage_end(conn: Any, channel_key: str, policy: str) -> int:
    """The stored checkpoint of `policy` (0 before its first summary)."""
    row = conn.execute(COVERAGE_SQL, (channel_key, policy)).fetchone()
    return 0 if row is None else int(row[0])


def summarize_to(conn: Any, channel_key: str, policy: str, end: int) -> PgSummary | None:
    """Summarize the terminal rows in (coverage_end, end] and move coverage_end, in one commit.

    `end` comes from the policy's rule, asked before this call. None (nothing written) when no
    terminal row lies in the range.
    """
    with conn.transaction():
        start = coverage_end(conn, channel_key, policy)
        if end <= start:
            return None
        items = tuple(
            int(r[0]) for r in conn.execute(TERMINAL_IN_RANGE_SQL, (channel_key, start, end))
        )
        if not items:
            return None
        sid = int(
            conn.execute(INSERT_SUMMARY_SQL, (channel_key, policy, start + 1, end)).fetchone()[0]
        )
        conn.execute(INSERT_ITEMS_SQL, (sid, list(items)))
        conn.execute(UPSERT_CHECKPOINT_SQL, (channel_key, policy, end))
    return PgSummary(sid, start + 1, end, items)


def orphans(conn: Any, channel_key: str, policy: str) -> list[int]:
    """Audit: terminal rows at or below the policy's coverage that no summary of it holds."""
    end = coverage_end(conn, channel_key, policy)
    return [int(r[0]) for r in conn.execute(ORPHANS_SQL, (channel_key, end, policy))]


def explain_json(conn: Any, sql: str, params: Any = None) -> dict[str, Any]:
    """The root plan node of `EXPLAIN (FORMAT JSON)` for one of this module's statements."""
    row = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
    return row[0][0]["Plan"]


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a JSON plan, depth first (InitPlans and SubPlans included)."""
    out = [plan]
    for child in plan.get("Plans", []):
        out += plan_nodes(child)
    return out
