"""Part-one figures: the delivery timeline, chained checkpoint ranges, the exhaustive orphan
chart, the trigger cost (one worker, and K workers per tick) and the busy loop.

Each function draws a DataFrame or dataclasses labkit computed and returns a Figure with a
title, labelled axes and a legend. No layout engine (a widget redraw cannot pay for one):
axes are placed with `subplots_adjust`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from labkit.frontier.log import POLICIES, STATUSES
from labkit.frontier.scenarios import POLICY_COLUMNS
from labkit.frontier.summarizer import Summary
from labkit.plots.style import (
    COLORS,
    RIGHT_LEGEND,
    STATUS_MARKS,
    FrameCache,
    figure_of,
    label_share_bars,
    single_axes,
    styled,
)

POLICY_LABELS = {"max": "MAX(delivered) watermark", "frontier": "gap-free frontier"}
POLICY_SHORT = {"max": "MAX(delivered)", "frontier": "frontier"}
TRIGGER_LABELS = {
    "after_checkpoint": "after checkpoint (busy loop)",
    "newly_covered": "newly covered (frontier)",
}
_FRONT_ORPHANS = POLICY_COLUMNS["frontier"].orphan_ids
# The policies in the order they are drawn: the wrong rule first, the frontier over it.
_DRAW_ORDER = tuple(reversed(POLICIES))
_RINGS = tuple(zip(_DRAW_ORDER, (150, 230), strict=True))  # (policy, orphan ring size)
TRIGGER_COLORS = {"after_checkpoint": COLORS["max"], "newly_covered": COLORS["frontier"]}


def _axes(width: float, height: float, right: float = 0.97, bottom: float = 0.14) -> Axes:
    return single_axes(width, height, right=right, bottom=bottom)


def _ids_text(ids: Sequence[int]) -> str:
    return f" (ids {', '.join(str(i) for i in ids)})" if ids else ""


def _shard_rows(timeline: pd.DataFrame, shard: str | None) -> pd.DataFrame:
    if shard is None:
        shard = timeline["shard"].iloc[0]
    rows = timeline[timeline["shard"] == shard]
    if rows.empty:
        raise ValueError(f"shard {shard!r} is not in the timeline")
    return rows


class TimelineCanvas:
    """A reusable timeline figure: the frame (axes, ticks, legend) is built once per shape and
    each `render` swaps only the marks, which keeps a widget redraw cheap."""

    def __init__(self, width: float = 7.6, height: float = 3.6, live_text: bool = True) -> None:
        """`live_text=False` draws a fixed title with the frame and no per-step note: text is
        the dearest thing to rasterise, and a widget shows the step and counts beside it."""
        self.width, self.height = width, height
        self.live_text = live_text
        self.fig: Figure | None = None
        self._shape: tuple[int, int] | None = None
        self._marks: list = []
        self._kinds: tuple[bool, bool] | None = None
        self._cache = FrameCache()

    def _frame(self, last: int, top: int) -> Axes:
        ax = _axes(self.width, self.height, right=0.67)
        self.fig = figure_of(ax)
        ax.set_xlim(-0.5, last + 0.5)
        ax.set_ylim(-0.6, top + 0.8)
        ax.set_yticks(range(0, top + 1, 1 if top <= 10 else 2))
        ax.set_xlabel("step (one event each)")
        ax.set_ylabel("message id")
        handles = [
            *(
                Line2D([], [], ls="", marker=STATUS_MARKS[s], color=COLORS[s], label=s)
                for s in STATUSES
            ),
            Line2D([], [], color=COLORS["max"], lw=2.0, ls="--", label=POLICY_LABELS["max"]),
            Line2D([], [], color=COLORS["frontier"], lw=2.4, label=POLICY_LABELS["frontier"]),
            Line2D(
                [],
                [],
                ls="",
                marker="o",
                ms=12,
                mfc="none",
                mec=COLORS["orphan"],
                mew=1.6,
                label="orphan under MAX",
            ),
        ]
        ax.legend(handles=handles, **RIGHT_LEGEND)
        self._shape = (last, top)
        return ax

    @styled
    def render(
        self,
        timeline: pd.DataFrame,
        shard: str | None = None,
        step: int | None = None,
        title: str = "MAX watermark vs gap-free frontier",
    ) -> Figure:
        """Draw `run_scenario` output for one shard up to `step`; see `timeline_figure`."""
        rows = _shard_rows(timeline, shard)
        last = int(rows["step"].max())
        upto = last if step is None else max(0, min(int(step), last))
        shown = rows[rows["step"] <= upto]
        top = max((i for statuses in rows["statuses"] for i in statuses), default=1)
        # the same kinds of marks as last time: move the new data into them (no note to
        # rewrite, a step line to move, and the frontier's rings there or not as before)
        kinds = (step is not None, any(len(lost) for lost in shown[_FRONT_ORPHANS]))
        if self.fig is None or self._shape != (last, top):
            ax = self._frame(last, top)
            self._marks = []  # they were on the old figure
        else:
            ax = self.fig.axes[0]
            moved = not self.live_text and kinds == self._kinds and kinds[0]
            if moved:
                _move_marks(self._marks, shown, upto)
            else:
                for artist in self._marks:
                    artist.remove()
                self._marks = []
        if not self._marks:
            self._kinds = kinds
            self._marks = _timeline_marks(
                ax, shown, upto, mark_step=step is not None, note=self.live_text
            )
        if self.live_text:
            ax.set_title(f"{title}\nstep {upto}: {shown.iloc[-1]['event']}", fontsize=10)
        elif ax.get_title() != title:
            ax.set_title(title, fontsize=10)  # part of the frame (see `png`'s frame key)
        return figure_of(ax)

    def png(self, dpi: int = 80) -> bytes:
        """PNG of the last `render`; the frame's pixels are reused while its shape holds."""
        if self.fig is None:
            raise RuntimeError("render() a timeline before asking for its PNG")
        title = self.fig.axes[0].title
        if self.live_text:
            return self._cache.png(self.fig, [*self._marks, title], (self._shape, dpi), dpi)
        return self._cache.png(self.fig, self._marks, (self._shape, title.get_text(), dpi), dpi)


