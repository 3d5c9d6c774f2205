"""Part two's stateful canvases, which widgets redraw in place, and the trace marks they share
with the figures in `labkit.plots.catalog`.

`FiveDesignsCanvas` holds one `simulate` trace per design as small multiples; `WorkbenchCanvas`
draws a `ScheduleBuilder`'s runs (the focus design's requests as lanes, every design's head).
Each is built once: an update moves data into existing artists and `FrameCache` redraws only
those, so a widget pays for a few artists, not for axes and tick labels. Markers carry a `gid`
(``rewind:<design>``, ``reject:<design>``, ``head:<design>``) so tests can find them.
"""

from __future__ import annotations

import math
import pickle
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import Collection, LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text

from labkit.designs.registry import DESIGNS, DISPLAY_NAMES
from labkit.designs.schedule_builder import DUPLICATE, GAVE_UP, SETTLED, DesignRun
from labkit.designs.schedules import Step
from labkit.plots.style import (
    COLORS,
    DESIGN_MARKS,
    FrameCache,
    design_style,
    new_figure,
    workbook_style,
)

# Legend labels; `DISPLAY_NAMES` (labkit.designs.registry) are the short names panel titles use.
DESIGN_LABELS = {
    "callback": "write in callback",
    "lww": "last-write-wins (updated_at)",
    "ballot": "single ballot + watermark",
    "fenced": "hedged ballots (W on one head)",
    "cas": "compare-and-set, no ballot",
    "pipelined": "W ballots in flight, in order",
}
REWIND_COLOR = COLORS["rewind"]

Traces = Mapping[str, pd.DataFrame]
Limits = tuple[float, float]


@dataclass(frozen=True)
class Prepared:
    """A picture `FiveDesignsCanvas.png` would give, drawn ahead (`png_ahead`), and the axes
    limits it leaves: `adopt` shows it as if `png` had drawn it then."""

    png: bytes
    scale: object
    xlim: Limits
    ylim: Limits


def as_traces(traces: Traces | pd.DataFrame) -> dict[str, pd.DataFrame]:
    """`traces` by design, in `DESIGNS` order (a single trace is keyed by its design)."""
    if isinstance(traces, pd.DataFrame):
        return {str(traces["design"].iloc[0]): traces}
    return {d: traces[d] for d in (*DESIGNS, *traces) if d in traces}


_EMPTY_TRACE = pd.DataFrame(
    {"t": [], "event": [], "committed": [], "head_version": [], "rewind": []}
)


def _trace_artists(ax: Axes, design: str) -> dict[str, Any]:
    """Empty artists for one design's trace, filled in by `_set_trace`."""
    color = COLORS.get(design, "#444444")
    (line,) = ax.step(
        [],
        [],
        where="post",
        color=color,
        ls=DESIGN_MARKS.get(design, {}).get("ls", "-"),
        lw=2.0,
        label=DESIGN_LABELS.get(design, design),
        gid=f"trace:{design}",
    )
    rejects = ax.scatter(
        [], [], marker="|", s=70, color=COLORS["reject"], zorder=3, gid=f"reject:{design}"
    )
    rewinds = ax.scatter(
        [],
        [],
        marker="v",
        s=90,
        color=REWIND_COLOR,
        edgecolors="black",
        linewidths=0.6,
        zorder=5,
        gid=f"rewind:{design}",
    )
    return {"line": line, "rejects": rejects, "rewinds": rewinds}


def _xy(frame: pd.DataFrame, mask: np.ndarray | None = None) -> np.ndarray:
    """(t, head_version) points of `frame`, optionally only rows where `mask` holds.

    Masks numpy arrays rather than filtering the DataFrame: a widget redraws every trace on
    every change and a DataFrame filter costs more than the drawing.
    """
    xy = np.column_stack(
        [frame["t"].to_numpy(dtype=float), frame["head_version"].to_numpy(dtype=float)]
    ).reshape(-1, 2)
    return xy if mask is None else xy[mask]


def _set_trace(artists: dict[str, Any], trace: pd.DataFrame, *, faint: bool = False) -> np.ndarray:
    """Point one design's artists at `trace`: head line, rejected responses, rewinds; returns
    the trace's (t, head_version) points."""
    xy = _xy(trace)
    artists["line"].set_data(xy[:, 0], xy[:, 1])
    artists["line"].set_linewidth(1.0 if faint else 2.0)
    artists["line"].set_alpha(0.35 if faint else 1.0)
    events = trace["event"].to_numpy()
    committed = trace["committed"].to_numpy()
    rejected = (events == "deliver") & (committed == False)  # noqa: E712 (None = no decision)
    artists["rejects"].set_offsets(xy[rejected])
    artists["rejects"].set_alpha(0.5 if faint else 0.9)
    artists["rewinds"].set_offsets(xy[falls(trace)])
    return xy


