"""Ballot throughput: safe ticks per second on a file-backed store, and the simulator's speed.

A tick is `WatermarkLoop.reserve()` then `apply()` of its (committing) response: two durable
transactions. The floor is two bare transactions on another file of the same directory with
the journal_mode and synchronous the loop's connection reports: an UPDATE, then an UPDATE and
an INSERT. Samples alternate between the two so a slow disk stretch hits both alike.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, print_table, time_interleaved
from labkit import db
from labkit.ballot import WatermarkLoop
from labkit.designs.registry import DESIGNS
from labkit.designs.simulator import FAULTS, simulate

NAME = "ballot_throughput"
TOOLS = [{"name": f"tool-{i}", "args": ["query", "limit"], "enabled": True} for i in range(8)]
SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def pragmas(conn: sqlite3.Connection) -> tuple[str, int]:
    """(journal_mode, synchronous) as the connection reports them."""
    mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    return mode, int(conn.execute("PRAGMA synchronous").fetchone()[0])


def floor_connection(path: Path, journal_mode: str, synchronous: int) -> sqlite3.Connection:
    """A bare file with the loop's durability settings and two tiny tables."""
    conn = db.connect(path)
    conn.execute(f"PRAGMA journal_mode = {journal_mode}")  # values read back from SQLite itself
    conn.execute(f"PRAGMA synchronous = {int(synchronous)}")
    conn.execute("CREATE TABLE store (id INTEGER PRIMARY KEY, next INTEGER NOT NULL)")
    conn.execute("CREATE TABLE log (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    conn.execute("INSERT INTO store VALUES (1, 0)")
    return conn


def floor_tick(conn: sqlite3.Connection) -> None:
    """The least two durable transactions a tick could be."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE store SET next = next + 1 WHERE id = 1")
    conn.execute("COMMIT")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE store SET next = next + 1 WHERE id = 1")
    conn.execute("INSERT INTO log (v) VALUES (1)")
    conn.execute("COMMIT")


def loop_tick(loop: WatermarkLoop) -> None:
    """One safe tick: reserve a ballot, then apply the response that commits it."""
    ballot = loop.reserve()
    out = loop.apply(ballot.answer(TOOLS))
    if not out.committed:
        raise AssertionError(f"benchmark tick was rejected: {out}")


def measure_ticks(directory: Path, repeats: int, number: int) -> dict[str, object]:
    conn = db.connect(directory / "watermark.db")
    loop = WatermarkLoop(conn, window=1)
    mode, sync = pragmas(conn)
    if sync == 0:
        raise AssertionError("WatermarkLoop runs with synchronous=OFF: durability is not kept")
    floor = floor_connection(directory / "floor.db", mode, sync)
    if pragmas(floor) != (mode, sync):
        raise AssertionError(f"floor settings {pragmas(floor)} differ from {(mode, sync)}")
    t = time_interleaved(
        {"tick": lambda: loop_tick(loop), "floor": lambda: floor_tick(floor)}, repeats, number
    )
    head = loop.head_version()
    conn.close()
    floor.close()
    return {
        "journal_mode": mode,
        "synchronous": SYNC_NAMES.get(sync, str(sync)),
        "tick_s": t["tick"].median,
        "floor_s": t["floor"].median,
        "ticks_per_s": 1 / t["tick"].median,
        "floor_per_s": 1 / t["floor"].median,
        "tick_over_floor": t["tick"].median / t["floor"].median,
        "commits": head,
    }


def measure_simulate(design: str, ticks: int, repeats: int) -> dict[str, object]:
    """Events per second of `simulate` for one design, every fault class on, seed 0."""
    best = []
    events = 0
    for _ in range(repeats):
        start = time.perf_counter()
        trace = simulate(design, FAULTS, seed=0, ticks=ticks)
        best.append(time.perf_counter() - start)
        events = len(trace)
    best.sort()
    median = best[len(best) // 2]
    return {
        "design": design,
        "ticks": ticks,
        "events": events,
        "run_s": median,
        "events_per_s": events / median,
    }


def plot(rows: list[dict[str, object]]):
    """Left: ticks/s against the floor (the `tick` row). Right: simulator events/s per design
    (the `simulate` rows)."""
    from labkit.plots.style import COLORS, new_figure

    (tick_row,) = [r for r in rows if r["kind"] == "tick"]
    sims = [r for r in rows if r["kind"] == "simulate"]
    fig = new_figure(8.0, 3.6, layout="constrained")
    left, right = fig.subplots(1, 2)
    left.bar(
        ["WatermarkLoop tick", "floor: 2 bare txns"],
        [float(tick_row["ticks_per_s"]), float(tick_row["floor_per_s"])],
        color=[COLORS["ballot"], COLORS["reject"]],
    )
    left.set_ylabel("per second (median)")
    left.set_title(
        f"Safe ticks, {tick_row['journal_mode']} + synchronous={tick_row['synchronous']}",
        fontsize=9,
    )
    right.bar(
        [str(r["design"]) for r in sims],
        [float(r["events_per_s"]) for r in sims],
        color=[COLORS[str(r["design"])] for r in sims],
    )
    right.set_ylabel("simulator events per second")
    right.set_title("simulate(), every fault class", fontsize=9)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure ticks against the floor and the simulator per design; write CSV and figure."""
    repeats, number = (3, 3) if smoke else (15, 20)
    with tempfile.TemporaryDirectory(prefix="bench-ballot-") as tmp:
        tick_row = measure_ticks(Path(tmp), repeats, number)
    sims = [measure_simulate(d, 4 if smoke else 40, 1 if smoke else 5) for d in DESIGNS]
    print(
        f"  store: journal_mode={tick_row['journal_mode']}, synchronous={tick_row['synchronous']}"
    )
    print_table(
        [
            {
                "what": "WatermarkLoop tick",
                "median": fmt_s(float(tick_row["tick_s"])),
                "per_s": f"{float(tick_row['ticks_per_s']):.0f}",
            },
            {
                "what": "floor (2 bare txns)",
                "median": fmt_s(float(tick_row["floor_s"])),
                "per_s": f"{float(tick_row['floor_per_s']):.0f}",
            },
        ],
        ("what", "median", "per_s"),
    )
    print_table(
        [
            {**r, "run": fmt_s(float(r["run_s"])), "events/s": f"{float(r['events_per_s']):.0f}"}
            for r in sims
        ],
        ("design", "ticks", "events", "run", "events/s"),
    )
    rows: list[dict[str, object]] = [
        {"kind": "tick", "design": "ballot", **tick_row},
        *({"kind": "simulate", **r} for r in sims),
    ]
    ratio = float(tick_row["tick_over_floor"])
    ratios = {"tick / floor": ratio}
    targets = {
        "tick within 2x of the floor": ratio <= 2.0,
        "durability kept (synchronous != OFF)": tick_row["synchronous"] != "OFF",
    }
    rows = _rectangular(rows)
    return finish(NAME, rows, ratios, targets, plot(rows), out)


def _rectangular(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Give every row the union of the keys (blank where absent) so one CSV holds both kinds."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    return [{k: row.get(k, "") for k in keys} for row in rows]