Points = dict[str, tuple[list[int], list[int]]]


def _mark_points(shown: pd.DataFrame) -> tuple[Points, Points]:
    """(step, id) points of each status square and of each policy's orphan rings."""
    marks: Points = {s: ([], []) for s in STATUSES}
    rings: Points = {p: ([], []) for p in POLICIES}
    for st, statuses, lost_max, lost_front in zip(
        shown["step"],
        shown["statuses"],
        shown[POLICY_COLUMNS["max"].orphan_ids],
        shown[POLICY_COLUMNS["frontier"].orphan_ids],
        strict=True,
    ):
        for row_id, status in statuses.items():
            marks[status][0].append(st)
            marks[status][1].append(row_id)
        for policy, lost in (("max", lost_max), ("frontier", lost_front)):
            rings[policy][0].extend([st] * len(lost))
            rings[policy][1].extend(lost)
    return marks, rings


def _max_line(shown: pd.DataFrame) -> np.ndarray:
    return shown["max_watermark"].astype("Float64").to_numpy(dtype=float, na_value=float("nan"))


def _move_marks(marks_drawn: list, shown: pd.DataFrame, upto: int) -> None:
    """Put `shown` into the artists `_timeline_marks` made (same kinds, same order): moving
    data into existing artists costs a fraction of making them."""
    marks, rings = _mark_points(shown)
    squares = iter(marks_drawn)
    for status in STATUSES:
        next(squares).set_offsets(np.column_stack(marks[status]).reshape(-1, 2))
    steps = shown["step"].to_numpy()
    next(squares).set_data(steps, _max_line(shown))
    next(squares).set_data(steps, shown["frontier"].to_numpy(dtype=float))
    for policy, _ in _RINGS:  # the order `_timeline_marks` adds the rings in
        if policy == "max" or rings["frontier"][0]:
            next(squares).set_offsets(np.column_stack(rings[policy]).reshape(-1, 2))
    next(squares).set_xdata([upto, upto])


