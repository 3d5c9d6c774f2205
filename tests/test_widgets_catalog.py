"""FiveDesignsApp, InvertedArrivalStepper and the arrival-order workbench driven without a
browser.

Every test gets an app of its own, so no test depends on what an earlier one clicked.
"""

from __future__ import annotations

import pytest

from labkit.designs.registry import DESIGNS
from labkit.designs.run_stats import summarize_run
from labkit.designs.schedules import Kind, Step
from labkit.designs.simulator import FAULTS
from labkit.widgets.catalog import FAULT_PRESETS, FiveDesignsApp, InvertedArrivalStepper


@pytest.fixture
def app() -> FiveDesignsApp:
    return FiveDesignsApp(highlight="ballot", preset="inverted", seed=0)


def test_each_test_gets_a_fresh_app(app: FiveDesignsApp) -> None:
    assert (app.design.value, app.faults.value, app.seed.value) == ("ballot", "inverted", 0)
    assert app.window.value == 3 and app.latency.value == 1.0 and len(app.timings) == 1


def test_initial_state(app: FiveDesignsApp) -> None:
    assert set(app.traces) == set(DESIGNS) == set(app.summaries)
    assert app.last_png.startswith(b"\x89PNG")
    assert app.summaries["callback"].rewinds > 0
    assert app.summaries["ballot"].rewinds == app.summaries["fenced"].rewinds == 0
    assert all(app.summaries[d] == summarize_run(app.traces[d]) for d in DESIGNS)
    assert "wb-design" in app.design._dom_classes and "wb-faults" in app.faults._dom_classes
    assert "<table" in app.metrics.value and "callback" in app.counterexamples.value


def test_css_classes_for_the_browser_test(app: FiveDesignsApp) -> None:
    classes = {
        c
        for w in (
            app.latency,
            app.duplicate_rate,
            app.clock_skew,
            app.window,
            app.seed,
            app.out,
            app.metrics,
        )
        for c in w._dom_classes
    }
    assert {
        "wb-latency",
        "wb-duplicate-rate",
        "wb-clock-skew",
        "wb-window",
        "wb-seed",
        "wb-traces",
        "wb-metrics",
    } <= classes
    assert {f"wb-fault-{f}" for f in FAULTS} == {
        c for box in app.fault_boxes.values() for c in box._dom_classes
    }


def test_an_idle_kernel_draws_the_next_frame_ahead_and_a_script_does_not(app) -> None:
    import asyncio

    async def in_a_kernel() -> FiveDesignsApp:  # a running event loop, as ipykernel has
        made = FiveDesignsApp(highlight="ballot", preset="inverted", seed=0)
        while made._ahead:  # the work ahead, the frame among it, one step per turn
            await asyncio.sleep(0.01)
        return made

    assert asyncio.run(in_a_kernel()).frames_drawn_ahead == 1
    app.seed.value = 5
    assert app.frames_drawn_ahead == 0  # no loop: no idle time, nothing drawn


def test_picking_a_design_redraws_only(app: FiveDesignsApp) -> None:
    before_png, before = app.last_png, dict(app.traces)
    app.design.value = "callback"
    assert app.last_png != before_png
    assert all(app.traces[d] is before[d] for d in DESIGNS)  # memoised: nothing re-simulated
    assert "background" in app.metrics.value.split("callback")[0].rsplit("<tr", 1)[-1]


def test_the_clock_skew_says_what_it_moves_and_when_it_moved_nothing(app: FiveDesignsApp) -> None:
    """Only lww reads the clocks: the slider says so, and a move that changes no run says so."""
    assert "only <b>lww</b>" in app.why_skew.value and not app.clock_skew.disabled
    app.clock_skew.value = 0.0
    before = app.runs["lww"].summary
    app.clock_skew.value = 0.1  # inverted, seed 0: lww keeps the same answers
    assert app.runs["lww"].summary == before
    assert "No change" in app.message.value and "no other design reads" in app.message.value
    app.clock_skew.value = 3.0
    assert app.runs["lww"].summary != before and app.message.value == ""
    without = FiveDesignsApp(designs=["callback", "ballot"])
    assert without.clock_skew.disabled and "disabled" in without.why_skew.value


