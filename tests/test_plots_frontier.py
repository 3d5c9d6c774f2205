"""Part-one figures: titled, labelled, with a legend, and drawing exactly what labkit computed."""

from __future__ import annotations

import math

import pytest
from matplotlib.figure import Figure

from labkit.frontier import orders as explorer
from labkit.frontier import summarizer as sm
from labkit.frontier import triggers
from labkit.frontier.log import POLICIES
from labkit.frontier.scenario_format import load_scenario
from labkit.frontier.scenarios import replay_scenario, run_scenario, scenario_from_order
from labkit.plots import frontier as pf
from labkit.plots.style import image_bundle, label_share_bars, new_figure, png_bytes


def _check_figure(fig: Figure) -> None:
    assert isinstance(fig, Figure)
    assert fig.get_layout_engine() is None  # widget redraws cannot pay for a layout engine
    for ax in fig.axes:
        assert ax.get_title()
        assert ax.get_xlabel() and ax.get_ylabel()
        legend = ax.get_legend()
        assert legend is not None and [t.get_text() for t in legend.get_texts()]
    assert png_bytes(fig).startswith(b"\x89PNG")


def _line(fig: Figure, gid: str):
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == gid]
    return line


@pytest.fixture(scope="module")
def seed_timeline():
    return run_scenario(load_scenario("seed"))


def test_timeline_lines_match_dataframe(seed_timeline) -> None:
    fig = pf.timeline_figure(seed_timeline)
    _check_figure(fig)
    steps = seed_timeline["step"].tolist()
    front = _line(fig, "frontier")
    assert list(front.get_xdata()) == steps
    assert list(front.get_ydata()) == seed_timeline["frontier"].tolist()
    mx = _line(fig, "max_watermark")
    want = seed_timeline["max_watermark"].astype("Float64").to_numpy(float, na_value=math.nan)
    got = list(mx.get_ydata())
    assert [math.isnan(v) for v in got] == [math.isnan(v) for v in want]
    assert [v for v in got if not math.isnan(v)] == [v for v in want if not math.isnan(v)]
    assert (
        max(v for v in got[:8] if not math.isnan(v)) == 5
    )  # MAX jumps to 5 while ids 1 and 2 are pending


def test_timeline_rings_the_max_orphans_up_to_the_step(seed_timeline) -> None:
    fig = pf.timeline_figure(seed_timeline, step=8)
    (rings,) = [c for c in fig.axes[0].collections if c.get_gid() == "orphans_max"]
    shown = seed_timeline[seed_timeline["step"] <= 8]
    expected = [
        (s, i) for s, ids in zip(shown["step"], shown["orphan_ids_max"], strict=True) for i in ids
    ]
    assert [tuple(p) for p in rings.get_offsets().tolist()] == expected
    assert "2 orphan(s) under MAX (ids 1, 2)" in " ".join(t.get_text() for t in fig.axes[0].texts)
    assert [ln.get_xdata()[-1] for ln in fig.axes[0].get_lines() if ln.get_gid()] == [8, 8]


def test_timeline_canvas_reuses_its_frame(seed_timeline) -> None:
    canvas = pf.TimelineCanvas()
    first = canvas.render(seed_timeline, step=3)
    again = canvas.render(seed_timeline, step=12)
    assert again is first and len(first.axes) == 1
    assert _line(again, "frontier").get_xdata()[-1] == 12
    assert len([ln for ln in again.axes[0].get_lines() if ln.get_gid() == "frontier"]) == 1


def test_timeline_marks_moved_in_place_draw_what_fresh_marks_do(seed_timeline) -> None:
    """A widget's canvas moves new data into its marks; the picture is a fresh canvas's."""
    other = run_scenario(scenario_from_order([5, 5, 1, 5, 5, 5], [3, 1, 2, 4, 5, 6]))
    moved = pf.TimelineCanvas(live_text=False)
    moved.render(seed_timeline, step=12)
    marks = list(moved._marks)
    for timeline, step in ((seed_timeline, 3), (seed_timeline, 8), (other, 4), (seed_timeline, 0)):
        moved.render(timeline, step=step)
        fresh = pf.TimelineCanvas(live_text=False)
        fresh.render(timeline, step=step)
        assert moved.png() == fresh.png(), (step, "moved marks draw another picture")
    moved.render(seed_timeline, step=12)
    again = list(moved._marks)
    moved.render(seed_timeline, step=5)
    assert moved._marks == again != marks  # the same artists, moved (a new frame made new ones)


def test_timeline_rejects_unknown_shard(seed_timeline) -> None:
    with pytest.raises(ValueError, match="nope"):
        pf.timeline_figure(seed_timeline, shard="nope")