def _timeline_marks(
    ax: Axes, shown: pd.DataFrame, upto: int, mark_step: bool, note: bool = True
) -> list:
    """Status squares, both watermark step lines, orphan rings and the orphan note."""
    marks, rings = _mark_points(shown)
    out: list = [
        ax.scatter(*marks[s], s=46, marker=STATUS_MARKS[s], color=COLORS[s], label=s, zorder=3)
        for s in STATUSES
    ]
    steps = shown["step"].to_numpy()
    max_line = _max_line(shown)
    out += ax.step(
        steps,
        max_line,
        where="post",
        color=COLORS["max"],
        lw=2.0,
        ls="--",
        label=POLICY_LABELS["max"],
        gid="max_watermark",
        zorder=4,
    )
    out += ax.step(
        steps,
        shown["frontier"].to_numpy(dtype=float),
        where="post",
        color=COLORS["frontier"],
        lw=2.4,
        label=POLICY_LABELS["frontier"],
        gid="frontier",
        zorder=4,
    )
    for policy, size in _RINGS:
        xs, ys = rings[policy]
        if policy == "max" or xs:  # the frontier never orphans; an empty ring set is noise
            out.append(
                ax.scatter(
                    xs,
                    ys,
                    s=size,
                    facecolors="none",
                    edgecolors=COLORS["orphan"],
                    linewidths=1.6,
                    label=f"orphan under {policy.upper()}",
                    gid=f"orphans_{policy}",
                    zorder=5,
                )
            )
    if mark_step:
        out.append(ax.axvline(upto, color="#555555", lw=0.8, alpha=0.6))
    if not note:
        return out
    current = shown.iloc[-1]
    lost = current[POLICY_COLUMNS["max"].orphan_ids]
    out.append(
        ax.text(
            0.01,
            0.98,
            f"step {upto}: {len(lost)} orphan(s) under MAX{_ids_text(lost)}, "
            f"{len(current[POLICY_COLUMNS['frontier'].orphan_ids])} under the frontier",
            transform=ax.transAxes,
            va="top",
            fontsize=8.5,
            color=COLORS["orphan"],
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1.5},
        )
    )
    return out


def timeline_figure(
    timeline: pd.DataFrame,
    shard: str | None = None,
    step: int | None = None,
    title: str = "MAX watermark vs gap-free frontier",
    width: float = 7.6,
    height: float = 3.6,
) -> Figure:
    """`run_scenario` output for one shard: row status per step, both watermarks, orphans.

    Only steps up to `step` (default: the last) are drawn; the axes keep the full range so an
    animation does not jump. Red rings mark rows the MAX policy orphaned at that step.
    """
    return TimelineCanvas(width, height).render(timeline, shard, step, title)


