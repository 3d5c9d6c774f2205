"""Part two's figure of pipelined ballots: one run's lanes with the head climbing over them, and
the throughput of `ballot`, `fenced` and `pipelined` as the window W grows.

Each request is a lane at the height of its fence (the version it commits on): a solid bar while
the planner works on it, a dashed one while its answer waits in the hold, and a mark where it
ended (committed, refused, given up or flushed). The head is a black step line: it climbs one
version per commit and a lane ends where the head passes it. Markers carry a `gid`
(``lane-end:<outcome>``, ``head``, ``depth:<design>``) so tests can find them. The figure is
built once (`PipelinedCanvas`); a widget moves new data into it and redraws only the data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from labkit.designs.pipeline_study import (
    COMMITTED,
    COMPARED,
    DEPTHS,
    FLUSHED,
    GAVE_UP,
    IN_FLIGHT,
    REFUSED,
    Lane,
    lanes,
)
from labkit.designs.registry import DISPLAY_NAMES
from labkit.plots.style import (
    COLORS,
    FrameCache,
    design_style,
    new_figure,
    styled,
    workbook_style,
)

HOLD_COLOR = COLORS["hold"]
FLUSH_COLOR = COLORS["flush"]
# Keyword arguments of `Axes.scatter` (and of a legend's `Line2D`), per way a lane ends.
END_STYLE: dict[str, dict[str, Any]] = {
    COMMITTED: {"marker": "o", "s": 26, "color": COLORS["pipelined"]},
    REFUSED: {"marker": "X", "s": 46, "color": COLORS["reject"]},
    GAVE_UP: {"marker": "D", "s": 30, "facecolors": "none", "edgecolors": "black"},
    FLUSHED: {"marker": "s", "s": 26, "color": FLUSH_COLOR},
}
END_LABELS = {
    COMMITTED: "committed",
    REFUSED: "answer refused",
    GAVE_UP: "loop gave up",
    FLUSHED: "flushed (its base was lost)",
}
LATE_LABEL = "answer landed after its lane ended"


def _rows(shown: Sequence[Lane]) -> dict[int, float]:
    """Each lane's height: its fence, nudged up for every earlier ask on the same fence."""
    asks: dict[int, int] = {}
    y = {}
    for lane in shown:
        k = asks.get(lane.fence, 0)
        asks[lane.fence] = k + 1
        y[lane.request_id] = lane.fence + 0.3 + 0.22 * min(k, 2)
    return y


def _points(xy: Sequence[tuple[float, float]]) -> np.ndarray:
    return np.asarray(xy, dtype=float).reshape(-1, 2)


def lane_handles() -> list[Line2D]:
    """The legend of a lanes panel."""
    color = COLORS["pipelined"]
    handles = [
        Line2D([], [], color=color, lw=2.2, label="asked, planner working"),
        Line2D([], [], color=HOLD_COLOR, lw=2.2, ls=(0, (2, 1)), label="answered, held"),
        Line2D([], [], color="black", lw=1.4, label="the head (a reader's view)"),
    ]
    for outcome, style in END_STYLE.items():
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker=style["marker"],
                ms=6,
                color=style.get("color", "black"),
                mfc=style.get("color", "none"),
                label=END_LABELS[outcome],
            )
        )
    handles.append(
        Line2D([], [], ls="", marker="|", ms=8, color=COLORS["reject"], label=LATE_LABEL)
    )
    return handles


