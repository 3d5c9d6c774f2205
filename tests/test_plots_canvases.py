"""Part two's stateful canvases: an update moves the marks, and a blitted redraw looks like a
full one (or changes where the data changed)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from labkit.designs.registry import DESIGNS
from labkit.designs.schedule_builder import ScheduleBuilder
from labkit.designs.schedules import Step
from labkit.designs.simulator import simulate
from labkit.plots.canvases import FiveDesignsCanvas, WorkbenchCanvas
from labkit.plots.style import png_bytes


@pytest.fixture(scope="module")
def traces() -> dict[str, pd.DataFrame]:
    return {d: simulate(d, ["inverted", "duplicate"], seed=0) for d in DESIGNS}


def test_canvas_update_moves_the_markers(traces) -> None:
    canvas = FiveDesignsCanvas()
    canvas.update(traces, "ballot")
    clean = {d: simulate(d, [], seed=0) for d in DESIGNS}
    canvas.update(clean, "fenced")
    (marks,) = [
        a for ax in canvas.fig.axes for a in ax.get_children() if a.get_gid() == "rewind:callback"
    ]
    assert len(marks.get_offsets()) == 0
    assert "0 falls" in canvas.axes["callback"].get_title()


def test_blitted_png_matches_a_full_draw(traces) -> None:
    canvas = FiveDesignsCanvas()
    canvas.png(traces, "lww")  # renders and caches the frame (same limits as the next call)
    blitted = canvas.png(traces, "ballot")  # restored frame + redrawn traces, titles, spines
    fresh = FiveDesignsCanvas()
    fresh.fig.set_dpi(80)
    full = png_bytes(fresh.update(traces, "ballot", nice_limits=True), dpi=80)
    a, b = (
        np.asarray(Image.open(io.BytesIO(x)).convert("RGB"), dtype=int) for x in (blitted, full)
    )
    assert a.shape == b.shape
    differing = (np.abs(a - b).max(axis=2) > 16).mean()
    assert differing < 0.001, f"{differing:.2%} of pixels differ from a full draw"


def test_workbench_canvas_blit_redraws_changes() -> None:
    b = ScheduleBuilder()
    canvas = WorkbenchCanvas(b.designs)
    first = canvas.png(b.runs, b.steps, "ballot")
    b.add(Step.deliver(1))
    second = canvas.png(b.runs, b.steps, "ballot")
    assert first != second
    b.undo()
    assert canvas.png(b.runs, b.steps, "ballot") == first


SCHEDULE_14 = (
    "timeout 1; deliver 2; deliver 3; deliver 1; dup 2; deliver 4; timeout; deliver 5; "
    "deliver 6; dup 5; crash; deliver 7; stale 8; deliver 9"
)


@pytest.mark.slow
def test_workbench_canvas_grown_in_place_draws_what_a_fresh_one_does() -> None:
    b = ScheduleBuilder()
    b.use_preset("inverted")
    grown = WorkbenchCanvas(b.designs)
    grown.png(b.runs, b.steps, "callback")
    small = grown.fig.get_size_inches()[1]
    b.load(SCHEDULE_14)  # more lanes than the figure has room for: it grows taller
    after = grown.png(b.runs, b.steps, "callback")
    fresh = WorkbenchCanvas(b.designs)
    assert grown.fig.get_size_inches()[1] > small
    assert after == fresh.png(b.runs, b.steps, "callback")
    for focus in ("lww", "callback", "lww"):  # the focus names the lanes: a frame of its own
        other = WorkbenchCanvas(b.designs)
        assert grown.png(b.runs, b.steps, focus) == other.png(b.runs, b.steps, focus)


def test_frame_cache_keeps_both_frames_of_a_control_moved_back_and_forth(traces, monkeypatch):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    full_draws = []
    draw = FigureCanvasAgg.draw
    monkeypatch.setattr(FigureCanvasAgg, "draw", lambda self: full_draws.append(1) or draw(self))
    canvas = FiveDesignsCanvas()
    images = [canvas.png(traces, "lww", scale=s, at_least=(30.0 * s, 20.0)) for s in (1, 2)]
    assert len(full_draws) == 1  # the second frame's ticks go on the first one's kept rest
    for _ in range(2):  # back and forth: both frames are kept, neither is drawn again
        assert [canvas.png(traces, "lww", scale=s, at_least=(30.0 * s, 20.0)) for s in (1, 2)] == (
            images
        )
    assert images[0] != images[1] and len(full_draws) == 1


@pytest.mark.parametrize("live_titles", [False, True])
@pytest.mark.slow
def test_new_limits_and_highlights_draw_what_a_fresh_canvas_does(traces, live_titles) -> None:
    """The frame of new limits is the kept rest plus that frame's ticks, and a highlight's
    spines are kept drawn: byte for byte what a canvas that drew everything shows."""
    grown = FiveDesignsCanvas(live_titles=live_titles)
    for room, highlight in [(20.0, "lww"), (30.0, "lww"), (30.0, "ballot"), (50.0, "cas"),
                            (50.0, "lww"), (50.0, "ballot")]:  # fmt: skip
        shown = grown.png(traces, highlight, scale=room, at_least=(room, 26.0))
        fresh = FiveDesignsCanvas(live_titles=live_titles)
        assert shown == fresh.png(traces, highlight, scale=room, at_least=(room, 26.0))


def test_a_frame_drawn_ahead_is_restored_by_the_run_that_needs_it(traces, monkeypatch):
    from matplotlib.axis import Axis
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FiveDesignsCanvas()
    assert not canvas.draw_ahead()  # nothing shown yet: no limits to go past
    canvas.png(traces, "lww", scale=1, at_least=(30.0, 20.0))
    assert canvas.draw_ahead() and not canvas.draw_ahead()  # the 40-long axis, kept once
    assert canvas.axes["lww"].get_xlim() == (-0.6, 30.6)  # the limits shown are put back
    drawn = []
    for cls in (FigureCanvasAgg, Axis):
        monkeypatch.setattr(cls, "draw", lambda self, *a, cls=cls, d=cls.draw: (
            drawn.append(cls), d(self, *a))[1])  # fmt: skip
    longer = canvas.png(traces, "lww", scale=2, at_least=(40.0, 20.0))  # as a longer run would
    assert drawn == []  # no frame and no tick drawn: restored
    monkeypatch.undo()
    assert canvas.axes["lww"].get_xlim() == (-0.8, 40.8)
    assert longer == FiveDesignsCanvas().png(traces, "lww", scale=2, at_least=(40.0, 20.0))


def test_a_picture_drawn_ahead_is_what_png_gives_and_leaves_the_canvas_as_it_was() -> None:
    clean = {d: simulate(d, [], seed=0) for d in DESIGNS}
    longer = {d: simulate(d, ["stall"], seed=0) for d in DESIGNS}
    room = (10.0, 10.0)
    canvas, fresh = FiveDesignsCanvas(), FiveDesignsCanvas()
    for c in (canvas, fresh):
        c.png(clean, "lww", scale=1, at_least=room)
    shown, start = canvas.axes["lww"].get_xlim(), canvas.start_limits(1, room)
    prepared = canvas.png_ahead(longer, "ballot", scale=1, at_least=room)
    assert prepared.xlim != shown  # the stalled runs grow the axes ...
    assert canvas.axes["lww"].get_xlim() == shown and canvas.start_limits(1, room) == start
    assert canvas.png(clean, "cas", scale=1, at_least=room) == fresh.png(  # ... not the canvas's
        clean, "cas", scale=1, at_least=room
    )
    canvas.png_ahead(longer, "ballot", scale=1, at_least=room)
    assert canvas.adopt(prepared) == fresh.png(longer, "ballot", scale=1, at_least=room)
    assert canvas.axes["lww"].get_xlim() == fresh.axes["lww"].get_xlim() == prepared.xlim
    assert canvas.start_limits(1, room) == fresh.start_limits(1, room)


def test_widget_png_is_a_small_palette_image_that_looks_like_the_full_colour_one(traces):
    canvas = FiveDesignsCanvas()
    small = canvas.png(traces, "ballot")
    full = png_bytes(canvas.fig, dpi=80)
    image = Image.open(io.BytesIO(small))
    assert image.mode == "P" and len(small) < len(full) / 2
    a, b = (np.asarray(Image.open(io.BytesIO(x)).convert("RGB"), dtype=int) for x in (small, full))
    assert a.shape == b.shape
    assert (np.abs(a - b).max(axis=2) > 16).mean() < 0.001


def test_workbench_texts_are_kept_drawn_and_look_as_if_drawn_each_time(monkeypatch) -> None:
    from matplotlib.text import Text

    b = ScheduleBuilder()
    b.load(SCHEDULE_14)
    full = (dict(b.runs), list(b.steps))
    b.undo()
    shorter = (dict(b.runs), list(b.steps))
    kept = WorkbenchCanvas(b.designs)
    kept.kept_pngs = 0  # this test is about the texts: no whole pictures kept
    each_time = WorkbenchCanvas(b.designs)  # the same canvas, its texts drawn on every update
    png = each_time._frames.png
    monkeypatch.setattr(
        each_time._frames,
        "png",
        lambda fig, animated, key, dpi, texts=(), **kw: png(
            fig, [*texts, *animated], key, dpi, **kw
        ),
    )
    drawn: list[Text] = []
    text_draw = Text.draw
    monkeypatch.setattr(Text, "draw", lambda self, r: drawn.append(self) or text_draw(self, r))
    texts_drawn = []
    for runs, steps in (full, shorter, full, shorter):  # deliver, undo, redo, undo
        drawn.clear()
        image = kept.png(runs, steps, "lww")
        texts_drawn.append(len([t for t in drawn if t in kept._texts and t.get_visible()]))
        assert image == each_time.png(runs, steps, "lww")
    assert texts_drawn[0] > texts_drawn[1] > 0 and texts_drawn[2:] == [0, 0]


@pytest.mark.slow
def test_a_rescaled_workbench_canvas_draws_a_short_schedule_as_a_fresh_one_does() -> None:
    """Reset or a new schedule after a long one: the axes fit the new schedule alone (not the
    room the long one needed), drawn on the same figure as a brand-new canvas would draw it."""
    b = ScheduleBuilder()
    b.load(SCHEDULE_14)
    canvas = WorkbenchCanvas(b.designs)
    long_png = canvas.png(b.runs, b.steps, "ballot")
    tall = canvas.fig.get_size_inches()[1]
    b.use_preset("inverted")
    kept = canvas.png(b.runs, b.steps, "ballot")  # without rescale: the long schedule's room
    canvas.rescale()
    short_png = canvas.png(b.runs, b.steps, "ballot")
    assert canvas.fig.get_size_inches()[1] < tall
    assert short_png == WorkbenchCanvas(b.designs).png(b.runs, b.steps, "ballot")
    assert kept != short_png
    b.load(SCHEDULE_14)
    canvas.rescale()
    assert canvas.png(b.runs, b.steps, "ballot") == long_png  # and back, from its frames


def test_every_fall_in_a_head_strip_carries_a_marker() -> None:
    """A fall is a one-version dip in a strip a few dozen pixels tall: each one gets a marker
    where the head landed, and a design that never falls gets none."""
    b = ScheduleBuilder()
    b.use_preset("inverted")
    canvas = WorkbenchCanvas(b.designs)
    canvas.update(b.runs, b.steps, b.designs[0])
    for design, played in b.runs.items():
        xs, ys = canvas.strip_art[design]["falls"].get_data()
        assert list(zip(xs, ys, strict=True)) == [(f.step, f.head) for f in played.falls]
    assert b.runs["callback"].falls and not b.runs["ballot"].falls
