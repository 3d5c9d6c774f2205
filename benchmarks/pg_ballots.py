"""Ballots on PostgreSQL: a safe tick against two bare transactions, and N workers' commits/s.

A safe tick is `WatermarkLoop.reserve()` then `apply()` of its committing response on one
connection: each is a read, then one guarded write that commits on its own. The floor (the
target's yardstick) is two bare transactions on the same server with the same settings
(durable commits): BEGIN, an UPDATE, COMMIT; BEGIN, an UPDATE and an INSERT, COMMIT. Shown
beside it, stricter: the same two writes as two autocommit statements, with no BEGIN or COMMIT
round trips at all. Samples alternate between the three. Then
`labkit.pg.ballots.run_workers` runs N worker processes on one catalog and reports commits/s
with its invariants (the workers commit asynchronously: their number is the rule's cost under
contention, not the disk's).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from benchmarks.ballot_throughput import loop_tick  # the same tick as on SQLite
from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, print_table, time_interleaved
from labkit.catalog.loop import WatermarkLoop
from labkit.pg import ballots as pb
from labkit.pg import instance as pg

NAME = "pg_ballots"
WORKERS, TARGET = 8, 300
SMOKE_WORKERS, SMOKE_TARGET = 2, 6
FLOOR_SCHEMA_SQL = (
    "CREATE TABLE store (id integer PRIMARY KEY, next bigint NOT NULL);"
    " CREATE TABLE log (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v bigint NOT NULL);"
    " INSERT INTO store VALUES (1, 0)"
)


def floor_tick(conn) -> None:
    """The least two durable transactions a tick could be."""
    with conn.transaction():
        conn.execute("UPDATE store SET next = next + 1 WHERE id = 1")
    with conn.transaction():
        conn.execute("UPDATE store SET next = next + 1 WHERE id = 1")
        conn.execute("INSERT INTO log (v) VALUES (1)")


def autocommit_floor_tick(conn) -> None:
    """The same two writes as `floor_tick`, each one autocommit statement (one round trip)."""
    conn.execute("UPDATE store SET next = next + 1 WHERE id = 1")
    conn.execute(
        "WITH bump AS (UPDATE store SET next = next + 1 WHERE id = 1) "
        "INSERT INTO log (v) VALUES (1)"
    )


def measure_ticks(dsn: str, repeats: int, number: int) -> dict[str, float]:
    """Median seconds of a safe tick and of both floors, interleaved, on one server."""
    with (
        pg.scratch_schema(dsn, prefix="bench_tick") as tick_schema,
        pg.scratch_schema(dsn, prefix="bench_floor") as floor_schema,
    ):
        with (
            pg.connect(dsn, options=pg.search_path_option(tick_schema)) as tconn,
            pg.connect(dsn, options=pg.search_path_option(floor_schema)) as fconn,
            pg.connect(dsn, autocommit=True, options=pg.search_path_option(floor_schema)) as aconn,
        ):
            loop = WatermarkLoop(tconn)
            with fconn.transaction():
                fconn.execute(FLOOR_SCHEMA_SQL)
            conns = (tconn, fconn, aconn)
            sync = {str(c.execute("SHOW synchronous_commit").fetchone()[0]) for c in conns}
            tconn.rollback()
            fconn.rollback()
            t = time_interleaved(
                {
                    "tick": lambda: loop_tick(loop),
                    "floor": lambda: floor_tick(fconn),
                    "autocommit": lambda: autocommit_floor_tick(aconn),
                },
                repeats,
                number,
            )
    if sync != {"on"}:
        raise AssertionError(f"synchronous_commit is {sync}, not on: durability is not kept")
    return {k + "_s": v.median for k, v in t.items()}


def plot(rows: list[dict[str, object]]):
    """Per-second rates: a safe tick, both floors, and the N workers' commits."""
    from labkit.plots.style import COLORS, single_axes

    ax = single_axes(6.8, 3.6, left=0.12, right=0.97, top=0.87, bottom=0.2)
    names = [textwrap.fill(str(r["what"]), 14) for r in rows]
    rates = [float(r["per_s"]) for r in rows]
    colors = [COLORS["ballot"], COLORS["reject"], COLORS["reject"], COLORS["fenced"]]
    ax.bar(names, rates, color=colors[: len(rates)], width=0.6)
    for i, rate in enumerate(rates):
        ax.text(i, rate * 1.02, f"{rate:.0f}/s", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("per second (median)")
    ax.set_ylim(0, max(rates) * 1.2)
    ax.set_title(
        "PostgreSQL: a safe tick, two floors, and workers sharing one catalog", fontsize=10
    )
    return ax.figure


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure ticks against the floor and one N-worker run; write CSV and figure."""
    repeats, number = (3, 3) if smoke else (15, 20)
    workers, target = (SMOKE_WORKERS, SMOKE_TARGET) if smoke else (WORKERS, TARGET)
    with pg.server() as dsn:
        print(f"  PostgreSQL {pg.probe(dsn)}; ticks on one connection, then {workers} workers")
        ticks = measure_ticks(dsn, repeats, number)
        many = pb.run_workers(dsn, workers=workers, target=target, seed=0)
    refused = len(many.ticks) - many.commits
    rows: list[dict[str, object]] = [
        {
            "what": "safe tick",
            "workers": 1,
            "per_s": round(1 / ticks["tick_s"], 1),
            "median_s": ticks["tick_s"],
            "commits": "",
            "refused": "",
        },
        {
            "what": "floor: 2 bare txns",
            "workers": 1,
            "per_s": round(1 / ticks["floor_s"], 1),
            "median_s": ticks["floor_s"],
            "commits": "",
            "refused": "",
        },
        {
            "what": "2 autocommit writes",
            "workers": 1,
            "per_s": round(1 / ticks["autocommit_s"], 1),
            "median_s": ticks["autocommit_s"],
            "commits": "",
            "refused": "",
        },
        {
            "what": f"{workers} workers: commits",
            "workers": workers,
            "per_s": round(many.commits_per_s, 1),
            "median_s": "",
            "commits": many.commits,
            "refused": refused,
        },
    ]
    print_table(
        [
            {**r, "median": fmt_s(float(r["median_s"])) if r["median_s"] != "" else "-"}
            for r in rows
        ],
        ("what", "workers", "median", "per_s", "commits", "refused"),
    )
    for line in many.invariants.lines():
        print(f"  {workers} workers: {line}")
    print(
        f"  {workers} workers: {many.lost_races} guarded writes lost a race and were decided"
        f" again; {many.commit_first_misses} commits tried before reading did not land"
    )
    ratio = ticks["tick_s"] / ticks["floor_s"]
    ratios = {
        "tick / floor": ratio,
        "tick / 2 autocommit writes (no target)": ticks["tick_s"] / ticks["autocommit_s"],
        f"{workers} workers: commits per s": many.commits_per_s,
    }
    targets = {
        "tick within 2x of the floor": ratio <= 2.0,
        f"{workers} workers keep every invariant": many.invariants.ok,
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)
