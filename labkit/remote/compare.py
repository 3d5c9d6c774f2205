"""The simulator checked against the real thing: the same designs, seeds, latency draw,
window and faults, once in `labkit.designs.simulator` and once against the real service.

The simulator counts time in mean latencies; the real run in seconds. `side_by_side` puts the
simulator's numbers in seconds (times multiplied by the latency, throughput divided by it) so
each metric reads the same on both sides, and gives the ratio real / simulated.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path

import pandas as pd

import labkit.designs.simulator as simulator
from labkit.designs.registry import ALL_DESIGNS
from labkit.designs.run_stats import RunSummary
from labkit.remote.driver import RemoteRun, run
from labkit.remote.service import serve

# (metric, how a simulated value becomes seconds: multiply by latency ** power)
METRICS: tuple[tuple[str, int], ...] = (
    ("throughput", -1),
    ("latency_p50", 1),
    ("latency_p95", 1),
    ("wasted_per_commit", 0),
    ("rewinds", 0),
)


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def measure(
    designs: Sequence[str] = ALL_DESIGNS,
    faults: Collection[str] = (),
    seeds: Sequence[int] = (0, 1, 2),
    *,
    ticks: int = 20,
    latency: float = 0.05,
    window: int = 3,
) -> dict[tuple[str, int], tuple[RunSummary, RemoteRun]]:
    """The simulated summary and the real run per (design, seed). One service per seed (its seed draws
    the skews and the targets), with `span` = ticks - 3 so both pick the same targets."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="labkit-compare-") as tmp:
        for seed in seeds:
            with serve(faults, seed, latency=latency, span=max(1, ticks - 3)) as url:
                for design in designs:
                    sim = simulator.run(design, faults, seed, ticks=ticks, window=window)
                    store = Path(tmp) / f"{design}-{seed}.db"
                    real = run(
                        design,
                        url,
                        ticks=ticks,
                        window=window,
                        seed=seed,
                        store=store,
                        name=f"compare-{design}-{seed}",
                    )
                    out[(design, seed)] = (sim.summary, real)
    return out


def side_by_side(
    pairs: dict[tuple[str, int], tuple[RunSummary, RemoteRun]], latency: float
) -> pd.DataFrame:
    """One row per design: each metric simulated (in seconds) and real, averaged over seeds
    (rewinds summed), real / simulated, and the falls the real runs' reader processes saw."""
    rows = []
    for design in dict.fromkeys(d for d, _ in pairs):
        mine = [pair for (d, _), pair in pairs.items() if d == design]
        row: dict[str, object] = {"design": design, "seeds": len(mine)}
        for metric, power in METRICS:
            combine = sum if metric == "rewinds" else _mean
            sim = combine([getattr(s, metric) * latency**power for s, _ in mine])
            real = combine([getattr(r.summary, metric) for _, r in mine])
            row[f"{metric} sim"] = round(sim, 4)
            row[f"{metric} real"] = round(real, 4)
            row[f"{metric} real/sim"] = round(real / sim, 2) if sim else None
        row["reader_falls real"] = sum(len(r.reader_falls) for _, r in mine)
        rows.append(row)
    return pd.DataFrame(rows)


def differences(table: pd.DataFrame, tolerance: float = 0.25) -> pd.DataFrame:
    """The cells of a `side_by_side` table where real and simulated differ by more than
    `tolerance` (a ratio outside 1 ± tolerance, or one side zero and the other not): the ones
    that need a reason."""
    rows = []
    for row in table.to_dict("records"):
        for metric, _ in METRICS:
            sim, real = row[f"{metric} sim"], row[f"{metric} real"]
            ratio = row[f"{metric} real/sim"]
            off = (
                (sim == 0) != (real == 0)
                if ratio is None or pd.isna(ratio)
                else (abs(ratio - 1) > tolerance)
            )
            if off:
                rows.append(
                    {
                        "design": row["design"],
                        "metric": metric,
                        "sim": sim,
                        "real": real,
                        "real/sim": ratio,
                    }
                )
    return pd.DataFrame(rows, columns=["design", "metric", "sim", "real", "real/sim"])
