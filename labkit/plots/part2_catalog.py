"""Part-two figures: catalog-version traces per design, the inverted arrival step by step,
the arrival-order explorer and the crash/restart trace.

Each function draws what labkit computed (a `planner.simulate` trace, an
`arrivals.ScheduleResult`, an `arrivals.explore_all` table) and returns a Figure with a
title, labelled axes and a legend. No layout engine: widget redraws place axes with
`subplots_adjust`. Markers carry a `gid` (``rewind:<design>``, ``reject:<design>``) so tests
can find them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from labkit.arrivals import CRASH, DELIVER, TIMEOUT, ScheduleResult
from labkit.designs import DESIGNS, DISPLAY_NAMES
from labkit.plots.style import (
    COLORS,
    RIGHT_LEGEND,
    FrameCache,
    label_share_bars,
    new_figure,
    single_axes,
    styled,
    workbook_style,
)

# Legend labels; `DISPLAY_NAMES` (labkit.designs) are the short names panel titles use.
DESIGN_LABELS = {
    "callback": "write in callback",
    "lww": "last-write-wins (updated_at)",
    "ballot": "single ballot + watermark",
    "fenced": "hedged ballots (W on one head)",
    "cas": "compare-and-set, no ballot",
}
REWIND_COLOR = "#b00020"

Traces = Mapping[str, pd.DataFrame]


def _as_traces(traces: Traces | pd.DataFrame) -> dict[str, pd.DataFrame]:
    if isinstance(traces, pd.DataFrame):
        return {str(traces["design"].iloc[0]): traces}
    return {d: traces[d] for d in (*DESIGNS, *traces) if d in traces}


_EMPTY_TRACE = pd.DataFrame(
    {"t": [], "event": [], "committed": [], "head_version": [], "rewind": []}
)


def _trace_artists(ax: Axes, design: str) -> dict[str, Any]:
    """Empty artists for one design's trace, filled in by `_set_trace`."""
    color = COLORS.get(design, "#444444")
    (line,) = ax.step([], [], where="post", color=color, lw=2.0,
                      label=DESIGN_LABELS.get(design, design), gid=f"trace:{design}")
    rejects = ax.scatter([], [], marker="|", s=70, color=COLORS["reject"], zorder=3,
                         gid=f"reject:{design}")
    rewinds = ax.scatter([], [], marker="v", s=90, color=REWIND_COLOR, edgecolors="black",
                         linewidths=0.6, zorder=5, gid=f"rewind:{design}")
    return {"line": line, "rejects": rejects, "rewinds": rewinds}


def _xy(frame: pd.DataFrame, mask: np.ndarray | None = None) -> np.ndarray:
    """(t, head_version) points of `frame`, optionally only rows where `mask` holds.

    Masks numpy arrays rather than filtering the DataFrame: a widget redraws every trace on
    every change and a DataFrame filter costs more than the drawing.
    """
    xy = np.column_stack([frame["t"].to_numpy(dtype=float),
                          frame["head_version"].to_numpy(dtype=float)]).reshape(-1, 2)
    return xy if mask is None else xy[mask]


def _set_trace(artists: dict[str, Any], trace: pd.DataFrame, *, faint: bool = False) -> None:
    """Point one design's artists at `trace`: head line, rejected responses, rewinds."""
    xy = _xy(trace)
    artists["line"].set_data(xy[:, 0], xy[:, 1])
    artists["line"].set_linewidth(1.0 if faint else 2.0)
    artists["line"].set_alpha(0.35 if faint else 1.0)
    events = trace["event"].to_numpy()
    committed = trace["committed"].to_numpy()
    rejected = (events == "deliver") & (committed == False)  # noqa: E712 (None = no decision)
    artists["rejects"].set_offsets(xy[rejected])
    artists["rejects"].set_alpha(0.5 if faint else 0.9)
    artists["rewinds"].set_offsets(xy[trace["rewind"].to_numpy(dtype=bool)])


def _draw_trace(ax: Axes, trace: pd.DataFrame, design: str, *, faint: bool = False) -> None:
    """One design's head as the reader sees it, rewinds as red down-arrows, rejects as ticks."""
    _set_trace(_trace_artists(ax, design), trace, faint=faint)
    ax.update_datalim(_xy(trace))
    ax.autoscale_view()


