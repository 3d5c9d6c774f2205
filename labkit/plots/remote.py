"""Figures of a run against the real planner service (notebook 09 and its widget): the requests
as lanes that fill as answers arrive, above the head as the reader saw it.

`lanes_figure` draws a `labkit.remote.views.LaneView` (a run so far, or finished); with the
finished run's `reader_trace` it adds the reader process's own view of the head. Markers carry
a `gid` (``answer:commit``, ``answer:refused``, ``inflight``, ``fall``) so tests can find them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from labkit.plots.canvases import DESIGN_LABELS, REWIND_COLOR
from labkit.plots.style import COLORS, RIGHT_LEGEND, new_figure, styled
from labkit.remote.views import COMMIT, Lane, LaneView

IN_FLIGHT_COLOR = COLORS["running"]
FAULT_COLOR = COLORS["fault"]
MAX_LANES = 16


def _lane_label(lane: Lane) -> str:
    """A lane's tick label: its request id, and the fault the service drew for it, if any."""
    return (
        f"{lane.fault.replace('_', ' ')} {lane.request_id}" if lane.fault else str(lane.request_id)
    )


def _lane_marks(ax, view: LaneView, lanes, color: str) -> None:
    """Bars from send to first answer (or to now while in flight), answers as marks."""
    for y, lane in enumerate(lanes):
        end = lane.answers[0][0] if lane.answers else view.now
        if lane.in_flight:
            given_up = lane.gave_up if lane.gave_up is not None else end
            ax.plot(
                [lane.sent, given_up],
                [y, y],
                color=IN_FLIGHT_COLOR,
                lw=5,
                solid_capstyle="butt",
                gid="inflight",
            )
            if lane.gave_up is not None:  # given up, but the planner may still answer
                ax.plot(
                    [lane.gave_up, end],
                    [y, y],
                    color=IN_FLIGHT_COLOR,
                    lw=2,
                    ls=(0, (2, 2)),
                    gid="inflight",
                )
        else:
            ax.plot([lane.sent, end], [y, y], color=color, lw=5, alpha=0.35, solid_capstyle="butt")
        if lane.gave_up is not None:
            ax.scatter(
                [lane.gave_up],
                [y],
                marker="D",
                s=28,
                facecolors="none",
                edgecolors="black",
                linewidths=1.0,
                zorder=4,
            )
        for t, outcome in lane.answers:
            if outcome == COMMIT:
                ax.scatter(
                    [t],
                    [y],
                    s=40,
                    color=color,
                    edgecolors="black",
                    linewidths=0.5,
                    zorder=5,
                    gid="answer:commit",
                )
            else:
                ax.scatter(
                    [t],
                    [y],
                    s=36,
                    marker="X",
                    color=COLORS["reject"],
                    zorder=5,
                    gid="answer:refused",
                )


def _head_marks(ax, view: LaneView, color: str, reader: pd.DataFrame | None) -> None:
    """The head after each event (the loop's reader), its falls, and the reader process."""
    if view.heads:
        ts = np.array([t for t, _ in view.heads] + [view.now], dtype=float)
        hs = np.array([h for _, h in view.heads] + [view.heads[-1][1]], dtype=float)
        ax.step(ts, hs, where="post", color=color, lw=2.0, gid="head")
        fell = np.flatnonzero(hs[1:] < hs[:-1]) + 1
        ax.scatter(
            ts[fell],
            hs[fell],
            marker="v",
            s=60,
            color=REWIND_COLOR,
            edgecolors="black",
            linewidths=0.5,
            zorder=5,
            gid="fall",
        )
    if reader is not None and not reader.empty:
        rt = reader["t"].to_numpy(dtype=float)
        rh = reader["head_version"].to_numpy(dtype=float)
        ax.step(rt, rh, where="post", color="black", lw=1.0, ls=":", gid="reader")
        fell = np.flatnonzero(rh[1:] < rh[:-1]) + 1
        ax.scatter(
            rt[fell],
            rh[fell],
            marker="o",
            s=70,
            facecolors="none",
            edgecolors=REWIND_COLOR,
            linewidths=1.5,
            zorder=6,
            gid="reader-fall",
        )
    for t, faults in view.faults_switched:
        ax.axvline(t, color=FAULT_COLOR, ls="--", lw=0.9)
        ax.annotate(
            ", ".join(f.replace("_", " ") for f in faults) or "faults off",
            (t, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -2),
            textcoords="offset points",
            ha="left",
            va="top",
            fontsize=9,
            color=FAULT_COLOR,
        )