def test_the_metrics_table_shows_the_rewinds_first(app: FiveDesignsApp) -> None:
    """The columns the notebook and the instructor read (rewinds, then throughput, latency and
    wasted calls) are in view, not scrolled past a dozen others."""
    head = app.metrics.value.split("<tbody>")[0]
    assert head.index(">rewinds<") < head.index(">throughput") < head.index(">latency p95<")
    assert head.index(">wasted calls / commit<") < head.index(">commits<")


def test_fault_presets_set_the_checkboxes(app: FiveDesignsApp) -> None:
    for preset in ("none", "duplicate", "all", "inverted"):
        app.faults.value = preset
        assert app.selected_faults == FAULT_PRESETS[preset]
        assert all(r.faults == FAULT_PRESETS[preset] for r in app.runs.values())
        assert app.summaries["ballot"].rewinds == app.summaries["fenced"].rewinds == 0
    app.faults.value = "none"
    assert app.summaries["callback"].rewinds == 0
    app.faults.value = "inverted"
    assert app.summaries["callback"].rewinds > 0


def test_ticking_a_box_switches_the_preset(app: FiveDesignsApp) -> None:
    app.faults.value = "inverted"
    app.fault_boxes["stall"].value = True
    assert app.faults.value == "custom"
    assert app.selected_faults == ("inverted", "stall")
    app.fault_boxes["stall"].value = False
    assert app.faults.value == "inverted"


def test_window_slider_reruns_fenced_only(app: FiveDesignsApp) -> None:
    app.faults.value = "all"
    before, png = dict(app.traces), app.last_png
    app.window.value = 5 if app.window.value != 5 else 2
    assert app.traces["fenced"] is not before["fenced"]
    assert all(app.traces[d] is before[d] for d in ("callback", "lww", "ballot"))
    assert app.last_png != png
    assert app.summaries["fenced"].rewinds == 0


def test_seed_and_sliders_change_the_traces(app: FiveDesignsApp) -> None:
    app.faults.value = "all"
    before = app.summaries["ballot"]
    app.seed.value = app.seed.value + 1
    assert app.summaries["ballot"] != before
    app.latency.value = 2.0
    assert app.summaries["ballot"].sim_time > before.sim_time
    assert app.summaries["ballot"].rewinds == app.summaries["fenced"].rewinds == 0
    assert len(app.timings) == 4 and all(t > 0 for t in app.timings)  # start + 3 changes


def test_stepper_walks_the_inverted_arrival() -> None:
    stepper = InvertedArrivalStepper()
    late = {d: stepper.outcomes[d] for d in ("callback", "ballot")}
    assert all((o.kind, o.request_id) == (Kind.DELIVER, 12) for o in late.values())
    assert late["callback"].committed and late["callback"].rewind
    assert not late["ballot"].committed and late["ballot"].reason == "unknown_ballot"
    assert "12:unknown_ballot (head v2)" in stepper.caption.value
    png = stepper.last_png
    stepper.step.value = 2
    second = stepper.outcomes["ballot"]
    assert (second.request_id, second.committed, second.head) == (13, True, 1)
    assert stepper.last_png != png
    assert stepper.results["callback"].rewinds and not stepper.results["fenced"].rewinds


# --- the arrival-order workbench (ScheduleBuilder + ArrivalWorkbench) ----------------------

from labkit.designs.schedule_builder import (  # noqa: E402 (grouped with the tests that use them)
    PRESETS,
    ScheduleBuilder,
    StepError,
    current_designs,
    parse_schedule,
    shortest_break,
)
from labkit.widgets.catalog import ArrivalWorkbench  # noqa: E402


