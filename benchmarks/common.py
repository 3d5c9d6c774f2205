"""Timing, machine description and result writing shared by every benchmark."""

from __future__ import annotations

import csv
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
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench_{name}.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def fmt_s(seconds: float) -> str:
    """Seconds in the unit a person reads fastest."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"
