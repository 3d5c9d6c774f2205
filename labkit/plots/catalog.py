"""Part-two figures: catalog-version traces per design, the five designs side by side, the
inverted arrival step by step, the arrival-order explorer, the crash/restart trace and the
workbench picture.

Each function draws what labkit computed (a `simulator.simulate` trace, an
`arrival_orders.ScheduleResult`, an `arrival_orders.explore_all` table) and returns a Figure
with a title, labelled axes and a legend. No layout engine: widget redraws place axes with
`subplots_adjust`. The two figures a widget redraws in place are drawn by the canvases of
`labkit.plots.canvases`. Markers carry a `gid` (``rewind:<design>``,
``reject:<design>``) so tests can find them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from labkit.designs.arrival_orders import ScheduleResult
from labkit.designs.registry import DISPLAY_NAMES
from labkit.designs.schedule_builder import DesignRun
from labkit.designs.schedules import Kind, Step
from labkit.plots.canvases import (
    DESIGN_LABELS,
    REWIND_COLOR,
    FiveDesignsCanvas,
    Traces,
    WorkbenchCanvas,
    as_traces,
    draw_trace,
    marker_handles,
)
from labkit.plots.style import (
    COLORS,
    RIGHT_LEGEND,
    design_style,
    figure_of,
    label_share_bars,
    new_figure,
    single_axes,
    styled,
)


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
    shown = as_traces(traces)
    ax = single_axes(width, height, left=0.08, right=0.66)
    fig = figure_of(ax)
    for design, trace in shown.items():
        draw_trace(ax, trace, design, faint=highlight is not None and design != highlight)
    ax.set_xlabel("simulated time (mean planner latency = 1)")
    ax.set_ylabel("catalog head version")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, *marker_handles()], **RIGHT_LEGEND)
    return fig


def five_designs_figure(
    traces: Traces,
    title: str = "Five designs, one planner, one fault trace",
    highlight: str | None = None,
    ncols: int = 3,
    width: float = 8.0,
    height: float = 4.8,
) -> Figure:
    """The designs' `simulate` traces as small multiples (see `FiveDesignsCanvas`)."""
    shown = as_traces(traces)
    canvas = FiveDesignsCanvas(list(shown), title, ncols, width, height)
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
    panel_h = 0.62 + 0.26 * max(1, len(lanes))  # five designs fit one screen with their app
    fig = new_figure(width, height or panel_h * len(runs) + 1.1)
    axes = fig.subplots(len(runs), 1, sharex=True, squeeze=False)[:, 0]
    fig.subplots_adjust(
        left=0.13,
        right=0.66,
        top=1 - 0.78 / fig.get_figheight(),
        bottom=0.62 / fig.get_figheight(),
        hspace=0.7,
    )
    for ax, res in zip(axes, runs, strict=True):
        color = COLORS.get(res.design, "#444444")
        top = len(lanes) - 0.4
        for i, outcome in enumerate(res.outcomes[:last], start=1):
            y = lane_y.get(outcome.request_id, 0) if outcome.request_id is not None else 0
            if outcome.kind == Kind.DELIVER and outcome.committed:
                ax.scatter([i], [y], s=80, color=color, zorder=4)
            elif outcome.kind == Kind.DELIVER:
                ax.scatter([i], [y], s=70, marker="X", color=COLORS["reject"], zorder=4)
                ax.annotate(
                    str(outcome.reason).replace("_", " "),
                    (i, y),
                    xytext=(0, -8),
                    textcoords="offset points",
                    ha="center",
                    va="top",
                    fontsize=9,
                    color="#444444",
                )
            elif outcome.kind == Kind.TIMEOUT and outcome.request_id is not None:
                ax.scatter(
                    [i],
                    [y],
                    s=70,
                    marker="D",
                    facecolors="none",
                    edgecolors=color,
                    linewidths=1.5,
                    zorder=4,
                )
            elif outcome.kind == Kind.CRASH:
                ax.axvline(i, color="black", ls="--", lw=1)
            ax.text(
                i,
                top,
                f"v{outcome.head}",
                ha="center",
                va="bottom",
                fontsize=9,
                color=REWIND_COLOR if outcome.rewind else "black",
                fontweight="bold" if outcome.rewind else "normal",
            )
        ax.set_ylim(-1.3, len(lanes) + 0.1)  # room below the lowest lane for a reason
        ax.set_yticks(range(len(lanes)), [str(r) for r in lanes], fontsize=9)
        ax.set_title(
            f"{res.design}: {DESIGN_LABELS.get(res.design, res.design)}",
            loc="left",
            fontsize=10,
            color=color,
            fontweight="bold",
            y=1.0,
            pad=14,
        )
        ax.grid(False, axis="y")
        for k in range(len(lanes)):
            ax.axhline(k, color="#dddddd", lw=0.8, zorder=1)
    steps = [str(s) for s in runs[0].steps] or [""] * n_steps
    labels = [f"{i}\n{s}" for i, s in enumerate(steps, start=1)]
    axes[-1].set_xticks(range(1, len(labels) + 1), labels, fontsize=9)
    axes[-1].set_xlim(0.4, n_steps + 0.6)
    axes[-1].set_xlabel("step (what the planner or the loop did)")
    fig.suptitle(f"{title} (head version above each step)", fontsize=10.5)
    for ax in axes:
        ax.set_ylabel("request")
    handles = [
        Line2D([], [], ls="", marker="o", ms=8, color="#555555", label="response committed"),
        Line2D(
            [],
            [],
            ls="",
            marker="X",
            ms=8,
            color=COLORS["reject"],
            label="response rejected (reason)",
        ),
        Line2D(
            [],
            [],
            ls="",
            marker="D",
            ms=7,
            mfc="none",
            mec="#555555",
            label="loop gave up, replays",
        ),
        Line2D([], [], ls="", marker="$v1$", ms=12, color=REWIND_COLOR, label="head fell"),
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
    """`arrivals.explore_all` as bars: per design, rewinding orders out of all orders.

    Constrained layout (no widget redraws this figure), so the legend of design names always
    fits beside the axes, however long the names.
    """
    fig = new_figure(width, height, layout="constrained")
    ax = fig.add_subplot()
    designs = [str(d) for d in table["design"]]
    rewinding = [int(n) for n in table["rewinding"]]
    orders = [int(n) for n in table["orders"]]
    shares = [r / o if o else 0.0 for r, o in zip(rewinding, orders, strict=True)]
    for x, (design, share) in enumerate(zip(designs, shares, strict=True)):
        ax.bar(
            x,
            share,
            width=0.6,
            color=COLORS.get(design, "#444444"),
            label=f"{design}: {DISPLAY_NAMES.get(design, design)}",
        )
    label_share_bars(ax, range(len(designs)), shares, rewinding, orders, fontsize=8.5)
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
    shown = as_traces(traces)
    ax = single_axes(width, height, left=0.08, right=0.66)
    fig = figure_of(ax)
    for design, trace in shown.items():
        draw_trace(ax, trace, design)
        ax.step(
            trace["t"].to_numpy(dtype=float),
            trace["head_version"].cummax().to_numpy(),
            where="post",
            color=COLORS.get(design, "#444444"),
            ls=":",
            lw=1.2,
            alpha=0.8,
            gid=f"last_seen:{design}",
        )
        for event, style in (("crash", "-"), ("restart", "--")):
            for t in trace.loc[trace["event"] == event, "t"]:
                ax.axvline(float(t), color="black", ls=style, lw=0.9, alpha=0.6)
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="#555555", ls=":", label="reader's last-seen head"),
        Line2D([], [], color="black", ls="-", lw=0.9, label="loop crashed"),
        Line2D([], [], color="black", ls="--", lw=0.9, label="loop restarted"),
        *marker_handles(),
    ]
    ax.set_xlabel("simulated time (mean planner latency = 1)")
    ax.set_ylabel("catalog head version")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    ax.legend(handles=handles, **RIGHT_LEGEND)
    return fig


