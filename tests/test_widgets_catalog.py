"""FourDesignsApp and InvertedArrivalStepper driven without a browser.

Every test gets an app of its own, so no test depends on what an earlier one clicked.
"""

from __future__ import annotations

import pytest

from labkit.arrivals import DELIVER
from labkit.designs import DESIGNS
from labkit.planner import FAULTS, summarize_run
from labkit.widgets.part2_catalog import FAULT_PRESETS, FourDesignsApp, InvertedArrivalStepper


@pytest.fixture
def app() -> FourDesignsApp:
    return FourDesignsApp(highlight="ballot", preset="inverted", seed=0)


def test_each_test_gets_a_fresh_app(app: FourDesignsApp) -> None:
    assert (app.design.value, app.faults.value, app.seed.value) == ("ballot", "inverted", 0)
    assert app.window.value == 3 and app.latency.value == 1.0 and len(app.timings) == 1


def test_initial_state(app: FourDesignsApp) -> None:
    assert set(app.traces) == set(DESIGNS) == set(app.summaries)
    assert app.last_png.startswith(b"\x89PNG")
    assert app.summaries["callback"].rewinds > 0
    assert app.summaries["ballot"].rewinds == app.summaries["fenced"].rewinds == 0
    assert all(app.summaries[d] == summarize_run(app.traces[d]) for d in DESIGNS)
    assert "wb-design" in app.design._dom_classes and "wb-faults" in app.faults._dom_classes
    assert "<table" in app.metrics.value and "callback" in app.counterexamples.value


def test_css_classes_for_the_browser_test(app: FourDesignsApp) -> None:
    classes = {c for w in (app.latency, app.duplicate_rate, app.clock_skew, app.window, app.seed,
                           app.out, app.metrics) for c in w._dom_classes}
    assert {"wb-latency", "wb-duplicate-rate", "wb-clock-skew", "wb-window", "wb-seed",
            "wb-traces", "wb-metrics"} <= classes
    assert {f"wb-fault-{f}" for f in FAULTS} == {
        c for box in app.fault_boxes.values() for c in box._dom_classes}


def test_picking_a_design_redraws_only(app: FourDesignsApp) -> None:
    before_png, before = app.last_png, dict(app.traces)
    app.design.value = "callback"
    assert app.last_png != before_png
    assert all(app.traces[d] is before[d] for d in DESIGNS)  # memoised: nothing re-simulated
    assert "background" in app.metrics.value.split("callback")[0].rsplit("<tr", 1)[-1]


def test_fault_presets_set_the_checkboxes(app: FourDesignsApp) -> None:
    for preset in ("none", "duplicate", "all", "inverted"):
        app.faults.value = preset
        assert app.selected_faults == FAULT_PRESETS[preset]
        assert all(r.faults == FAULT_PRESETS[preset] for r in app.runs.values())
        assert app.summaries["ballot"].rewinds == app.summaries["fenced"].rewinds == 0
    app.faults.value = "none"
    assert app.summaries["callback"].rewinds == 0
    app.faults.value = "inverted"
    assert app.summaries["callback"].rewinds > 0


def test_ticking_a_box_switches_the_preset(app: FourDesignsApp) -> None:
    app.faults.value = "inverted"
    app.fault_boxes["stall"].value = True
    assert app.faults.value == "custom"
    assert app.selected_faults == ("inverted", "stall")
    app.fault_boxes["stall"].value = False
    assert app.faults.value == "inverted"


def test_window_slider_reruns_fenced_only(app: FourDesignsApp) -> None:
    app.faults.value = "all"
    before, png = dict(app.traces), app.last_png
    app.window.value = 5 if app.window.value != 5 else 2
    assert app.traces["fenced"] is not before["fenced"]
    assert all(app.traces[d] is before[d] for d in ("callback", "lww", "ballot"))
    assert app.last_png != png
    assert app.summaries["fenced"].rewinds == 0


def test_seed_and_sliders_change_the_traces(app: FourDesignsApp) -> None:
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
    assert all((o.kind, o.request_id) == (DELIVER, 12) for o in late.values())
    assert late["callback"].committed and late["callback"].rewind
    assert not late["ballot"].committed and late["ballot"].reason == "unknown_ballot"
    assert "12:unknown_ballot (head v2)" in stepper.caption.value
    png = stepper.last_png
    stepper.step.value = 2
    second = stepper.outcomes["ballot"]
    assert (second.request_id, second.committed, second.head) == (13, True, 1)
    assert stepper.last_png != png
    assert stepper.results["callback"].rewinds and not stepper.results["fenced"].rewinds