def falls(trace: pd.DataFrame) -> np.ndarray:
    """Where the reader saw the head go down: each fall once, as `summarize_run` counts them
    (a head that stays low for several events is one fall)."""
    head = trace["head_version"].to_numpy(dtype=float)
    mask = np.zeros(len(head), dtype=bool)
    mask[1:] = head[1:] < head[:-1]
    return mask


def draw_trace(ax: Axes, trace: pd.DataFrame, design: str, *, faint: bool = False) -> None:
    """One design's head as the reader sees it, falls as red down-arrows, rejects as ticks."""
    _set_trace(_trace_artists(ax, design), trace, faint=faint)
    ax.update_datalim(_xy(trace))
    ax.autoscale_view()


def marker_handles() -> list[Line2D]:
    """Legend entries for the marks `draw_trace` puts on a head line."""
    return [
        Line2D(
            [],
            [],
            ls="",
            marker="v",
            ms=8,
            color=REWIND_COLOR,
            mec="black",
            label="fall seen by the reader",
        ),
        Line2D([], [], ls="", marker="|", ms=9, color=COLORS["reject"], label="response rejected"),
    ]


def _panel_title(design: str, trace: pd.DataFrame) -> str:
    """The design, the commits and the falls its reader saw (as `summarize_run` counts them)."""
    n_falls = int(falls(trace).sum())
    parts = []
    if "head_changed" in trace:
        parts.append(f"{int(trace['head_changed'].sum())} commits")
    parts.append(f"{n_falls} fall{'s' if n_falls != 1 else ''}")
    return f"{DISPLAY_NAMES.get(design, design)}\n{' · '.join(parts)}"