def _marker_handles() -> list[Line2D]:
    return [
        Line2D([], [], ls="", marker="v", ms=8, color=REWIND_COLOR, mec="black",
               label="rewind seen by the reader"),
        Line2D([], [], ls="", marker="|", ms=9, color=COLORS["reject"],
               label="response rejected"),
    ]


@styled
def version_trace_figure(
    traces: Traces | pd.DataFrame,
    title: str = "Catalog version seen by an independent reader",
    highlight: str | None = None,
    width: float = 7.6,
    height: float = 3.6,
) -> Figure:
    """`simulate` traces on one axes: time vs the head the reader sees, one step line per design.

    Red down-arrows mark events after which the head had fallen; grey ticks mark rejected
    responses. With `highlight`, the other designs are drawn faint.
    """
    shown = _as_traces(traces)
    ax = single_axes(width, height, left=0.08, right=0.66)
    fig = ax.figure
    for design, trace in shown.items():
        _draw_trace(ax, trace, design, faint=highlight is not None and design != highlight)
    ax.set_xlabel("simulated time (mean planner latency = 1)")
    ax.set_ylabel("catalog head version")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, *_marker_handles()], **RIGHT_LEGEND)
    return fig


def _panel_title(design: str, trace: pd.DataFrame) -> str:
    """The design, the commits its reader saw (as `summarize_run` counts them) and rewinds."""
    rewinds = int(trace["rewind"].sum())
    parts = []
    if "head_changed" in trace:
        parts.append(f"{int(trace['head_changed'].sum())} commits")
    parts.append(f"{rewinds} rewind{'s' if rewinds != 1 else ''}")
    return f"{DISPLAY_NAMES.get(design, design)}\n{' · '.join(parts)}"


class FourDesignsCanvas:
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
            raise ValueError("FourDesignsCanvas needs at least one design")
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
        fig.subplots_adjust(left=0.08, right=0.98, top=0.84 if self.live_titles else 0.86,
                            bottom=0.12 if spare_slot else 0.2,
                            hspace=0.55 if self.live_titles else 0.34, wspace=0.08)
        flat = list(axes.flat)
        self.axes = dict(zip(self.designs, flat, strict=False))
        spare = flat[len(self.designs):]
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
            Line2D([], [], color=COLORS.get(d, "#444444"), lw=2, label=DESIGN_LABELS.get(d, d))
            for d in self.designs
        ]
        handles = [*design_handles, *_marker_handles()]
        if spare:  # the legend fills the first empty slot
            box = spare[0].get_position()
            fig.legend(handles=handles, loc="center", fontsize=8,
                       bbox_to_anchor=(box.x0 + box.width / 2, box.y0 + box.height / 2))
        else:
            fig.legend(handles=handles, loc="lower center", ncols=3, fontsize=8,
                       bbox_to_anchor=(0.5, 0.0))

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
            _set_trace(self.artists[design], trace, faint=faint)
            if len(trace):
                xmax = max(xmax, float(trace["t"].max()))
                ymax = max(ymax, float(trace["head_version"].max()))
            mine = design == highlight
            if self.live_titles:
                ax.set_title(_panel_title(design, trace), fontsize=9, y=1.0, pad=4,
                             fontweight="bold" if mine else "normal",
                             color="#555555" if faint else "black")
            for spine in ax.spines.values():
                spine.set_visible(mine or spine.spine_type in ("left", "bottom"))
                spine.set_color(COLORS.get(design, "black") if mine else "black")
                spine.set_linewidth(2.2 if mine else 0.8)
        if nice_limits:
            xmax, ymax = 10.0 * math.ceil(xmax / 10.0), 5.0 * math.ceil((ymax + 0.5) / 5.0) - 1.2
        first = next(iter(self.axes.values()))
        first.set_xlim(-0.02 * xmax, xmax * 1.02)
        first.set_ylim(-0.8, ymax + 1.2)
        return self.fig

    def _dynamic(self) -> list[Any]:
        """Artists that change between updates with the same limits and highlight."""
        found: list[Any] = []
        for design, ax in self.axes.items():
            titles = [ax.title] if self.live_titles else []
            found += [*titles, *ax.spines.values(), *self.artists[design].values()]
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

        The frame (axes, ticks, legend) is rendered once per (limits, dpi); each call restores
        it and draws the traces, titles and spines on top, so a widget pays for a few artists
        instead of four axes of tick labels. While `scale` (e.g. the latency setting) stays
        the same the limits only grow, so new seeds mostly reuse the frame; `at_least` is where
        they start (room for a typical run, so the frame is rarely redrawn).
        """
        floor = self._limits.get(scale, at_least)
        with workbook_style():
            self.update(traces, highlight, nice_limits=True, at_least=floor)
        first = next(iter(self.axes.values()))
        self._limits = {scale: (first.get_xlim()[1] / 1.02, first.get_ylim()[1] - 1.2)}
        key = (first.get_xlim(), first.get_ylim(), dpi)
        return self._frames.png(self.fig, self._dynamic(), key, dpi)


def four_designs_figure(
    traces: Traces,
    title: str = "Five designs, one planner, one fault trace",
    highlight: str | None = None,
    ncols: int = 3,
    width: float = 8.0,
    height: float = 4.8,
) -> Figure:
    """The designs' `simulate` traces as small multiples (see `FourDesignsCanvas`)."""
    shown = _as_traces(traces)
    canvas = FourDesignsCanvas(list(shown), title, ncols, width, height)
    return canvas.update(shown, highlight)


