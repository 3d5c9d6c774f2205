"""Measurements behind the trigger figures: per-shard count vs global poll, and the busy loop.

Both build their own small SQLite log through `labkit.frontier` and report a DataFrame; the
plots in `labkit.plots.frontier` only draw what these return.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable

import pandas as pd

from labkit import frontier as fr
from labkit import summarizer as sm

ACTIVE_SHARD = "active"


def _add_settled_shards(conn: sqlite3.Connection, first: int, last: int, rows: int) -> None:
    """Shards `dormant-<first>` .. `dormant-<last - 1>`, each holding `rows` delivered rows."""
    conn.executemany(
        "INSERT INTO conversations (channel_key, direction, status, priority) "
        "VALUES (?, 'inbound', 'delivered', 5)",
        [(f"dormant-{k}",) for k in range(first, last) for _ in range(rows)],
    )


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def trigger_cost(
    dormant: Iterable[int] = (0, 100, 200, 400, 800),
    rows_per_shard: int = 20,
    active_rows: int = 20,
    repeats: int = 15,
) -> pd.DataFrame:
    """Time one worker's trigger check as dormant shards pile up (median of `repeats`).

    One active shard has `active_rows` rows, half of them newly covered; every dormant shard
    holds `rows_per_shard` settled rows. Columns: dormant_shards, total_rows, per_shard_s
    (`newly_covered_count` for the active shard) and global_poll_s (`global_poll_counts`:
    the table-wide GROUP BY the anti-pattern runs), plus their ratio.
    """
    conn = fr.connect()
    for _ in range(active_rows):
        fr.enqueue(conn, ACTIVE_SHARD, 5)
    for row_id in range(1, active_rows + 1):
        fr.mark_delivered(conn, row_id)
    coverage_end = active_rows // 2
    frontier = fr.delivered_frontier(conn, ACTIVE_SHARD, coverage_end)
    records, have = [], 0
    for count in sorted(set(dormant)):
        _add_settled_shards(conn, have, count, rows_per_shard)
        have = count
        conn.commit()
        per_shard = _median_seconds(
            lambda: fr.newly_covered_count(conn, ACTIVE_SHARD, coverage_end, frontier), repeats
        )
        poll = _median_seconds(
            lambda: fr.global_poll_counts(conn, {ACTIVE_SHARD: coverage_end}), repeats
        )
        total = conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
        records.append(
            {
                "dormant_shards": count,
                "total_rows": int(total),
                "per_shard_s": per_shard,
                "global_poll_s": poll,
                "ratio": poll / per_shard if per_shard else float("nan"),
            }
        )
    conn.close()
    return pd.DataFrame.from_records(records)


def busy_loop_trace(rows: int = 6, ticks: int = 8, unblock_at: int = 4) -> pd.DataFrame:
    """A shard whose row 1 stays pending while rows 2..`rows` are delivered, under both triggers.

    Each tick reads what the trigger counts as "ready", then lets `busy_loop_ticks` poll once;
    at tick `unblock_at` row 1 is delivered. Columns: tick, trigger, ready, fired, summarized,
    wasted, coverage_end. "after_checkpoint" fires on every tick while nothing can advance.
    """
    frames = []
    for trigger in sm.TRIGGERS:
        conn = fr.connect()
        ids = [fr.enqueue(conn, "main", 5) for _ in range(rows)]
        for row_id in ids[1:]:
            fr.mark_delivered(conn, row_id)
        for tick in range(ticks):
            if tick == unblock_at:
                fr.mark_delivered(conn, ids[0])
            readings = fr.trigger_readings(conn, "main", sm.coverage_end(conn, "main"))
            (row,) = sm.busy_loop_ticks(conn, "main", ticks=1, trigger=trigger)
            frames.append({**row, "tick": tick, "ready": readings[trigger]})
        conn.close()
    columns = ["tick", "trigger", "ready", "fired", "summarized", "wasted", "coverage_end"]
    return pd.DataFrame.from_records(frames)[columns]
