"""Every trigger in one place: the per-shard trigger queries, the busy-loop worker, and the
measurements behind the trigger figures (per-shard count vs global poll, one tick of K workers,
the busy loop, query plans, and the pages each index occupies).

A trigger answers a shard worker's "is there work that can advance my checkpoint?". The queries
read the log of `labkit.frontier.log` on either backend; the worker writes summaries through
`labkit.frontier.summarizer` (neither imports this module). The measurements count SQLite's own
work (VM steps, pages) and build their own SQLite logs. The plots in
`labkit.plots.frontier` only draw what the measurements here return.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

import labkit.backend as backend
import labkit.frontier.log as fr
import labkit.frontier.summarizer as sm

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
    conn: backend.Connection, channel_key: str, coverage_end: int, frontier: int
) -> int:
    """Rows of this shard in (coverage_end, frontier]: the only work that is really ready."""
    return int(fr.fetch(conn, TRIGGER_SQL, (channel_key, coverage_end, frontier))[0][0])


def rows_after_checkpoint(conn: backend.Connection, channel_key: str, coverage_end: int) -> int:
    """The busy-loop trigger: counts every row after the checkpoint, blocked ones included.

    While a pending row keeps the frontier still, this stays > 0, so a worker that fires on it
    runs again and again without being able to advance its checkpoint.
    """
    return int(fr.fetch(conn, AFTER_CHECKPOINT_SQL, (channel_key, coverage_end))[0][0])


def global_poll_counts(
    conn: backend.Connection, coverage_ends: Mapping[str, int]
) -> dict[str, int]:
    """THE ANTI-PATTERN: each shard's worker runs a table-wide GROUP BY and keeps its own row.

    One full aggregate per worker per tick, paying for every dormant shard; it also counts
    rows after the checkpoint rather than newly covered ones. Kept for the cost comparison.
    """
    counts: dict[str, int] = {}
    for key, end in coverage_ends.items():
        everyone = dict(fr.fetch(conn, GLOBAL_POLL_SQL, (end,)))
        counts[key] = int(everyone.get(key, 0))
    return counts


def trigger_readings(
    conn: backend.Connection, channel_key: str, coverage_end: int
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
    conn: backend.Connection, channel_key: str, ticks: int = 5, trigger: str = "newly_covered"
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
# The measurements' own logs: settled history, bulk-inserted; and the size of the table.
SETTLED_ROW_SQL = (
    "INSERT INTO conversations (channel_key, direction, status, priority) "
    "VALUES (?, 'inbound', 'delivered', 5)"
)
COUNT_SQL = "SELECT COUNT(*) FROM conversations"


def _add_settled_shards(conn: sqlite3.Connection, first: int, last: int, rows: int) -> None:
    """Shards `dormant-<first>` .. `dormant-<last - 1>`, each holding `rows` delivered rows."""
    conn.executemany(
        SETTLED_ROW_SQL,
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
    byte-stable docs figure needs. SQLite only: PostgreSQL has no such counter.
    """
    backend.require(conn, "vm_steps", "sqlite")
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
        total = conn.execute(COUNT_SQL).fetchone()[0]
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


