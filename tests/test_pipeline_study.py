"""Notebook 05's section on pipelined ballots: the lanes read from a trace, the depth and fault
comparisons, part one's frontier beside the hold's, the figure and the depth-slider widget
(driven without a browser)."""

from __future__ import annotations

import asyncio
import html

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labkit.widgets.pipelined as widget_module
from labkit.designs.pipeline_study import (
    COMMITTED,
    FAULT_CASES,
    FLUSHED,
    GAVE_UP,
    IN_FLIGHT,
    NO_FAULT,
    PIPELINED_NAME,
    REFUSED,
    compare_at,
    depth_table,
    fault_table,
    frontier_side_by_side,
    lanes,
    plan_at,
    runs_at,
)
from labkit.designs.registry import DISPLAY_NAMES
from labkit.designs.run_stats import summarize_run
from labkit.designs.simulator import FAULTS, simulate
from labkit.plots.pipelined import END_LABELS, LATE_LABEL, pipelined_figure
from labkit.widgets.pipelined import PipelineDepthApp, idle_controls

# --- lanes ------------------------------------------------------------------------------------


def test_a_fault_free_run_commits_every_lane_once_in_fence_order() -> None:
    trace = simulate("pipelined", (), 0, ticks=12, window=4)
    shown = lanes(trace)
    assert [lane.end for lane in shown] == [COMMITTED] * 12
    assert sorted(lane.fence for lane in shown) == list(range(12))
    commits = sorted(shown, key=lambda lane: (lane.ended, lane.fence))
    assert [lane.fence for lane in commits] == list(range(12))  # the head sweeps up the fences
    assert sum(lane.held for lane in shown) == summarize_run(trace).held > 0
    for lane in shown:
        assert lane.sent <= lane.answered <= lane.ended
        assert lane.held == (lane.answered < lane.ended)  # held answers wait for the head


def test_a_stalled_answer_is_given_up_and_the_lanes_above_it_flushed() -> None:
    trace = simulate("pipelined", ("stall",), 0, ticks=12, window=4)
    shown = lanes(trace)
    (gave_up,) = [lane for lane in shown if lane.end == GAVE_UP]
    flushed = [lane for lane in shown if lane.end == FLUSHED]
    assert sorted(lane.fence for lane in flushed) == [gave_up.fence + k for k in (1, 2, 3)]
    assert {lane.ended for lane in flushed} == {gave_up.ended}
    replays = {lane.replay_of: lane for lane in shown if lane.replay_of is not None}
    for lost in (gave_up, *flushed):  # each lost tick is asked again on its own fence
        assert replays[lost.ballot_id].fence == lost.fence
        assert replays[lost.ballot_id].end == COMMITTED
    assert gave_up.answered is not None and gave_up.answered > gave_up.ended  # landed late
    committed = [lane for lane in shown if lane.end == COMMITTED]
    assert sorted(lane.fence for lane in committed) == list(range(12))


def test_a_refused_answer_ends_its_lane_with_the_reason() -> None:
    trace = simulate("pipelined", ("stale_body",), 0, ticks=12, window=4)
    refused = [lane for lane in lanes(trace) if lane.end == REFUSED]
    assert refused and {lane.reason for lane in refused} <= {"stale_base", "base_hash_mismatch"}
    assert not [lane for lane in lanes(trace) if lane.end == IN_FLIGHT]


# --- the comparisons --------------------------------------------------------------------------


def test_compare_at_runs_each_design_at_the_asked_depth() -> None:
    one = compare_at(1, ticks=10)
    assert list(one["design"]) == ["ballot", "pipelined"]  # no hedge with a single call
    assert one.iloc[0]["throughput"] == one.iloc[1]["throughput"]  # W = 1 is the single ballot
    four = compare_at(4, ("stall",), ticks=10)
    assert list(four["design"]) == ["ballot", "fenced", "pipelined"]
    assert (four["W"] == 4).all() and (four["rewinds"] == 0).all() and (four["kept"] == 10).all()
    by = four.set_index("design")
    assert by.loc["pipelined", "ticks replayed"] > by.loc["ballot", "ticks replayed"]


def test_the_comparison_rules_are_written_once_in_plan_at() -> None:
    assert plan_at(1) == [("ballot", 1), ("pipelined", 1)]
    assert plan_at(4) == [("ballot", 1), ("fenced", 4), ("pipelined", 4)]
    found = runs_at(3, ("stall",), 1, ticks=8)
    assert [d for d, _ in found] == [d for d, _ in plan_at(3)]
    table = compare_at(3, ("stall",), 1, ticks=8)
    assert list(table["throughput"]) == [round(s.throughput, 2) for _, s in found]
    assert list(table["name"]) == [DISPLAY_NAMES[d] for d, _ in found]
    assert PIPELINED_NAME == DISPLAY_NAMES["pipelined"] in set(table["name"])


