"""Run the benchmarks: `python -m benchmarks [--smoke | --replot] [--only NAME ...] [--out DIR]`.

A full run writes `docs/figures/bench_<name>.csv/.svg/.png`; `--smoke` uses tiny sizes and
writes into a temporary directory (or `--out`), never into docs/figures. `--replot` measures
nothing: it redraws each figure from the CSV already in `--out` (default docs/figures), for
when only the plot code changed.
"""

from __future__ import annotations

import argparse
import importlib
import tempfile
import time
from pathlib import Path

from benchmarks.common import FIGURES, BenchResult, figure_from_csv, machine_line

NAMES = (
    "frontier_lookup",
    "trigger_poll",
    "widget_latency",
    "widget_browser",
    "ballot_throughput",
    "explorers",
    "arrival_search",
    "pipelined_throughput",
    "pg_commit_order",
    "pg_frontier_lookup",
    "pg_ballots",
    "remote_vs_sim",
    "pg_remote",
    "audit",
)


def run_one(name: str, smoke: bool, out: Path) -> BenchResult:
    """Import `benchmarks.<name>` and run it, with a header and its wall time."""
    module = importlib.import_module(f"benchmarks.{name}")
    print(f"\n== {name} {'(smoke)' if smoke else ''}".rstrip())
    start = time.perf_counter()
    result = module.run(smoke=smoke, out=out)
    print(f"  ({time.perf_counter() - start:.1f} s)")
    return result


def replot_one(name: str, out: Path) -> list[Path]:
    """Redraw `bench_<name>.svg/.png` in `out` from `bench_<name>.csv` there, measuring nothing
    (nothing written for a benchmark whose figure needs its measured objects)."""
    from labkit.plots.style import save_figure

    fig = figure_from_csv(name, out)
    if fig is None:
        print(f"{name}: drawn from measured objects, not its CSV; rerun it to redraw", flush=True)
        return []
    paths = save_figure(fig, out / f"bench_{name}")
    print(f"{name}: " + ", ".join(str(p) for p in paths), flush=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds in total")
    parser.add_argument(
        "--replot", action="store_true", help="redraw the figures from the CSVs, measure nothing"
    )
    parser.add_argument("--only", action="append", choices=NAMES, help="run just this one")
    parser.add_argument("--out", type=Path, help="output directory (default: docs/figures)")
    args = parser.parse_args(argv)
    if args.replot:
        if args.smoke:
            parser.error("--replot measures nothing; it cannot be a smoke run")
        for name in args.only or NAMES:
            replot_one(name, args.out or FIGURES)
        return 0
    out = args.out
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="bench-smoke-")) if args.smoke else FIGURES
    if args.smoke and out.resolve() == FIGURES.resolve():
        parser.error("smoke runs never write into docs/figures")
    print(machine_line())
    results = [run_one(name, args.smoke, out) for name in args.only or NAMES]
    missed = [f"{r.name}: {k}" for r in results for k, ok in r.targets.items() if not ok]
    print(f"\n{machine_line()}")
    print(f"targets missed: {', '.join(missed)}" if missed else "every target met")
    print(f"output in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
