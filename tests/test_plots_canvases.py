"""Part two's stateful canvases: an update moves the marks, and a blitted redraw looks like a
full one (or changes where the data changed)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from labkit.designs.design import DESIGNS
from labkit.designs.schedule_builder import ScheduleBuilder
from labkit.designs.schedules import Step
from labkit.designs.simulator import simulate
from labkit.plots.part2_canvases import FiveDesignsCanvas, WorkbenchCanvas
from labkit.plots.style import png_bytes


@pytest.fixture(scope="module")
def traces() -> dict[str, pd.DataFrame]:
    return {d: simulate(d, ["inverted", "duplicate"], seed=0) for d in DESIGNS}


def test_canvas_update_moves_the_markers(traces) -> None:
    canvas = FiveDesignsCanvas()
    canvas.update(traces, "ballot")
    clean = {d: simulate(d, [], seed=0) for d in DESIGNS}
    canvas.update(clean, "fenced")
    (marks,) = [a for ax in canvas.fig.axes for a in ax.get_children()
                if a.get_gid() == "rewind:callback"]
    assert len(marks.get_offsets()) == 0
    assert "0 rewinds" in canvas.axes["callback"].get_title()


def test_blitted_png_matches_a_full_draw(traces) -> None:
    canvas = FiveDesignsCanvas()
    canvas.png(traces, "lww")  # renders and caches the frame (same limits as the next call)
    blitted = canvas.png(traces, "ballot")  # restored frame + redrawn traces, titles, spines
    fresh = FiveDesignsCanvas()
    fresh.fig.set_dpi(80)
    full = png_bytes(fresh.update(traces, "ballot", nice_limits=True), dpi=80)
    a, b = (np.asarray(Image.open(io.BytesIO(x)).convert("RGB"), dtype=int) for x in (blitted, full))
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
