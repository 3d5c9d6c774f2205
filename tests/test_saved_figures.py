"""A widget's picture saved as a figure spec redraws byte for byte; a bad spec is one line."""

from __future__ import annotations

import json

import pytest

import labkit.widgets.frontier as wf
from labkit.plots.saved import SpecError, draw_saved, load_spec, saved_png
from labkit.plots.style import png_bytes
from labkit.widgets.common import WIDGET_DPI


def _rebuilt(app, tmp_path) -> bytes:
    """Save the app's figure, read the file back, redraw it the way the app draws."""
    path = app.save_figure(tmp_path / "fig.json")
    return saved_png(load_spec(path), dpi=WIDGET_DPI)


@pytest.mark.slow
def test_frontier_timeline_rebuilds_a_custom_order_at_a_middle_step(tmp_path):
    app = wf.FrontierTimelineApp(n=6)
    app.order_dropdown.value = wf.CUSTOM
    app.custom_text.value = "3 5 f1 2 r1 4 6"
    app.step_slider.value = 5
    assert _rebuilt(app, tmp_path) == app.last_png
    app.step_slider.value = 9  # the canvas moved its marks; a fresh one draws the same
    assert _rebuilt(app, tmp_path) == app.last_png


@pytest.mark.slow
def test_predicted_orphans_timeline_rebuilds(tmp_path):
    app = wf.PredictOrphansApp(seed=3)
    app.reveal()
    app.new_puzzle()  # the timeline is gone until this puzzle is answered
    with pytest.raises(RuntimeError, match="drawn nothing"):
        app.save_figure(tmp_path / "fig.json")
    app.reveal()
    assert _rebuilt(app, tmp_path) == app.last_png


@pytest.mark.slow
def test_edge_case_rebuilds_another_scenario_and_shard(tmp_path):
    app = wf.EdgeCaseApp("dead_letter_tail")
    shards = list(app.shard.options)
    app.shard.value = shards[-1]
    assert _rebuilt(app, tmp_path) == app.last_png
    # the CLI's path: the Figure itself, rendered as every other figure is
    spec = load_spec(tmp_path / "fig.json")
    assert png_bytes(draw_saved(spec), dpi=WIDGET_DPI) == app.last_png


@pytest.mark.slow
def test_inverted_arrival_stepper_rebuilds_an_early_step(tmp_path):
    from labkit.widgets.catalog import InvertedArrivalStepper

    stepper = InvertedArrivalStepper(designs=("callback", "ballot"))
    stepper.step.value = 2
    assert _rebuilt(stepper, tmp_path) == stepper.last_png


@pytest.mark.slow
def test_pipeline_depth_rebuilds_another_window_fault_and_seed(tmp_path):
    from labkit.widgets.pipelined import PipelineDepthApp

    app = PipelineDepthApp(window=2, fault="duplicate", seed=5)
    with app.hold():
        app.window.value, app.seed.value = 8, 7
    app.update()
    assert _rebuilt(app, tmp_path) == app.last_png


@pytest.mark.slow
@pytest.mark.postgres
def test_commit_order_lab_rebuilds_from_its_recorded_state(pg_dsn, tmp_path):
    from labkit.pg.commit_order import LATE_COMMIT
    from labkit.widgets.pg import CommitOrderApp

    app = CommitOrderApp(pg_dsn)
    try:
        for actor, action in LATE_COMMIT[:-1]:
            app.step(actor, action)
        assert _rebuilt(app, tmp_path) == app.last_png
    finally:
        app.close()
    # recorded, not recomputed: the file alone redraws it once the server is gone
    assert saved_png(tmp_path / "fig.json", dpi=WIDGET_DPI) == app.last_png


@pytest.mark.slow
def test_real_planner_run_rebuilds_from_its_recorded_lanes_and_reader(tmp_path):
    from labkit.widgets.remote import RealPlannerApp

    app = RealPlannerApp(design="callback", ticks=12, latency_ms=5, seed=2)
    assert app.start()
    assert app.wait() is not None and app.error == ""
    spec = json.loads(app.save_figure(tmp_path / "fig.json").read_text())
    assert spec["state"]["reader"] is not None and spec["state"]["view"]["done"]
    assert saved_png(tmp_path / "fig.json", dpi=WIDGET_DPI) == app.last_png


@pytest.mark.slow
def test_five_designs_rebuilds_after_the_axes_grew_on_other_seeds(tmp_path):
    from labkit.widgets.catalog import FiveDesignsApp

    app = FiveDesignsApp(highlight="lww", preset="all", seed=4, ticks=12)
    with app.hold():
        app.window.value, app.latency.value = 4, 1.5
    app.update()
    app.seed.value = 9  # the canvas keeps the limits the seed before reached
    assert _rebuilt(app, tmp_path) == app.last_png


@pytest.mark.slow
def test_workbench_rebuilds_a_schedule_after_an_undo(tmp_path):
    from labkit.designs.registry import ALL_DESIGNS
    from labkit.widgets.catalog import ArrivalWorkbench

    wb = ArrivalWorkbench(preset=None, focus="pipelined", designs=ALL_DESIGNS, depth=3)
    wb.type_schedule(
        "deliver 2; deliver 1; deliver 3; timeout; "
        + "; ".join(f"deliver {i}" for i in range(4, 9))
    )
    rooms = wb.canvas.rooms
    for _ in range(7):
        wb.buttons["undo"].click()  # the room the axes grew to stays
    assert len(wb.builder.steps) == 2 and wb.canvas.rooms == rooms
    assert _rebuilt(wb, tmp_path) == wb.last_png


@pytest.mark.parametrize(
    "text, says",
    [
        ("{", "not JSON"),
        ('{"format": "workbook-figure/2", "figure": "workbench", "state": {}}', "format: expected"),
        ('{"format": "workbook-figure/1", "figure": "pie", "state": {}}', "figure: expected one"),
        (
            '{"format": "workbook-figure/1", "figure": "checkpoint_ranges",'
            ' "state": {"scenario": "seed", "shard": 3}}',
            "state.shard: expected a string, got 3",
        ),
        (
            '{"format": "workbook-figure/1", "figure": "checkpoint_ranges",'
            ' "state": {"scenario": "seed"}}',
            "state.shard: missing required field",
        ),
        (
            '{"format": "workbook-figure/1", "figure": "arrival_lanes", "state": {"steps": [],'
            ' "first_request": 1, "designs": [], "upto": 0}}',
            "state.upto: must be >= 1, got 0",
        ),
        (
            '{"format": "workbook-figure/1", "figure": "arrival_lanes", "state": {"steps":'
            ' ["deliver 1", "fly 2"], "first_request": 1, "designs": ["lww"], "upto": 1}}',
            "state.steps[1]: ",
        ),
        (
            '{"format": "workbook-figure/1", "figure": "checkpoint_ranges",'
            ' "state": {"scenario": "/etc/passwd", "shard": "main"}}',
            "state.scenario: no bundled scenario '/etc/passwd'",
        ),
    ],
)
def test_a_bad_spec_is_refused_in_one_line_naming_the_file_and_field(tmp_path, text, says):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(SpecError) as refused:
        draw_saved(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and says in message and "\n" not in message
