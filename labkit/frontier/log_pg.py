"""What the message log writes differently on PostgreSQL: its id triggers (the tables are specs,
`labkit.frontier.tables`, rendered here), dispatch's row lock, and the xmin horizon wait (its
statements and the loop that runs them, `horizon_wait`).
`labkit.frontier.log` runs them when its store handle (`labkit.store`) is PostgreSQL's; every
other statement of the log is written once, there.

Two things differ from SQLite, where one writer at a time hides them:

* An id is taken from a sequence when a row is inserted, but the row becomes visible when its
  transaction commits. A smaller id can therefore appear *after* a larger one was delivered;
  Article 1's rule (`id_order_frontier`) then walks past it, and the row is orphaned.
* `delivered_frontier` here is the **xmin horizon wait** (`horizon_wait`): it never passes an id
  that a transaction still in progress may yet commit. On an idle connection it reads the next
  transaction id without taking one, so a lookup consumes no transaction id and, with no writer
  in flight, is one statement (one round trip). Inside a caller's transaction it takes an id
  and polls in that transaction, which needs READ COMMITTED; the summarizer sessions of part
  three (`labkit.pg.stress`, `labkit.pg.commit_order`) pin that level when they open
  (`labkit.catalog.versions_pg.pin_settings`), so a change of the server's default cannot stop them.

`enqueue` never commits (the caller's transaction decides); the status changes commit on their
own when the connection is idle and nest as a savepoint inside a caller's transaction.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import labkit.backend as backend
import labkit.frontier.tables as tables
from labkit import schema, store

if TYPE_CHECKING:
    import psycopg

HORIZON_WAIT_S = 5.0
HORIZON_POLL_S = 0.002

# What the horizon wait relies on: the id sequence caches no ids, and both id triggers are in
# place and enabled. The parts are shared by the named check (`PRECONDITIONS_SQL`, one row: the
# sequence's name, its cache, the enabled triggers) and the lookup's own test, a function of the
# log's schema (`PRECONDITIONS_FUNCTION`: true, false, or NULL when conversations.id has no
# sequence). A function, not a subquery, because the lookup calls it only when the preconditions
# may have changed, and a subquery's plan is set up (its catalogs opened and locked) on every
# run of the statement, called or not: about 20 µs of the server's time per lookup. It finds
# `conversations` by the caller's search path, as the lookup does.
_ID_TRIGGERS_ENABLED = (
    "(SELECT COUNT(*) FROM pg_trigger AS t WHERE t.tgrelid = CAST('conversations' AS regclass)"
    "  AND t.tgenabled <> 'D'"
    "  AND t.tgname IN ('conversations_xact_id_first', 'conversations_id_taken_here'))"
)
_ID_SEQUENCE = (
    " FROM pg_sequence AS s"
    " WHERE s.seqrelid = CAST(pg_get_serial_sequence('conversations', 'id') AS regclass)"
)
PRECONDITIONS_SQL = (
    "SELECT s.seqrelid::regclass::text, s.seqcache, " + _ID_TRIGGERS_ENABLED + _ID_SEQUENCE
)
PRECONDITIONS_FUNCTION = "labkit_frontier_preconditions_hold"
_PRECONDITIONS_FUNCTION_DDL = (
    "CREATE OR REPLACE FUNCTION "
    + PRECONDITIONS_FUNCTION
    + "() RETURNS boolean LANGUAGE sql STABLE AS $$SELECT s.seqcache = 1 AND "
    + _ID_TRIGGERS_ENABLED
    + " = 2"
    + _ID_SEQUENCE
    + "$$;\n"
)

# The id triggers the horizon wait relies on (see below): PostgreSQL alone has them.
_ID_TRIGGERS_DDL = """
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
"""
# The log's tables are specs (`labkit.frontier.tables`), rendered here as PostgreSQL runs
# them, then the id triggers and the precondition test.
SCHEMA_SQL = (
    "\n" + schema.script(tables.LOG, "postgres") + _ID_TRIGGERS_DDL + _PRECONDITIONS_FUNCTION_DDL
)
# Why the statement trigger: the identity's nextval() runs while the row is built, and a
# transaction gets its id only when it first writes. A BEFORE ... FOR EACH STATEMENT trigger fires
# before any row is built, so every id is taken by a transaction that already has its xact id,
# which the horizon wait relies on. It also notes the sequence's last value then, and the row
# trigger refuses an id at or below it (taken earlier: a `nextval()` of its own, then
# `OVERRIDING SYSTEM VALUE`, or handed out of a session's cache) and an id that is not the value
# the sequence just gave this row (any other explicit id, above the sequence too). A cached
# sequence is refused outright (`check_preconditions`): its ids are taken before the transaction
# that inserts them exists.

# Dispatch's pick, row-locked: a second dispatcher skips the row the first one holds instead of
# waiting for it and then claiming it a second time (SQLite's single writer needs no lock).
SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"

# The xmin horizon wait inside a caller's transaction, step 1, one statement: the largest visible
# id of the shard (read from the statement's snapshot) and a fresh transaction id, taken after that
# snapshot (the caller's transaction keeps it; see `horizon_wait` for why it must be taken there).
HORIZON_OPEN_SQL = (
    "SELECT (SELECT MAX(id) FROM conversations WHERE channel_key = :key), "
    "pg_current_xact_id(), current_setting('transaction_isolation')"
)
# The poll's test: has the snapshot's xmin horizon passed transaction id :xact, i.e. has every
# older transaction ended? (`log.HORIZON_CHECK_SQL` asks it with Article 1's rule, one snapshot.)
HORIZON_PASSED = "pg_snapshot_xmin(pg_current_snapshot()) >= CAST(:xact AS xid8)"
OWN_XACT_SQL = "SELECT pg_current_xact_id_if_assigned()"

# The lookup on an idle connection reads the next transaction id to be assigned, N, without
# taking one: `age(xid)` counts from the calling transaction's own id if it has one, else from N,
# read the first time the transaction calls it. In a statement that is its own transaction and
# writes nothing, called in the select list (run by the executor, after the statement's snapshot
# was taken; the planner pre-evaluates a STABLE function only to estimate a WHERE clause), it is
# N as of a moment after that snapshot. Measured from the snapshot's xmin x, which is never
# above N and less than 2^31 below it, the 32-bit age is the whole distance: N = x + age(x),
# with x's epoch, and N = x exactly when no transaction holding an id ran when the snapshot was
# taken (see `horizon_wait`).
_XMIN = "pg_snapshot_xmin(pg_current_snapshot())"
_PAST_XMIN = f"age(CAST({_XMIN} AS xid))"
_NEXT_XID = f"CAST(CAST({_XMIN} AS text) AS bigint) + {_PAST_XMIN}"
_TABLE = "CAST(CAST('conversations' AS regclass) AS oid)"
# The lookup's columns before Article 1's rule (`log.HORIZON_LOOKUP_SQL` adds the rule, one
# statement, one snapshot): N; whether nothing with a transaction id was in flight; the table the
# search path names; whether the preconditions hold (tested only when they may have changed
# since :known_next, see `horizon_wait`); and the largest id of the shard the snapshot sees,
# sought only when something was in flight (the wait's cap) or :largest asks for it (evidence).
# A CASE runs a subquery only when it takes that branch: a quiet log's lookup pays for neither.
_VISIBLE_MAX = "(SELECT MAX(id) FROM conversations WHERE channel_key = :key)"
HORIZON_NOW = ", ".join(
    [
        _NEXT_XID,
        _PAST_XMIN + " = 0",
        _TABLE,
        "CASE WHEN " + _NEXT_XID + " = CAST(:known_next AS bigint)"
        " AND " + _TABLE + " = CAST(:known_table AS oid) THEN true"
        f" ELSE {PRECONDITIONS_FUNCTION}() END",
        "CASE WHEN " + _PAST_XMIN + " = 0 AND NOT CAST(:largest AS boolean) THEN NULL"
        " ELSE " + _VISIBLE_MAX + " END",
    ]
)
# A statement that reads only N, from another connection: how tests and the benchmark count the
# transaction ids a run of lookups consumed, consuming none themselves.
NEXT_XID_SQL = f"SELECT {_NEXT_XID}"


class PreconditionError(RuntimeError):
    """The log on PostgreSQL is set up in a way the xmin horizon wait cannot be sound on."""


class HorizonError(RuntimeError):
    """`delivered_frontier` on PostgreSQL was called where its xmin horizon wait cannot be sound."""


@dataclass(frozen=True)
class HorizonReading:
    """One lookup behind the xmin horizon: the frontier, whether the horizon passed, and what
    it waited for.

    `xact_id` is the transaction id the horizon had to pass: on an idle connection the next id
    to be assigned when the lookup read the log (read, not taken), inside a caller's transaction
    the id the lookup took; `visible_max` the largest id it could see then (None if the shard
    had none, or if it was not asked for and nothing had to wait: `delivered_frontier` does not
    ask); `waited_s` how long older transactions kept it waiting.
    """

    frontier: int
    settled: bool
    visible_max: int | None
    xact_id: int
    waited_s: float


def check_preconditions(conn: psycopg.Connection[Any]) -> None:
    """Refuse, in one line naming the sequence, a log whose ids could be taken outside the
    transaction that inserts them: a sequence that caches ids per session, or a missing or
    disabled id trigger. One catalog read: `create_schema` runs it, and the frontier lookup when
    its own test (`PRECONDITIONS_FUNCTION`, in the lookup statement) fails (`horizon_wait`)."""
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


# Per connection: (the table `conversations` named, N) of the last lookup whose precondition test
# held while no transaction with an id was in flight. Strings: psycopg sends them untyped, and the
# statement casts them.
_KNOWN: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()
_UNKNOWN = (None, None)


def horizon_wait(
    conn: psycopg.Connection[Any],
    channel_key: str,
    base: int,
    wait: float,
    lookup_sql: str,
    check_sql: str,
    *,
    largest: bool = True,
) -> HorizonReading:
    """The xmin horizon wait (`log.horizon_frontier` and `log.delivered_frontier` validate the
    arguments and call it with `log.HORIZON_LOOKUP_SQL` and `log.HORIZON_CHECK_SQL`): the
    frontier never passes an id that a transaction still in flight may yet commit. `largest`
    asks for `visible_max` also when nothing had to wait (an extra index seek).

    Why it is sound: every id is taken by a transaction that already has its transaction id (the
    statement trigger gives it one before `nextval()`). So if v is the largest id a snapshot s
    sees, every id <= v was taken before s by a transaction whose id is below N, the next id to
    be assigned at any moment after s. Once a snapshot's xmin is >= N, every such transaction has
    ended, its rows are in that snapshot or rolled back for ever, and Article 1's rule over it,
    capped at v, is final.

    On an idle connection (the usual case) the lookup is one statement run as a transaction of
    its own, at any isolation level: N is read in it, after its snapshot, without taking an id
    (`HORIZON_NOW`), so it consumes none. If that snapshot's xmin is already N (no transaction
    holding an id was running when it was taken, none got one before N was read), the rule's
    answer in the same statement is final: one round trip. Otherwise it polls, each poll a
    statement of its own, until a snapshot's xmin passes N; after `wait` seconds (a session idle
    in a transaction that wrote holds it forever) it returns `base`: it holds back, never skips.

    The preconditions (`check_preconditions`) are tested in the lookup statement
    (`PRECONDITIONS_FUNCTION`), but only when they may have changed: the test is skipped when N
    and the table are those of an earlier lookup on this connection whose test held while
    nothing with a transaction id ran. Any DDL takes a transaction id, and at that earlier
    snapshot every transaction that had one had ended, so with N unchanged no catalog row can
    have changed since. So they are tested once per connection, and again after anything was
    written (once per lookup while writers are busy), always in the same round trip. A failed
    test runs the named check, which raises.

    Inside a caller's transaction (READ COMMITTED, not written yet) N cannot be read: `age()`
    keeps the value it first read in that transaction, which may be older than the snapshot.
    There it takes an id, as `g` (the caller's transaction keeps it), and polls in that
    transaction.
    """
    params: dict[str, Any] = {"key": channel_key, "base": base}
    if transaction_open(conn):
        return _wait_in_callers_transaction(conn, params, wait, check_sql)
    flip = not conn.autocommit  # each statement its own transaction: no BEGIN, no COMMIT
    if flip:
        conn.autocommit = True
    try:
        for _ in range(2):
            known_table, known_next = _KNOWN.get(conn, _UNKNOWN)
            asked = {**params, "known_table": known_table, "known_next": known_next}
            asked["largest"] = largest
            try:
                row = backend.POSTGRES.execute(conn, lookup_sql, asked).fetchone()
            except Exception as exc:
                _refuse_a_log_made_before_its_test(exc)
                raise
            next_xid, settled, table, sound, visible_max, frontier = row
            if sound:
                break
            check_preconditions(conn)  # raises, naming the sequence; else they changed meanwhile
        else:
            raise PreconditionError(
                "the id sequence or the id triggers of conversations changed during the lookup; "
                "ask again"
            )
        if settled:
            _KNOWN[conn] = (str(table), str(next_xid))
            return HorizonReading(frontier, True, visible_max, next_xid, 0.0)
        if visible_max is None or visible_max <= base:
            return HorizonReading(base, True, visible_max, next_xid, 0.0)
        return _poll(conn, {**params, "xact": str(next_xid)}, wait, check_sql, visible_max)
    finally:
        if flip and not conn.closed and not conn.broken:
            conn.autocommit = False  # the caller's setting, back


def _refuse_a_log_made_before_its_test(exc: Exception) -> None:
    """A log made by an older `create_schema` has no precondition test: say so in one line."""
    from psycopg import errors

    if isinstance(exc, errors.UndefinedFunction) and PRECONDITIONS_FUNCTION in str(exc):
        raise PreconditionError(
            f"the log has no {PRECONDITIONS_FUNCTION}() (it was made by an older labkit): run "
            "create_schema again"
        ) from None


def _poll(
    conn: psycopg.Connection[Any],
    params: dict[str, Any],
    wait: float,
    check_sql: str,
    visible_max: int,
    asked_once: bool = True,
) -> HorizonReading:
    """Ask `check_sql` (the horizon test and the rule, one snapshot) until the horizon passes
    `params["xact"]` or `wait` seconds went by; the rule's answer is capped at `visible_max`."""
    base, xact_id = params["base"], int(params["xact"])
    start = time.monotonic()
    while True:
        waited = time.monotonic() - start
        if asked_once:
            if waited >= wait:
                return HorizonReading(base, False, visible_max, xact_id, waited)
            time.sleep(HORIZON_POLL_S)
        asked_once = True
        settled, frontier = backend.POSTGRES.execute(conn, check_sql, params).fetchone()
        if settled:
            value = max(base, min(int(frontier), visible_max))
            return HorizonReading(value, True, visible_max, xact_id, time.monotonic() - start)


def _wait_in_callers_transaction(
    conn: psycopg.Connection[Any], params: dict[str, Any], wait: float, check_sql: str
) -> HorizonReading:
    """The wait inside a caller's transaction: take an id after the snapshot that saw v, then
    poll (READ COMMITTED: each statement a fresh snapshot) until the horizon passes it."""
    check_preconditions(conn)
    own = conn.execute(OWN_XACT_SQL).fetchone()
    assert own is not None  # a SELECT of one function call returns one row
    if own[0] is not None:
        raise HorizonError(
            "delivered_frontier on PostgreSQL needs a transaction that has not written yet "
            "(inside a transaction it takes a fresh transaction id); call it before writing, "
            "or commit first"
        )
    visible_max, xact, isolation = backend.POSTGRES.execute(
        conn, HORIZON_OPEN_SQL, params
    ).fetchone()
    if isolation != "read committed":
        raise HorizonError(
            f"delivered_frontier on PostgreSQL inside a transaction polls with fresh snapshots, "
            f"which needs READ COMMITTED; this transaction is {isolation.upper()} (or call it "
            "with no transaction open)"
        )
    xact_id = int(str(xact))
    base = params["base"]
    if visible_max is None or visible_max <= base:
        return HorizonReading(base, True, visible_max, xact_id, 0.0)
    return _poll(conn, {**params, "xact": str(xact)}, wait, check_sql, visible_max, False)


def transaction_open(conn: psycopg.Connection[Any]) -> bool:
    """Whether the psycopg connection `conn` is inside a transaction (not idle)."""
    return conn.pgconn.transaction_status != _PQTRANS_IDLE


_PQTRANS_IDLE = 0  # libpq's PQTRANS_IDLE (psycopg.pq.TransactionStatus.IDLE), read without
# building a ConnectionInfo: the lookup asks on every call


def explain_json(
    conn: psycopg.Connection[Any] | store.Store, statement: str, params: Any = None
) -> dict[str, Any]:
    """The root plan node of PostgreSQL's `EXPLAIN (FORMAT JSON)` for one statement written in
    SQLite's placeholder style (the log's plans on PostgreSQL; SQLite's: `log.explain`)."""
    s = store.require(conn, "explain_json", "postgres")
    row = s.execute("EXPLAIN (FORMAT JSON) " + statement, params).fetchone()
    return row[0][0]["Plan"]


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of a JSON plan, depth first (InitPlans and SubPlans included)."""
    out = [plan]
    for child in plan.get("Plans", []):
        out += plan_nodes(child)
    return out
