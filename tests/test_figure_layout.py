"""No figure is cut at its edge: every text a figure draws lies inside its canvas.

Each docs figure (`labkit.docs.figure_specs.SPECS`) and each benchmark figure (redrawn from its
committed CSV by the benchmark's own `plot(rows)`; one without is skipped, saying so) is drawn
on an Agg canvas; every Text artist the draw actually rendered (titles, axis labels, tick
labels, legend texts, annotations) must have its window extent inside `fig.bbox`. Saving never
uses `bbox_inches`, so text outside the canvas is text the reader does not see.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from unittest import mock

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation, Text

from benchmarks.__main__ import NAMES as BENCHMARKS
from benchmarks.common import FIGURES, figure_from_csv
from labkit.docs.figure_specs import SPECS
from labkit.plots.style import new_figure, workbook_style

# Sub-pixel rounding of glyph extents is not a cut; half a pixel is.
TOLERANCE_PX = 0.5


@dataclass(frozen=True)
class Overflow:
    """One drawn text outside the canvas: what it is, and by how many pixels on which side."""

    role: str
    text: str
    side: str
    pixels: float

    def __str__(self) -> str:
        return f"{self.role} {self.text!r} overflows the {self.side} edge by {self.pixels:.1f} px"


def _role(text: Text, fig: Figure) -> str:
    """Name a text by the part of the figure it belongs to, for the failure message."""
    if text is getattr(fig, "_suptitle", None):
        return "suptitle"
    for legend in fig.findobj(Legend):
        if text in legend.get_texts() or text is legend.get_title():
            return "legend text"
    for ax in fig.axes:
        if text in (ax.title, ax._left_title, ax._right_title):
            return "axes title"
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if text is axis.label:
                return f"{name}-label"
            if text is axis.offsetText:
                return f"{name} offset text"
            ticks = axis.get_major_ticks() + axis.get_minor_ticks()
            if any(text in (tick.label1, tick.label2) for tick in ticks):
                return f"{name} tick label"
    return "annotation" if isinstance(text, Annotation) else "text"


def drawn_texts(fig: Figure) -> list[Text]:
    """Draw `fig` on an Agg canvas and return the non-empty texts the draw rendered.

    Recording `Text.draw` leaves out texts that exist but are never drawn (tick labels of
    ticks outside the view limits, clipped annotations), whose stale positions mean nothing.
    """
    drawn: list[Text] = []
    real_draw = Text.draw

    def recording_draw(self: Text, renderer: object) -> None:
        real_draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)

    canvas = FigureCanvasAgg(fig)
    with workbook_style(), mock.patch.object(Text, "draw", recording_draw):
        canvas.draw()
    return drawn


def overflows(fig: Figure) -> list[Overflow]:
    """Every drawn text whose rendered bounding box leaves the canvas, worst side each."""
    texts = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    found = []
    for text in texts:
        box = text.get_window_extent(renderer)
        sides = {
            "left": canvas.x0 - box.x0,
            "right": box.x1 - canvas.x1,
            "bottom": canvas.y0 - box.y0,
            "top": box.y1 - canvas.y1,
        }
        side, pixels = max(sides.items(), key=lambda kv: kv[1])
        if pixels > TOLERANCE_PX:
            found.append(Overflow(_role(text, fig), text.get_text(), side, pixels))
    return found


def _report(name: str, found: list[Overflow]) -> str:
    return f"{name}: " + "; ".join(str(o) for o in found)


def _bench_figure(name: str) -> Callable[[], Figure]:
    def build() -> Figure:
        fig = figure_from_csv(name, FIGURES)
        if fig is None:
            pytest.skip(f"benchmarks.{name} has no plot(rows): its figure needs a measuring run")
        return fig

    return build


FIGURE_BUILDS: dict[str, Callable[[], Figure]] = {
    **{spec.name: (lambda spec=spec: spec.draw()[0]) for spec in SPECS},
    **{f"bench_{name}": _bench_figure(name) for name in BENCHMARKS},
}


# Part three's docs figures are drawn from runs on a real server (labkit.pg.shared_server).
PG_SPECS = {spec.name for spec in SPECS if "shared_server" in inspect.getsource(spec.build)}
LAYOUT_RUNS = [
    pytest.param(name, marks=[pytest.mark.postgres] if name in PG_SPECS else [])
    for name in FIGURE_BUILDS
]


@pytest.mark.parametrize("name", LAYOUT_RUNS)
def test_every_text_lies_inside_the_canvas(name: str) -> None:
    found = overflows(FIGURE_BUILDS[name]())
    assert not found, _report(name, found)


def test_the_check_reports_a_cut_legend_and_label() -> None:
    """The check can fail: a legend pushed past the right edge and a y-label past the left."""
    fig = new_figure(4.0, 3.0)
    ax = fig.add_axes((0.02, 0.15, 0.7, 0.7))
    ax.add_patch(Rectangle((0, 0), 1, 1, label="a long legend entry that cannot fit"))
    ax.set_ylabel("seconds per call")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    found = {(o.role, o.side) for o in overflows(fig)}
    assert ("legend text", "right") in found
    assert ("y-label", "left") in found
    assert ("y tick label", "left") in found


def test_the_check_ignores_tick_labels_outside_the_view() -> None:
    """Tick labels matplotlib keeps for ticks beyond the limits are never drawn: not a cut."""
    fig = new_figure(4.0, 3.0)
    ax = fig.add_axes((0.1, 0.2, 0.85, 0.7))
    ax.plot([0, 10], [0, 10])
    ax.set_xticks(range(-20, 31, 5))
    ax.set_xlim(0, 10)
    drawn = drawn_texts(fig)
    kept = [t for t in ax.xaxis.get_ticklabels() if t.get_text() in ("-20", "\N{MINUS SIGN}20")]
    assert kept and not set(kept) & set(drawn), "matplotlib no longer keeps out-of-view labels"
    assert not overflows(fig)