@pytest.fixture
def bench() -> ArrivalWorkbench:
    return ArrivalWorkbench(preset=None)


def texts(steps: list[Step]) -> list[str]:
    """Steps as a person reads them."""
    return [str(s) for s in steps]


def test_builder_plays_every_registered_design() -> None:
    b = ScheduleBuilder()
    assert b.designs == current_designs() and set(b.runs) == set(DESIGNS)
    assert all(run.heads == [0] and 1 in run.lanes for run in b.runs.values())
    b.add("deliver 1")
    assert texts(b.steps) == ["deliver 1"] and all(run.heads == [0, 1] for run in b.runs.values())
    assert b.runs["fenced"].lanes[2].sent_at == 0 and b.runs["ballot"].lanes[2].sent_at == 1


def test_builder_undo_reset_and_text() -> None:
    b = ScheduleBuilder()
    b.load("timeout 1, deliver 2; deliver 3")
    assert b.text == "timeout 1; deliver 2; deliver 3"
    assert str(b.undo()) == "deliver 3" and texts(b.steps) == ["timeout 1", "deliver 2"]
    assert b.runs["callback"].heads == [0, 0, 1]
    b.reset()
    assert texts(b.steps) == [] and b.undo() is None and b.runs["ballot"].heads == [0]


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_plays_and_the_ballot_designs_never_fall(name: str) -> None:
    b = ScheduleBuilder()
    b.use_preset(name)
    assert b.steps == list(PRESETS[name].steps)
    assert not b.runs["ballot"].falls and not b.runs["fenced"].falls
    assert all(not run.skipped for run in b.runs.values())


def test_presets_show_their_fault() -> None:
    b = ScheduleBuilder()
    b.use_preset("inverted")
    assert b.runs["callback"].verdict.startswith("BROKEN: reader saw v2 \u2192 v1 at step 4")
    assert b.runs["ballot"].rejects == {"unknown_ballot": 1}
    assert b.runs["callback"].lanes[1].status == "arrived late"
    b.use_preset("retry_after_commit")
    assert b.runs["callback"].falls and not b.runs["lww"].falls
    b.use_preset("stale_body")
    assert b.runs["ballot"].rejects == {"stale_base": 1} and b.runs["callback"].overwrites == 1
    assert "lost update" in b.runs["callback"].verdict
    b.use_preset("duplicate")
    assert b.runs["ballot"].rejects == {"unknown_ballot": 2}
    assert b.runs["ballot"].lanes[1].status == "duplicated"
    b.use_preset("crash")
    assert all(run.crashes == [1] for run in b.runs.values())
    with pytest.raises(KeyError, match="unknown preset 'nope'"):
        b.use_preset("nope")


def test_typed_errors_name_the_step_and_change_nothing() -> None:
    b = ScheduleBuilder()
    b.load("deliver 1")
    with pytest.raises(StepError, match=r"step 2 \('delivr 2'\): not a step") as bad:
        b.load("deliver 1; delivr 2; deliver 3")
    assert (bad.value.index, bad.value.text) == (2, "delivr 2")
    with pytest.raises(
        StepError,
        match=r"step 3 \('deliver 9'\): no design can take it: "
        r"it has not sent request 9",
    ):
        b.load("deliver 1; deliver 2; deliver 9")
    with pytest.raises(StepError, match=r"step 2 \('stale 1'\)"):
        b.add("stale 1")
    assert texts(b.steps) == ["deliver 1"] and b.runs["callback"].heads == [0, 1]
    assert parse_schedule(" 1 ;dup 1,, timeout ; crash") == [
        Step.deliver(1),
        Step.dup(1),
        Step.timeout(),
        Step.crash(),
    ]