def shown_lanes(view: LaneView, most: int = MAX_LANES) -> list[Lane]:
    """Up to `most` lanes in request order: first those still in flight, given up, struck by a
    fault or refused (where the story is), then the most recent others."""

    def telling(lane: Lane) -> bool:
        refused = any(outcome != COMMIT for _, outcome in lane.answers)
        return lane.in_flight or lane.gave_up is not None or bool(lane.fault) or refused

    by_id = sorted(view.lanes, key=lambda lane: lane.request_id)
    keep = [lane for lane in by_id if telling(lane)][-most:]
    rest = [lane for lane in by_id if not telling(lane)]
    room = most - len(keep)
    keep += rest[max(0, len(rest) - room) :] if room > 0 else []
    return sorted(keep, key=lambda lane: lane.request_id)


@styled
def lanes_figure(
    view: LaneView,
    design: str,
    reader: pd.DataFrame | None = None,
    title: str | None = None,
    width: float = 7.6,
    height: float = 4.8,
    max_lanes: int = MAX_LANES,
) -> Figure:
    """The last `max_lanes` requests of a run as lanes (orange while in flight, dashed once the
    loop gave up, a dot or a cross when an answer lands), above the head after every event with
    its falls; `reader` (a `reader_trace`) adds what the reader process saw."""
    color = COLORS.get(design, "#444444")
    fig = new_figure(width, height)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    fig.subplots_adjust(left=0.26, right=0.68, top=0.9, bottom=0.11, hspace=0.12)
    lanes = shown_lanes(view, max_lanes)
    _lane_marks(top, view, lanes, color)
    top.set_yticks(range(len(lanes)), [_lane_label(lane) for lane in lanes], fontsize=9)
    for tick, lane in zip(top.get_yticklabels(), lanes, strict=True):
        if lane.fault:
            tick.set_color(FAULT_COLOR)
    top.set_ylim(-0.8, max(len(lanes), 1) - 0.2)
    top.set_ylabel("request")
    top.grid(False, axis="y")
    _head_marks(bottom, view, color, reader)
    bottom.set_ylabel("head version")
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
    bottom.set_xlabel("seconds since the run started")
    bottom.set_xlim(0, max(view.now, 0.05) * 1.02)
    hidden = len(view.lanes) - len(lanes)
    state = "finished" if view.done else "running"
    name = DESIGN_LABELS.get(design, design)
    fig.suptitle(title or f"{design}: {name}, {state}", fontsize=10, x=0.26, ha="left")
    top.set_title(
        f"{view.in_flight} in flight, {len(view.lanes)} sent"
        + (
            f" ({len(lanes)} shown: those in flight, given up, struck or refused first)"
            if hidden
            else ""
        ),
        fontsize=9,
        loc="left",
    )
    handles = [
        Line2D([], [], color=IN_FLIGHT_COLOR, lw=5, label="in flight"),
        Line2D(
            [], [], color=IN_FLIGHT_COLOR, lw=2, ls=(0, (2, 2)), label="given up, may still land"
        ),
        Line2D([], [], ls="", marker="D", mfc="none", mec="black", ms=5, label="loop gave up"),
        Patch(color=color, alpha=0.35, label="answered"),
        Line2D([], [], ls="", marker="o", color=color, mec="black", ms=6, label="answer committed"),
        Line2D([], [], ls="", marker="X", color=COLORS["reject"], ms=6, label="answer refused"),
    ]
    top.legend(handles=handles, **RIGHT_LEGEND)
    head_handles = [
        Line2D([], [], color=color, lw=2, label="head after each event"),
        Line2D([], [], ls="", marker="v", color=REWIND_COLOR, mec="black", ms=6, label="head fell"),
    ]
    if reader is not None:
        head_handles += [
            Line2D([], [], color="black", ls=":", label="reader process"),
            Line2D(
                [], [], ls="", marker="o", mfc="none", mec=REWIND_COLOR, ms=7, label="fall it saw"
            ),
        ]
    bottom.legend(handles=head_handles, **RIGHT_LEGEND)
    return fig
