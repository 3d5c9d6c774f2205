"""Pipelined ballots (issue 22): the trade-off of Article 2's table, measured in the simulator.

Simulated time is in units of the planner's mean latency and the loop itself costs nothing
there, so this is a planner whose latency dominates. Three measurements, each averaged over
seeds:

1. depth: kept versions per time unit of `ballot`, `fenced` and `pipelined` as W grows
   (1, 2, 4, 8), no faults;
2. faults: what `pipelined` (W = 4) pays under each fault class: rejects by reason, replays
   (flushed and refused ticks asked again), wasted planner calls per kept version;
3. table: Article 2's table with numbers, every design with every fault class on: latency
   p50/p95, throughput, rewinds seen, rejected work.

It also times the exact explorer on `pipelined` (n = 6 must stay under a second; n = 8 is
reported) and checks that no arrival order rewinds it.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import labkit.designs.pipeline_study as study
import labkit.designs.simulator as simulator
from benchmarks.common import FIGURES, BenchResult, finish, print_table
from labkit.designs.arrival_search import explore_with_stats
from labkit.designs.registry import ALL_DESIGNS, spec
from labkit.designs.run_stats import RunSummary
from labkit.designs.simulator import FAULTS

NAME = "pipelined_throughput"
DEPTHS = study.DEPTHS
ROWS = ("callback", "lww", "ballot", "fenced", "pipelined", "cas")  # Article 2's four + two
assert set(ROWS) == set(ALL_DESIGNS)


def _runs(design: str, faults: tuple[str, ...], window: int, ticks: int, seeds: int):
    return [
        simulator.run(design, faults, seed, ticks=ticks, window=window).summary
        for seed in range(seeds)
    ]


def _mean(values) -> float:
    return statistics.fmean(values) if values else 0.0


def _rejected(s: RunSummary) -> int:
    return sum(s.rejects.values())


def _seeded(window: int, faults: tuple[str, ...], ticks: int, seeds: int, designs) -> dict:
    """`pipeline_study.runs_at` for every seed: each design's summaries, in `designs` order."""
    found: dict[str, list[RunSummary]] = {}
    for seed in range(seeds):
        for design, s in study.runs_at(window, faults, seed, ticks=ticks, designs=designs):
            found.setdefault(design, []).append(s)
    return found


def measure_depth(ticks: int, seeds: int) -> list[dict[str, object]]:
    """Throughput of the three ballot designs as W grows (W is ignored by `ballot`)."""
    by_window = {w: _seeded(w, (), ticks, seeds, study.COMPARED) for w in DEPTHS}
    rows = []
    for design in study.COMPARED:
        for w in DEPTHS:
            sums = by_window[w].get(design)
            if sums is None:  # the rules of `plan_at` leave it out at this depth
                continue
            rows.append(
                {
                    "kind": "depth",
                    "design": design,
                    "window": w,
                    "faults": "none",
                    "throughput": round(_mean([s.throughput for s in sums]), 3),
                    "latency_p50": round(_mean([s.latency_p50 for s in sums]), 3),
                    "latency_p95": round(_mean([s.latency_p95 for s in sums]), 3),
                    "rewinds": sum(s.rewinds for s in sums),
                    "rejected": round(_mean([_rejected(s) for s in sums]), 2),
                    "replays": round(_mean([s.replays for s in sums]), 2),
                    "wasted_per_commit": round(_mean([s.wasted_per_commit for s in sums]), 3),
                    "held": round(_mean([s.held for s in sums]), 2),
                }
            )
    return rows


def measure_faults(ticks: int, seeds: int, window: int = 4) -> list[dict[str, object]]:
    """What each fault class costs `pipelined` (and, for comparison, `ballot`): the cases of
    `pipeline_study.fault_table`, averaged over seeds."""
    rows = []
    for case in study.FAULT_CASES:
        faults = () if case == study.NO_FAULT else (case,)
        runs = _seeded(window, faults, ticks, seeds, ("ballot", "pipelined"))
        for design, sums in runs.items():
            reasons: dict[str, float] = {}
            for s in sums:
                for reason, count in s.rejects.items():
                    if count:
                        reasons[reason] = reasons.get(reason, 0) + count / len(sums)
            rows.append(
                {
                    "kind": "fault",
                    "design": design,
                    "window": spec(design).window(window),
                    "faults": case,
                    "throughput": round(_mean([s.throughput for s in sums]), 3),
                    "rewinds": sum(s.rewinds for s in sums),
                    "rejected": round(_mean([_rejected(s) for s in sums]), 2),
                    "reasons": "; ".join(f"{r} {c:.1f}" for r, c in sorted(reasons.items())),
                    "replays": round(_mean([s.replays for s in sums]), 2),
                    "wasted_per_commit": round(_mean([s.wasted_per_commit for s in sums]), 3),
                    "held": round(_mean([s.held for s in sums]), 2),
                }
            )
    return rows


