"""Part two's figure of pipelined ballots: one run's lanes with the head climbing over them, and
the throughput of `ballot`, `fenced` and `pipelined` as the window W grows.

Each request is a lane at the height of its fence (the version it commits on): a solid bar while
the planner works on it, a dashed one while its answer waits in the hold, and a mark where it
ended (committed, refused, given up or flushed). The head is a black step line: it climbs one
version per commit and a lane ends where the head passes it. Markers carry a `gid`
(``lane-end:<outcome>``, ``head``, ``depth:<design>``) so tests can find them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.axes import Axes
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
from labkit.plots.style import COLORS, new_figure, styled

HOLD_COLOR = "#9ecae1"
FLUSH_COLOR = "#e6550d"
END_STYLE: dict[str, dict[str, object]] = {
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


def _rows(shown: Sequence[Lane]) -> dict[int, float]:
    """Each lane's height: its fence, nudged up for every earlier ask on the same fence."""
    asks: dict[int, int] = {}
    y = {}
    for lane in shown:
        k = asks.get(lane.fence, 0)
        asks[lane.fence] = k + 1
        y[lane.request_id] = lane.fence + 0.3 + 0.22 * min(k, 2)
    return y


def draw_lanes(ax: Axes, trace: pd.DataFrame, until: float | None = None) -> list[Lane]:
    """Draw the lanes and the head of a `simulate` trace of a ballot design on `ax`."""
    shown = lanes(trace)
    end = until if until is not None else float(trace["t"].max())
    y = _rows(shown)
    color = COLORS["pipelined"]
    for lane in shown:
        h = y[lane.request_id]
        stop = lane.ended if lane.ended is not None else end
        answered = lane.answered if lane.answered is not None and lane.answered <= stop else None
        ax.plot(
            [lane.sent, answered or stop],
            [h, h],
            color=color,
            lw=2.2,
            solid_capstyle="butt",
            zorder=2,
        )
        if answered is not None and lane.held:
            ax.plot([answered, stop], [h, h], color=HOLD_COLOR, lw=2.2, ls=(0, (2, 1)), zorder=2)
        if lane.end != IN_FLIGHT:
            ax.scatter([stop], [h], zorder=4, gid=f"lane-end:{lane.end}", **END_STYLE[lane.end])
        if lane.answered is not None and lane.answered > stop:  # the answer landed too late
            ax.scatter([lane.answered], [h], marker="|", s=60, color=COLORS["reject"], zorder=3)
    head = trace[["t", "head_version"]]
    ax.step(
        [0.0, *head["t"], end],
        [0, *head["head_version"], int(head["head_version"].iloc[-1])],
        where="post",
        color="black",
        lw=1.4,
        zorder=3,
        gid="head",
    )
    ax.set_xlim(0, end * 1.02)
    ax.set_ylim(-0.2, max([1.0, *y.values()]) + 0.6)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("simulated time (mean planner latency = 1)")
    ax.set_ylabel("version (a ballot sits on its fence)")
    return shown


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
        Line2D(
            [],
            [],
            ls="",
            marker="|",
            ms=8,
            color=COLORS["reject"],
            label="answer landed after its lane ended",
        )
    )
    return handles


def draw_depth(ax: Axes, table: pd.DataFrame, window: int | None = None) -> None:
    """Throughput against W for each design in `table` (`pipeline_study.depth_table`); with
    `window`, a ring marks that depth on each line."""
    for design in COMPARED:
        mine = table[table["design"] == design]
        if mine.empty:
            continue
        ax.plot(
            mine["W"],
            mine["throughput"],
            marker="o",
            ms=4,
            color=COLORS[design],
            label=str(mine["name"].iloc[0]),
            gid=f"depth:{design}",
        )
        here = mine[mine["W"] == window]
        if not here.empty:
            ax.scatter(
                here["W"],
                here["throughput"],
                s=110,
                facecolors="none",
                edgecolors=COLORS[design],
                linewidths=1.5,
                zorder=4,
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(DEPTHS), [str(w) for w in DEPTHS])
    ax.minorticks_off()
    ax.set_xlabel("W (ballots in flight)")
    ax.set_ylabel("kept versions per time unit")
    ax.set_ylim(0, max(1.0, float(table["throughput"].max())) * 1.12)
    ax.legend(fontsize=7.5, loc="upper left")


@styled
def pipelined_figure(
    trace: pd.DataFrame,
    depth: pd.DataFrame,
    title: str = "Pipelined ballots",
    window: int | None = None,
    width: float = 9.6,
    height: float = 4.2,
) -> Figure:
    """Left: one run's lanes and head (`draw_lanes`). Right: throughput against W
    (`draw_depth`), `window` ringed. No layout engine: a widget redraws it."""
    fig = new_figure(width, height)
    fig.subplots_adjust(left=0.065, right=0.98, top=0.86, bottom=0.3, wspace=0.28)
    grid = fig.add_gridspec(1, 3)
    lanes_ax, depth_ax = fig.add_subplot(grid[0, :2]), fig.add_subplot(grid[0, 2])
    draw_lanes(lanes_ax, trace)
    lanes_ax.set_title("Lanes of one run: the head sweeps up the fences", fontsize=9.5)
    lanes_ax.legend(
        handles=lane_handles(), fontsize=7.5, ncol=4, loc="upper left", bbox_to_anchor=(0.0, -0.17)
    )
    draw_depth(depth_ax, depth, window)
    depth_ax.set_title("Throughput on a slow planner", fontsize=9.5)
    fig.suptitle(title, fontsize=10.5)
    return fig