def test_a_step_one_design_cannot_take_is_skipped_there_with_a_reason() -> None:
    b = ScheduleBuilder()
    b.add("deliver 2")  # only fenced (window 2) has sent request 2
    assert b.runs["fenced"].outcomes[0].committed is True
    assert b.runs["ballot"].outcomes == [None]
    assert b.runs["ballot"].skipped == {1: "request 2 has not been sent"}


def test_availability_explains_why() -> None:
    b = ScheduleBuilder()
    assert b.availability(Step.deliver(1)).ok and b.availability(Step.crash()).ok
    dup = b.availability(Step.dup(1))
    assert not dup.ok and "has not arrived yet" in dup.why
    assert "built on version 0" in b.availability(Step.stale(1)).why
    assert "not waiting on request 7" in b.availability(Step.timeout(7)).why
    b.add("deliver 1")
    assert b.availability(Step.dup(1)).ok and not b.availability(Step.deliver(1)).ok


def test_shortest_break_per_design() -> None:
    assert texts(shortest_break("callback")) == ["deliver 1", "deliver 2", "deliver 1"]
    assert shortest_break("ballot") is None
    with pytest.raises(ValueError, match="unknown design"):
        shortest_break("nope")


def test_workbench_buttons_add_steps(bench: ArrivalWorkbench) -> None:
    png = bench.last_png
    assert bench.k == 1 and bench.buttons["deliver"].description == "deliver response 1"
    assert bench.buttons["dup"].disabled and "not arrived yet" in bench.why.value
    assert bench.buttons["undo"].disabled
    bench.buttons["deliver"].click()
    assert texts(bench.builder.steps) == ["deliver 1"] and bench.last_png != png
    assert bench.schedule.value == "deliver 1"
    bench.request.value = 1
    bench.buttons["dup"].click()
    bench.request.value = 2
    bench.buttons["stale"].click()
    bench.buttons["crash"].click()
    bench.buttons["oldest"].click()
    assert texts(bench.builder.steps) == ["deliver 1", "dup 1", "stale 2", "crash", "timeout"]
    assert len(bench.timings) == 1 + 5 + 1  # start, five steps, picking request 2 (1 was on)


def test_workbench_give_up_undo_reset(bench: ArrivalWorkbench) -> None:
    bench.buttons["give_up"].click()
    assert texts(bench.builder.steps) == ["timeout 1"]
    assert "in flight" in dict((v, lbl) for lbl, v in bench.request.options)[2]
    bench.buttons["undo"].click()
    assert texts(bench.builder.steps) == [] and bench.schedule.value == ""
    bench.preset.value = "inverted"
    assert bench.builder.steps == list(PRESETS["inverted"].steps)
    assert "BROKEN" in bench.verdicts.value
    bench.buttons["reset"].click()
    assert texts(bench.builder.steps) == [] and "BROKEN" not in bench.verdicts.value
    assert bench.preset.value == ""


def test_workbench_typed_schedule_and_inline_error(bench: ArrivalWorkbench) -> None:
    bench.type_schedule("deliver 1; deliver 2; dup 1")
    assert (
        texts(bench.builder.steps) == ["deliver 1", "deliver 2", "dup 1"] and not bench.error.value
    )
    assert "BROKEN: reader saw v2 \u2192 v1 at step 3" in bench.verdicts.value
    bench.type_schedule("deliver 1; delivr 2")
    assert "step <b>2</b> <code>delivr 2</code>" in bench.error.value
    assert "Traceback" not in bench.error.value
    assert texts(bench.builder.steps) == ["deliver 1", "deliver 2", "dup 1"]  # unchanged
    bench.schedule.value = "crash"  # what Enter in the text box does
    assert texts(bench.builder.steps) == ["crash"] and not bench.error.value


def test_workbench_shortest_break(bench: ArrivalWorkbench) -> None:
    bench.focus.value = "lww"
    assert bench.shortest.description == "shortest schedule that breaks lww"
    bench.shortest.click()
    assert bench.builder.steps == shortest_break("lww")
    assert bench.builder.runs["lww"].falls and "Shortest schedule" in bench.message.value
    before = list(bench.builder.steps)
    bench.focus.value = "ballot"
    bench.shortest.click()
    assert "No schedule breaks ballot" in bench.message.value
    assert bench.builder.steps == before


