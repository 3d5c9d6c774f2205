"""The frontier API on a real PostgreSQL server: same answers as SQLite, the commit-order gap
with two real connections, the xmin horizon wait, and the query plans at 50,000 rows."""

from __future__ import annotations

import threading
import time

import pytest

from labkit.frontier import log as fr
from labkit.frontier import log_pg as fpg
from labkit.frontier import summarizer as sm

pytestmark = pytest.mark.postgres


def run_core_scenario(conn) -> dict[str, int | None]:
    """Part one's scenario on one connection: priority dispatch finishes ids out of order."""
    ids = [fr.enqueue(conn, "main", p) for p in (5, 5, 1, 5, 5)]
    conn.commit()
    first = fr.dispatch_next(conn, "main")
    fr.mark_delivered(conn, first)
    fr.mark_delivered(conn, ids[4])
    fr.mark_failed(conn, ids[0])
    return {
        "first": first,
        "frontier": fr.delivered_frontier(conn, "main"),
        "id_order": fr.id_order_frontier(conn, "main"),
        "max": fr.max_delivered_watermark(conn, "main"),
        "after_base": fr.delivered_frontier(conn, "main", 1),
    }


def test_core_scenario_matches_sqlite(pg_connect) -> None:
    got = run_core_scenario(pg_connect())
    assert got == run_core_scenario(fr.connect())
    assert got == {"first": 3, "frontier": 1, "id_order": 1, "max": 5, "after_base": 1}


def test_enqueue_never_commits(pg_connect) -> None:
    writer, reader = pg_connect(), pg_connect(autocommit=True)
    row = fr.enqueue(writer, "main", 1)
    assert fr.id_order_frontier(reader, "main") == 0
    writer.rollback()
    assert reader.execute("SELECT count(*) FROM conversations").fetchone()[0] == 0
    assert fr.enqueue(writer, "main", 1) == row + 1  # the rolled-back id stays a hole
    writer.commit()
    assert fr.id_order_frontier(reader, "main") == row  # the hole is passed, the open row not


def test_transitions_refuse_like_sqlite(pg_connect) -> None:
    conn = pg_connect()
    row = fr.enqueue(conn, "main", 1)
    conn.commit()
    fr.mark_running(conn, row)
    fr.mark_delivered(conn, row)
    with pytest.raises(fr.TerminalStateError, match="terminal"):
        fr.mark_failed(conn, row)
    with pytest.raises(fr.TransitionError, match="does not exist"):
        fr.mark_running(conn, 999)
    other = fr.enqueue(conn, "main", 1)
    conn.commit()
    fr.mark_running(conn, other)
    with pytest.raises(fr.TransitionError, match="cannot move it to 'running'"):
        fr.mark_running(conn, other)


def test_dispatch_hands_each_row_out_once(pg_connect) -> None:
    conn = pg_connect()
    for p in (3, 1, 2, 1):
        fr.enqueue(conn, "main", p)
    conn.commit()
    a, b = pg_connect(), pg_connect()
    got = [fr.dispatch_next(a), fr.dispatch_next(b), fr.dispatch_next(a), fr.dispatch_next(b)]
    assert got == [2, 4, 3, 1] and fr.dispatch_next(a) is None


def late_commit(pg_connect):
    """Two writers: A takes id 1 and stays open; B takes id 2, commits, and 2 is delivered."""
    a, b, summarizer = pg_connect(), pg_connect(), pg_connect()
    late = fr.enqueue(a, "main", 1)
    early = fr.enqueue(b, "main", 1)
    b.commit()
    fr.mark_delivered(b, early)
    return a, b, summarizer, late, early


def test_id_order_rule_passes_the_late_id_and_orphans_it(pg_connect) -> None:
    a, _, s, late, early = late_commit(pg_connect)
    end = fr.id_order_frontier(s, "main", 0)
    assert (late, early, end) == (1, 2, 2)
    assert sm.summarize_range(s, "main", "id_order").item_ids == (2,)
    a.commit()
    fr.mark_delivered(a, late)
    assert sm.summarize_range(s, "main", "id_order") is None
    assert sm.orphans(s, "main", "id_order") == [1]


def test_delivered_frontier_holds_until_the_late_id_commits(pg_connect) -> None:
    a, _, s, late, _ = late_commit(pg_connect)
    held = fr.horizon_frontier(s, "main", 0, wait=0.05)
    assert (held.frontier, held.settled, held.visible_max) == (0, False, 2)
    assert s.info.transaction_status.name == "IDLE"  # the wait left no transaction open
    a.commit()
    assert fr.delivered_frontier(s, "main", 0) == 0  # id 1 is visible now, and pending
    fr.mark_delivered(a, late)
    end = fr.delivered_frontier(s, "main", 0)
    assert end == 2 and sm.summarize_range(s, "main", "frontier").item_ids == (1, 2)
    assert sm.orphans(s, "main", "frontier") == []


