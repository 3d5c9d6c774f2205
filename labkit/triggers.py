"""Every trigger in one place: the per-shard trigger queries, the busy-loop worker, and the
measurements behind the trigger figures (per-shard count vs global poll, the busy loop, plans).

A trigger answers a shard worker's "is there work that can advance my checkpoint?". The queries
read the log of `labkit.frontier`; the worker writes summaries through `labkit.summarizer`
(neither imports this module). The plots in `labkit.plots.part1_frontier` only draw what the
measurements here return.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable, Mapping

import pandas as pd

from labkit import frontier as fr
from labkit import summarizer as sm

# --- the trigger queries ---------------------------------------------------------------------

# Per-shard trigger: rows newly covered, (coverage_end, frontier]; a COVERING INDEX seek.
TRIGGER_SQL = "SELECT COUNT(*) FROM conversations WHERE channel_key = ? AND id > ? AND id <= ?"
# Busy-loop trigger: every row created after the checkpoint, blocked or not.
AFTER_CHECKPOINT_SQL = "SELECT COUNT(*) FROM conversations WHERE channel_key = ? AND id > ?"
# The named anti-pattern: a table-wide aggregate each worker runs and then filters client-side.
GLOBAL_POLL_SQL = (
    "SELECT channel_key, COUNT(*) FROM conversations WHERE id > ? GROUP BY channel_key"
)


def newly_covered_count(
    conn: sqlite3.Connection, channel_key: str, coverage_end: int, frontier: int
) -> int:
    """Rows of this shard in (coverage_end, frontier]: the only work that is really ready."""
    return int(conn.execute(TRIGGER_SQL, (channel_key, coverage_end, frontier)).fetchone()[0])


def rows_after_checkpoint(conn: sqlite3.Connection, channel_key: str, coverage_end: int) -> int:
    """The busy-loop trigger: counts every row after the checkpoint, blocked ones included.

    While a pending row keeps the frontier still, this stays > 0, so a worker that fires on it
    runs again and again without being able to advance its checkpoint.
    """
    return int(conn.execute(AFTER_CHECKPOINT_SQL, (channel_key, coverage_end)).fetchone()[0])


def global_poll_counts(
    conn: sqlite3.Connection, coverage_ends: Mapping[str, int]
) -> dict[str, int]:
    """THE ANTI-PATTERN: each shard's worker runs a table-wide GROUP BY and keeps its own row.

    One full aggregate per worker per tick, paying for every dormant shard; it also counts
    rows after the checkpoint rather than newly covered ones. Kept for the cost comparison.
    """
    counts: dict[str, int] = {}
    for key, end in coverage_ends.items():
        everyone = dict(conn.execute(GLOBAL_POLL_SQL, (end,)).fetchall())
        counts[key] = int(everyone.get(key, 0))
    return counts


def trigger_readings(
    conn: sqlite3.Connection, channel_key: str, coverage_end: int
) -> dict[str, int]:
    """Side by side for one shard: the frontier, newly covered rows, and the busy-loop count."""
    frontier = fr.delivered_frontier(conn, channel_key, coverage_end)
    return {
        "frontier": frontier,
        "newly_covered": newly_covered_count(conn, channel_key, coverage_end, frontier),
        "after_checkpoint": rows_after_checkpoint(conn, channel_key, coverage_end),
    }


# --- the worker loop -------------------------------------------------------------------------


TRIGGERS = ("after_checkpoint", "newly_covered")


def busy_loop_ticks(
    conn: sqlite3.Connection, channel_key: str, ticks: int = 5, trigger: str = "newly_covered"
) -> list[dict]:
    """Poll a shard's worker `ticks` times; when `trigger` fires, summarize (frontier policy).

    With "after_checkpoint" a pending row that blocks the frontier keeps the trigger firing
    while every run advances nothing (wasted runs: a busy loop); "newly_covered" stays quiet.
    """
    if trigger not in TRIGGERS:
        raise ValueError(f"unknown trigger {trigger!r}; expected one of {TRIGGERS}")
    rows = []
    for tick in range(ticks):
        start = sm.coverage_end(conn, channel_key, "frontier")
        if trigger == "after_checkpoint":
            fired = rows_after_checkpoint(conn, channel_key, start) > 0
        else:
            frontier = fr.delivered_frontier(conn, channel_key, start)
            fired = newly_covered_count(conn, channel_key, start, frontier) > 0
        summary = sm.summarize_range(conn, channel_key, "frontier") if fired else None
        rows.append(
            {
                "tick": tick,
                "trigger": trigger,
                "fired": fired,
                "summarized": summary is not None,
                "wasted": fired and summary is None,
                "coverage_end": sm.coverage_end(conn, channel_key, "frontier"),
            }
        )
    return rows


# --- measurements ----------------------------------------------------------------------------


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


def vm_steps(conn: sqlite3.Connection, fn: Callable[[], object]) -> int:
    """SQLite virtual-machine instructions `fn` executes on `conn`: work, not wall time.

    Unlike a timing, the count is the same on every machine and run, which is what a
    byte-stable docs figure needs.
    """
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(tick, 1)
    try:
        fn()
    finally:
        conn.set_progress_handler(None, 1)
    return steps


def trigger_cost(
    dormant: Iterable[int] = (0, 100, 200, 400, 800),
    rows_per_shard: int = 20,
    active_rows: int = 20,
    repeats: int = 15,
    measure: str = "time",
) -> pd.DataFrame:
    """Cost of one worker's trigger check as dormant shards pile up.

    One active shard has `active_rows` rows, half of them newly covered; every dormant shard
    holds `rows_per_shard` settled rows. With `measure="time"` the columns are per_shard_s
    (`newly_covered_count` for the active shard) and global_poll_s (`global_poll_counts`:
    the table-wide GROUP BY the anti-pattern runs), medians of `repeats`; with
    `measure="vm_steps"` they are per_shard_steps and global_poll_steps (deterministic).
    Both add dormant_shards, total_rows and the ratio.
    """
    if measure not in ("time", "vm_steps"):
        raise ValueError(f"measure must be 'time' or 'vm_steps', got {measure!r}")
    suffix = "_s" if measure == "time" else "_steps"
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

        def check() -> int:
            return newly_covered_count(conn, ACTIVE_SHARD, coverage_end, frontier)

        def poll_all() -> object:
            return global_poll_counts(conn, {ACTIVE_SHARD: coverage_end})

        if measure == "time":
            per_shard = _median_seconds(check, repeats)
            poll = _median_seconds(poll_all, repeats)
        else:
            per_shard, poll = vm_steps(conn, check), vm_steps(conn, poll_all)
        total = conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
        records.append(
            {
                "dormant_shards": count,
                "total_rows": int(total),
                f"per_shard{suffix}": per_shard,
                f"global_poll{suffix}": poll,
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
    for trigger in TRIGGERS:
        conn = fr.connect()
        ids = [fr.enqueue(conn, "main", 5) for _ in range(rows)]
        for row_id in ids[1:]:
            fr.mark_delivered(conn, row_id)
        for tick in range(ticks):
            if tick == unblock_at:
                fr.mark_delivered(conn, ids[0])
            readings = trigger_readings(conn, "main", sm.coverage_end(conn, "main"))
            (row,) = busy_loop_ticks(conn, "main", ticks=1, trigger=trigger)
            frames.append({**row, "tick": tick, "ready": readings[trigger]})
        conn.close()
    columns = ["tick", "trigger", "ready", "fired", "summarized", "wasted", "coverage_end"]
    return pd.DataFrame.from_records(frames)[columns]


# (query, its SQL, the index it claims, the DDL that removes that index for the comparison).
# The frontier row is the one statement `delivered_frontier` executes: both seeks in a COALESCE.
PLAN_QUERIES = (
    ("frontier lookup", fr.FRONTIER_LOOKUP_SQL, "idx_conv_active", "DROP INDEX idx_conv_active"),
    ("trigger count", TRIGGER_SQL, "idx_conv_shard_id", "DROP INDEX idx_conv_shard_id"),
)


def query_plans(settled: int = 2000, active: int = 2) -> pd.DataFrame:
    """`EXPLAIN QUERY PLAN` of the frontier lookup and the trigger, with and without their index.

    The log holds `settled` delivered rows and `active` pending ones in shard "main" (plus a
    second shard). Each index is dropped inside a savepoint that is rolled back, so the two
    plans come from the same data. Columns: query, index, with_index, without_index.
    """
    conn = fr.connect()
    conn.executemany(
        "INSERT INTO conversations (channel_key, direction, status, priority) "
        "VALUES (?, 'inbound', 'delivered', 5)",
        [("main" if k % 2 else "other",) for k in range(settled)],
    )
    for _ in range(active):
        fr.enqueue(conn, "main", 5)
    conn.commit()
    end = settled // 2
    params = {
        "frontier lookup": ("main", end),
        "trigger count": ("main", end, fr.delivered_frontier(conn, "main", end)),
    }
    rows = []
    for name, sql, index, drop in PLAN_QUERIES:
        with_index = fr.explain(conn, sql, params[name])
        conn.execute("SAVEPOINT plan_without_index")
        conn.execute(drop)
        without = fr.explain(conn, sql, params[name])
        conn.execute("ROLLBACK TO plan_without_index")
        conn.execute("RELEASE plan_without_index")
        rows.append(
            {
                "query": name,
                "index": index,
                "with_index": " | ".join(with_index),
                "without_index": " | ".join(without),
            }
        )
    conn.close()
    return pd.DataFrame.from_records(rows)