def query_plans(settled: int = 2000, active: int = 2, shards: int = 2) -> pd.DataFrame:
    """`EXPLAIN QUERY PLAN` of the frontier lookup and the trigger, with and without their index.

    The log holds `settled` delivered rows spread round-robin over `shards` shards ("main"
    first; `shards=1` puts them all in "main"), then `active` pending rows in "main". Each
    index is dropped inside a savepoint that is rolled back, so both plans come from the same
    data. Columns: query, index, with_index, without_index, and with_steps / without_steps:
    the SQLite VM steps one run of the query costs each way (work, not time).
    """
    if shards < 1:
        raise ValueError(f"query_plans: shards must be >= 1, got {shards}")
    names = ["main", *(f"other-{k}" for k in range(1, shards))]
    conn = fr.connect()
    conn.executemany(
        SETTLED_ROW_SQL,
        [(names[k % shards],) for k in range(settled)],
    )
    for _ in range(active):
        fr.enqueue(conn, "main", 5)
    end = settled // 2
    params: dict[str, tuple[Any, ...] | dict[str, Any]] = {
        "frontier lookup": {"key": "main", "base": end},
        "trigger count": ("main", end, fr.delivered_frontier(conn, "main", end)),
    }
    rows = []
    for name, sql, index, drop in PLAN_QUERIES:

        def run(sql: str = sql, args: tuple[Any, ...] | dict[str, Any] = params[name]) -> object:
            return conn.execute(sql, args).fetchall()

        with_index, with_steps = fr.explain(conn, sql, params[name]), vm_steps(conn, run)
        conn.execute("SAVEPOINT plan_without_index")
        conn.execute(drop)
        without, without_steps = fr.explain(conn, sql, params[name]), vm_steps(conn, run)
        conn.execute("ROLLBACK TO plan_without_index")
        conn.execute("RELEASE plan_without_index")
        rows.append(
            {
                "query": name,
                "index": index,
                "with_index": " | ".join(with_index),
                "without_index": " | ".join(without),
                "with_steps": with_steps,
                "without_steps": without_steps,
            }
        )
    conn.close()
    return pd.DataFrame.from_records(rows)


# --- what each index costs to keep -----------------------------------------------------------

LOG_OBJECTS = ("conversations", "idx_conv_active", "idx_conv_shard_id")


def _dbstat_pages(conn: sqlite3.Connection, names: Sequence[str]) -> dict[str, int] | None:
    """Pages per object from SQLite's `dbstat` table, or None if this build lacks it."""
    try:
        rows = conn.execute("SELECT name, COUNT(*) FROM dbstat GROUP BY name").fetchall()
    except sqlite3.OperationalError:
        return None
    found = dict(rows)
    return {name: int(found.get(name, 0)) for name in names}


def _pages_freed_by_dropping(conn: sqlite3.Connection, names: Sequence[str]) -> dict[str, int]:
    """Pages per object without `dbstat`: on a private copy, what VACUUM frees when it goes.

    A table is measured alone: its indexes are dropped (and vacuumed away) first.
    """
    pages = {}
    for name in names:
        copy = sqlite3.connect(":memory:", isolation_level=None)
        conn.backup(copy)
        (kind,) = copy.execute("SELECT type FROM sqlite_schema WHERE name = ?", (name,)).fetchone()
        if kind == "table":
            for (index,) in copy.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? "
                "AND sql IS NOT NULL",
                (name,),
            ).fetchall():
                copy.execute(f'DROP INDEX "{index}"')  # a name read from sqlite_schema
        copy.execute("VACUUM")
        before = copy.execute("PRAGMA page_count").fetchone()[0]
        copy.execute(f'DROP {kind.upper()} "{name}"')  # kind and name from sqlite_schema
        copy.execute("VACUUM")
        pages[name] = int(before - copy.execute("PRAGMA page_count").fetchone()[0])
        copy.close()
    return pages


def object_pages(
    conn: sqlite3.Connection, names: Sequence[str] = LOG_OBJECTS, use_dbstat: bool = True
) -> dict[str, int]:
    """Database pages each table or index in `names` occupies right now.

    Read from SQLite's `dbstat` virtual table when this build has it (and `use_dbstat`);
    otherwise measured on a copy as the pages `VACUUM` frees when the object is dropped
    (packed pages, so a little fewer for a table that has seen many updates). SQLite only.
    """
    backend.require(conn, "object_pages", "sqlite")
    unknown = [
        n
        for n in names
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (n,)).fetchone() is None
    ]
    if unknown:
        raise ValueError(f"object_pages: no table or index named {unknown[0]!r}")
    found = _dbstat_pages(conn, names) if use_dbstat else None
    return found if found is not None else _pages_freed_by_dropping(conn, names)


