"""What each docs figure shows, built from the same labkit code and plot functions the
notebooks use, with fixed seeds and deterministic measures (no wall-clock timings)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from labkit.designs.lessons import (
    BUG2_FAULTS,
    BUG2_SEED,
    DEPTH_TICKS,
    INVERTED_STEPS,
    PIPELINE_FAULTS,
    PIPELINE_SEED,
    PIPELINE_TICKS,
    PIPELINE_WINDOW,
    SHOWCASE_FAULTS,
    SHOWCASE_SEED,
)
from labkit.designs.registry import DESIGNS
from labkit.frontier.scenario_format import Scenario, load_scenario


@dataclass(frozen=True)
class FigureSpec:
    """A docs figure: its file stem, a one-line caption and a builder -> (figure, data).

    A part-one figure drawn from a delivery scenario has `scenario` set: its builder takes the
    scenario (the bundled "seed" unless the reader gives their own, `--scenario FILE`)."""

    name: str
    caption: str
    build: Callable[..., tuple[Figure, Any]]
    scenario: bool = False

    def draw(self, scenario: Scenario | None = None) -> tuple[Figure, Any]:
        """Build this figure; a scenario figure from `scenario` (default: the bundled seed)."""
        if not self.scenario:
            return self.build()
        return self.build(scenario or load_scenario("seed"))


def _timeline(scenario: Scenario) -> tuple[Figure, Any]:
    import labkit.frontier.scenarios as sc
    from labkit.plots.frontier import timeline_figure

    timeline = sc.run_scenario(scenario)
    table = timeline.drop(columns=["statuses"]).astype(str)
    whose = "Article 1's scenario" if scenario.name == "seed" else f"Scenario {scenario.name!r}"
    return timeline_figure(timeline, title=f"{whose}: MAX watermark vs frontier"), table


def _checkpoints(scenario: Scenario) -> tuple[Figure, Any]:
    import labkit.frontier.log as fr
    import labkit.frontier.scenarios as sc
    import labkit.frontier.summarizer as sm
    from labkit.plots.frontier import checkpoint_ranges_figure

    conn = sc.replay_scenario(scenario)
    ranges = {p: sm.summaries(conn, "main", p) for p in fr.POLICIES}
    lost = {p: sm.orphans(conn, "main", p) for p in fr.POLICIES}
    last_id = conn.execute("SELECT MAX(id) FROM conversations").fetchone()[0]
    data = {p: [(s.start_id, s.end_id, list(s.item_ids)) for s in ranges[p]] for p in fr.POLICIES}
    return checkpoint_ranges_figure(ranges, lost, last_id=last_id), {"ranges": data, "lost": lost}


def _orphan_rates() -> tuple[Figure, Any]:
    import labkit.frontier.orders as explorer
    from labkit.plots.frontier import orphan_rates_figure

    rates = explorer.orphan_rates(range(3, 9))
    return orphan_rates_figure(rates), rates


def _trigger_work() -> tuple[Figure, Any]:
    import labkit.frontier.triggers as triggers
    from labkit.plots.frontier import trigger_cost_figure

    cost = triggers.trigger_cost(measure="vm_steps")
    return trigger_cost_figure(cost, title="Work per trigger check as dormant shards pile up"), cost


def _busy_loop() -> tuple[Figure, Any]:
    import labkit.frontier.triggers as triggers
    from labkit.plots.frontier import busy_loop_figure

    trace = triggers.busy_loop_trace()
    return busy_loop_figure(trace), trace


def _simulate_all(faults: tuple[str, ...], designs: tuple[str, ...] = DESIGNS) -> dict[str, Any]:
    from labkit.designs.simulator import simulate

    return {d: simulate(d, faults, seed=SHOWCASE_SEED) for d in designs}


def _traces_data(traces: dict[str, Any]) -> dict[str, Any]:
    cols = ["t", "event", "ballot_id", "committed", "reason", "head_version"]
    return {d: t[cols].astype(str).to_dict("list") for d, t in traces.items()}


def _inverted_trace() -> tuple[Figure, Any]:
    from labkit.designs.simulator import simulate
    from labkit.plots.catalog import rewind_panels_figure

    traces = {d: simulate(d, BUG2_FAULTS, seed=BUG2_SEED) for d in ("callback", "ballot")}
    fig = rewind_panels_figure(traces, title="A late answer: callback rewinds, the ballot rejects")
    return fig, _traces_data(traces)


def _five_designs() -> tuple[Figure, Any]:
    from labkit.plots.catalog import five_designs_figure

    traces = _simulate_all(SHOWCASE_FAULTS)
    return five_designs_figure(traces), _traces_data(traces)


def _arrival_lanes() -> tuple[Figure, Any]:
    from labkit.designs.arrival_orders import run_schedule
    from labkit.plots.catalog import arrival_lanes_figure

    results = [run_schedule(d, INVERTED_STEPS) for d in DESIGNS]
    data = {r.design: [r.labels, r.heads] for r in results}
    return arrival_lanes_figure(results), data


def _arrival_explorer() -> tuple[Figure, Any]:
    from labkit.designs.arrival_orders import explore_all
    from labkit.plots.catalog import explorer_figure

    table = explore_all(3)
    return explorer_figure(table), table


def _restarts() -> tuple[Figure, Any]:
    from labkit.designs.simulator import simulate
    from labkit.plots.catalog import restarts_figure

    faults = ("crash", "inverted", "retry_after_commit")
    traces = {d: simulate(d, faults, seed=0) for d in ("callback", "ballot", "fenced")}
    return restarts_figure(traces), _traces_data(traces)


def _pipelined() -> tuple[Figure, Any]:
    from labkit.designs.pipeline_study import depth_table
    from labkit.designs.simulator import simulate
    from labkit.plots.pipelined import pipelined_figure

    trace = simulate(
        "pipelined",
        PIPELINE_FAULTS,
        seed=PIPELINE_SEED,
        ticks=PIPELINE_TICKS,
        window=PIPELINE_WINDOW,
    )
    depth = depth_table(seed=0, ticks=DEPTH_TICKS)
    title = f"Pipelined ballots, W = {PIPELINE_WINDOW}: one stalled answer (left), no fault (right)"
    fig = pipelined_figure(trace, depth, title=title, window=PIPELINE_WINDOW)
    return fig, {"trace": _traces_data({"pipelined": trace}), "depth": depth.to_dict("list")}


# Part three runs on a real server (`labkit.pg.instance.shared_server()`: LABKIT_PG_DSN or the
# pip-installed one). Its figures come from fixed scripted interleavings counted in steps, so
# ids, coverage and orphans are the same on every run; no timing is drawn.
FIX_SCRIPTS = 4
FIX_SCRIPT_STEPS = 40


def _commit_order_timeline() -> tuple[Figure, Any]:
    from dataclasses import asdict

    import labkit.pg.commit_order as co
    from labkit.pg.instance import shared_server
    from labkit.plots.pg import commit_order_timeline_figure

    with co.CommitOrderLab(shared_server().dsn) as lab:
        state = lab.run(co.LATE_COMMIT)
    return commit_order_timeline_figure(state), asdict(state)


def _fixes_compared() -> tuple[Figure, Any]:
    from dataclasses import asdict

    import labkit.pg.commit_order as co
    from labkit.pg.instance import shared_server
    from labkit.plots.pg import fixes_figure

    scripts = [co.random_script(FIX_SCRIPT_STEPS, seed) for seed in range(FIX_SCRIPTS)]
    outcomes = co.compare_fixes(shared_server().dsn, scripts)
    return fixes_figure(outcomes), [asdict(o) for o in outcomes]


SPECS: tuple[FigureSpec, ...] = (
    FigureSpec(
        "frontier_timeline", "MAX jumps past pending rows; the frontier waits.", _timeline, True
    ),
    FigureSpec(
        "checkpoint_ranges", "Chained summaries per policy, orphans ringed.", _checkpoints, True
    ),
    FigureSpec("orphan_rates", "Delivery orders that orphan rows, n = 3..8.", _orphan_rates),
    FigureSpec(
        "trigger_work", "Per-shard trigger vs global poll, in SQLite VM steps.", _trigger_work
    ),
    FigureSpec("busy_loop", "Counting rows stuck behind a pending row busy-loops.", _busy_loop),
    FigureSpec(
        "inverted_trace",
        "A late answer: the catalog version a reader sees, callback and single ballot"
        " in one panel each.",
        _inverted_trace,
    ),
    FigureSpec("five_designs", "Five designs on one fault trace.", _five_designs),
    FigureSpec("arrival_lanes", "The inverted arrival, step by step, per design.", _arrival_lanes),
    FigureSpec(
        "arrival_explorer", "Arrival orders that rewind the catalog, per design.", _arrival_explorer
    ),
    FigureSpec("crash_restart", "Head version across a loop crash and restart.", _restarts),
    FigureSpec(
        "pipelined_ballots",
        "Pipelined ballots: lanes, hold and head of one run; throughput against W.",
        _pipelined,
    ),
    FigureSpec(
        "commit_order_timeline",
        "PostgreSQL: a late smaller id; the no-wait frontier orphans it, the horizon waits.",
        _commit_order_timeline,
    ),
    FigureSpec(
        "fixes_compared",
        "PostgreSQL: orphans and cost of the no-wait frontier, a lock, the xmin horizon wait.",
        _fixes_compared,
    ),
)