@styled
def checkpoint_ranges_figure(
    summaries: Mapping[str, Sequence[Summary]],
    orphans: Mapping[str, Sequence[int]] | None = None,
    last_id: int | None = None,
    title: str = "Chained checkpoints per policy",
    width: float = 7.6,
    height: float = 2.8,
) -> Figure:
    """Each policy's summaries as id ranges on one row: items as dots, orphans as red rings.

    A range that does not start at the previous end + 1 leaves a hatched hole; ids after the
    last range up to `last_id` are outlined as not covered yet.
    """
    orphans = orphans or {}
    ax = _axes(width, height, right=0.68, bottom=0.2)
    fig = figure_of(ax)
    policies = [p for p in POLICIES if p in summaries]
    top = last_id or 0
    for y, policy in enumerate(policies):
        color = COLORS[policy]
        expected = 1
        for k, s in enumerate(summaries[policy]):
            if s.start_id > expected:
                ax.barh(
                    y,
                    s.start_id - expected,
                    left=expected - 0.5,
                    height=0.55,
                    color="white",
                    edgecolor=COLORS["orphan"],
                    hatch="///",
                    zorder=2,
                )
            ax.barh(
                y,
                s.end_id - s.start_id + 1,
                left=s.start_id - 0.5,
                height=0.55,
                color=color,
                alpha=0.28 if k % 2 else 0.45,
                edgecolor=color,
                zorder=2,
            )
            ax.text(
                (s.start_id + s.end_id) / 2,
                y + 0.36,
                f"[{s.start_id}, {s.end_id}]",
                ha="center",
                va="bottom",
                fontsize=9,
                color=color,
            )
            ax.scatter(s.item_ids, [y] * len(s.item_ids), s=22, color="black", zorder=3)
            expected = s.end_id + 1
            top = max(top, s.end_id)
        if last_id is not None and last_id >= expected:
            ax.barh(
                y,
                last_id - expected + 1,
                left=expected - 0.5,
                height=0.55,
                color="none",
                edgecolor="#888888",
                ls=":",
                zorder=1,
            )
        lost = list(orphans.get(policy, ()))
        ax.scatter(
            lost,
            [y] * len(lost),
            s=150,
            facecolors="none",
            edgecolors=COLORS["orphan"],
            linewidths=1.8,
            zorder=4,
        )
    ax.set_yticks(range(len(policies)), [POLICY_SHORT[p] for p in policies], fontsize=9)
    ax.set_ylim(-0.6, len(policies) - 0.2)
    ax.set_xlim(0.3, top + 0.7)
    ax.set_xticks(range(1, top + 1))
    ax.set_xlabel("message id")
    ax.set_ylabel("policy")
    ax.set_title(title)
    ax.grid(False, axis="y")
    handles = [
        *(Patch(color=COLORS[p], alpha=0.45, label=f"summary range ({p})") for p in policies),
        ax.scatter([], [], s=22, color="black", label="row in a summary"),
        ax.scatter(
            [],
            [],
            s=150,
            facecolors="none",
            edgecolors=COLORS["orphan"],
            linewidths=1.8,
            label="orphan: terminal, in no summary",
        ),
        Patch(facecolor="white", edgecolor=COLORS["orphan"], hatch="///", label="hole in chain"),
        Patch(facecolor="none", edgecolor="#888888", ls=":", label="not covered yet"),
    ]
    ax.legend(handles=handles, **RIGHT_LEGEND)
    fig.subplots_adjust(left=0.19, right=0.64)
    return fig


@styled
def orphan_rates_figure(
    rates: pd.DataFrame,
    title: str = "Delivery orders that orphan a row, every order of n messages",
    width: float = 7.6,
    height: float = 3.4,
) -> Figure:
    """`explorer.orphan_rates` as grouped bars: share of orders with >= 1 orphan per policy."""
    ax = _axes(width, height)
    fig = figure_of(ax)
    bar = 0.38
    for k, policy in enumerate(_DRAW_ORDER):
        part = rates[rates["policy"] == policy].sort_values("n")
        xs = part["n"].to_numpy() + (k - 0.5) * bar
        ax.bar(xs, part["share"], width=bar, color=COLORS[policy], label=POLICY_LABELS[policy])
        label_share_bars(
            ax,
            xs,
            part["share"],
            part["orphaning_orders"],
            part["orders"],
            fontsize=8,
            rotation=90,
            color=COLORS[policy],
        )
    ns = sorted(rates["n"].unique())
    ax.set_xticks(ns)
    ax.set_ylim(0, 1.45)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel("messages in the shard (n); every delivery order enumerated")
    ax.set_ylabel("share of orders orphaning >= 1 row")
    ax.set_title(title)
    ax.legend(loc="upper left", ncols=2, fontsize=8)
    return fig


@styled
def trigger_cost_figure(
    cost: pd.DataFrame,
    title: str = "One worker's trigger check as dormant shards pile up",
    width: float = 7.6,
    height: float = 3.4,
) -> Figure:
    """`triggers.trigger_cost`: per-shard count vs global GROUP BY poll, per check.

    Plots microseconds for a timed run, SQLite VM steps for a `measure="vm_steps"` run.
    """
    timed = "per_shard_s" in cost
    scale, unit = (
        (1e6, "time per check (us, log scale)")
        if timed
        else (1, "SQLite VM steps per check (log scale)")
    )
    suffix = "_s" if timed else "_steps"
    ax = _axes(width, height)
    fig = figure_of(ax)
    xs = cost["dormant_shards"]
    poll = cost[f"global_poll{suffix}"] * scale
    ax.plot(
        xs,
        poll,
        marker="o",
        color=COLORS["max"],
        label="global GROUP BY poll, filtered client-side",
        gid="global_poll",
    )
    ax.plot(
        xs,
        cost[f"per_shard{suffix}"] * scale,
        marker="s",
        color=COLORS["frontier"],
        label="per-shard count of (coverage_end, frontier]",
        gid="per_shard",
    )
    ax.annotate(
        f"x{cost['ratio'].iloc[-1]:.0f} {'slower' if timed else 'more work'}",
        (xs.iloc[-1], poll.iloc[-1]),
        xytext=(-8, -4),
        textcoords="offset points",
        ha="right",
        va="top",
        fontsize=8.5,
        color=COLORS["max"],
    )
    ax.set_yscale("log")
    ax.set_xlabel("dormant shards in the table")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(loc="center right", fontsize=8)
    return fig


