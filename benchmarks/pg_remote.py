"""The real loop against the real planner with its store on SQLite and on PostgreSQL (issue 22).

`ballot` and `pipelined` (W = 3) run against one `labkit.remote.serve` per seed, no faults,
once on a SQLite file and once with `dsn=` on a fresh schema of an embedded PostgreSQL server
(`labkit.pg`), where the pipelined loop's hold (`labkit.catalog.hold`) lives too. Means over
the seeds: kept versions per second, latency p50/p95, answers held, and the falls the
independent reader process saw (none expected on either store).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from psycopg.conninfo import make_conninfo

import labkit.remote.driver as driver
from benchmarks.common import FIGURES, BenchResult, finish, print_table
from labkit.pg import instance as pg
from labkit.remote.service import serve

NAME = "pg_remote"
DESIGNS = (("ballot", 1), ("pipelined", 3))
STORES = ("sqlite", "postgres")


def _one(
    url: str, design: str, window: int, store: str, seed: int, ticks: int, dsn: str
) -> driver.RemoteRun:
    """One run of `design` on a new store of kind `store`."""
    name = f"{design}-{store}-{seed}"
    if store == "sqlite":
        with tempfile.TemporaryDirectory(prefix="labkit-pg-remote-") as tmp:
            where = Path(tmp) / "store.db"
            return driver.run(
                design, url, ticks=ticks, window=window, seed=seed, store=where, name=name
            )
    with pg.scratch_schema(dsn, prefix="bench_remote") as schema:
        at = make_conninfo(dsn, options=pg.search_path_option(schema))
        return driver.run(design, url, ticks=ticks, window=window, seed=seed, dsn=at, name=name)


def measure(smoke: bool) -> list[dict[str, object]]:
    """One row per (design, store): means over the seeds (falls summed)."""
    latency, ticks, seeds = (0.01, 4, (0,)) if smoke else (0.05, 20, (0, 1, 2))
    runs: dict[tuple[str, str], list[driver.RemoteRun]] = {}
    with pg.server() as dsn:
        for seed in seeds:
            with serve((), seed, latency=latency, span=max(1, ticks - 3)) as url:
                for design, window in DESIGNS:
                    for store in STORES:
                        done = _one(url, design, window, store, seed, ticks, dsn)
                        runs.setdefault((design, store), []).append(done)
    rows = []
    for (design, store), mine in runs.items():
        summaries = [r.summary for r in mine]
        rows.append(
            {
                "design": design,
                "store": store,
                "window": dict(DESIGNS)[design],
                "latency_s": latency,
                "ticks": ticks,
                "seeds": len(mine),
                "per_s": round(statistics.fmean(s.throughput for s in summaries), 2),
                "p50_ms": round(1000 * statistics.fmean(s.latency_p50 for s in summaries), 1),
                "p95_ms": round(1000 * statistics.fmean(s.latency_p95 for s in summaries), 1),
                "held": round(statistics.fmean(s.held for s in summaries), 1),
                "kept": round(statistics.fmean(s.kept for s in summaries), 1),
                "reader_falls": sum(len(r.reader_falls) for r in mine),
            }
        )
    return rows


def plot(rows: list[dict[str, object]]):
    """Kept versions per second of each design on each store."""
    from labkit.plots.style import COLORS, single_axes

    ax = single_axes(6.4, 3.4, left=0.12, right=0.97, top=0.87, bottom=0.16)
    color = {"sqlite": COLORS["ballot"], "postgres": COLORS["reject"]}
    for i, row in enumerate(rows):
        rate, store = float(row["per_s"]), str(row["store"])
        shown = store if store not in ax.get_legend_handles_labels()[1] else None
        ax.bar(i, rate, color=color[store], width=0.6, label=shown)
        ax.text(i, rate * 1.02, f"{rate:.1f}/s", ha="center", va="bottom", fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_xticks(range(len(rows)), [f"{r['design']}\n{r['store']}" for r in rows], fontsize=8)
    ax.set_ylabel("kept versions per second")
    ax.set_ylim(0, max(float(r["per_s"]) for r in rows) * 1.2)
    ax.set_title("The real loop and planner: the store on SQLite or PostgreSQL", fontsize=10)
    return ax.figure


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure, print, write CSV and figure, check the targets."""
    rows = measure(smoke)
    print_table(rows, ["design", "store", "per_s", "p50_ms", "p95_ms", "held", "reader_falls"])
    rate = {(r["design"], r["store"]): float(r["per_s"]) for r in rows}
    ratios = {
        f"pipelined / ballot on {store}": rate[("pipelined", store)] / rate[("ballot", store)]
        for store in STORES
    }
    for design, _ in DESIGNS:
        ratios[f"{design}: postgres / sqlite"] = (
            rate[(design, "postgres")] / rate[(design, "sqlite")]
        )
    targets = {
        "no reader fall on either store": all(r["reader_falls"] == 0 for r in rows),
        "every run kept its versions": all(r["kept"] == r["ticks"] for r in rows),
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)
