"""Every query that claims an index is held to its EXPLAIN QUERY PLAN (SEARCH, never SCAN)."""

from __future__ import annotations

import sqlite3

import pytest

from labkit.frontier import log as fr
from labkit.frontier import triggers

FRONTIER_PLAN = "SEARCH conversations USING COVERING INDEX idx_conv_active (channel_key=? AND id>?)"
FALLBACK_PLAN = (
    "SEARCH conversations USING COVERING INDEX idx_conv_shard_id (channel_key=? AND id>?)"
)
# SQLite prints both `<` and `<=` upper bounds as `id<?`
TRIGGER_PLAN = (
    "SEARCH conversations USING COVERING INDEX idx_conv_shard_id (channel_key=? AND id>? AND id<?)"
)


def big_log(settled: int = 50_000) -> sqlite3.Connection:
    """One shard with `settled` delivered rows and two active ones, plus a dormant shard."""
    conn = fr.connect()
    conn.executemany(
        "INSERT INTO conversations (channel_key, direction, status, priority) "
        "VALUES (?, 'inbound', 'delivered', 5)",
        [("main",)] * settled + [("dormant",)] * 1000,
    )
    fr.enqueue(conn, "main", 5)
    fr.mark_running(conn, fr.enqueue(conn, "main", 1))
    conn.execute("ANALYZE")
    return conn


@pytest.fixture(scope="module")
def large() -> sqlite3.Connection:
    return big_log()


@pytest.mark.parametrize("conn_factory", [fr.connect, big_log], ids=["empty", "50k-settled"])
def test_each_query_seeks_its_own_index(conn_factory) -> None:
    conn = conn_factory()
    assert fr.explain(conn, fr.FRONTIER_SQL, ("main", 0)) == [FRONTIER_PLAN]
    assert fr.explain(conn, fr.FALLBACK_SQL, ("main", 0)) == [FALLBACK_PLAN]
    assert fr.explain(conn, triggers.TRIGGER_SQL, ("main", 0, 10)) == [TRIGGER_PLAN]


@pytest.mark.parametrize("conn_factory", [fr.connect, big_log], ids=["empty", "50k-settled"])
def test_one_statement_lookup_is_the_two_seeks(conn_factory) -> None:
    # `delivered_frontier` runs both steps as scalar subqueries of one statement; each keeps
    # its own index seek, and the only SCAN is SQLite's one-row constant driver.
    conn = conn_factory()
    lookup = {"key": "main", "base": 0}
    assert fr.explain(conn, fr.FRONTIER_LOOKUP_SQL, lookup) == [
        "SCAN CONSTANT ROW",
        "SCALAR SUBQUERY 1",
        FRONTIER_PLAN,
        "SCALAR SUBQUERY 2",
        FALLBACK_PLAN,
    ]
    # what `delivered_frontier` runs on SQLite (its values bound by position) is the same plan
    assert fr.explain(conn, fr.LOOKUP_BY_POSITION_SQL, ("main", 0)) == fr.explain(
        conn, fr.FRONTIER_LOOKUP_SQL, lookup
    )


def test_frontier_on_large_history_reads_active_rows_only(large: sqlite3.Connection) -> None:
    assert fr.delivered_frontier(large, "main", 0) == 50_000 + 1000
    assert fr.delivered_frontier(large, "dormant", 0) == 51_000
    assert triggers.newly_covered_count(large, "main", 49_990, 50_000) == 10


def test_shard_keys_with_quotes_get_the_same_plan(large: sqlite3.Connection) -> None:
    key = "o'brien\"; DROP TABLE conversations;--"
    assert fr.explain(large, fr.FRONTIER_SQL, (key, 0)) == [FRONTIER_PLAN]
    assert fr.delivered_frontier(large, key, 0) == 0


def test_no_plan_of_ours_scans() -> None:
    conn = big_log(2_000)
    for sql, params in [
        (fr.FRONTIER_SQL, ("main", 0)),
        (fr.FALLBACK_SQL, ("main", 0)),
        (triggers.TRIGGER_SQL, ("main", 0, 5)),
        (triggers.AFTER_CHECKPOINT_SQL, ("main", 0)),
    ]:
        assert not any(line.startswith("SCAN") for line in fr.explain(conn, sql, params)), sql