@styled
def fanout_cost_figure(
    cost: pd.DataFrame,
    title: str = "One poll tick of K workers: global poll vs per-shard count",
    width: float = 7.6,
    height: float = 3.6,
) -> Figure:
    """`triggers.fanout_cost`: VM steps per tick against K, one line per shard count and rule.

    The global poll's lines climb with K and sit higher for every extra shard (K x shards);
    the per-shard lines coincide whatever the shard count (K x 1).
    """
    ax = _axes(width, height, right=0.66)
    rules = (
        ("global_poll", "o", COLORS["max"], "global poll"),
        ("per_shard", "s", COLORS["frontier"], "per-shard count"),
    )
    styles = ["-", "--", ":", "-."]
    for i, count in enumerate(sorted(cost["shards"].unique())):
        part = cost[cost["shards"] == count]
        for column, marker, color, name in rules:
            ax.plot(
                part["workers"],
                part[f"{column}_steps"],
                marker=marker,
                color=color,
                ls=styles[i % len(styles)],
                label=f"{name}, {count} shards",
                gid=f"{column}_{count}",
            )
    ax.set(
        yscale="log",
        xticks=sorted(cost["workers"].unique()),
        title=title,
        xlabel="K: workers polling in the same tick",
        ylabel="SQLite VM steps per tick (log)",
    )
    ax.legend(**RIGHT_LEGEND)
    return figure_of(ax)


@styled
def busy_loop_figure(
    trace: pd.DataFrame,
    title: str = "Trigger on rows after the checkpoint, or on newly covered rows?",
    width: float = 7.6,
    height: float = 3.4,
) -> Figure:
    """`triggers.busy_loop_trace`: the "ready" count each rule reads per tick; x = wasted run."""
    ax = _axes(width, height, right=0.68)
    fig = figure_of(ax)
    for key, part in trace.groupby("trigger", sort=False):
        trigger = str(key)
        color = TRIGGER_COLORS[trigger]
        dashed = trigger == "after_checkpoint"
        ax.step(
            part["tick"],
            part["ready"],
            where="mid",
            color=color,
            lw=2,
            ls="--" if dashed else "-",
            zorder=3 if dashed else 2,
            label=TRIGGER_LABELS[trigger],
            gid=trigger,
        )
        wasted = part[part["wasted"]]
        done = part[part["summarized"]]
        ax.scatter(wasted["tick"], wasted["ready"], marker="x", s=60, color=color, zorder=4)
        ax.scatter(
            done["tick"],
            done["ready"],
            marker="o",
            s=60,
            facecolors="none",
            edgecolors=color,
            linewidths=1.8,
            zorder=4,
        )
    ax.scatter([], [], marker="x", s=60, color="#444444", label="run that advanced nothing")
    ax.scatter(
        [],
        [],
        marker="o",
        s=60,
        facecolors="none",
        edgecolors="#444444",
        label="run that wrote a summary",
    )
    wasted_runs = int(trace["wasted"].sum())
    ax.text(
        0.01,
        0.97,
        f"{wasted_runs} wasted run(s) in total",
        transform=ax.transAxes,
        va="top",
        fontsize=8.5,
    )
    ax.set_xlabel("poll tick")
    ax.set_ylabel('rows counted as "ready"')
    ax.set_ylim(-0.5, trace["ready"].max() + 1.5)
    ax.set_title(title)
    ax.legend(**RIGHT_LEGEND)
    return fig