def test_fault_table_stacks_compare_at_for_no_fault_and_each_fault_alone() -> None:
    table = fault_table(3, seed=2, ticks=8)
    assert list(dict.fromkeys(table["fault"])) == list(FAULT_CASES) == [NO_FAULT, *FAULTS]
    for case in (NO_FAULT, "stall"):
        alone = compare_at(3, () if case == NO_FAULT else (case,), 2, ticks=8)
        mine = table[table["fault"] == case].drop(columns="fault").reset_index(drop=True)
        assert mine.equals(alone)


def test_depth_table_pipelining_grows_with_w_and_the_ballot_ignores_it() -> None:
    table = depth_table((1, 2, 4), ticks=12)
    speed = table.pivot(index="W", columns="design", values="throughput")
    assert speed["ballot"].nunique() == 1
    assert speed.loc[1, "pipelined"] < speed.loc[2, "pipelined"] < speed.loc[4, "pipelined"]
    assert speed.loc[4, "pipelined"] > speed.loc[4, "fenced"] > speed.loc[4, "ballot"]


@settings(max_examples=30, deadline=None)
@given(head=st.integers(0, 5), answered=st.sets(st.integers(0, 8)))
def test_the_hold_and_part_ones_log_agree_side_by_side(head: int, answered: set[int]) -> None:
    table = frontier_side_by_side(head, answered, fences=9)
    assert list(table["row id"]) == [f + 1 for f in table["fence"]]
    delivered = table["row status"] == "delivered"
    assert list(delivered) == [f < head or f in answered for f in table["fence"]]
    assert (table["head may reach"] == table["part one's frontier"]).all()
    reach = int(table["head may reach"].iloc[0])
    assert all(f in answered or f < head for f in range(reach))  # nothing below it waits
    assert reach == 9 or reach not in answered  # it stops at a fence still in flight


# --- the figure -------------------------------------------------------------------------------


def _gids(fig) -> list[str]:
    return [a.get_gid() for ax in fig.axes for a in ax.get_children() if a.get_gid()]


def _by_gid(fig) -> dict[str, object]:
    return {a.get_gid(): a for ax in fig.axes for a in ax.get_children() if a.get_gid()}


def test_the_figure_marks_every_ended_lane_the_head_and_each_design() -> None:
    trace = simulate("pipelined", ("stall",), 0, ticks=10, window=4)
    fig = pipelined_figure(trace, depth_table((1, 2), ticks=8), window=2)
    gids, marks = _gids(fig), _by_gid(fig)
    ends = [lane.end for lane in lanes(trace) if lane.end != IN_FLIGHT]
    for outcome in (COMMITTED, GAVE_UP, FLUSHED, REFUSED):  # one scatter per outcome
        assert gids.count(f"lane-end:{outcome}") == 1
        assert len(marks[f"lane-end:{outcome}"].get_offsets()) == ends.count(outcome)
    assert gids.count("head") == 1
    head_x, head_y = marks["head"].get_data()
    assert list(head_y[1:-1]) == list(trace["head_version"])
    assert {g for g in gids if g.startswith("depth:")} == {
        "depth:ballot",
        "depth:fenced",
        "depth:pipelined",
    }


# --- the widget -------------------------------------------------------------------------------


@pytest.fixture
def app() -> PipelineDepthApp:
    return PipelineDepthApp(window=4, fault="stall", seed=0)


@pytest.mark.slow
def test_the_widget_shows_what_the_study_functions_compute(app: PipelineDepthApp) -> None:
    """Runs shared between the table and the curve, and kept per setting, change nothing."""
    for window, fault, seed in ((4, "stall", 0), (3, "stale_body", 2), (1, NO_FAULT, 2)):
        with app.hold():
            app.window.value, app.fault.value, app.seed.value = window, fault, seed
        app.update()
        faults = () if fault == NO_FAULT else (fault,)
        assert app.table.equals(compare_at(window, faults, seed, ticks=20))
        assert app.depth.equals(depth_table(faults=faults, seed=seed, ticks=20))
        assert app.trace.equals(simulate("pipelined", faults, seed, ticks=20, window=window))


def test_the_legend_is_html_and_names_every_mark(app: PipelineDepthApp) -> None:
    for label in (*END_LABELS.values(), LATE_LABEL, "answered, held"):
        assert html.escape(label) in app.legend.value
    assert "wb-pipe-legend" in app.legend._dom_classes


@pytest.mark.slow
def test_an_idle_kernel_prepares_the_next_moves(app: PipelineDepthApp, monkeypatch) -> None:
    """With an event loop and idle time, the settings one move away are simulated and drawn
    ahead; moving there then simulates nothing and shows what a cold update would."""
    monkeypatch.setattr(widget_module, "AHEAD_DELAY_S", 0.0)

    async def idle() -> None:
        for _ in range(2000):
            await asyncio.sleep(0)
            if not app._ahead:
                return

    async def moves() -> None:
        app.seed.value = 1  # an update inside a running loop schedules the work ahead
        for control, value in ((app.window, 5), (app.fault, "inverted")):
            await idle()
            assert not app._ahead
            with monkeypatch.context() as patched:
                patched.setattr(widget_module, "run", _no_run)
                control.value = value

    asyncio.run(moves())
    assert app.done_ahead > 0
    assert app.table.equals(compare_at(5, ("inverted",), 1, ticks=20))
    cold = PipelineDepthApp(window=5, fault="inverted", seed=1)
    assert cold.depth.equals(app.depth) and cold.state.value == app.state.value
    assert cold.metrics.value == app.metrics.value


