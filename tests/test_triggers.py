"""Triggers: what each one counts, the global poll's agreement, and the busy loop it causes."""

from __future__ import annotations

import sqlite3

import pytest

from labkit.frontier import log as fr
from labkit.frontier import triggers


def blocked_log() -> sqlite3.Connection:
    """The seed's six rows in shard "main" (id 3 urgent), 2..6 delivered, id 1 still pending."""
    conn = fr.connect()
    ids = [fr.enqueue(conn, "main", priority) for priority in [5, 5, 1, 5, 5, 5]]
    for row_id in ids[1:]:
        fr.mark_delivered(conn, row_id)
    return conn


def test_trigger_counts_only_newly_covered_rows() -> None:
    conn = blocked_log()
    readings = triggers.trigger_readings(conn, "main", 0)
    # id 1 blocks: nothing is newly covered, yet five rows sit after the checkpoint
    assert readings == {"frontier": 0, "newly_covered": 0, "after_checkpoint": 6}
    fr.mark_delivered(conn, 1)
    assert triggers.trigger_readings(conn, "main", 0)["newly_covered"] == 6


def test_global_poll_matches_per_shard_counts_after_checkpoint() -> None:
    conn = fr.connect()
    for key in ["a", "b", "a", "c", "a", "b"]:
        fr.enqueue(conn, key, 5)
    ends = {"a": 1, "b": 0, "c": 4, "silent": 0}
    expected = {k: triggers.rows_after_checkpoint(conn, k, end) for k, end in ends.items()}
    assert triggers.global_poll_counts(conn, ends) == expected
    assert expected == {"a": 2, "b": 2, "c": 0, "silent": 0}


def test_busy_loop_trigger_fires_without_progress() -> None:
    conn = blocked_log()  # id 1 still pending blocks everything
    naive = triggers.busy_loop_ticks(conn, "main", ticks=4, trigger="after_checkpoint")
    assert all(t["fired"] and t["wasted"] for t in naive)
    scoped = triggers.busy_loop_ticks(conn, "main", ticks=4, trigger="newly_covered")
    assert not any(t["fired"] for t in scoped)
    fr.mark_delivered(conn, 1)
    scoped = triggers.busy_loop_ticks(conn, "main", ticks=2, trigger="newly_covered")
    assert [t["summarized"] for t in scoped] == [True, False]
    assert scoped[-1]["coverage_end"] == 6
    with pytest.raises(ValueError, match="unknown trigger"):
        triggers.busy_loop_ticks(conn, "main", trigger="cron")


# --- Article 1's scale claims, measured -------------------------------------------------------


def test_frontier_plan_stays_a_search_on_the_partial_index_at_50000_settled_rows() -> None:
    plans = triggers.query_plans(settled=50_000, active=2, shards=1).set_index("query")
    lookup = plans.loc["frontier lookup"]
    assert (
        "SEARCH conversations USING COVERING INDEX idx_conv_active (channel_key=? AND id>?)"
        in (lookup["with_index"])
    )
    assert "SCAN conversations" not in lookup["with_index"]
    # bounded by the open rows: a few dozen steps; without the index it walks 25,000 rows
    assert lookup["with_steps"] < 100
    assert lookup["without_steps"] > 25_000
    trigger = plans.loc["trigger count"]
    assert "SEARCH conversations USING COVERING INDEX idx_conv_shard_id" in trigger["with_index"]
    with pytest.raises(ValueError, match="shards must be >= 1"):
        triggers.query_plans(settled=10, shards=0)


def test_object_pages_from_dbstat_and_without_it_agree() -> None:
    conn = fr.connect()
    for k in range(3000):
        fr.enqueue(conn, f"shard-{k % 7}", 5)
    for row_id in range(1, 2990):
        fr.mark_delivered(conn, row_id)
    measured = triggers.object_pages(conn)
    fallback = triggers.object_pages(conn, use_dbstat=False)
    assert set(measured) == set(triggers.LOG_OBJECTS)
    for name in triggers.LOG_OBJECTS:
        # the fallback measures a vacuumed copy: packed pages, so up to ~10% fewer
        assert 0.9 * measured[name] - 1 <= fallback[name] <= measured[name], (name, fallback)
    # eleven open rows fit in one page; every row of the table does not
    assert measured["idx_conv_active"] == 1
    assert measured["idx_conv_shard_id"] > 5 and measured["conversations"] > 5
    with pytest.raises(ValueError, match="no table or index named 'idx_missing'"):
        triggers.object_pages(conn, ["idx_missing"])


def test_partial_index_size_follows_open_rows_not_history() -> None:
    sizes = triggers.index_sizes(settled=(0, 5_000, 20_000), active=3)
    assert sizes["settled_rows"].tolist() == [0, 5_000, 20_000]
    assert sizes["active_index_pages"].tolist() == [1, 1, 1]
    shard = sizes["shard_index_pages"].tolist()
    table = sizes["table_pages"].tolist()
    assert shard[0] < shard[1] < shard[2] and table[0] < table[1] < table[2]
    assert shard[2] > 3 * shard[1] // 2  # grows with history (4x the rows)


def test_fanout_costs_k_times_shards_globally_and_k_times_one_per_shard() -> None:
    cost = triggers.fanout_cost(workers=(1, 2, 4), shards=(10, 40), rows_per_shard=4)
    assert len(cost) == 6
    by = cost.set_index(["shards", "workers"])
    for shards in (10, 40):
        one = by.loc[(shards, 1)]
        four = by.loc[(shards, 4)]
        # each extra worker pays the same again: K times one worker's cost, both ways
        assert four["global_poll_steps"] == pytest.approx(4 * one["global_poll_steps"], rel=0.05)
        assert four["per_shard_steps"] == 4 * one["per_shard_steps"]
    # more shards: the global poll grows with them, the per-shard count does not move
    assert by.loc[(40, 4), "global_poll_steps"] > 3 * by.loc[(10, 4), "global_poll_steps"]
    assert by.loc[(40, 4), "per_shard_steps"] == by.loc[(10, 4), "per_shard_steps"]
    assert by.loc[(40, 1), "ratio"] > by.loc[(10, 1), "ratio"] > 1
    assert by.loc[(40, 2), "total_rows"] == 160


def test_fanout_cost_refuses_more_workers_than_shards() -> None:
    with pytest.raises(ValueError, match="8 workers need at least 8 shards, got 5"):
        triggers.fanout_cost(workers=range(1, 9), shards=(5,))
    with pytest.raises(ValueError, match="workers must be >= 1"):
        triggers.fanout_cost(workers=(0, 1), shards=(5,))
