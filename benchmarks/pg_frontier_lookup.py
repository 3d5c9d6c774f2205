"""The PostgreSQL frontier lookup against a primary-key read, and what it consumes (issue 37.2).

One shard holds n delivered rows (n = 10^3 and 10^5), in two shapes: a few pending rows at the
tail ("active") and none ("settled"). No writer is in flight: this is the lookup a summarizer
makes on a quiet log, `delivered_frontier(conn, shard, 0)` on an idle connection, one not in
autocommit (a summarizer's session, the `lookup` columns) and one in autocommit (`autocommit`).
The floor is `SELECT status FROM conversations WHERE id = ?` as one autocommit statement (one
round trip, the least any read costs). Samples of the three alternate. Measured in the same
run, per size and shape: the transaction ids 1,000 lookups consumed on each connection (the
server's next id, read from another connection without taking one, before and after) and the
round trips one lookup makes (libpq's protocol trace, Linux only).
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, print_table, time_interleaved
from labkit.frontier import log as fr
from labkit.frontier import log_pg as fpg
from labkit.pg import instance as pg

NAME = "pg_frontier_lookup"
SIZES = (10**3, 10**5)
SMOKE_SIZES = (10**2, 10**3)
SHAPES = ("active", "settled")
ACTIVE = 3  # pending rows at the tail in the "active" shape
SHARD = "main"
COUNTED = 1_000  # lookups between the two reads of the transaction counter
FLOOR_SQL = "SELECT status FROM conversations WHERE id = %s"
_FILL_SQL = (
    "INSERT INTO conversations (channel_key, direction, status, priority)"
    " SELECT %s, 'inbound', 'delivered', i %% 5 FROM generate_series(1, %s) AS i"
)
_SET_TAIL_SQL = "UPDATE conversations SET status = %s WHERE channel_key = %s AND id > %s"


def next_xid(conn: Any) -> int:
    """The server's next transaction id, read without taking one."""
    return int(conn.execute(fpg.NEXT_XID_SQL).fetchone()[0])


def fill(conn: Any, n: int) -> None:
    """One shard of `n` delivered rows, vacuumed (an index-only scan needs the visibility map)."""
    conn.execute(_FILL_SQL, (SHARD, n))
    conn.execute("VACUUM ANALYZE conversations")


def set_shape(conn: Any, n: int, shape: str) -> int:
    """Make the last `ACTIVE` rows pending ("active") or delivered ("settled"); the frontier."""
    status = "pending" if shape == "active" else "delivered"
    conn.execute(_SET_TAIL_SQL, (status, SHARD, n - ACTIVE))
    return n - ACTIVE if shape == "active" else n


def round_trips(conn: Any, call: Any) -> int | None:
    """How many requests `call()` sends on `conn` that the server answers (ReadyForQuery)."""
    if sys.platform != "linux":
        return None
    from psycopg import pq

    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            call()
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        return sum("\tReadyForQuery\t" in line for line in trace)