def index_sizes(
    settled: Iterable[int] = (0, 1_000, 10_000, 50_000), active: int = 2
) -> pd.DataFrame:
    """Pages of the log table and of both indexes as settled history grows in one shard.

    `active` rows stay pending throughout; the rest are delivered. The partial index holds only
    the open rows, so its size follows `active`; the table and the full index follow history.
    Columns: settled_rows, active_rows, table_pages, active_index_pages, shard_index_pages.
    """
    conn = fr.connect()
    for _ in range(active):
        fr.enqueue(conn, "main", 5)
    records, have = [], 0
    for count in sorted(set(settled)):
        conn.executemany(
            SETTLED_ROW_SQL,
            [("main",)] * (count - have),
        )
        have = count
        pages = object_pages(conn)
        records.append(
            {
                "settled_rows": count,
                "active_rows": active,
                "table_pages": pages["conversations"],
                "active_index_pages": pages["idx_conv_active"],
                "shard_index_pages": pages["idx_conv_shard_id"],
            }
        )
    conn.close()
    return pd.DataFrame.from_records(records)


# --- K workers: one global poll each, or one per-shard count each ----------------------------


def _fanout_log(shards: int, rows_per_shard: int) -> sqlite3.Connection:
    """`shards` shards `s-0`.. whose delivered rows arrive round-robin, as mixed traffic does."""
    conn = fr.connect()
    conn.executemany(
        SETTLED_ROW_SQL,
        [(f"s-{k}",) for _ in range(rows_per_shard) for k in range(shards)],
    )
    return conn


def _worker_checkpoints(conn: sqlite3.Connection, workers: int) -> dict[str, tuple[int, int]]:
    """Shards s-0..s-(workers - 1): (coverage_end halfway through the shard, its frontier)."""
    checkpoints = {}
    for k in range(workers):
        key = f"s-{k}"
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM conversations WHERE channel_key = ? ORDER BY id", (key,)
            )
        ]
        end = ids[len(ids) // 2 - 1] if len(ids) > 1 else 0
        checkpoints[key] = (end, fr.delivered_frontier(conn, key, end))
    return checkpoints


def _tick_steps(
    conn: sqlite3.Connection, checkpoints: Mapping[str, tuple[int, int]], scoped: bool
) -> int:
    """VM steps of one tick in which every worker in `checkpoints` runs its trigger once."""

    def tick() -> None:
        for key, (end, frontier) in checkpoints.items():
            if scoped:
                newly_covered_count(conn, key, end, frontier)
            else:
                global_poll_counts(conn, {key: end})

    return vm_steps(conn, tick)


def fanout_cost(
    workers: Iterable[int] = range(1, 9),
    shards: Iterable[int] = (20, 100, 400),
    rows_per_shard: int = 6,
) -> pd.DataFrame:
    """SQLite VM steps one poll tick costs when K workers each check their own shard.

    For every shard count S (the table holds S shards of `rows_per_shard` delivered rows) and
    every K, workers 1..K each run their trigger once: either the global `GROUP BY` poll,
    filtered client-side (`global_poll_counts`), or the per-shard count of
    (coverage_end, frontier] (`newly_covered_count`). Each worker's checkpoint sits halfway
    through its shard. Columns: workers, shards, total_rows, global_poll_steps,
    per_shard_steps, ratio. Steps are counted, not timed, so the table is the same everywhere.
    """
    ks = sorted(set(workers))
    if not ks or ks[0] < 1:
        raise ValueError(f"fanout_cost: workers must be >= 1, got {ks}")
    records = []
    for count in sorted(set(shards)):
        if ks[-1] > count:
            raise ValueError(
                f"fanout_cost: {ks[-1]} workers need at least {ks[-1]} shards, got {count}"
            )
        conn = _fanout_log(count, rows_per_shard)
        total = int(conn.execute(COUNT_SQL).fetchone()[0])
        checkpoints = _worker_checkpoints(conn, ks[-1])
        for k in ks:
            mine = dict(list(checkpoints.items())[:k])
            global_steps = _tick_steps(conn, mine, scoped=False)
            own_steps = _tick_steps(conn, mine, scoped=True)
            records.append(
                {
                    "workers": k,
                    "shards": count,
                    "total_rows": total,
                    "global_poll_steps": global_steps,
                    "per_shard_steps": own_steps,
                    "ratio": global_steps / own_steps,
                }
            )
        conn.close()
    return pd.DataFrame.from_records(records)