def test_horizon_waits_for_a_commit_that_lands_in_time(pg_connect) -> None:
    a, _, s, late, _ = late_commit(pg_connect)
    fr.mark_delivered(a, late)  # a savepoint inside A's still-open transaction
    commit = threading.Timer(0.2, a.commit)
    commit.start()
    reading = fr.horizon_frontier(s, "main", 0, wait=10)
    # The commit is visible before `a.commit()` returns: without the join the fixture's
    # teardown could use `a` while the timer's thread still reads the commit's answer.
    commit.join(10)
    assert reading.settled and reading.frontier == 2 and reading.waited_s > 0


def test_older_xact_committing_a_larger_id_does_not_fool_the_horizon_wait(pg_connect) -> None:
    """Capping below the first id whose xact >= xmin is not enough: here the open transaction
    is the YOUNGER one, and the row that passes it belongs to an OLDER xact id."""
    old, young, s = pg_connect(), pg_connect(), pg_connect()
    old.execute("SELECT pg_current_xact_id()")  # the older transaction id, taken first
    small = fr.enqueue(young, "main", 1)  # the younger transaction takes the smaller id
    large = fr.enqueue(old, "main", 1)
    old.commit()
    fr.mark_delivered(old, large)
    x_large = s.execute("SELECT xact_id::text::bigint FROM conversations").fetchone()[0]
    xmin = s.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint").fetchone()[0]
    s.commit()
    assert small < large and x_large < xmin  # nothing visible is at or above xmin
    assert fr.id_order_frontier(s, "main") == large  # the naive rule passes `small`
    assert fr.horizon_frontier(s, "main", 0, wait=0.05).frontier == 0
    assert s.info.transaction_status.name == "IDLE"  # it took no id and left nothing open
    young.commit()
    assert fr.delivered_frontier(s, "main") == small - 1


def test_every_insert_takes_its_xact_id_before_its_row(pg_connect) -> None:
    """The statement trigger gives the transaction its id before any row (and its nextval) is
    built; without it a fresh transaction reaches its row with no xact id."""
    conn = pg_connect()
    # only the statement trigger may hand out the xact id before the row now
    conn.execute(
        "ALTER TABLE conversations ALTER xact_id DROP NOT NULL, ALTER xact_id DROP DEFAULT"
    )
    conn.execute(
        "CREATE FUNCTION probe_xid() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF pg_current_xact_id_if_assigned() IS NULL THEN RAISE 'no xact id yet'; END IF; "
        "RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER probe BEFORE INSERT ON conversations "
        "FOR EACH ROW EXECUTE FUNCTION probe_xid()"
    )
    conn.commit()
    for _ in range(5):
        fr.enqueue(conn, "main", 1)
        conn.commit()
    conn.execute("DROP TRIGGER conversations_xact_id_first ON conversations")
    # the row trigger that checks each id against the statement trigger's note goes too, so
    # that the probe shows what a row meets without the statement trigger
    conn.execute("DROP TRIGGER conversations_id_taken_here ON conversations")
    conn.commit()  # (the DDL itself took an xact id)
    refused = 0
    for _ in range(5):  # nextval takes an xact id itself only when it logs (1 call in 32)
        try:
            fr.enqueue(conn, "main", 1)
        except Exception as exc:  # noqa: BLE001
            assert "no xact id yet" in str(exc)
            refused += 1
        conn.rollback()
    assert refused >= 4


def test_horizon_wait_refuses_a_transaction_that_already_wrote(pg_connect) -> None:
    conn = pg_connect()
    fr.enqueue(conn, "main", 1)
    with pytest.raises(fr.HorizonError, match="has not written"):
        fr.delivered_frontier(conn, "main")
    conn.rollback()
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    with pytest.raises(fr.HorizonError, match="READ COMMITTED"):
        fr.delivered_frontier(conn, "main")


def test_horizon_wait_inside_a_callers_read_transaction(pg_connect) -> None:
    conn, other = pg_connect(), pg_connect()
    row = fr.enqueue(other, "main", 1)
    other.commit()
    fr.mark_delivered(other, row)
    conn.execute("SELECT 1")  # the caller's transaction is open, read-only so far
    assert fr.delivered_frontier(conn, "main") == row
    assert conn.info.transaction_status.name == "INTRANS"
    conn.rollback()


# --- plans at 50,000 rows ----------------------------------------------------------------------

N_ROWS = 50_000