def measure(
    dsn: str, sizes: tuple[int, ...], number: int, repeats: int, counted: int
) -> list[dict[str, object]]:
    """Floor and lookup per size and shape (samples interleaved across sizes), then the ids
    `counted` lookups consumed and one lookup's round trips."""
    rows: list[dict[str, object]] = []
    with ExitStack() as stack:
        watch = stack.enter_context(pg.connect(dsn, autocommit=True))
        conns: dict[int, tuple[Any, Any, Any]] = {}
        for n in sizes:
            schema = stack.enter_context(pg.scratch_schema(dsn, prefix=f"bench_lookup_{n}"))
            opts = pg.search_path_option(schema)
            admin, floor = (
                stack.enter_context(pg.connect(dsn, autocommit=True, options=opts))
                for _ in range(2)
            )
            lookup = stack.enter_context(pg.connect(dsn, options=opts))  # a summarizer's, idle
            fr.create_schema(admin)
            fill(admin, n)
            conns[n] = (admin, lookup, floor)  # floor's connection is in autocommit
        for shape in SHAPES:
            fns = {}
            for n, (admin, lookup, floor) in conns.items():
                expected = set_shape(admin, n, shape)
                assert fr.delivered_frontier(lookup, SHARD, 0) == expected
                fns[f"floor {n}"] = _floor(floor, n // 2)
                fns[f"lookup {n}"] = _lookup(lookup)
                fns[f"autocommit {n}"] = _lookup(floor)
            t = time_interleaved(fns, repeats, number)
            for n, (_, lookup, floor) in conns.items():
                spent = {
                    kind: ids_spent(watch, conn, counted)
                    for kind, conn in (("s", lookup), ("a", floor))
                }
                trips = {
                    kind: round_trips(conn, _lookup(conn))
                    for kind, conn in (("s", lookup), ("a", floor))
                }
                floor_t, lookup_t, auto_t = (
                    t[f"{k} {n}"] for k in ("floor", "lookup", "autocommit")
                )
                rows.append(
                    {
                        "rows": n,
                        "shape": shape,
                        "floor_s": floor_t.median,
                        "lookup_s": lookup_t.median,
                        "lookup_p95_s": lookup_t.p95,
                        "ratio_to_floor": lookup_t.median / floor_t.median,
                        "autocommit_s": auto_t.median,
                        "autocommit_ratio_to_floor": auto_t.median / floor_t.median,
                        "xids_per_1000_lookups": spent["s"],
                        "autocommit_xids_per_1000_lookups": spent["a"],
                        "round_trips_per_lookup": "" if trips["s"] is None else trips["s"],
                        "autocommit_round_trips_per_lookup": ""
                        if trips["a"] is None
                        else trips["a"],
                    }
                )
    return rows


def ids_spent(watch: Any, conn: Any, counted: int) -> float:
    """Transaction ids the server assigned while `conn` made `counted` lookups, per 1,000."""
    before = next_xid(watch)
    for _ in range(counted):
        fr.delivered_frontier(conn, SHARD, 0)
    return round((next_xid(watch) - before) * 1000 / counted, 1)


def _floor(conn: Any, row_id: int):
    return lambda: conn.execute(FLOOR_SQL, (row_id,)).fetchone()


def _lookup(conn: Any):
    return lambda: fr.delivered_frontier(conn, SHARD, 0)


def plot(rows: list[dict[str, object]]):
    """Floor and both lookups per size and shape, µs (median); each lookup's ratio to the floor
    and the transaction ids 1,000 of them consumed, on top."""
    from labkit.plots.style import COLORS, single_axes

    ax = single_axes(7.2, 3.8, left=0.1, right=0.98, top=0.86, bottom=0.19)
    xs = range(len(rows))
    bars = (
        ("floor_s", None, None, COLORS["reject"], "floor: PK read (autocommit)"),
        (
            "lookup_s",
            "ratio_to_floor",
            "xids_per_1000_lookups",
            COLORS["frontier"],
            "lookup (session)",
        ),
        (
            "autocommit_s",
            "autocommit_ratio_to_floor",
            "autocommit_xids_per_1000_lookups",
            COLORS["max"],
            "lookup on an autocommit connection",
        ),
    )
    top = 0.0
    for i, (key, ratio, ids, color, label) in enumerate(bars):
        us = [float(r[key]) * 1e6 for r in rows]
        at = [x + (i - 1) * 0.27 for x in xs]
        ax.bar(at, us, width=0.27, color=color, label=label)
        top = max(top, *us)
        if ratio is not None:
            for x, r, u in zip(at, rows, us, strict=True):
                note = f"{float(r[ratio]):.2f}×\n{float(r[ids]):g} ids"
                ax.text(x, u * 1.02, note, ha="center", va="bottom", fontsize=6.5)
    ax.set_xticks(list(xs), [f"{int(r['rows']):,} rows\n{r['shape']}" for r in rows], fontsize=8)
    ax.set_ylabel("µs per call (median)")
    ax.set_ylim(0, top * 1.4)
    ax.legend(loc="upper left", fontsize=7)
    ax.set_title(
        "PostgreSQL delivered_frontier, no writer in flight: time, and ids per 1,000 lookups",
        fontsize=9,
    )
    return ax.figure


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure every size and shape; print the table, write CSV and figure."""
    sizes = SMOKE_SIZES if smoke else SIZES
    number, repeats, counted = (20, 3, 100) if smoke else (200, 21, COUNTED)
    with pg.server() as dsn:
        print(f"  PostgreSQL {pg.probe(dsn)}; one shard per size, no writer in flight")
        rows = measure(dsn, sizes, number, repeats, counted)
    print_table(
        [
            {
                **r,
                "floor": fmt_s(float(r["floor_s"])),
                "lookup": fmt_s(float(r["lookup_s"])),
                "ratio": f"{float(r['ratio_to_floor']):.2f}",
                "autocommit": fmt_s(float(r["autocommit_s"])),
                "ratio ": f"{float(r['autocommit_ratio_to_floor']):.2f}",
                "ids/1000": (
                    f"{r['xids_per_1000_lookups']}, {r['autocommit_xids_per_1000_lookups']}"
                ),
                "round trips": (
                    f"{r['round_trips_per_lookup']}, {r['autocommit_round_trips_per_lookup']}"
                ),
            }
            for r in rows
        ],
        (
            "rows",
            "shape",
            "floor",
            "lookup",
            "ratio",
            "autocommit",
            "ratio ",
            "ids/1000",
            "round trips",
        ),
    )
    worst = max(
        max(float(r["ratio_to_floor"]), float(r["autocommit_ratio_to_floor"])) for r in rows
    )
    spent = max(
        max(float(r["xids_per_1000_lookups"]), float(r["autocommit_xids_per_1000_lookups"]))
        for r in rows
    )
    ratios = {"worst lookup / PK read": worst}  # the ids consumed are a column, often 0
    print(f"  transaction ids per 1,000 lookups, worst: {spent:g}")
    targets = {
        "lookup within 2x of a PK read": worst <= 2.0,
        "at most 10 transaction ids per 1,000 lookups": spent <= 10,
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)