def measure_table(ticks: int, seeds: int, window: int = 4) -> list[dict[str, object]]:
    """Article 2's table: every design, every fault class on."""
    rows = []
    for design in ROWS:
        sums = _runs(design, FAULTS, window, ticks, seeds)
        rows.append(
            {
                "kind": "table",
                "design": design,
                "window": spec(design).window(window),
                "faults": "all",
                "throughput": round(_mean([s.throughput for s in sums]), 3),
                "latency_p50": round(_mean([s.latency_p50 for s in sums]), 3),
                "latency_p95": round(_mean([s.latency_p95 for s in sums]), 3),
                "rewinds": sum(s.rewinds for s in sums),
                "rejected": round(_mean([_rejected(s) for s in sums]), 2),
                "replays": round(_mean([s.replays for s in sums]), 2),
                "wasted_per_commit": round(_mean([s.wasted_per_commit for s in sums]), 3),
            }
        )
    return rows


def measure_explorer(sizes: tuple[int, ...], window: int = 3) -> list[dict[str, object]]:
    """The memoised arrival-order search on `pipelined`: time, orders, rewinding, states."""
    rows = []
    for n in sizes:
        start = time.perf_counter()
        found, stats = explore_with_stats("pipelined", n, window=window)
        rows.append(
            {
                "kind": "explore",
                "design": "pipelined",
                "window": window,
                "n": n,
                "run_s": round(time.perf_counter() - start, 4),
                "orders": found.orders,
                "rewinding": found.rewinding,
                "distinct_states": stats.distinct,
            }
        )
    return rows


def plot(rows: list[dict[str, object]]):
    """Left: kept versions per time unit against W. Right: rejected work per fault class."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(8.6, 3.6, layout="constrained")
    left, right = fig.subplots(1, 2)
    depth = [r for r in rows if r["kind"] == "depth"]
    for design in ("ballot", "fenced", "pipelined"):
        mine = [r for r in depth if r["design"] == design]
        left.plot(
            [int(r["window"]) for r in mine],
            [float(r["throughput"]) for r in mine],
            marker="o",
            color=COLORS.get(design, "#444444"),
            label=design,
        )
    left.set_xscale("log", base=2)
    left.set_xticks(list(DEPTHS), [str(w) for w in DEPTHS])
    left.set_xlabel("W (ballots in flight)")
    left.set_ylabel("kept versions per time unit")
    left.set_title("Throughput on a slow planner, no faults", fontsize=9)
    left.legend(fontsize=8)
    faults = [r for r in rows if r["kind"] == "fault" and r["design"] == "pipelined"]
    labels = [str(r["faults"]) for r in faults]
    ys = list(range(len(faults)))
    right.barh(
        [y - 0.2 for y in ys],
        [float(r["replays"]) for r in faults],
        height=0.4,
        color=COLORS["reject"],
        label="ticks replayed (refused or flushed)",
    )
    right.barh(
        [y + 0.2 for y in ys],
        [float(r["rejected"]) for r in faults],
        height=0.4,
        color="#1f4e9c",
        label="answers refused",
    )
    right.set_yticks(ys, labels)
    right.invert_yaxis()
    right.set_xlabel("per run (mean)")
    right.set_title("pipelined (W = 4): rejected work per fault class", fontsize=9)
    right.legend(fontsize=8)
    return fig


def run_bench(smoke: bool) -> list[dict[str, object]]:
    ticks, seeds = (8, 1) if smoke else (60, 5)
    rows = measure_depth(ticks, seeds)
    rows += measure_faults(ticks, seeds)
    rows += measure_table(ticks, seeds)
    rows += measure_explorer((3,) if smoke else (6, 8))
    return rows


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure the three tables and the explorer; write CSV and figure; check the targets."""
    rows = run_bench(smoke)
    for kind, columns in (
        ("depth", ("design", "window", "throughput", "latency_p50", "latency_p95", "held")),
        (
            "fault",
            (
                "design",
                "faults",
                "throughput",
                "rejected",
                "reasons",
                "replays",
                "wasted_per_commit",
            ),
        ),
        (
            "table",
            (
                "design",
                "throughput",
                "latency_p50",
                "latency_p95",
                "rewinds",
                "rejected",
                "replays",
                "wasted_per_commit",
            ),
        ),
        ("explore", ("n", "run_s", "orders", "rewinding", "distinct_states")),
    ):
        print_table([r for r in rows if r["kind"] == kind], columns)
    speed = {
        (r["design"], r["window"]): float(r["throughput"]) for r in rows if r["kind"] == "depth"
    }
    ratio = speed[("pipelined", 4)] / speed[("ballot", 4)]
    explored = [r for r in rows if r["kind"] == "explore"]
    six = [r for r in explored if r["n"] == 6]
    guarded = ("ballot", "fenced", "pipelined", "cas")
    targets = {
        "pipelined W=4 >= 2.5x ballot": ratio >= 2.5,
        "no rewind for the guarded designs": all(
            r["rewinds"] == 0 for r in rows if r.get("design") in guarded and "rewinds" in r
        ),
        "no rewinding arrival order": all(r["rewinding"] == 0 for r in explored),
        "explore n=6 < 1 s": all(float(r["run_s"]) < 1.0 for r in six),
    }
    rows = _rectangular(rows)
    return finish(NAME, rows, {"pipelined W=4 / ballot": ratio}, targets, plot(rows), out)


def _rectangular(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Give every row the union of the keys (blank where absent) so one CSV holds every kind."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    return [{k: row.get(k, "") for k in keys} for row in rows]
