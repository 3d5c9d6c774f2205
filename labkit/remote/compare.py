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
import labkit.remote.knobs as knobs
from labkit import validation
from labkit.designs.registry import ALL_DESIGNS, check_design
from labkit.designs.run_stats import RunSummary
from labkit.remote.driver import RemoteRun, run
from labkit.remote.faults import check_service_faults
from labkit.remote.service import serve

# (metric, how a simulated value becomes seconds: multiply by latency ** power)
METRICS: tuple[tuple[str, int], ...] = (
    ("throughput", -1),
    ("latency_p50", 1),
    ("latency_p95", 1),
    ("wasted_per_commit", 0),
    ("rewinds", 0),
)


# Why real and simulated part, per (metric, direction of real against simulated): the reasons
# `differences` gives each cell more than its tolerance apart (notebook 09, benchmarks.md §11).
WHY: dict[tuple[str, str], str] = {
    ("throughput", "lower"): (
        "the loop's own work costs real time the simulator counts as free: a durable SQLite "
        "write per reserve and per decision, an HTTP message each way, one event handled at a "
        "time (the hedged design pays it for each of its W ballots); an answer landing near the "
        "timeout can also replay a tick on the real side only"
    ),
    ("throughput", "higher"): (
        "a near-tie went the other way: an answer beat its timer for real but not in the "
        "simulator, or the simulator had a fall the real run did not, so more versions were "
        "kept in less time"
    ),
    ("latency_p50", "higher"): (
        "each version also waits for HTTP both ways, the durable writes and the loop's previous "
        "event, all free in the simulator; the hedged design's winning answer also waits while "
        "the losers' refusals are written"
    ),
    ("latency_p50", "lower"): (
        "ticks the simulator replayed (their answers landed just after its timer) were answered "
        "in time for real"
    ),
    ("latency_p95", "higher"): (
        "the tail is one or two versions of a short run: an answer that landed just inside the "
        "timeout (3 mean latencies) in the simulator landed just outside it for real, pushed "
        "over by HTTP, durable writes and a timer waking late, so the real loop replayed that "
        "tick and waited for another answer"
    ),
    ("latency_p95", "lower"): (
        "the same near-tie at the timeout the other way: the simulator replayed a tick whose "
        "answer landed just after its timer, while the real answer beat the timer"
    ),
    ("wasted_per_commit", "higher"): (
        "an answer landing near the timeout came too late on the real side only, so the real "
        "loop replayed its tick and sent one call more; for a design that falls, a fall the "
        "simulator did not have also takes kept versions back"
    ),
    ("wasted_per_commit", "lower"): (
        "a replay (an answer near the timeout) or a fall happened in the simulator only: the "
        "near-tie went the other way for real"
    ),
    ("rewinds", "higher"): (
        "a late answer and the next commit were a near-tie, and real scheduling (HTTP, timers "
        "waking a few ms late) put them in the other order; the service also releases a held "
        "inverted answer when it sees a request two versions past its base, the simulator when "
        "the head gets there"
    ),
}
WHY[("rewinds", "lower")] = WHY[("rewinds", "higher")]
GUARDED_FELL = "a bug, not a difference of model: a guarded design must never fall"
UNGUARDED = ("callback", "lww")  # the designs that may fall


def why(design: str, metric: str, sim: float, real: float) -> str:
    """The reason real and simulated `metric` part for `design` (`WHY`); a guarded design
    whose rewinds differ is a bug, said so."""
    if metric == "rewinds" and design not in UNGUARDED:
        return GUARDED_FELL
    return WHY[(metric, "higher" if real > sim else "lower")]


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
    """The simulated summary and the real run per (design, seed). One service per seed (its seed
    draws the skews and the targets), with `span` = ticks - 3 so both pick the same targets."""
    designs = tuple(check_design(d) for d in knobs.sequence(designs, "measure(): designs"))
    faults = check_service_faults(faults)
    seeds = tuple(
        validation.int_arg(seed, f"measure(): seeds[{i}]")
        for i, seed in enumerate(knobs.sequence(seeds, "measure(): seeds"))
    )
    ticks = validation.int_arg(ticks, "measure(): ticks", low=1)
    latency = knobs.seconds(latency, "measure(): latency")
    window = knobs.count(window, "measure(): window", high=knobs.MAX_WINDOW)
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
    latency = knobs.seconds(latency, "side_by_side(): latency")
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
    `tolerance` (a ratio outside 1 ± tolerance, or one side zero and the other not), each with
    its reason (`why`)."""
    tolerance = validation.number_arg(tolerance, "differences(): tolerance", at_least=0.0)
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
                        "why": why(row["design"], metric, sim, real),
                    }
                )
    return pd.DataFrame(rows, columns=["design", "metric", "sim", "real", "real/sim", "why"])