@pytest.mark.slow
def test_a_long_session_keeps_a_bounded_memory(app: PipelineDepthApp, monkeypatch) -> None:
    monkeypatch.setattr(widget_module, "KEPT", 3)
    for seed in range(1, 6):
        app.seed.value = seed
    assert len(app._views) == len(app._depths) == 3 and len(app._runs) == 3
    assert list(app._views)[-1] == (4, "stall", 5)  # the newest are kept
    app.seed.value = 1  # a forgotten setting is simply computed again, the same
    assert app.table.equals(compare_at(4, ("stall",), 1, ticks=20))


def _no_run(*args, **kwargs):
    raise AssertionError("simulated although it was prepared ahead")


def test_the_widget_starts_on_the_stalled_run(app: PipelineDepthApp) -> None:
    assert app.last_png.startswith(b"\x89PNG") and len(app.timings) == 1
    assert set(app.trace["design"]) == {"pipelined"}
    assert list(app.table["design"]) == ["ballot", "fenced", "pipelined"]
    assert "3 flushed" in app.state.value and "v20" in app.state.value
    assert "pipelined ballots" in app.metrics.value and "wb-scroll" in app.metrics.value
    (bold,) = [row for row in app.metrics.value.split("<tr") if "font-weight:bold" in row]
    assert f">{PIPELINED_NAME}<" in bold  # the pipelined row stands out
    classes = {
        c
        for w in (app.window, app.fault, app.seed, app.idle, app.out, app.metrics)
        for c in w._dom_classes
    }
    assert {
        "wb-pipe-depth",
        "wb-pipe-fault",
        "wb-pipe-seed",
        "wb-pipe-idle",
        "wb-pipe-lanes",
        "wb-pipe-metrics",
    } <= classes


def test_the_depth_slider_reruns_and_says_what_does_nothing(app: PipelineDepthApp) -> None:
    png, trace = app.last_png, app.trace
    app.window.value = 1
    assert app.last_png != png and not app.trace.equals(trace)
    assert list(app.table["design"]) == ["ballot", "pipelined"]
    assert "hedged ballots have no second call" in app.idle.value
    assert all(html.escape(note) in app.idle.value for note in idle_controls(1))
    app.window.value = 8
    assert "second call" not in app.idle.value and "single ballot" in app.idle.value
    assert summarize_run(app.trace).held > 0 and (app.table["W"] == 8).all()


def test_moving_back_to_a_depth_already_seen_only_redraws(app: PipelineDepthApp) -> None:
    first = app.trace
    app.window.value = 2
    app.window.value = 4
    assert app.trace is first  # memoised per (W, fault, seed)


def test_the_fault_picker_and_seed_change_the_runs(app: PipelineDepthApp) -> None:
    assert app.faults == ("stall",)
    app.fault.value = NO_FAULT
    assert app.faults == () and "0 flushed" in app.state.value
    assert (app.table["ticks replayed"][app.table["design"] != "fenced"] == 0).all()
    assert set(app.fault.options) == {NO_FAULT, *FAULTS}
    before = app.depth
    app.seed.value = 3
    assert not app.depth.equals(before) and (app.table["rewinds"] == 0).all()


@pytest.mark.parametrize("faults", [(f,) for f in FAULTS] + [FAULTS])
def test_under_any_fault_each_fence_has_one_committed_lane_and_none_is_left_open(faults) -> None:
    trace = simulate("pipelined", faults, 2, ticks=10, window=3)
    shown = lanes(trace)
    committed = sorted(lane.fence for lane in shown if lane.end == COMMITTED)
    assert committed == list(range(10))
    assert not [lane for lane in shown if lane.end == IN_FLIGHT]
    lost = [lane for lane in shown if lane.end in (GAVE_UP, FLUSHED, REFUSED)]
    replayed = {lane.replay_of for lane in shown if lane.replay_of is not None}
    assert {lane.ballot_id for lane in lost} <= replayed  # every lost tick is asked again


def test_two_answers_in_holds_the_early_answer_and_checks_its_base_hash_at_the_fence() -> None:
    from labkit.designs.pipeline_study import two_answers_in

    honest = two_answers_in(stale=False)
    assert honest.said == "held" and honest.held == [honest.second.ballot_id]
    assert honest.landed.committed
    _, decision = honest.loop.settle(3.0)
    assert decision.committed and honest.loop.read_head()[0] == 2

    stale = two_answers_in(stale=True)
    assert stale.said == "held" and stale.landed.committed
    _, decision = stale.loop.settle(3.0)
    assert not decision.committed and decision.reason == "base_hash_mismatch"
    assert stale.loop.read_head()[0] == 1
