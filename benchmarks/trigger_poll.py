"""Trigger poll vs dormant shards: per-shard `newly_covered_count` against the global GROUP BY.

S dormant shards (S = 10 .. 10^4) of `ROWS_PER_SHARD` settled rows each, ids interleaved as if
every channel had been busy once, plus K = 50 active shards at the tail, each with rows newly
covered since its checkpoint and one pending row. One tick = every active worker asks "is there
work?": per shard, its frontier and the count of (coverage_end, frontier]; versus the named
anti-pattern, one table-wide `GROUP BY channel_key` per worker filtered client-side.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from benchmarks.common import (
    FIGURES,
    BenchResult,
    finish,
    fmt_s,
    print_table,
    time_interleaved,
)
from labkit.frontier import log as fr
from labkit.frontier import triggers

NAME = "trigger_poll"
SIZES = (10, 10**2, 10**3, 10**4)
SMOKE_SIZES = (3, 10)
# "A few hundred" rows per dormant shard would make the 10^4 case a 3M-row table whose global
# poll costs ~0.9 s per worker (45 s a tick); 100 keeps the full run near a minute.
ROWS_PER_SHARD = 100
SMOKE_ROWS_PER_SHARD = 20
WORKERS = 50
SMOKE_WORKERS = 4
COVERED, READY = 10, 9  # per active shard: rows already summarized, rows newly covered

_DORMANT_SQL = """
INSERT INTO conversations (id, channel_key, direction, status, priority)
WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
SELECT i, 'dormant-' || ((i - 1) % ?), 'inbound', 'delivered', i % 5 FROM seq
"""


def active_key(k: int) -> str:
    return f"active-{k}"


def build(shards: int, rows_per_shard: int, workers: int) -> tuple[sqlite3.Connection, dict]:
    """The log, and each active shard's coverage_end (indexes built after the bulk fill)."""
    conn = fr.connect()
    conn.execute("DROP INDEX idx_conv_active")
    conn.execute("DROP INDEX idx_conv_shard_id")
    dormant_rows = shards * rows_per_shard
    tail = []
    for step in range(COVERED + READY + 1):
        status = "pending" if step == COVERED + READY else "delivered"
        tail.extend((active_key(k), status) for k in range(workers))
    with conn:
        conn.execute(_DORMANT_SQL, (dormant_rows, shards))
        conn.executemany(
            "INSERT INTO conversations (channel_key, direction, status, priority)"
            " VALUES (?, 'inbound', ?, 5)",
            tail,
        )
    fr.create_schema(conn)
    # an active shard's COVERED-th row is its checkpoint
    coverage = {
        active_key(k): dormant_rows + (COVERED - 1) * workers + k + 1 for k in range(workers)
    }
    return conn, coverage


def per_shard_tick(conn: sqlite3.Connection, coverage: dict[str, int]) -> int:
    """Every active worker's own trigger: its frontier, then its newly covered rows."""
    ready = 0
    for key, end in coverage.items():
        frontier = fr.delivered_frontier(conn, key, end)
        ready += triggers.newly_covered_count(conn, key, end, frontier)
    return ready


def global_tick(conn: sqlite3.Connection, coverage: dict[str, int]) -> int:
    """Every active worker runs the table-wide GROUP BY and keeps its own count."""
    return sum(triggers.global_poll_counts(conn, coverage).values())


def measure(
    sizes: tuple[int, ...], rows_per_shard: int, workers: int, smoke: bool
) -> list[dict[str, object]]:
    """Build every size first, then time the ticks with samples alternating across sizes.

    Alternation makes the flatness ratio compare sizes under the same machine load.
    """
    built = {s: build(s, rows_per_shard, workers) for s in sizes}
    for conn, coverage in built.values():
        assert per_shard_tick(conn, coverage) == workers * READY
        assert global_tick(conn, coverage) == workers * (READY + 1)  # counts the blocked row too
    mine = time_interleaved(
        {str(s): (lambda c=c, cov=cov: per_shard_tick(c, cov)) for s, (c, cov) in built.items()},
        repeats=3 if smoke else 9,
        number=2 if smoke else 20,
    )
    theirs = time_interleaved(
        {str(s): (lambda c=c, cov=cov: global_tick(c, cov)) for s, (c, cov) in built.items()},
        repeats=3,
    )
    rows = []
    for s, (conn, _) in built.items():
        total = int(conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0])
        conn.close()
        per, glob = mine[str(s)].median, theirs[str(s)].median
        rows.append(
            {
                "dormant_shards": s,
                "rows_per_shard": rows_per_shard,
                "total_rows": total,
                "workers": workers,
                "per_shard_tick_s": per,
                "global_tick_s": glob,
                "global_over_per_shard": glob / per,
            }
        )
    return rows


def plot(rows: list[dict[str, object]]):
    """Seconds per tick against dormant shards, log-log, both triggers."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(6.5, 4.0, layout="constrained")
    ax = fig.add_subplot()
    xs = [int(r["dormant_shards"]) for r in rows]
    lines = (
        ("per_shard_tick_s", "-o", COLORS["frontier"], "per-shard newly_covered_count"),
        ("global_tick_s", "-s", COLORS["max"], "global GROUP BY poll, filtered client-side"),
    )
    for column, style, color, label in lines:
        ax.plot(xs, [float(r[column]) * 1e3 for r in rows], style, color=color, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("dormant shards")
    ax.set_ylabel(f"ms per tick ({rows[0]['workers']} active workers)")
    ax.set_title("Trigger poll vs dormant shards")
    ax.legend(loc="upper left", fontsize=8)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure every size, print the table and ratios, write CSV and figure."""
    sizes = SMOKE_SIZES if smoke else SIZES
    rps = SMOKE_ROWS_PER_SHARD if smoke else ROWS_PER_SHARD
    workers = SMOKE_WORKERS if smoke else WORKERS
    rows = measure(sizes, rps, workers, smoke)
    print_table(
        [
            {
                **r,
                "per_shard": fmt_s(float(r["per_shard_tick_s"])),
                "global": fmt_s(float(r["global_tick_s"])),
                "ratio": f"{float(r['global_over_per_shard']):.1f}",
            }
            for r in rows
        ],
        ("dormant_shards", "total_rows", "per_shard", "global", "ratio"),
    )
    first, last = rows[0], rows[-1]
    flat = float(last["per_shard_tick_s"]) / float(first["per_shard_tick_s"])
    big = int(last["dormant_shards"])
    ratios = {
        f"per-shard tick {big} / {first['dormant_shards']} dormant shards": flat,
        f"global / per-shard at {big} dormant shards": float(last["global_over_per_shard"]),
    }
    targets = {"per-shard flat (within 1.3x across sizes)": flat <= 1.3}
    return finish(NAME, rows, ratios, targets, plot(rows), out)