def test_workbench_focus_changes_the_lanes_only(bench: ArrivalWorkbench) -> None:
    bench.preset.value = "inverted"
    png, verdicts = bench.last_png, bench.verdicts.value
    bench.focus.value = "fenced"
    assert bench.last_png != png and bench.verdicts.value == verdicts
    # the picker speaks for every design: only fenced has sent request 5
    assert [lbl for lbl, _ in bench.request.options][-1] == "5: not sent \u00d74, in flight \u00d71"
    bench.request.value = 5
    assert (
        "fenced in flight" in bench.request.tooltip and "callback not sent" in bench.request.tooltip
    )


def test_builder_used_from_another_thread_replays_instead_of_failing() -> None:
    """A kernel can run widget callbacks on another thread than the cell that built the app."""
    import threading

    b = ScheduleBuilder()
    b.add("deliver 1")
    seen: list[object] = []

    def elsewhere() -> None:
        try:
            seen.append(b.availability(Step.deliver(2)).ok)
            b.add("deliver 2")
            seen.append(b.runs["ballot"].heads)
        except Exception as exc:  # reported by the assertion below
            seen.append(exc)

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert seen == [True, [0, 1, 2]]
    b.undo()  # back on the first thread: replays again, no ProgrammingError
    assert texts(b.steps) == ["deliver 1"]


# --- issue 19: the widgets say what they do ---------------------------------------------------


def test_the_duplicate_rate_is_greyed_out_without_the_duplicate_fault(app: FiveDesignsApp) -> None:
    assert app.duplicate_rate.disabled and "duplicate" in app.why_duplicate.value
    app.fault_boxes["duplicate"].value = True
    assert not app.duplicate_rate.disabled and app.why_duplicate.value == ""
    app.faults.value = "none"
    assert app.duplicate_rate.disabled


def test_picking_custom_says_no_change(app: FiveDesignsApp) -> None:
    png, n = app.last_png, len(app.timings)
    app.faults.value = "custom"
    assert "No change" in app.message.value and "tick or untick" in app.message.value
    assert app.last_png == png and len(app.timings) == n
    app.fault_boxes["stall"].value = True
    assert app.message.value == ""


def test_tables_scroll_inside_their_own_box(app: FiveDesignsApp) -> None:
    bench = ArrivalWorkbench(preset="inverted")
    for shown in (app.metrics.value, bench.verdicts.value):
        assert "<div class='wb-scroll' style='overflow-x:auto;" in shown
        assert shown.endswith("</table></div>")


def test_typed_and_button_paths_accept_the_same_steps(bench: ArrivalWorkbench) -> None:
    bench.buttons["deliver"].click()
    bench.request.value = 1
    assert bench.buttons["deliver"].disabled  # the button refuses a second first-arrival
    bench.type_schedule("deliver 1; deliver 1")
    assert "step <b>2</b>" in bench.error.value and "dup 1" in bench.error.value
    assert texts(bench.builder.steps) == ["deliver 1"]
    bench.type_schedule("deliver 1; dup 1")
    assert texts(bench.builder.steps) == ["deliver 1", "dup 1"] and not bench.error.value


def test_a_request_lost_in_a_crash_has_its_own_status(bench: ArrivalWorkbench) -> None:
    bench.type_schedule("deliver 1; crash")
    labels = dict((v, lbl) for lbl, v in bench.request.options)
    assert labels[2].startswith("2: lost in crash")
    bench.request.value = 2
    assert bench.buttons["give_up"].disabled  # consistent: no loop still waits on 2
    assert bench.builder.runs["callback"].lanes[2].status == "lost in crash"
    bench.type_schedule("deliver 1; crash; deliver 2")
    assert bench.builder.runs["callback"].lanes[2].status == "arrived late"