class FiveDesignsCanvas:
    """Small multiples sharing both axes, one `simulate` trace per design (2x3 or 1x5).

    Built once; `update` swaps the data and the highlight in place, so a widget redraw pays
    for rasterising only, not for building axes and ticks again. `highlight` draws that
    design's panel with a thick frame in its colour and the others faint.
    """

    def __init__(
        self,
        designs: Sequence[str] = DESIGNS,
        title: str = "Five designs, one planner, one fault trace",
        ncols: int = 3,
        width: float = 8.0,
        height: float = 4.8,
        live_titles: bool = True,
    ) -> None:
        """`live_titles=False` keeps each panel's title to its design name, drawn once with the
        frame: text is the dearest thing to rasterise, and a widget shows the counts in its
        metrics table anyway."""
        if not designs:
            raise ValueError("FiveDesignsCanvas needs at least one design")
        self.designs = list(designs)
        self.live_titles = live_titles
        self._frames = FrameCache()
        self._limits: dict[object, tuple[float, float]] = {}
        with workbook_style():
            self._build(title, ncols, width, height)

    def _build(self, title: str, ncols: int, width: float, height: float) -> None:
        nrows = -(-len(self.designs) // ncols)
        self.fig = fig = new_figure(width, height)
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
        spare_slot = nrows * ncols > len(self.designs)
        fig.subplots_adjust(
            left=0.08,
            right=0.98,
            top=0.84 if self.live_titles else 0.86,
            bottom=0.12 if spare_slot else 0.2,
            hspace=0.55 if self.live_titles else 0.34,
            wspace=0.08,
        )
        flat = list(axes.flat)
        self.axes = dict(zip(self.designs, flat, strict=False))
        spare = flat[len(self.designs) :]
        for k, ax in enumerate(spare, start=len(self.designs)):
            ax.set_visible(False)
            if k >= ncols:  # the panel above an empty slot shows the time axis itself
                flat[k - ncols].xaxis.set_tick_params(labelbottom=True)
                flat[k - ncols].set_xlabel("simulated time")
        if not self.live_titles:
            for design, ax in self.axes.items():
                ax.set_title(DISPLAY_NAMES.get(design, design), fontsize=9, pad=4)
        self.artists = {d: _trace_artists(ax, d) for d, ax in self.axes.items()}
        for ax in axes[-1]:
            ax.set_xlabel("simulated time")
        for ax in axes[:, 0]:
            ax.set_ylabel("head version")
        fig.suptitle(title, fontsize=11)
        design_handles = [
            Line2D([], [], lw=2, label=DESIGN_LABELS.get(d, d), **design_style(d))
            for d in self.designs
        ]
        handles = [*design_handles, *marker_handles()]
        if spare:  # the legend fills the first empty slot
            box = spare[0].get_position()
            fig.legend(
                handles=handles,
                loc="center",
                fontsize=9,
                bbox_to_anchor=(box.x0 + box.width / 2, box.y0 + box.height / 2),
            )
        else:
            fig.legend(
                handles=handles, loc="lower center", ncols=3, fontsize=9, bbox_to_anchor=(0.5, 0.0)
            )

    def update(
        self,
        traces: Traces,
        highlight: str | None = None,
        *,
        nice_limits: bool = False,
        at_least: tuple[float, float] = (1.0, 1.0),
    ) -> Figure:
        """Show `traces` (design -> simulate trace), emphasising `highlight`; returns the figure.

        `nice_limits` rounds the shared axes' upper limits up (time to a multiple of 10,
        versions to a multiple of 5) and `at_least` keeps them from shrinking, so that
        consecutive updates often share the same frame (see `png`).
        """
        xmax, ymax = at_least
        for design, ax in self.axes.items():
            trace = traces.get(design)
            faint = highlight is not None and design != highlight
            if trace is None:
                trace = _EMPTY_TRACE
            xy = _set_trace(self.artists[design], trace, faint=faint)
            if len(trace):  # nanmax: NaN skipped, as a Series' max skips it
                xmax = max(xmax, float(np.nanmax(xy[:, 0])))
                ymax = max(ymax, float(np.nanmax(xy[:, 1])))
            mine = design == highlight
            if self.live_titles:
                ax.set_title(
                    _panel_title(design, trace),
                    fontsize=9,
                    y=1.0,
                    pad=4,
                    fontweight="bold" if mine else "normal",
                    color="#555555" if faint else "black",
                )
            for spine in ax.spines.values():
                spine.set_visible(mine or spine.spine_type in ("left", "bottom"))
                spine.set_color(COLORS.get(design, "black") if mine else "black")
                spine.set_linewidth(2.2 if mine else 0.8)
        if nice_limits:
            xmax, ymax = 10.0 * math.ceil(xmax / 10.0), 5.0 * math.ceil((ymax + 0.5) / 5.0) - 1.2
        self._set_limits((-0.02 * xmax, xmax * 1.02), (-0.8, ymax + 1.2))
        return self.fig

    def _set_limits(self, xlim: Limits, ylim: Limits) -> None:
        first = next(iter(self.axes.values()))
        if first.get_xlim() != xlim:  # the shared axes' callbacks run only on a real change
            first.set_xlim(*xlim)
        if first.get_ylim() != ylim:
            first.set_ylim(*ylim)

    def _dynamic(self) -> list[Any]:
        """Artists that change between updates with the same limits and highlight."""
        found: list[Any] = []
        for design, ax in self.axes.items():
            titles = [ax.title] if self.live_titles else []
            found += [*titles, *self.artists[design].values()]
        return found

    def png(
        self,
        traces: Traces,
        highlight: str | None = None,
        dpi: int = 80,
        scale: object = None,
        at_least: tuple[float, float] = (1.0, 1.0),
    ) -> bytes:
        """`update` and render to PNG bytes, redrawing only what changed (`FrameCache`).

        The frame (axes, ticks, legend) is rendered once per (limits, dpi), and new limits
        redraw only the ticks on the rest, which is kept; the spines of a highlight are kept
        drawn on it. Each call restores that and draws the traces (and live titles) on top, so
        a widget pays for a few artists instead of every panel's tick labels. While `scale`
        (e.g. the latency setting) stays the same the limits only grow, so new seeds mostly
        reuse the frame; `at_least` is where they start (room for a typical run).
        """
        floor = self.start_limits(scale, at_least)
        with workbook_style():
            self.update(traces, highlight, nice_limits=True, at_least=floor)
        self._remember(scale)
        first = next(iter(self.axes.values()))
        key = (first.get_xlim(), first.get_ylim(), dpi)
        return self._frames.png(
            self.fig,
            self._dynamic(),
            key,
            dpi,
            ticks=self._ticks(),
            steady=[spine for ax in self.axes.values() for spine in ax.spines.values()],
            steady_key=highlight,
        )

    def start_limits(self, scale: object, at_least: Limits = (1.0, 1.0)) -> Limits:
        """The limits a `png` with this `scale` and `at_least` starts from now: with the scale
        unchanged, those the last picture reached."""
        return self._limits.get(scale, at_least)

    def _remember(self, scale: object) -> None:
        first = next(iter(self.axes.values()))
        self._limits = {scale: (first.get_xlim()[1] / 1.02, first.get_ylim()[1] - 1.2)}

    def png_ahead(
        self,
        traces: Traces,
        highlight: str | None = None,
        dpi: int = 80,
        scale: object = None,
        at_least: Limits = (1.0, 1.0),
    ) -> Prepared:
        """What `png` with these arguments would give now, drawn while a widget's kernel is
        idle; the limits shown and where the next `png` starts are put back, so the canvas
        goes on as if nothing had been drawn (only its kept frames may have grown)."""
        first = next(iter(self.axes.values()))
        kept, xlim, ylim = self._limits, first.get_xlim(), first.get_ylim()
        try:
            made = self.png(traces, highlight, dpi, scale, at_least)
            return Prepared(made, scale, first.get_xlim(), first.get_ylim())
        finally:
            self._limits = kept
            with workbook_style():
                self._set_limits(xlim, ylim)

    def adopt(self, prepared: Prepared) -> bytes:
        """Show `prepared`: take the limits its `png` would have left (as `png` does) and return
        its bytes. The traces drawn stay whatever was drawn last; every `png` replaces them."""
        with workbook_style():
            self._set_limits(prepared.xlim, prepared.ylim)
        self._remember(prepared.scale)
        return prepared.png

    def _ticks(self) -> list[Any]:
        return [axis for ax in self.axes.values() for axis in (ax.xaxis, ax.yaxis)]

    def draw_ahead(self, dpi: int = 80) -> bool:
        """Draw and keep the frame a run longer than the time axis would need next (the axis
        one step of 10 longer, as `png` rounds it), then put the limits back. A widget calls it
        while its kernel is idle, so the seed that outlasts the axis restores a frame instead
        of drawing one. False (nothing drawn) if there is no frame yet or it is kept already."""
        first = next(iter(self.axes.values()))
        if not self._limits:
            return False
        xlim, ylim = first.get_xlim(), first.get_ylim()
        longer = 10.0 * (round(xlim[1] / 1.02 / 10.0) + 1)
        ahead = (-0.02 * longer, longer * 1.02)
        if self._frames.has((ahead, ylim, dpi), dpi):
            return False
        with workbook_style():
            first.set_xlim(*ahead)
            try:
                self._frames.keep(self.fig, (first.get_xlim(), ylim, dpi), dpi, self._ticks())
            finally:
                first.set_xlim(*xlim)
        return True


# --- the arrival-order workbench: lanes over the head, per design ------------------------

# Inches: a lane, a head strip, above and below the axes. The whole app fits a 1280x800
# screen with six designs (tests/browser/test_widgets_fit.py).
_LANE_H, _STRIP_H, _TOP, _BOTTOM = 0.26, 0.45, 0.32, 0.74
_LANES_STEP, _STEPS_STEP = 3, 4  # the rooms for lanes (a taller figure) and steps grow so
AHEAD_HEIGHTS = 2  # taller figures whose frame an idle kernel draws ahead (a 15-step schedule)
KEPT_PNGS = 32  # workbench pictures kept per canvas, by what they show
_LANE_MARKS: dict[str, dict[str, Any]] = {  # key -> Line2D style for one kind of lane marker
    "commit": {"marker": "o", "ms": 8},
    "dup": {"marker": "P", "ms": 9, "mec": "white"},
    "reject": {"marker": "X", "ms": 8, "color": COLORS["reject"]},
    "gave_up": {"marker": "D", "ms": 6, "mfc": "white", "mew": 1.5},
    "flying": {"marker": ">", "ms": 6},
    "held": {"marker": "s", "ms": 7, "mfc": "white", "mew": 1.5},
    "flushed": {"marker": r"$\circlearrowleft$", "ms": 10, "color": COLORS["reject"]},
}


def _room(value: int, floor: int, step: int) -> int:
    """`value` rounded up to a multiple of `step`, at least `floor` (stable axes, rare redraws)."""
    return max(floor, step * -(-value // step))


class _TextPool:
    """Reusable Text artists on one axes: creating text is dear, moving it is not."""

    def __init__(self, ax: Axes, **style: Any) -> None:
        self.ax, self.style, self.used = ax, style, 0
        self.texts: list[Text] = []

    def reset(self) -> None:
        for text in self.texts:
            text.set_visible(False)
        self.used = 0

    def put(self, x: float, y: float, text: str, **style: Any) -> None:
        if self.used == len(self.texts):
            self.texts.append(self.ax.text(0, 0, "", **self.style))
        artist = self.texts[self.used]
        artist.set_position((x, y))
        artist.set_text(text)
        artist.set_visible(True)
        artist.update(style)
        self.used += 1


def _draws_nothing(artist: Any) -> bool:
    """True for an artist with nothing to draw: hidden, or a line or collection with no
    points, segments or shapes (most of the workbench's marks in a short schedule)."""
    if not artist.get_visible():
        return True
    if isinstance(artist, Line2D):
        return np.size(artist.get_xdata()) == 0
    if isinstance(artist, Collection):
        return len(artist.get_paths()) == 0
    return False


def _below_boxes(heads: np.ndarray, seen: np.ndarray, xs: np.ndarray) -> list[np.ndarray]:
    """One rectangle per step where the head is below the last-seen version."""
    return [
        np.array([[xs[i], heads[i]], [xs[i + 1], heads[i]], [xs[i + 1], seen[i]], [xs[i], seen[i]]])
        for i in range(len(xs) - 1)
        if heads[i] < seen[i]
    ]


class WorkbenchCanvas:
    """The workbench picture: the focus design's requests as lanes (send -> arrival), above
    one strip per design with the catalog head over the steps. For `pipelined` a lane also
    shows an answer held (a hollow square), its wait until the step its fence is reached
    (dashed, ending at the commit or refusal) and a flush (its tick replayed).

    The frame (axes, ticks, legend, and every artist, empty) depends only on the room the
    schedule needs (steps, lanes, versions, rounded up, never shrinking); an update moves data
    into those artists and `FrameCache` redraws only them. Below the ticks and spines the frame
    depends only on the figure's height (`draw_ahead` draws it for taller figures while a
    widget's kernel is idle). The lanes' title, the figure's title, lane names, notes and step
    names are kept drawn per text (`FrameCache`'s `texts`). The last `KEPT_PNGS` pictures are
    kept whole (`pngs`), keyed by everything they show, so an undo or a step taken again costs
    no drawing.
    """

    def __init__(
        self, designs: Sequence[str], width: float = 8.8, rooms: tuple[int, int, int] = (0, 0, 0)
    ) -> None:
        """`rooms`: the room to start from (another canvas's `rooms`, to draw as it did)."""
        self.designs = list(designs)
        self.width = width
        self.fig: Figure | None = None
        self._rooms = rooms  # lanes, steps, versions the axes have room for
        self._frames = FrameCache(bases=1 + AHEAD_HEIGHTS)
        self.pngs: OrderedDict[tuple, bytes] = OrderedDict()
        self.kept_pngs = KEPT_PNGS
        self._dynamic: list[Any] = []
        self._texts: list[Any] = []

    # --- frame ---------------------------------------------------------------------------

    def _heights(self, lanes_room: int) -> tuple[float, list[float]]:
        """Figure height (inches) and the grid's height ratios for `lanes_room` lanes."""
        lanes_h = _LANE_H * lanes_room + 0.35
        height = _TOP + lanes_h + _STRIP_H * len(self.designs) + _BOTTOM
        return height, [lanes_h, *[_STRIP_H] * len(self.designs)]

    def _build(self, lanes_room: int) -> None:
        """A new figure tall enough for `lanes_room` lanes, with every artist (empty)."""
        height, ratios = self._heights(lanes_room)
        fig = new_figure(self.width, height)
        self._grid = grid = fig.add_gridspec(
            1 + len(self.designs),
            1,
            height_ratios=ratios,
            left=0.17,
            right=0.75,
            top=1 - _TOP / height,
            bottom=_BOTTOM / height,
            hspace=0.38,
        )
        self.lanes_ax = lanes = fig.add_subplot(grid[0])
        self.strips = {
            d: fig.add_subplot(grid[i + 1], sharex=lanes) for i, d in enumerate(self.designs)
        }
        lanes.set_ylim(lanes_room - 0.4, -0.7)
        lanes.set_yticks([])
        lanes.grid(False, axis="y")
        lanes.set_ylabel("requests")
        self.lanes_title = lanes.set_title(" ", loc="left", fontsize=10, fontweight="bold")
        for design, ax in self.strips.items():
            ax.tick_params(axis="y", labelsize=9)
            ax.set_ylabel(
                f"{design}\nhead",
                rotation=0,
                ha="right",
                va="center",
                fontsize=9,
                color=COLORS.get(design, "#444444"),
                fontweight="bold",
            )
            ax.tick_params(axis="x", labelbottom=False)
        lanes.tick_params(axis="x", labelbottom=False)
        self.strips[self.designs[-1]].set_xlabel("step", fontsize=9, labelpad=26)
        # no figure title: the lanes' title and the strips' labels say what each part shows,
        # and the height goes to the strips
        self.suptitle = fig.suptitle("", fontsize=10)
        lanes.legend(
            handles=self._legend(),
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),  # below the lanes title, which may run long
            fontsize=9,
            handlelength=1.6,
            labelspacing=0.3,
        )
        self.fig = fig
        self._make_artists("#555555")

    def _grow(self, lanes_room: int) -> None:
        """Make the figure tall enough for `lanes_room` lanes in place: the same picture as a
        `_build`, without building six axes and every artist again (~40% of a cold update)."""
        assert self.fig is not None, "only a built figure grows"
        height, ratios = self._heights(lanes_room)
        self.fig.set_size_inches(self.width, height)
        self._grid.set_height_ratios(ratios)
        self._grid.update(top=1 - _TOP / height, bottom=_BOTTOM / height)
        for ax in self.fig.axes:
            spec = ax.get_subplotspec()  # every axes here sits on the grid
            if spec is not None:
                ax.set_subplotspec(spec)  # puts the axes where the grid now says
        self.lanes_ax.set_ylim(lanes_room - 0.4, -0.7)

    def _set_rooms(self, steps_room: int, head_room: int) -> None:
        """Axes limits for `steps_room` steps and versions up to `head_room` (no new artists)."""
        self.lanes_ax.set_xlim(-0.6, steps_room + 0.6)
        self.strips[self.designs[-1]].set_xticks(range(steps_room + 1))
        for ax in self.strips.values():
            ax.set_ylim(-0.6, head_room + 0.6)
            ax.set_yticks([0, head_room])  # two labels: more would touch in a strip this short

    def _legend(self) -> list[Any]:
        grey = "#555555"
        held = (
            [
                Line2D(
                    [],
                    [],
                    ls="",
                    marker="s",
                    ms=7,
                    mfc="white",
                    mec=grey,
                    mew=1.5,
                    label="arrived early: held",
                ),
                Line2D([], [], color=grey, ls="--", lw=1.2, label="held until its fence"),
                Line2D(
                    [],
                    [],
                    ls="",
                    marker=r"$\circlearrowleft$",
                    ms=10,
                    color=COLORS["reject"],
                    label="flushed: tick replayed",
                ),
            ]
            if "pipelined" in self.designs
            else []
        )
        return [
            Line2D([], [], color=grey, lw=3, alpha=0.55, label="request travelling"),
            Line2D([], [], ls="", marker="o", ms=7, color=grey, label="arrived, committed"),
            Line2D(
                [], [], ls="", marker="X", ms=7, color=COLORS["reject"], label="arrived, rejected"
            ),
            Line2D(
                [],
                [],
                ls="",
                marker="P",
                ms=8,
                color=grey,
                mec="white",
                label="duplicate, committed",
            ),
            Line2D(
                [], [], ls="", marker="D", ms=6, mfc="white", mec=grey, label="loop gave up on it"
            ),
            Line2D([], [], ls="", marker=">", ms=6, color=grey, label="still in flight"),
            Line2D([], [], color=grey, ls=":", lw=1.2, label="late or repeated"),
            *held,
            Line2D([], [], color=grey, lw=1.8, label="catalog head"),
            Line2D([], [], color="#777777", ls=":", lw=1, label="highest version seen"),
            Patch(color=REWIND_COLOR, alpha=0.3, label="reader sees older catalog"),
            Line2D(
                [],
                [],
                ls="",
                marker="o",
                ms=5,
                mfc="white",
                mec="#888888",
                label="step n/a for design",
            ),
            Line2D([], [], color="black", ls="--", lw=1, label="loop crashed + restarted"),
        ]

    def _make_artists(self, color: str) -> None:
        """Every data artist, empty; `update` fills them in."""
        lanes = self.lanes_ax
        self.bars = LineCollection(
            [], colors=color, linewidths=3, alpha=0.55, capstyle="butt", gid="lanes"
        )
        self.lane_color = color
        self.tails = LineCollection([], colors=color, linewidths=1.2, linestyles=":")
        self.waits = LineCollection(
            [], colors=color, linewidths=1.2, linestyles="--", gid="held_waits"
        )
        lanes.add_collection(self.bars)
        lanes.add_collection(self.tails)
        lanes.add_collection(self.waits)
        self.marks = {
            k: lanes.plot([], [], ls="", **{"color": color, **style}, gid=f"lane_mark:{k}")[0]
            for k, style in _LANE_MARKS.items()
        }
        self.lane_names = _TextPool(lanes, ha="right", va="center", fontsize=9)
        self.notes = _TextPool(lanes, fontsize=9, color="#444444")
        self.crash_lines = {}
        self.strip_art: dict[str, dict[str, Any]] = {}
        for design, ax in [("lanes", lanes), *self.strips.items()]:
            self.crash_lines[design] = LineCollection(
                [],
                colors="black",
                linestyles="--",
                linewidths=1,
                transform=ax.get_xaxis_transform(),
            )
            ax.add_collection(self.crash_lines[design])
        for design, ax in self.strips.items():
            dcolor = COLORS.get(design, "#444444")
            below = PolyCollection([], facecolors=REWIND_COLOR, alpha=0.45, linewidths=0)
            ax.add_collection(below)
            fall = ax.annotate(
                "",
                xy=(0, 0),
                xytext=(0, 0),
                fontsize=9,
                color=REWIND_COLOR,
                fontweight="bold",
                gid=f"fall:{design}",
                arrowprops={"arrowstyle": "->", "color": REWIND_COLOR},
            )
            self.strip_art[design] = {
                "seen": ax.step([], [], where="post", color="#777777", ls=":", lw=1.0)[0],
                "below": below,
                "head": ax.step([], [], where="post", color=dcolor, lw=1.8, gid=f"head:{design}")[
                    0
                ],
                "skipped": ax.plot([], [], ls="", marker="o", ms=5, mfc="white", mec="#888888")[0],
                # every fall a reader saw, marked where the head landed: visible projected,
                # where a one-version dip in a strip this short is not
                "falls": ax.plot(
                    [],
                    [],
                    ls="",
                    marker="v",
                    ms=10,
                    color=REWIND_COLOR,
                    mec="white",
                    mew=0.8,
                    gid=f"falls:{design}",
                )[0],
                "fall": fall,
            }
        last = self.strips[self.designs[-1]]
        self.step_names = _TextPool(
            last,
            rotation=30,
            ha="right",
            va="top",
            fontsize=9,
            transform=last.get_xaxis_transform(),
        )

    # --- data ----------------------------------------------------------------------------

    def _fill_lanes(self, run: DesignRun, now: int) -> None:
        bars, tails, waits = [], [], []
        points: dict[str, list[tuple[float, float]]] = {k: [] for k in _LANE_MARKS}
        self.lane_names.reset()
        self.notes.reset()
        order = sorted(run.lanes.values(), key=lambda ln: (ln.sent_at, ln.request_id))
        for y, lane in enumerate(order):
            arrived, gave_up, flushed = lane.arrived_at, lane.gave_up_at, lane.flushed_at
            end = min(x for x in (arrived, gave_up, flushed, now) if x is not None)
            bars.append([(lane.sent_at, y), (end, y)])
            if arrived is None and gave_up is None and flushed is None:
                points["flying"].append((end, y))
            if lane.held_at is not None:  # the wait from the hold to its decision (or flush)
                settled = lane.settled
                until = settled.step if settled is not None else flushed
                waits.append([(lane.held_at, y), (now if until is None else until, y)])
            if flushed is not None:
                points["flushed"].append((flushed, y))
                if arrived is not None and arrived > flushed:
                    tails.append([(flushed, y), (arrived, y)])
                self.notes.put(flushed + 0.15, y - 0.22, "flushed: replayed")
            if gave_up is not None:
                tail = arrived if arrived is not None and arrived > gave_up else now
                tails.append([(gave_up, y), (tail, y)])
                points["gave_up"].append((gave_up, y))
            name = f"r{lane.request_id}"
            if lane.replay_of is not None:
                name += f" (replays r{lane.replay_of})"
            self.lane_names.put(lane.sent_at - 0.15, y, name)
            arrivals = [e for e in lane.events if e.kind != GAVE_UP]
            repeated = [e for e in arrivals if e.kind != SETTLED]
            if len(repeated) > 1:
                tails.append([(repeated[0].step, y), (repeated[-1].step, y)])
            for ev in arrivals:
                dup = ev.kind == DUPLICATE
                kind = ("dup" if dup else "commit") if ev.committed else "reject"
                if ev.held:
                    kind = "held"
                points[kind].append((ev.step, y))
                if ev.kind == SETTLED:
                    note = (
                        "committed at its fence"
                        if ev.committed
                        else "refused at its fence: " + str(ev.reason).replace("_", " ")
                    )
                    self.notes.put(ev.step + 0.15, y - 0.22, note)
                elif not ev.committed or ev.stale or dup:
                    note = "commit" if ev.committed else str(ev.reason).replace("_", " ")
                    note = ("dup: " if dup else "stale: " if ev.stale else "") + note
                    self.notes.put(ev.step + 0.15, y - 0.22, note)
        self.bars.set_segments(bars)
        self.tails.set_segments(tails)
        self.waits.set_segments(waits)
        for kind, line in self.marks.items():
            xy = np.array(points[kind], dtype=float).reshape(-1, 2)
            line.set_data(xy[:, 0], xy[:, 1])

    def _fill_strip(self, design: str, run: DesignRun) -> None:
        art = self.strip_art[design]
        heads = np.asarray(run.heads, dtype=float)
        xs = np.r_[np.arange(len(heads), dtype=float), len(heads) - 0.5]
        heads, seen = np.r_[heads, heads[-1]], np.maximum.accumulate(np.r_[heads, heads[-1]])
        art["seen"].set_data(xs, seen)
        art["head"].set_data(xs, heads)
        art["below"].set_verts(_below_boxes(heads, seen, xs))
        skipped = sorted(run.skipped)
        art["skipped"].set_data(skipped, [heads[s] for s in skipped])
        art["falls"].set_data([f.step for f in run.falls], [f.head for f in run.falls])
        fall = run.falls[0] if run.falls else None
        art["fall"].set_visible(fall is not None)
        if fall is not None:
            art["fall"].set_text(f"reader saw v{fall.seen} \u2192 v{fall.head}")
            art["fall"].xy = (fall.step, fall.head)
            art["fall"].set_position((fall.step + 0.4, fall.seen + 0.15))

    @property
    def rooms(self) -> tuple[int, int, int]:
        """The room (lanes, steps, versions) the axes have grown to."""
        return self._rooms

    def rescale(self) -> None:
        """Forget the room the axes grew to: the next update sizes them for its own schedule
        (Reset, a typed or preset schedule), reusing the figure, its artists and the frames
        already drawn instead of building a new canvas."""
        self._rooms = (0, 0, 0)

    def update(self, runs: Mapping[str, DesignRun], steps: Sequence[Step], focus: str) -> Figure:
        """Show `runs` (design -> `DesignRun` of the same `steps`), with the lanes of `focus`.

        The room for steps, lanes and versions only grows (undo does not shrink the axes), so
        the frame is rarely drawn again; more lanes than the figure holds build a taller one.
        """
        n = len(steps)
        top = max(max(r.heads) for r in runs.values())
        lanes_room = max(self._rooms[0], _room(len(runs[focus].lanes), 6, _LANES_STEP))
        steps_room = max(self._rooms[1], _room(n + 1, 8, _STEPS_STEP))
        head_room = max(self._rooms[2], _room(top + 1, 6, 3))
        rooms = (lanes_room, steps_room, head_room)
        rebuilt = self.fig is None or lanes_room != self._rooms[0]
        if rebuilt:
            with workbook_style():
                if self.fig is None:
                    self._build(lanes_room)
                else:
                    self._grow(lanes_room)
        if rebuilt or rooms != self._rooms:  # new ticks cost ~15 ms: only when the room grew
            self._set_rooms(steps_room, head_room)
        self._rooms = rooms
        color = COLORS.get(focus, "#444444")
        if color != self.lane_color:
            self.lane_color = color
            self.bars.set_color(color)
            self.tails.set_color(color)
            self.waits.set_color(color)
            for kind, line in self.marks.items():
                style = _LANE_MARKS[kind]
                line.set_color(style.get("color", color))
                if "mfc" not in style:
                    line.set_markerfacecolor(style.get("color", color))
                if "mec" not in style:
                    line.set_markeredgecolor(style.get("color", color))
        self.lanes_title.set_text(
            f"requests of {focus} ({DESIGN_LABELS.get(focus, focus)}): send \u2192 arrival"
        )
        self.lanes_title.set_color(color)
        self._fill_lanes(runs[focus], n)
        for design in self.designs:
            self._fill_strip(design, runs[design])
        crashes = runs[focus].crashes
        for design, lines in self.crash_lines.items():
            at = crashes if design == "lanes" else runs[design].crashes
            lines.set_segments([[(x, 0), (x, 1)] for x in at])
        self.step_names.reset()
        self.step_names.put(0, -0.12, "start")
        for i, step in enumerate(steps, start=1):
            self.step_names.put(i + 0.15, -0.12, f"{i}: {step}")
        # the figure's title after the lanes' (a tall figure brings them together), as a
        # whole draw orders them
        self._texts = [
            self.lanes_title,
            self.suptitle,
            *self.lane_names.texts,
            *self.notes.texts,
            *self.step_names.texts,
        ]
        self._dynamic = [
            self.bars,
            self.tails,
            self.waits,
            *self.marks.values(),
            *self.crash_lines.values(),
            *(a for art in self.strip_art.values() for a in art.values()),
        ]
        for artist in self._dynamic:  # kept out of every frame, drawn or not this time
            if not artist.get_animated():
                artist.set_animated(True)
        return self.fig  # type: ignore[return-value]

    def png(
        self, runs: Mapping[str, DesignRun], steps: Sequence[Step], focus: str, dpi: int = 80
    ) -> bytes:
        """`update`, then render: the frame is restored, only the data is drawn again. A
        picture kept in `pngs` (the same rooms, focus, dpi, steps and runs) is returned as is."""
        with workbook_style():
            fig = self.update(runs, steps, focus)
        # everything the picture depends on (the designs and width are the canvas's own)
        key = (self._rooms, focus, dpi, tuple(steps), pickle.dumps(dict(runs)))
        if key in self.pngs:
            self.pngs.move_to_end(key)
            return self.pngs[key]
        drawn = [a for a in self._dynamic if not _draws_nothing(a)]
        png = self._frames.png(
            fig, drawn, (self._rooms, dpi), dpi, self._texts, ticks=self._ticks()
        )
        if self.kept_pngs > 0:
            self.pngs[key] = png
            while len(self.pngs) > self.kept_pngs:
                self.pngs.popitem(last=False)
        return png

    def _ticks(self) -> list[Any]:
        """What differs between frames of one figure size: each axes' ticks, then its spines
        (drawn in that order, as a full draw does, where they meet)."""
        axes = [] if self.fig is None else self.fig.axes
        return [a for ax in axes for a in (ax.xaxis, ax.yaxis, *ax.spines.values())]

    def draw_ahead(self, dpi: int = 80) -> bool:
        """One step of work a longer schedule would need, done now: first the tick marks of a
        step axis `AHEAD_HEIGHTS` rooms longer, then the frame below the ticks of each of the
        `AHEAD_HEIGHTS` taller figures (more lanes) not kept yet, the figure put back after. A
        widget calls it while its kernel is idle, so such a schedule draws only ticks and
        spines on a new frame, with its ticks made. False (nothing done) if there is no figure
        yet or all is done."""
        if self.fig is None:
            return False
        ticks = self._rooms[1] + _STEPS_STEP * AHEAD_HEIGHTS + 1
        short = [ax.xaxis for ax in self.fig.axes if len(ax.xaxis.majorTicks) < ticks]
        for axis in short:
            axis.get_major_ticks(ticks)  # made now, so a longer axis only places them
        if short:
            return True
        now = self._rooms[0]
        for extra in range(1, AHEAD_HEIGHTS + 1):
            room = now + _LANES_STEP * extra
            if self._frames.has_base((self.width, self._heights(room)[0]), dpi):
                continue
            with workbook_style():
                self._grow(room)
                try:
                    self._frames.keep_base(self.fig, dpi, self._ticks())
                finally:
                    self._grow(now)
            return True
        return False