def test_global_poll_visits_every_shard() -> None:
    conn = fr.connect()
    fr.enqueue(conn, "main", 5)
    assert fr.explain(conn, triggers.GLOBAL_POLL_SQL, (0,)) == [
        "SCAN conversations USING COVERING INDEX idx_conv_shard_id"
    ]
    # with statistics SQLite prefers a skip-scan: one seek per distinct shard, dormant or not
    plan = fr.explain(big_log(2_000), triggers.GLOBAL_POLL_SQL, (0,))
    assert all("SCAN" in line or "ANY(channel_key)" in line for line in plan), plan


def test_frontier_plan_degrades_without_the_partial_index() -> None:
    conn = big_log(2_000)
    assert fr.explain(conn, fr.FRONTIER_SQL, ("main", 0)) == [FRONTIER_PLAN]
    conn.execute("DROP INDEX idx_conv_active")
    plan = fr.explain(conn, fr.FRONTIER_SQL, ("main", 0))
    assert not any("idx_conv_active" in line for line in plan), plan
    # it falls back to walking every row of the shard, settled history included
    assert plan == ["SEARCH conversations USING INDEX idx_conv_shard_id (channel_key=? AND id>?)"]
    assert fr.delivered_frontier(conn, "main", 0) == 3000  # still right, just slower


def test_trigger_plan_degrades_without_the_shard_index() -> None:
    conn = big_log(2_000)
    conn.execute("DROP INDEX idx_conv_shard_id")
    plan = fr.explain(conn, triggers.TRIGGER_SQL, ("main", 0, 10))
    assert not any("idx_conv_shard_id" in line for line in plan), plan
    assert not any("COVERING INDEX" in line for line in plan), plan


def test_explain_is_not_fooled_by_the_statement_cache() -> None:
    conn = fr.connect()
    sql = fr.FRONTIER_SQL
    assert fr.explain(conn, sql, ("main", 0)) == [FRONTIER_PLAN]
    conn.execute("DROP INDEX idx_conv_active")
    assert "idx_conv_active" not in " ".join(fr.explain(conn, sql, ("main", 0)))
    fr.create_schema(conn)  # puts the index back
    assert fr.explain(conn, sql, ("main", 0)) == [FRONTIER_PLAN]


def test_delivered_frontier_runs_the_lookup_statement_the_plan_table_shows() -> None:
    conn = fr.connect()
    fr.enqueue(conn, "main", 5)
    ran: list[str] = []
    conn.set_trace_callback(ran.append)
    fr.delivered_frontier(conn, "main", 0)
    conn.set_trace_callback(None)
    # the trace shows the statement with its parameters bound
    assert ran == [fr.FRONTIER_LOOKUP_SQL.replace(":key", "'main'").replace(":base", "0")]
    (shown,) = [sql for name, sql, *_ in triggers.PLAN_QUERIES if name == "frontier lookup"]
    assert shown == fr.FRONTIER_LOOKUP_SQL


def test_query_plans_table_has_both_seeks_with_and_without_the_partial_index() -> None:
    plans = triggers.query_plans(settled=400).set_index("query")
    lookup = plans.loc["frontier lookup"]
    assert lookup["index"] == "idx_conv_active"
    assert lookup["with_index"].split(" | ") == [
        "SCAN CONSTANT ROW",
        "SCALAR SUBQUERY 1",
        FRONTIER_PLAN,
        "SCALAR SUBQUERY 2",
        FALLBACK_PLAN,
    ]
    # without the partial index, seek 1 walks the shard's full index (settled rows included)
    assert lookup["without_index"].split(" | ") == [
        "SCAN CONSTANT ROW",
        "SCALAR SUBQUERY 1",
        "SEARCH conversations USING INDEX idx_conv_shard_id (channel_key=? AND id>?)",
        "SCALAR SUBQUERY 2",
        FALLBACK_PLAN,
    ]
    trigger = plans.loc["trigger count"]
    assert trigger["with_index"] == TRIGGER_PLAN
    # the rowid range (coverage_end, frontier] of every shard, not the whole table
    assert trigger["without_index"] == (
        "SEARCH conversations USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"
    )