def _request_ids(results: Sequence[ScheduleResult]) -> list[int]:
    ids = {o.request_id for res in results for o in res.outcomes if o.request_id is not None}
    return sorted(ids)


@styled
def arrival_lanes_figure(
    results: ScheduleResult | Sequence[ScheduleResult],
    upto: int | None = None,
    title: str = "The inverted arrival, step by step",
    width: float = 7.8,
    height: float | None = None,
) -> Figure:
    """`run_schedule` results as a lane diagram: one panel per design, one lane per request.

    Each step marks the request it touched: a filled dot when the response committed, a grey
    cross with the reason when it was rejected, a hollow diamond when the loop gave up. The
    head version after each step is written above the lanes, red where it fell. Only steps
    up to `upto` (1-based, default all) are drawn; the axes keep their full size.
    """
    runs = [results] if isinstance(results, ScheduleResult) else list(results)
    if not runs:
        raise ValueError("arrival_lanes_figure needs at least one ScheduleResult")
    lanes = _request_ids(runs)
    lane_y = {rid: k for k, rid in enumerate(lanes)}
    n_steps = max(len(r.outcomes) for r in runs)
    last = n_steps if upto is None else max(0, min(int(upto), n_steps))
    panel_h = 0.75 + 0.3 * max(1, len(lanes))
    fig = new_figure(width, height or panel_h * len(runs) + 1.2)
    axes = fig.subplots(len(runs), 1, sharex=True, squeeze=False)[:, 0]
    fig.subplots_adjust(left=0.13, right=0.7, top=1 - 0.7 / fig.get_figheight(),
                        bottom=0.6 / fig.get_figheight(), hspace=0.6)
    for ax, res in zip(axes, runs, strict=True):
        color = COLORS.get(res.design, "#444444")
        top = len(lanes) - 0.4
        for i, outcome in enumerate(res.outcomes[:last], start=1):
            y = lane_y.get(outcome.request_id, 0) if outcome.request_id is not None else 0
            if outcome.kind == DELIVER and outcome.committed:
                ax.scatter([i], [y], s=80, color=color, zorder=4)
            elif outcome.kind == DELIVER:
                ax.scatter([i], [y], s=70, marker="X", color=COLORS["reject"], zorder=4)
                ax.annotate(str(outcome.reason).replace("_", " "), (i, y), xytext=(0, -11),
                            textcoords="offset points", ha="center", va="top", fontsize=6.5,
                            color="#444444")
            elif outcome.kind == TIMEOUT and outcome.request_id is not None:
                ax.scatter([i], [y], s=70, marker="D", facecolors="none", edgecolors=color,
                           linewidths=1.5, zorder=4)
            elif outcome.kind == CRASH:
                ax.axvline(i, color="black", ls="--", lw=1)
            ax.text(i, top, f"v{outcome.head}", ha="center", va="bottom", fontsize=8,
                    color=REWIND_COLOR if outcome.rewind else "black",
                    fontweight="bold" if outcome.rewind else "normal")
        ax.set_ylim(-0.9, len(lanes) + 0.1)
        ax.set_yticks(range(len(lanes)), [str(r) for r in lanes], fontsize=8)
        ax.set_title(f"{res.design}: {DESIGN_LABELS.get(res.design, res.design)}",
                     loc="left", fontsize=9, color=color, fontweight="bold", y=1.0, pad=14)
        ax.grid(False, axis="y")
        for k in range(len(lanes)):
            ax.axhline(k, color="#dddddd", lw=0.8, zorder=1)
    steps = runs[0].steps or [""] * n_steps
    labels = [f"{i}\n{s}" for i, s in enumerate(steps, start=1)]
    axes[-1].set_xticks(range(1, len(labels) + 1), labels, fontsize=7)
    axes[-1].set_xlim(0.4, n_steps + 0.6)
    axes[-1].set_xlabel("step (what the planner or the loop did)")
    fig.suptitle(f"{title} (head version above each step)", fontsize=10.5)
    for ax in axes:
        ax.set_ylabel("request")
    handles = [
        Line2D([], [], ls="", marker="o", ms=8, color="#555555", label="response committed"),
        Line2D([], [], ls="", marker="X", ms=8, color=COLORS["reject"],
               label="response rejected (reason)"),
        Line2D([], [], ls="", marker="D", ms=7, mfc="none", mec="#555555",
               label="loop gave up, replays"),
        Line2D([], [], ls="", marker="$v1$", ms=12, color=REWIND_COLOR,
               label="head fell (rewind)"),
    ]
    axes[0].legend(handles=handles, **RIGHT_LEGEND)
    return fig