# --- bug 2 in one picture: one panel per design, the fall marked --------------------------


def _below_mask(heads: np.ndarray) -> np.ndarray:
    """True where the head is below the highest version the reader had seen before."""
    return heads < np.maximum.accumulate(heads) if len(heads) else heads.astype(bool)


@styled
def rewind_panels_figure(
    traces: Traces | pd.DataFrame,
    title: str = "Catalog head an independent reader sees, one panel per design",
    width: float = 7.8,
    panel_height: float = 1.7,
    xlabel: str = "simulated time (mean planner latency = 1)",
) -> Figure:
    """`simulate` traces stacked one design per panel (shared axes), so no line hides another.

    The dotted line is the highest version the reader had already seen; where the head is
    below it the gap is shaded red, and the first fall is marked "reader saw vA -> vB".
    Lines carry `gid` ``trace:<design>`` (tests read their data).
    """
    shown = as_traces(traces)
    fig = new_figure(width, panel_height * len(shown) + 1.1)
    axes = fig.subplots(len(shown), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    fig.subplots_adjust(
        left=0.09,
        right=0.68,
        top=1 - 0.55 / fig.get_figheight(),
        bottom=0.55 / fig.get_figheight(),
        hspace=0.45,
    )
    any_rejected = False  # the legend lists the rejected mark only where one is drawn
    for ax, (design, trace) in zip(axes, shown.items(), strict=True):
        color = COLORS.get(design, "#444444")
        t = trace["t"].to_numpy(dtype=float)
        heads = trace["head_version"].to_numpy(dtype=float)
        seen = np.maximum.accumulate(heads) if len(heads) else heads
        ax.step(t, seen, where="post", color="#555555", ls=":", lw=1.2, gid=f"last_seen:{design}")
        ax.fill_between(
            t,
            heads,
            seen,
            where=_below_mask(heads),
            step="post",
            color=REWIND_COLOR,
            alpha=0.25,
            lw=0,
            gid=f"below:{design}",
        )
        ax.step(t, heads, where="post", color=color, lw=2.0, gid=f"trace:{design}")
        refused = trace["committed"].to_numpy() == False  # noqa: E712 (None: no decision)
        rejected = (trace["event"].to_numpy() == "deliver") & refused
        ax.scatter(
            t[rejected],
            heads[rejected],
            marker="|",
            s=70,
            color=COLORS["reject"],
            zorder=3,
            gid=f"reject:{design}",
        )
        any_rejected = any_rejected or bool(rejected.any())
        falls = np.flatnonzero(_below_mask(heads) & ~np.r_[False, _below_mask(heads)[:-1]])
        for i in falls[:1]:
            ax.annotate(
                f"reader saw v{seen[i - 1]:.0f} \u2192 v{heads[i]:.0f}",
                xy=(t[i], heads[i]),
                xytext=(t[i] + 0.06 * (t[-1] - t[0]), heads[i] - 0.25 * seen[-1]),
                color=REWIND_COLOR,
                fontsize=9,
                fontweight="bold",
                va="center",
                arrowprops={"arrowstyle": "->", "color": REWIND_COLOR, "lw": 1.5},
                gid=f"fall:{design}",
            )
        below = int(_below_mask(heads).sum())
        verdict = (
            f"fell {len(falls)}x, {below} events below the last-seen head"
            if below
            else "never fell"
        )
        ax.set_title(
            f"{design}: {DESIGN_LABELS.get(design, design)} \u2014 {verdict}",
            loc="left",
            fontsize=9,
            color=color,
            fontweight="bold",
        )
        ax.set_ylabel("head")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
    axes[-1].set_xlabel(xlabel)
    fig.suptitle(title, fontsize=10.5)
    handles = [
        *(Line2D([], [], lw=2, label=d, **design_style(d)) for d in shown),
        Line2D([], [], color="#555555", ls=":", label="highest version already seen"),
        Patch(color=REWIND_COLOR, alpha=0.25, label="reader sees an older catalog"),
    ]
    if any_rejected:
        handles.append(
            Line2D(
                [], [], ls="", marker="|", ms=9, color=COLORS["reject"], label="response rejected"
            )
        )
    axes[0].legend(handles=handles, **RIGHT_LEGEND)
    return fig


@styled
def workbench_figure(
    runs: Mapping[str, DesignRun], steps: Sequence[Step], focus: str | None = None
) -> Figure:
    """A `ScheduleBuilder`'s runs as the workbench draws them (lanes of `focus`, heads of all)."""
    designs = list(runs)
    return WorkbenchCanvas(designs).update(runs, steps, focus or designs[0])
