"""The memoised arrival explorer (`arrival_search.explore_fast`) per design and n = 4..8.

Each row: schedules counted, schedule prefixes (what a walk without memo visits), states the
search reached and distinct states, and the median time. Where the SQLite replay
(`arrivals.explore_by_replay`) finishes in seconds (n <= 5) it is timed in alternation with the fast
explorer, after checking that both give the same answers.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import (
    FIGURES,
    BenchResult,
    finish,
    fmt_s,
    print_table,
    time_call,
    time_interleaved,
)
from labkit.designs import arrival_orders as arrivals
from labkit.designs import arrival_search
from labkit.designs.registry import DESIGNS

NAME = "arrival_search"
SIZES = (4, 5, 6, 7, 8)
SMOKE_SIZES = (2, 3)
REPLAY_MAX_N = 5  # set when fenced n = 6 replayed from scratch in about 40 s; the forked replay
# (each prefix played once) is not yet timed at n = 6
TARGETS_S = {6: 1.0, 8: 30.0}
SMOKE_TARGETS_S = {3: 1.0}  # a stand-in: the smoke run never reaches n = 6


def measure(design: str, n: int, repeats: int) -> dict[str, object]:
    """One row: the fast explorer's answer, work and time (and the replay's, for small n)."""
    found, stats = arrival_search.explore_with_stats(design, n)

    def fast() -> arrivals.Exploration:
        return arrival_search.explore_fast(design, n)

    replay_s: float | str = ""
    if n <= REPLAY_MAX_N:
        slow = arrivals.explore_by_replay(design, n)
        if slow != found:
            raise AssertionError(f"{design} n={n}: replay {slow} != fast {found}")
        rounds = repeats if n < REPLAY_MAX_N else 1
        t = time_interleaved(
            {"fast": fast, "replay": lambda: arrivals.explore_by_replay(design, n)}, repeats=rounds
        )
        fast_s, replay_s = t["fast"].median, t["replay"].median
    else:
        fast_s = time_call(fast, repeats=repeats).median
    return {
        "design": design,
        "n": n,
        "schedules": found.orders,
        "rewinding": found.rewinding,
        "prefixes": stats.prefixes,
        "states_visited": stats.visited,
        "distinct_states": stats.distinct,
        "median_s": fast_s,
        "replay_s": replay_s,
        "replay_over_fast": "" if replay_s == "" else float(replay_s) / fast_s,
    }


def plot(rows: list[dict[str, object]]):
    """Left: seconds per n, memo search (solid) and SQLite replay (dashed). Right: schedules
    counted vs distinct states, per design."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(8.0, 3.6, layout="constrained")
    left, right = fig.subplots(1, 2)
    for design in DESIGNS:
        mine = [r for r in rows if r["design"] == design]
        ns = [int(r["n"]) for r in mine]
        left.plot(
            ns, [float(r["median_s"]) for r in mine], "o-", color=COLORS[design], label=design
        )
        replay = [r for r in mine if r["replay_s"] != ""]
        left.plot(
            [int(r["n"]) for r in replay],
            [float(r["replay_s"]) for r in replay],
            "x--",
            color=COLORS[design],
            alpha=0.6,
        )
        right.plot(
            ns,
            [int(r["schedules"]) for r in mine],
            "o-",
            color=COLORS[design],
            label=f"{design}: schedules",
        )
        right.plot(ns, [int(r["distinct_states"]) for r in mine], "s:", color=COLORS[design])
    for n, budget in TARGETS_S.items():
        left.plot([n], [budget], "_", color="black", markersize=14)
    left.set_yscale("log")
    left.set_xlabel("n deliveries")
    left.set_ylabel("seconds (median)")
    left.set_title("memo search (o) vs replay walk on SQLite (x); _ = target", fontsize=9)
    left.legend(fontsize=8)
    right.set_yscale("log")
    right.set_xlabel("n deliveries")
    right.set_title("schedules counted (o) vs distinct states (s)", fontsize=9)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Time the memoised explorer per design and n, print the table, write CSV and figure."""
    repeats = 1 if smoke else 3
    sizes = SMOKE_SIZES if smoke else SIZES
    rows = [measure(design, n, repeats) for n in sizes for design in DESIGNS]
    print_table(
        [
            {
                **r,
                "median": fmt_s(float(r["median_s"])),
                "replay": "" if r["replay_s"] == "" else fmt_s(float(r["replay_s"])),
                "replay/fast": "" if r["replay_s"] == "" else f"{float(r['replay_over_fast']):.0f}",
            }
            for r in rows
        ],
        (
            "design",
            "n",
            "schedules",
            "rewinding",
            "prefixes",
            "states_visited",
            "distinct_states",
            "median",
            "replay",
            "replay/fast",
        ),
    )
    compared = max(int(r["n"]) for r in rows if r["replay_s"] != "")
    ratios = {
        f"{r['design']} n={compared} replay / fast time": float(r["replay_over_fast"])
        for r in rows
        if int(r["n"]) == compared
    }
    largest = max(sizes)
    ratios |= {
        f"{r['design']} n={largest} schedules / distinct states": (
            int(r["schedules"]) / int(r["distinct_states"])
        )
        for r in rows
        if int(r["n"]) == largest
    }
    targets = {
        f"{r['design']} n={n} under {budget:g} s": float(r["median_s"]) < budget
        for n, budget in (SMOKE_TARGETS_S if smoke else TARGETS_S).items()
        for r in rows
        if int(r["n"]) == n
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)