class PipelinedCanvas:
    """The figure of one pipelined run beside the depth curve, built once (axes, ticks, labels,
    the depth legend); `update` moves a run and a depth table into its artists, and `png`
    redraws only those on a kept frame (`FrameCache`), so a widget pays for a few artists.

    Each outcome's marks are one scatter (gid ``lane-end:<outcome>``), the lanes two line
    collections (planner working, answer held), the head one step line (gid ``head``) and
    each design one line (gid ``depth:<design>``) with a ring at the chosen W. `legend`
    draws the lanes' legend under the figure (a widget shows `lane_handles` in HTML instead).
    """

    def __init__(
        self,
        width: float = 9.6,
        height: float = 4.2,
        *,
        legend: bool = True,
        title: str = "Pipelined ballots",
        depth_top: float = 1.0,
    ) -> None:
        """`depth_top`: the throughput axis reaches at least this far (a widget passes room for
        its usual curves, so that most of them share one frame)."""
        self._frames = FrameCache()
        self.depth_top = depth_top
        with workbook_style():
            self._build(width, height, legend, title)

    def _build(self, width: float, height: float, legend: bool, title: str) -> None:
        self.fig = fig = new_figure(width, height)
        fig.subplots_adjust(
            left=0.065,
            right=0.98,
            top=1 - 0.59 / height,  # room for two lines of titles, whatever the height
            bottom=0.3 if legend else 0.13,
            wspace=0.28,
        )
        grid = fig.add_gridspec(1, 3)
        self.lanes_ax = ax = fig.add_subplot(grid[0, :2])
        self.depth_ax = depth_ax = fig.add_subplot(grid[0, 2])
        color = COLORS["pipelined"]
        self.working = LineCollection([], colors=color, linewidths=2.2, capstyle="butt", zorder=2)
        self.waiting = LineCollection(
            [], colors=HOLD_COLOR, linewidths=2.2, linestyles=[(0, (2, 1))], zorder=2
        )
        ax.add_collection(self.working)
        ax.add_collection(self.waiting)
        self.ends = {
            outcome: ax.scatter([], [], zorder=4, gid=f"lane-end:{outcome}", **style)
            for outcome, style in END_STYLE.items()
        }
        self.late = ax.scatter([], [], marker="|", s=60, color=COLORS["reject"], zorder=3)
        (self.head,) = ax.plot(
            [], [], drawstyle="steps-post", color="black", lw=1.4, zorder=3, gid="head"
        )
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("simulated time (mean planner latency = 1)")
        ax.set_ylabel("version (a ballot sits on its fence)")
        ax.set_title("Lanes of one run: the head sweeps up the fences", fontsize=9.5)
        if legend:
            ax.legend(
                handles=lane_handles(),
                fontsize=9,
                ncol=4,
                loc="upper left",
                bbox_to_anchor=(0.0, -0.17),
            )
        self.curves: dict[str, Line2D] = {}
        self.rings = {}
        for design in COMPARED:
            (self.curves[design],) = depth_ax.plot(
                [],
                [],
                ms=4,
                label=DISPLAY_NAMES[design],
                **design_style(design),
                gid=f"depth:{design}",
            )
            self.rings[design] = depth_ax.scatter(
                [],
                [],
                s=110,
                facecolors="none",
                edgecolors=COLORS[design],
                linewidths=1.5,
                zorder=4,
            )
        depth_ax.set_xscale("log", base=2)
        depth_ax.set_xlim(DEPTHS[0] / 1.25, DEPTHS[-1] * 1.25)
        depth_ax.set_xticks(list(DEPTHS), [str(w) for w in DEPTHS])
        depth_ax.minorticks_off()
        depth_ax.set_xlabel("W (ballots in flight)")
        depth_ax.set_ylabel("kept versions per time unit")
        depth_ax.legend(fontsize=9, loc="upper left")
        depth_ax.set_title("Throughput on a slow planner", fontsize=9.5)
        self.title = fig.suptitle(title, fontsize=10.5)

    def update(
        self,
        trace: pd.DataFrame,
        depth: pd.DataFrame,
        window: int | None = None,
        title: str | None = None,
        shown: Sequence[Lane] | None = None,
    ) -> list[Lane]:
        """Show the lanes and head of `trace` (a `simulate` trace of `pipelined`; `shown`, its
        `lanes` if already read) and the throughput in `depth` (`pipeline_study.depth_table`),
        `window` ringed; returns the lanes drawn."""
        shown = lanes(trace) if shown is None else shown
        end = float(trace["t"].max())
        y = _rows(shown)
        working, waiting, late = [], [], []
        ends: dict[str, list[tuple[float, float]]] = {outcome: [] for outcome in END_STYLE}
        for lane in shown:
            h = y[lane.request_id]
            stop = lane.ended if lane.ended is not None else end
            answered = (
                lane.answered if lane.answered is not None and lane.answered <= stop else None
            )
            working.append([(lane.sent, h), (stop if answered is None else answered, h)])
            if answered is not None and lane.held:
                waiting.append([(answered, h), (stop, h)])
            if lane.end != IN_FLIGHT:
                ends[lane.end].append((stop, h))
            if lane.answered is not None and lane.answered > stop:  # the answer landed too late
                late.append((lane.answered, h))
        self.working.set_segments(working)
        self.waiting.set_segments(waiting)
        for outcome, points in ends.items():
            self.ends[outcome].set_offsets(_points(points))
        self.late.set_offsets(_points(late))
        heads = trace["head_version"].to_numpy()
        self.head.set_data(
            [0.0, *trace["t"].to_numpy(), end], [0, *heads, int(heads[-1]) if len(heads) else 0]
        )
        # Limits rounded up, so that runs of similar length share a frame (see `png`).
        self.lanes_ax.set_xlim(0, 5 * math.ceil(end / 5) * 1.02)
        self.lanes_ax.set_ylim(-0.2, math.ceil(max([1.0, *y.values()])) + 0.6)
        for design in COMPARED:
            mine = depth[depth["design"] == design]
            self.curves[design].set_data(mine["W"].to_numpy(), mine["throughput"].to_numpy())
            here = mine[mine["W"] == window]
            self.rings[design].set_offsets(
                _points(list(zip(here["W"], here["throughput"], strict=True)))
            )
        top = float(depth["throughput"].max()) * 1.12 if len(depth) else 0.0
        self.depth_ax.set_ylim(0, max(self.depth_top, 2 * math.ceil(top / 2)))
        if title is not None:
            self.title.set_text(title)
        return list(shown)

    def png(self, dpi: int) -> bytes:
        """The figure as it stands after `update`, as widget PNG bytes: the frame (axes, ticks,
        labels) is drawn once per set of limits, the data and the title on top of it."""
        animated = [
            self.working,
            self.waiting,
            *self.ends.values(),
            self.late,
            self.head,
            *self.curves.values(),
            *self.rings.values(),
        ]
        key = (self.lanes_ax.get_xlim(), self.lanes_ax.get_ylim(), self.depth_ax.get_ylim())
        return self._frames.png(self.fig, animated, key, dpi, texts=[self.title])


@styled
def pipelined_figure(
    trace: pd.DataFrame,
    depth: pd.DataFrame,
    title: str = "Pipelined ballots",
    window: int | None = None,
    width: float = 9.6,
    height: float = 4.2,
) -> Figure:
    """Left: one run's lanes and head. Right: throughput against W, `window` ringed
    (`PipelinedCanvas`, with the lanes' legend under it)."""
    canvas = PipelinedCanvas(width, height, legend=True, title=title)
    canvas.update(trace, depth, window)
    return canvas.fig
