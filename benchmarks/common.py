"""Timing, machine description and result writing shared by every benchmark."""

from __future__ import annotations

import csv
import importlib
import io
import math
import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FIGURES = Path(__file__).resolve().parent.parent / "docs" / "figures"


@dataclass(frozen=True)
class Timing:
    """Per-call seconds over `repeats` rounds of `number` calls each."""

    median: float
    p95: float
    samples: tuple[float, ...]


def time_call(fn: Callable[[], object], repeats: int = 7, number: int = 1) -> Timing:
    """Median and p95 seconds per call of `fn`, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return Timing(statistics.median(samples), p95, tuple(samples))


def time_interleaved(
    fns: dict[str, Callable[[], object]], repeats: int = 9, number: int | dict[str, int] = 1
) -> dict[str, Timing]:
    """`time_call` for several callables at once, taking their samples in alternation.

    On a shared, noisy machine a slow stretch then hits every callable alike, so ratios of
    the medians compare like with like. `number` may differ per callable (a dict by name).
    """
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            calls = number[name] if isinstance(number, dict) else number
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls)
    out = {}
    for name, got in samples.items():
        ordered = sorted(got)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        out[name] = Timing(statistics.median(got), p95, tuple(got))
    return out


def machine_line() -> str:
    """One line naming the machine and the library versions the numbers depend on."""
    versions = []
    for dist in ("pandas", "matplotlib", "ipywidgets"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return (
        f"{platform.machine()} {os.cpu_count()} cpu, {platform.system()} {platform.release()}, "
        f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, " + ", ".join(versions)
    )


def write_csv(name: str, rows: Sequence[dict[str, object]], out: Path = FIGURES) -> Path:
    """Write benchmark rows to `out/bench_<name>.csv`."""
    from labkit.files import replace_file

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench_{name}.csv"
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    replace_file(path, text.getvalue())
    return path


def read_csv(name: str, out: Path = FIGURES) -> list[dict[str, str]]:
    """The rows a run wrote to `out/bench_<name>.csv`, every value a string (each `plot`
    converts what it draws, so a figure redrawn from its CSV matches the run's bytes)."""
    path = out / f"bench_{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no CSV to redraw from (run the benchmark first)")
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def figure_from_csv(name: str, out: Path = FIGURES) -> Figure | None:
    """Benchmark `name`'s figure redrawn by its module's `plot(rows)` from the CSV in `out`,
    measuring nothing; None for a benchmark without `plot(rows)` (its figure needs the
    measured objects: rerun it)."""
    plot = getattr(importlib.import_module(f"benchmarks.{name}"), "plot", None)
    return None if plot is None else plot(read_csv(name, out))


def fmt_s(seconds: float) -> str:
    """Seconds in the unit a person reads fastest."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


# --- shared by every benchmark module ---------------------------------------------------------


@dataclass
class BenchResult:
    """One benchmark's output: its CSV rows, the ratios it claims, and the files it wrote."""

    name: str
    rows: list[dict[str, object]]
    ratios: dict[str, float]
    targets: dict[str, bool]
    files: list[Path]


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank `q` percentile (0..1) of `samples`."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def print_table(rows: Sequence[dict[str, object]], columns: Sequence[str]) -> None:
    """Print rows as an aligned plain-text table (floats in seconds are formatted by caller)."""
    cells = [[str(r[c]) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def finish(
    name: str,
    rows: list[dict[str, object]],
    ratios: dict[str, float],
    targets: dict[str, bool],
    fig: Figure,
    out: Path,
) -> BenchResult:
    """Write `bench_<name>.csv/.svg/.png` into `out`, print ratios and targets, return it all."""
    from labkit.plots.style import save_figure

    files = [write_csv(name, rows, out), *save_figure(fig, out / f"bench_{name}")]
    for key, value in ratios.items():
        print(f"  ratio {key}: {value:.2f}")
    for key, ok in targets.items():
        print(f"  target {key}: {'MET' if ok else 'MISSED'}")
    print("  wrote " + ", ".join(str(p) for p in files))
    return BenchResult(name, rows, ratios, targets, files)