@pytest.fixture
def big_log(pg_connect):
    conn = pg_connect(autocommit=True)
    conn.execute(
        "INSERT INTO conversations (channel_key, direction, status, priority) "
        "SELECT 'shard-' || (i %% 50), 'inbound', "
        "CASE WHEN i %% 997 = 0 THEN 'pending' ELSE 'delivered' END, i %% 5 "
        "FROM generate_series(1, %s) AS i",
        (N_ROWS,),
    )
    # VACUUM sets the visibility map (as autovacuum would): without it the planner prices an
    # index-only scan like a heap walk and reads the primary key backwards instead. A snapshot
    # held elsewhere on the server (an autovacuum ANALYZE of an earlier test's table) keeps
    # VACUUM from marking the new pages all-visible, so it is repeated until they all are.
    deadline = time.monotonic() + 30
    while True:
        conn.execute("VACUUM ANALYZE conversations")
        pages, visible = conn.execute(
            "SELECT relpages, relallvisible FROM pg_class WHERE oid = 'conversations'::regclass"
        ).fetchone()
        if visible >= pages:
            return conn
        assert time.monotonic() < deadline, f"only {visible} of {pages} pages became all-visible"
        time.sleep(0.2)


def nodes(conn, sql, params):
    return fpg.plan_nodes(fpg.explain_json(conn, sql, params))


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        (fr.FRONTIER_LOOKUP_SQL, {"idx_conv_active", "idx_conv_shard_id"}),
        (fr.HORIZON_CHECK_SQL, {"idx_conv_active", "idx_conv_shard_id"}),
        (fpg.HORIZON_OPEN_SQL, {"idx_conv_shard_id"}),
        (fr.DISPATCH["postgres"][0], {"idx_conv_pending", "conversations_pkey"}),
        # a narrow id range: the primary key's range scan is as good; either, never a Seq Scan
        (sm.TERMINAL_IN_RANGE_SQL, {"idx_conv_shard_id", "conversations_pkey"}),
    ],
    ids=["frontier", "horizon_check", "horizon_open", "dispatch", "summary_range"],
)
def test_plans_use_the_indexes_never_a_seq_scan(big_log, sql, index) -> None:
    params = {"key": "shard-7", "base": 40_000, "xact": "1"}
    if "?" in sql:
        params = ("shard-7", 40_000, 40_500)[: sql.count("?")]
    found = nodes(big_log, sql, params)
    kinds = {n["Node Type"] for n in found}
    assert "Seq Scan" not in kinds, kinds
    scans = {n["Index Name"] for n in found if n["Node Type"] in ("Index Scan", "Index Only Scan")}
    assert scans == index if sql != sm.TERMINAL_IN_RANGE_SQL else len(scans & index) == 1, scans


@pytest.mark.parametrize("largest", [False, True])
def test_the_horizon_lookup_reads_the_log_through_its_indexes_only(big_log, largest) -> None:
    """The one-statement lookup touches `conversations` only, through the frontier's two
    indexes (its precondition test is a function, called only when it may have changed)."""
    params = {"key": "shard-7", "base": 40_000, "known_next": None, "known_table": None}
    found = nodes(big_log, fr.HORIZON_LOOKUP_SQL, {**params, "largest": largest})
    assert {n["Relation Name"] for n in found if "Relation Name" in n} == {"conversations"}
    assert {n["Node Type"] for n in found if "Relation Name" in n} <= {
        "Index Scan",
        "Index Only Scan",
    }
    scans = {n["Index Name"] for n in found if "Index Name" in n}
    assert scans == {"idx_conv_active", "idx_conv_shard_id"}


def test_frontier_seek_uses_the_partial_index_as_an_index_scan(big_log) -> None:
    found = nodes(big_log, fr.FRONTIER_LOOKUP_SQL, {"key": "shard-7", "base": 0})
    by_index = {n["Index Name"]: n["Node Type"] for n in found if "Index Name" in n}
    assert by_index["idx_conv_active"] in ("Index Scan", "Index Only Scan")
    assert by_index["idx_conv_shard_id"] == "Index Only Scan"


def test_frontier_on_a_big_log_is_what_the_rows_say(big_log) -> None:
    """Through the indexes, on 50,000 rows, both frontiers stop just below shard-7's first
    pending row, not at its last delivered one (where `MAX(delivered)` would put it)."""
    first_open, last_delivered = big_log.execute(
        "SELECT min(id) FILTER (WHERE status = 'pending'), "
        "max(id) FILTER (WHERE status = 'delivered') "
        "FROM conversations WHERE channel_key = 'shard-7'"
    ).fetchone()
    assert first_open is not None and last_delivered > first_open  # a pending row to stop at
    assert fr.delivered_frontier(big_log, "shard-7") == first_open - 1
    assert fr.id_order_frontier(big_log, "shard-7") == first_open - 1
