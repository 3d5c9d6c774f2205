"""Frontier lookup vs settled history: `delivered_frontier` against a primary-key read.

One shard holds n delivered rows (n = 10^3 .. 10^6), in two shapes: a few active rows at the
tail ("active": the partial-index seek answers) and none ("settled": the fallback seek runs).
The coverage base is 0, so the whole settled history lies above it: the hard case. Two floors,
on the same connection and timed in alternation with the lookup: a primary-key read of one
column (`SELECT status FROM conversations WHERE id = ?`) and the cheapest honest one, a seek
that returns the key alone (`SELECT id FROM conversations WHERE id = ?`, on the INTEGER PRIMARY
KEY). Last, `idx_conv_active` is dropped to show what the partial index buys.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, print_table, time_interleaved
from labkit.frontier import log as fr

NAME = "frontier_lookup"
SIZES = (10**3, 10**4, 10**5, 10**6)
SMOKE_SIZES = (10**2, 10**3)
ACTIVE = 3  # open rows at the tail in the "active" shape
SHAPES = ("active", "settled")
SHARD = "main"

_FILL_SQL = """
INSERT INTO conversations (id, channel_key, direction, status, priority)
WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
SELECT i, ?, 'inbound', 'delivered', i % 5 FROM seq
"""
_SET_TAIL_SQL = "UPDATE conversations SET status = ? WHERE channel_key = ? AND id > ?"
FLOOR_SQL = "SELECT status FROM conversations WHERE id = ?"  # a primary-key read, one column
KEY_FLOOR_SQL = "SELECT id FROM conversations WHERE id = ?"  # the seek alone: returns the key


def build(n: int) -> sqlite3.Connection:
    """An in-memory log with one shard of `n` delivered rows (indexes built after the fill)."""
    conn = fr.connect()
    conn.execute("DROP INDEX idx_conv_active")
    conn.execute("DROP INDEX idx_conv_shard_id")
    with conn:
        conn.execute(_FILL_SQL, (n, SHARD))
    fr.create_schema(conn)
    return conn


def set_shape(conn: sqlite3.Connection, n: int, shape: str) -> int:
    """Make the last `ACTIVE` rows pending ("active") or delivered ("settled").

    Returns the frontier."""
    with conn:
        conn.execute(
            _SET_TAIL_SQL, ("pending" if shape == "active" else "delivered", SHARD, n - ACTIVE)
        )
    expected = n - ACTIVE if shape == "active" else n
    assert fr.delivered_frontier(conn, SHARD, 0) == expected
    return expected


def measure(sizes: tuple[int, ...], number: int, repeats: int) -> list[dict[str, object]]:
    """Both floors and the lookup per size and shape, then the same without the partial index.

    Every size is built first and samples alternate across sizes (and floors/lookup), so the
    flatness and floor ratios compare measurements taken under the same machine load.
    """
    conns = {n: build(n) for n in sizes}

    def floor_of(n: int, sql: str):
        conn, mid = conns[n], n // 2
        return lambda: conn.execute(sql, (mid,)).fetchone()

    def lookup_of(n: int):
        conn = conns[n]
        return lambda: fr.delivered_frontier(conn, SHARD, 0)

    rows: list[dict[str, object]] = []
    for index in ("with_partial_index", "without_partial_index"):
        # without the index the lookup walks the shard: fewer calls per sample bound it, and
        # fewer samples (only the order of magnitude matters there)
        slow = index == "without_partial_index"
        calls = {}
        for n in sizes:
            if slow:
                conns[n].execute("DROP INDEX idx_conv_active")
            calls[f"floor {n}"] = calls[f"key floor {n}"] = number
            calls[f"lookup {n}"] = max(3, min(number, 200_000 // n)) if slow else number
        for shape in SHAPES:
            fns = {}
            for n in sizes:
                set_shape(conns[n], n, shape)
                fns[f"floor {n}"] = floor_of(n, FLOOR_SQL)
                fns[f"key floor {n}"] = floor_of(n, KEY_FLOOR_SQL)
                fns[f"lookup {n}"] = lookup_of(n)
            t = time_interleaved(fns, min(repeats, 9) if slow else repeats, calls)
            for n in sizes:
                floor, key_floor, lookup = t[f"floor {n}"], t[f"key floor {n}"], t[f"lookup {n}"]
                rows.append(
                    {
                        "rows": n,
                        "shape": shape,
                        "index": index,
                        "calls_per_sample": calls[f"lookup {n}"],
                        "floor_s": floor.median,
                        "key_floor_s": key_floor.median,
                        "lookup_s": lookup.median,
                        "lookup_p95_s": lookup.p95,
                        "ratio_to_floor": lookup.median / floor.median,
                        "ratio_to_key_floor": lookup.median / key_floor.median,
                    }
                )
    for conn in conns.values():
        conn.close()
    return rows


def plot(rows: list[dict[str, object]]):
    """Per-lookup time against settled history, log-log, floor included."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(7.0, 4.0, layout="constrained")
    ax = fig.add_subplot()
    sizes = sorted({int(r["rows"]) for r in rows})
    styles = {
        ("active", "with_partial_index"): (COLORS["frontier"], "-", "o"),
        ("settled", "with_partial_index"): (COLORS["frontier"], "--", "s"),
        ("active", "without_partial_index"): (COLORS["max"], "-", "o"),
        ("settled", "without_partial_index"): (COLORS["max"], "--", "s"),
    }
    for (shape, index), (color, ls, marker) in styles.items():
        pick = [r for r in rows if r["shape"] == shape and r["index"] == index]
        label = f"{shape}, {'no ' if index.startswith('without') else ''}partial index"
        ax.plot(
            sizes,
            [float(r["lookup_s"]) * 1e6 for r in pick],
            ls,
            marker=marker,
            color=color,
            label=label,
        )
    floor = [r for r in rows if r["shape"] == "active" and r["index"] == "with_partial_index"]
    ax.plot(
        sizes,
        [float(r["floor_s"]) * 1e6 for r in floor],
        ":",
        color="black",
        label="floor: PK read (one column)",
    )
    if all("key_floor_s" in r for r in floor):  # a CSV written before the key-only floor
        ax.plot(
            sizes,
            [float(r["key_floor_s"]) * 1e6 for r in floor],
            "-.",
            color="black",
            label="floor: key-only seek",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("delivered rows in the shard")
    ax.set_ylabel("µs per lookup (median)")
    ax.set_title("delivered_frontier vs settled history")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure every size and shape, print the table and ratios, write CSV and figure."""
    sizes = SMOKE_SIZES if smoke else SIZES
    # Short samples, many of them: on a shared machine a sample of a few milliseconds is often
    # cut by the scheduler, and the median of many short ones is steadier than of a few long.
    number, repeats = (50, 3) if smoke else (200, 41)
    rows = measure(sizes, number, repeats)
    print_table(
        [
            {
                **r,
                "floor": fmt_s(float(r["floor_s"])),
                "key floor": fmt_s(float(r["key_floor_s"])),
                "lookup": fmt_s(float(r["lookup_s"])),
                "/ floor": f"{float(r['ratio_to_floor']):.2f}",
                "/ key floor": f"{float(r['ratio_to_key_floor']):.2f}",
            }
            for r in rows
        ],
        ("rows", "shape", "index", "floor", "key floor", "lookup", "/ floor", "/ key floor"),
    )
    ratios: dict[str, float] = {}
    targets: dict[str, bool] = {}
    small, big = sizes[0], sizes[-1]
    for shape in SHAPES:
        mine = {
            int(r["rows"]): r
            for r in rows
            if r["shape"] == shape and r["index"] == "with_partial_index"
        }
        bare = {
            int(r["rows"]): r
            for r in rows
            if r["shape"] == shape and r["index"] == "without_partial_index"
        }
        worst = max(float(r["ratio_to_floor"]) for r in mine.values())
        worst_key = max(float(r["ratio_to_key_floor"]) for r in mine.values())
        at_big = float(mine[big]["ratio_to_key_floor"])
        flat = float(mine[big]["lookup_s"]) / float(mine[small]["lookup_s"])
        ratios[f"{shape}: worst lookup/floor"] = worst
        ratios[f"{shape}: worst lookup/key floor"] = worst_key
        ratios[f"{shape}: lookup/key floor at {big:.0e}"] = at_big
        ratios[f"{shape}: lookup {big:.0e} / {small:.0e}"] = flat
        ratios[f"{shape}: no partial index / with, at {big:.0e}"] = float(
            bare[big]["lookup_s"]
        ) / float(mine[big]["lookup_s"])
        targets[f"{shape}: within 1.5x of the key-only seek at {big:.0e}"] = at_big <= 1.5
        targets[f"{shape}: within 2x of either floor at every size"] = worst_key <= 2.0
        targets[f"{shape}: flat ({big:.0e} vs {small:.0e} within 1.3x)"] = flat <= 1.3
    return finish(NAME, rows, ratios, targets, plot(rows), out)