@styled
def explorer_figure(
    table: pd.DataFrame,
    title: str = "Arrival orders in which a reader sees the catalog rewind",
    width: float = 7.0,
    height: float = 3.2,
) -> Figure:
    """`arrivals.explore_all` as bars: per design, rewinding orders out of all orders."""
    ax = single_axes(width, height, right=0.7, top=0.86, bottom=0.16)
    fig = ax.figure
    rows = list(table.itertuples(index=False))
    shares = [r.rewinding / r.orders if r.orders else 0.0 for r in rows]
    for x, (row, share) in enumerate(zip(rows, shares, strict=True)):
        ax.bar(x, share, width=0.6, color=COLORS.get(row.design, "#444444"),
               label=f"{row.design}: {DISPLAY_NAMES.get(row.design, row.design)}")
    label_share_bars(ax, range(len(rows)), shares, [r.rewinding for r in rows],
                     [r.orders for r in rows], fontsize=8.5)
    ax.set_xticks(range(len(table)), list(table["design"]))
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("design")
    ax.set_ylabel("share of orders that rewind")
    ax.set_title(title)
    ax.legend(**RIGHT_LEGEND)
    return fig


@styled
def restarts_figure(
    traces: Traces | pd.DataFrame,
    title: str = "Catalog head across a loop crash and restart",
    width: float = 7.6,
    height: float = 3.6,
) -> Figure:
    """`simulate` traces with crash faults: head per design, crash/restart marks, and the
    reader's last-seen head (its running maximum) as a dotted line the head must never drop
    below.
    """
    shown = _as_traces(traces)
    ax = single_axes(width, height, left=0.08, right=0.66)
    fig = ax.figure
    for design, trace in shown.items():
        _draw_trace(ax, trace, design)
        ax.step(trace["t"].to_numpy(dtype=float), trace["head_version"].cummax().to_numpy(),
                where="post", color=COLORS.get(design, "#444444"), ls=":", lw=1.2, alpha=0.8,
                gid=f"last_seen:{design}")
        for event, style in (("crash", "-"), ("restart", "--")):
            for t in trace.loc[trace["event"] == event, "t"]:
                ax.axvline(float(t), color="black", ls=style, lw=0.9, alpha=0.6)
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="#555555", ls=":", label="reader's last-seen head"),
        Line2D([], [], color="black", ls="-", lw=0.9, label="loop crashed"),
        Line2D([], [], color="black", ls="--", lw=0.9, label="loop restarted"),
        *_marker_handles(),
    ]
    ax.set_xlabel("simulated time (mean planner latency = 1)")
    ax.set_ylabel("catalog head version")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.legend(handles=handles, **RIGHT_LEGEND)
    return fig
