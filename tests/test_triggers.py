"""Triggers: what each one counts, the global poll's agreement, and the busy loop it causes."""

from __future__ import annotations

import sqlite3

import pytest

from labkit import frontier as fr
from labkit import triggers


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