def test_checkpoint_ranges_show_orphans() -> None:
    conn = replay_scenario(load_scenario("seed"))
    ranges = {p: sm.summaries(conn, "main", p) for p in POLICIES}
    lost = {p: sm.orphans(conn, "main", p) for p in POLICIES}
    fig = pf.checkpoint_ranges_figure(ranges, lost, last_id=8)
    _check_figure(fig)
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == [f"[{s.start_id}, {s.end_id}]" for p in POLICIES for s in ranges[p]]
    ring_sets = [
        c.get_offsets().tolist() for c in fig.axes[0].collections if c.get_sizes()[0] == 150
    ]
    assert [[1.0, 1.0], [2.0, 1.0], [4.0, 1.0]] in ring_sets  # MAX row orphans 1, 2, 4


def test_checkpoint_ranges_draw_a_hole() -> None:
    bad = [sm.Summary(1, "main", "max", 1, 2, (1, 2)), sm.Summary(2, "main", "max", 5, 6, (5,))]
    fig = pf.checkpoint_ranges_figure({"max": bad}, last_id=7)
    _check_figure(fig)
    hatched = [p for p in fig.axes[0].patches if p.get_hatch() == "///"]
    assert len(hatched) == 1 and hatched[0].get_x() == pytest.approx(2.5)


def test_orphan_rates_figure() -> None:
    rates = explorer.orphan_rates(range(3, 6))
    fig = pf.orphan_rates_figure(rates)
    _check_figure(fig)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "5/6" in texts and "0/120" in texts


def test_share_bar_labels_sit_on_their_bars() -> None:
    fig = new_figure(3, 2)
    ax = fig.add_subplot()
    label_share_bars(ax, [0, 1], [0.5, 0.0], [3, 0], [6, 6], fontsize=7)
    placed = [(t.get_position(), t.get_text(), t.get_fontsize()) for t in ax.texts]
    assert placed == [((0, pytest.approx(0.52)), "3/6", 7), ((1, 0.02), "0/6", 7)]
    with pytest.raises(ValueError):
        label_share_bars(ax, [0, 1], [0.5], [1], [2])


def test_trigger_cost_figure() -> None:
    cost = triggers.trigger_cost(dormant=(0, 50), repeats=3)
    assert list(cost["dormant_shards"]) == [0, 50]
    assert cost["total_rows"].tolist() == [20, 20 + 50 * 20]
    fig = pf.trigger_cost_figure(cost)
    _check_figure(fig)
    assert list(_line(fig, "per_shard").get_ydata()) == list(cost["per_shard_s"] * 1e6)


def test_busy_loop_figure() -> None:
    trace = triggers.busy_loop_trace(rows=5, ticks=6, unblock_at=3)
    busy = trace[trace["trigger"] == "after_checkpoint"]
    quiet = trace[trace["trigger"] == "newly_covered"]
    assert busy["wasted"].sum() == 3 and quiet["wasted"].sum() == 0
    assert quiet["ready"].tolist() == [0, 0, 0, 5, 0, 0]
    fig = pf.busy_loop_figure(trace)
    _check_figure(fig)
    assert list(_line(fig, "after_checkpoint").get_ydata()) == busy["ready"].tolist()


def test_custom_order_timeline_has_every_step() -> None:
    timeline = run_scenario(scenario_from_order([5, 5, 1, 5], [3, 1, 2, 4]))
    fig = pf.timeline_figure(timeline, step=100)  # clamped to the last step
    assert _line(fig, "frontier").get_xdata()[-1] == timeline["step"].max()


def test_fanout_cost_figure() -> None:
    cost = triggers.fanout_cost(workers=(1, 2, 3), shards=(10, 30), rows_per_shard=4)
    fig = pf.fanout_cost_figure(cost)
    _check_figure(fig)
    assert fig.axes[0].get_yscale() == "log"
    for shards in (10, 30):
        part = cost[cost["shards"] == shards]
        assert list(_line(fig, f"global_poll_{shards}").get_ydata()) == list(
            part["global_poll_steps"]
        )
        assert list(_line(fig, f"per_shard_{shards}").get_ydata()) == list(part["per_shard_steps"])


def test_image_bundle_carries_the_alt_text() -> None:
    import base64

    png = png_bytes(new_figure(2, 1))
    bundle = image_bundle(png, 'ids 1 & 2 "orphaned" <for good>')
    assert bundle["text/plain"] == 'ids 1 & 2 "orphaned" <for good>'
    assert base64.b64decode(bundle["image/png"]) == png
    assert 'alt="ids 1 &amp; 2 &quot;orphaned&quot; &lt;for good&gt;"' in bundle["text/html"]
    assert f'src="data:image/png;base64,{bundle["image/png"]}"' in bundle["text/html"]
