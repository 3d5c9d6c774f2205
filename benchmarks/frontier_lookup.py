"""Frontier lookup vs settled history: `delivered_frontier` against a primary-key read.

One shard holds n delivered rows (n = 10^3 .. 10^6), in two shapes: a few active rows at the
tail ("active": the partial-index seek answers) and none ("settled": the MAX fallback runs).
The coverage base is 0, so the whole settled history lies above it: the hard case. The floor
is `SELECT status FROM conversations WHERE id = ?` on the same connection, timed in alternation
with the lookup. Last, `idx_conv_active` is dropped to show what the partial index buys.
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
    """Make the last `ACTIVE` rows pending ("active") or delivered ("settled"); return the frontier."""
    with conn:
        conn.execute(
            _SET_TAIL_SQL, ("pending" if shape == "active" else "delivered", SHARD, n - ACTIVE)
        )
    expected = n - ACTIVE if shape == "active" else n
    assert fr.delivered_frontier(conn, SHARD, 0) == expected
    return expected


def measure(sizes: tuple[int, ...], number: int, repeats: int) -> list[dict[str, object]]:
    """Floor and lookup per size and shape, then the same without the partial index.

    Every size is built first and samples alternate across sizes (and floor/lookup), so the
    flatness and floor ratios compare measurements taken under the same machine load.
    """
    conns = {n: build(n) for n in sizes}

    def floor_of(n: int):
        mid = n // 2
        return lambda: (
            conns[n].execute("SELECT status FROM conversations WHERE id = ?", (mid,)).fetchone()
        )

    def lookup_of(n: int):
        return lambda: fr.delivered_frontier(conns[n], SHARD, 0)

    rows: list[dict[str, object]] = []
    for index in ("with_partial_index", "without_partial_index"):
        calls = {}
        for n in sizes:
            if index == "without_partial_index":
                conns[n].execute("DROP INDEX idx_conv_active")
            # without the index the lookup walks the shard: fewer calls per sample bound it
            slow = index == "without_partial_index"
            calls[f"floor {n}"] = number
            calls[f"lookup {n}"] = max(3, min(number, 200_000 // n)) if slow else number
        for shape in SHAPES:
            fns = {}
            for n in sizes:
                set_shape(conns[n], n, shape)
                fns[f"floor {n}"] = floor_of(n)
                fns[f"lookup {n}"] = lookup_of(n)
            t = time_interleaved(fns, repeats, calls)
            for n in sizes:
                floor, lookup = t[f"floor {n}"], t[f"lookup {n}"]
                rows.append(
                    {
                        "rows": n,
                        "shape": shape,
                        "index": index,
                        "calls_per_sample": calls[f"lookup {n}"],
                        "floor_s": floor.median,
                        "lookup_s": lookup.median,
                        "lookup_p95_s": lookup.p95,
                        "ratio_to_floor": lookup.median / floor.median,
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
        label="floor: PK read",
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
    number, repeats = (50, 3) if smoke else (1000, 9)
    rows = measure(sizes, number, repeats)
    print_table(
        [
            {
                **r,
                "floor": fmt_s(float(r["floor_s"])),
                "lookup": fmt_s(float(r["lookup_s"])),
                "ratio": f"{float(r['ratio_to_floor']):.2f}",
            }
            for r in rows
        ],
        ("rows", "shape", "index", "floor", "lookup", "ratio"),
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
        flat = float(mine[big]["lookup_s"]) / float(mine[small]["lookup_s"])
        ratios[f"{shape}: worst lookup/floor"] = worst
        ratios[f"{shape}: lookup {big:.0e} / {small:.0e}"] = flat
        ratios[f"{shape}: no partial index / with, at {big:.0e}"] = float(
            bare[big]["lookup_s"]
        ) / float(mine[big]["lookup_s"])
        targets[f"{shape}: within 2x of the floor"] = worst <= 2.0
        targets[f"{shape}: flat ({big:.0e} vs {small:.0e} within 1.3x)"] = flat <= 1.3
    return finish(NAME, rows, ratios, targets, plot(rows), out)
