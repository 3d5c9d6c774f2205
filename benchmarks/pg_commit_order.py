"""Commit order on PostgreSQL: Article 1's rule, a lock and the xmin horizon wait under load.

Each rule runs `labkit.pg.stress.run_stress` on the same server (LABKIT_PG_DSN or the embedded
one): writer processes insert and commit after seeded random delays (one in ten commits
slowly), a dispatcher delivers, a summarizer advances its checkpoint. Reported per rule: rows,
orphans (terminal rows in no summary) and rows/s committed and summarized. The rules run one
after another on one machine, so the ratios compare like with like; the absolute numbers are
this machine's. The figure is drawn from the CSV's rows (`plot`), so `--replot` redraws it.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import FIGURES, BenchResult, finish, print_table
from labkit.pg import instance as pg
from labkit.pg import stress as ps

NAME = "pg_commit_order"
WRITERS, ROWS_PER_WRITER = 4, 500
SMOKE_WRITERS, SMOKE_ROWS_PER_WRITER = 2, 40


def measure(dsn: str, writers: int, rows_per_writer: int) -> list[ps.StressResult]:
    """One stress run per rule, same sizes and seed."""
    return [ps.run_stress(dsn, rule, writers, rows_per_writer, seed=0) for rule in ps.RULES]


def plot(rows: list[dict[str, object]]):
    """Rows/s committed and summarized per rule, orphans on top (from the CSV's rows)."""
    from labkit.plots.pg import throughput_figure

    results = [
        ps.StressResult(
            str(r["rule"]),
            int(r["writers"]),
            int(r["rows"]),
            int(r["orphans"]),
            float(r["committed_rows_per_s"]),
            float(r["summarized_rows_per_s"]),
            float(r["seconds"]),
        )
        for r in rows
    ]
    writers, per = results[0].writers, results[0].rows // results[0].writers
    return throughput_figure(results, title=f"{writers} writers x {per} rows: throughput per rule")


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Run every rule, print the table, write CSV and figure."""
    writers, per = (SMOKE_WRITERS, SMOKE_ROWS_PER_WRITER) if smoke else (WRITERS, ROWS_PER_WRITER)
    with pg.server() as dsn:
        print(f"  PostgreSQL {pg.probe(dsn)}, {writers} writers x {per} rows per rule")
        results = measure(dsn, writers, per)
    rows: list[dict[str, object]] = [
        {
            "rule": r.rule,
            "writers": r.writers,
            "rows": r.rows,
            "orphans": r.orphans,
            "committed_rows_per_s": round(r.committed_per_s, 1),
            "summarized_rows_per_s": round(r.summarized_per_s, 1),
            "seconds": round(r.seconds, 3),
        }
        for r in results
    ]
    print_table(rows, list(rows[0]))
    by = {r.rule: r for r in results}
    ratios = {
        f"{rule}: committed rows/s vs the no-wait frontier": by[rule].committed_per_s
        / by["id_order"].committed_per_s
        for rule in ("lock", "horizon")
    }
    ratios.update(
        {
            f"{rule}: summarized rows/s vs the no-wait frontier": by[rule].summarized_per_s
            / by["id_order"].summarized_per_s
            for rule in ("lock", "horizon")
        }
    )
    targets = {
        "the no-wait frontier orphans rows": by["id_order"].orphans > 0,
        "lock orphans none": by["lock"].orphans == 0,
        "horizon orphans none": by["horizon"].orphans == 0,
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)