def test_verdicts_colour_a_lost_update_and_count_rejections() -> None:
    bench = ArrivalWorkbench(preset=None)
    bench.type_schedule("deliver 1; deliver 2")
    fenced = bench.builder.runs["fenced"]
    assert fenced.rejects == {"stale_watermark": 1}
    assert "stale_watermark \u00d71" in bench.verdicts.value
    bench.type_schedule("deliver 1; stale 2; dup 1")
    lost = [d for d, r in bench.builder.runs.items() if r.overwrites and not r.falls]
    assert lost, "this schedule makes some design replace a version in place"
    for design in lost:
        row = bench.verdicts.value.split(f"<b>{design}</b>")[1].split("</tr>")[0]
        assert "data-verdict='lost update'" in row and "#2e7d32" not in row
    safe = [d for d, r in bench.builder.runs.items() if not r.overwrites and not r.falls]
    for design in safe:
        row = bench.verdicts.value.split(f"<b>{design}</b>")[1].split("</tr>")[0]
        assert "data-verdict='safe'" in row


def test_the_first_in_order_refusal_is_explained_on_the_verdict_line(bench) -> None:
    bench.type_schedule("deliver 1; deliver 2")
    assert bench.builder.runs["fenced"].in_order_refusal == (2, 2, "stale_watermark")
    fenced = bench.verdicts.value.split("<b>fenced</b>")[1].split("</tr>")[0]
    assert "step 2: request 2&#x27;s answer came in order and was refused" in fenced
    assert "same head as one that committed first" in fenced
    ballot = bench.verdicts.value.split("<b>ballot</b>")[1].split("</tr>")[0]
    assert "came in order" not in ballot


def test_every_refusal_a_design_can_give_has_its_why_written_once() -> None:
    from labkit.catalog.rule import REASON_WHY, REASONS
    from labkit.designs.design import CAS_CONFLICT
    from labkit.widgets.catalog import REFUSAL_WHY

    assert set(REFUSAL_WHY) == {*REASONS, CAS_CONFLICT}
    assert all(REFUSAL_WHY[r] is REASON_WHY[r] for r in REASONS)  # the rule's text, not a copy


def test_reset_gives_the_lanes_fresh_axes(bench: ArrivalWorkbench) -> None:
    bench.type_schedule("; ".join(f"deliver {i}" for i in range(1, 13)))
    long_canvas = bench.canvas
    bench.buttons["deliver"].click()
    assert bench.canvas is long_canvas  # a step added keeps the axes
    bench.buttons["reset"].click()
    assert bench.canvas is long_canvas  # rescaled, not rebuilt: its figure and frames are reused
    fresh = ArrivalWorkbench(preset=None)
    assert bench.last_png == fresh.last_png  # as if the long schedule never happened


def test_the_picture_does_not_move_as_the_hints_change(bench: ArrivalWorkbench) -> None:
    """The hints above the lanes share one box of fixed height, whatever they say."""
    assert bench.hints.layout.height and bench.hints.layout.overflow == "auto"
    assert {bench.why, bench.error, bench.message} <= set(bench.hints.children)
    assert len({b.layout.width for name, b in bench.buttons.items() if name in bench.KINDS}) == 4


def test_shortest_break_loads_with_repeats_written_as_dup(bench: ArrivalWorkbench) -> None:
    """The explorer writes a repeat arrival as a second `deliver`; the workbench, which refuses
    that spelling like its buttons do, loads it as `dup`, and the design still breaks."""
    assert texts(shortest_break("callback")) == ["deliver 1", "deliver 2", "deliver 1"]
    bench.focus.value = "callback"
    bench.shortest.click()
    assert texts(bench.builder.steps) == ["deliver 1", "deliver 2", "dup 1"]
    assert bench.builder.runs["callback"].falls and not bench.error.value
