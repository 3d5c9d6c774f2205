"""The simulator against the real planner service (issue 21): same designs, seeds, latency
draw, window and faults; then a load of 16 loops at once for 30 s.

1. compare: every design, with no faults and with every planner fault on, over several seeds,
   once in `labkit.designs.simulator` and once against `labkit.remote.serve` on loopback
   (`labkit.remote.compare`): throughput, latency p50/p95, wasted calls per commit, rewinds,
   the simulator's numbers put in seconds (times the mean latency).
2. load: 16 loops (ballot, fenced, pipelined in turn) against one service with faults on for
   30 s, each store read back: no commit lost or doubled, no reader fall.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import FIGURES, BenchResult, finish, print_table
from labkit.designs.registry import ALL_DESIGNS
from labkit.remote.compare import METRICS, differences, measure, side_by_side
from labkit.remote.faults import SERVICE_FAULTS
from labkit.remote.many_loops import load
from labkit.remote.service import serve

NAME = "remote_vs_sim"
SAFE = ("ballot", "fenced", "pipelined", "cas")
LOAD_FAULTS = ("inverted", "duplicate", "stale_body", "retry_after_commit")


def measure_compare(smoke: bool) -> list[dict[str, object]]:
    """One row per (fault set, design): each metric simulated and real, and their ratio
    (smoke: one seed, all faults only)."""
    latency, ticks, seeds = (0.01, 6, (0,)) if smoke else (0.05, 20, (0, 1, 2))
    rows = []
    sets = (("all", SERVICE_FAULTS),) if smoke else (("none", ()), ("all", SERVICE_FAULTS))
    for label, faults in sets:
        pairs = measure(ALL_DESIGNS, faults, seeds, ticks=ticks, latency=latency)
        table = side_by_side(pairs, latency)
        for cell in differences(table).to_dict("records"):  # each gap past 25 %, with its reason
            print(f"{label}: {cell['design']} {cell['metric']} x{cell['real/sim']}: {cell['why']}")
        for row in table.to_dict("records"):
            rows.append(
                {"kind": "compare", "faults": label, "latency_s": latency, "ticks": ticks, **row}
            )
    return rows


def measure_load(smoke: bool) -> dict[str, object]:
    """16 loops for 30 s (smoke: 2 loops for half a second) with faults on."""
    loops, seconds = (2, 0.5) if smoke else (16, 30.0)
    with serve(LOAD_FAULTS, seed=5, latency=0.01, span=5) as url:
        result = load(url, loops=loops, seconds=seconds)
    return {
        "kind": "load",
        "faults": ",".join(LOAD_FAULTS),
        "loops": result.loops,
        "seconds": round(result.seconds, 2),
        "commits": result.commits,
        "reported": result.reported,
        "lost": result.lost,
        "doubled": result.doubled,
        "falls": result.falls,
        "commits_per_s": round(result.commits / result.seconds, 1),
    }


def plot(rows: list[dict[str, object]]):
    """Real / simulated for each metric and design, without faults and with all of them."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(8.6, 3.6, layout="constrained")
    panels = fig.subplots(1, 2, sharey=True)
    metrics = [m for m, _ in METRICS if m != "rewinds"]
    for ax, label in zip(panels, ("none", "all"), strict=True):
        mine = [r for r in rows if r["kind"] == "compare" and r["faults"] == label]
        if not mine:  # a smoke run measures one fault set
            ax.set_axis_off()
            continue
        width = 0.8 / max(1, len(mine))
        for i, r in enumerate(mine):
            ratios = [r.get(f"{m} real/sim") for m in metrics]
            xs = [j + (i - len(mine) / 2) * width for j in range(len(metrics))]
            values = [float(v) if v not in (None, "") else 0.0 for v in ratios]
            ax.bar(
                xs,
                values,
                width=width,
                color=COLORS.get(str(r["design"]), "#444444"),
                label=str(r["design"]),
            )
        ax.axhline(1.0, color="#444444", linewidth=0.8)
        ax.axhspan(0.75, 1.25, color="#dddddd", zorder=0)
        ax.set_xticks(range(len(metrics)), [m.replace("_", " ") for m in metrics], fontsize=7)
        ax.set_title(f"faults: {label}", fontsize=9)
    panels[0].set_ylabel("real / simulated (grey: within 25 %)")
    panels[1].legend(fontsize=7)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Measure both parts; write CSV and figure; check the targets."""
    rows = measure_compare(smoke)
    loaded = measure_load(smoke)
    rows.append(loaded)
    columns = ["faults", "design"]
    for metric, _ in METRICS:
        columns += [f"{metric} sim", f"{metric} real"]
    print_table([r for r in rows if r["kind"] == "compare"], columns)
    print_table(
        [loaded],
        ["loops", "seconds", "commits", "reported", "lost", "doubled", "falls", "commits_per_s"],
    )
    compare = [r for r in rows if r["kind"] == "compare"]
    safe_falls = sum(int(r["reader_falls real"]) for r in compare if r["design"] in SAFE)
    safe_rewinds = sum(int(r["rewinds real"]) for r in compare if r["design"] in SAFE)
    ratios = {
        f"throughput real/sim, {r['design']}, faults {r['faults']}": float(r["throughput real/sim"])
        for r in compare
        if r["throughput real/sim"]
    }
    ratios["load commits per second"] = float(loaded["commits_per_s"])
    targets = {
        "safe designs: no rewind and no reader fall against the real service": safe_falls
        == safe_rewinds
        == 0,
        "load: no commit lost or doubled, no reader fall": loaded["lost"]
        == loaded["doubled"]
        == loaded["falls"]
        == 0,
    }
    keys = list(dict.fromkeys(k for r in rows for k in r))  # one CSV header for both kinds
    rows = [{k: r.get(k, "") for k in keys} for r in rows]
    return finish(NAME, rows, ratios, targets, plot(rows), out)
