"""Figures of part three: the commit-order timeline, the fixes compared, and ballots across
machines (the head over time per worker).

Each takes what `labkit.pg.commit_order`, `labkit.pg.stress` or `labkit.pg.ballots` returned and
draws it; nothing here talks to a server.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from labkit.pg.ballots import BallotRun
from labkit.pg.commit_order import RULES, LabState
from labkit.pg.stress import StressResult
from labkit.plots.style import COLORS, OKABE_ITO, RIGHT_LEGEND, figure_of, single_axes, styled

# The one name of each rule, in the legend and on notebook 07's widget message line.
RULE_NAMES = {"id_order": "no-wait frontier", "horizon": "xmin horizon wait"}
RULE_STYLE = {
    "id_order": (COLORS["max"], RULE_NAMES["id_order"]),
    "horizon": (COLORS["frontier"], RULE_NAMES["horizon"]),
}
WRITER_COLORS = {"A": COLORS["writer_a"], "B": COLORS["writer_b"]}
STEP_WORDS = {
    "insert": "inserts",
    "commit": "commits",
    "deliver": "deliver",
    "summarize": "summarize",
}


def step_label(actor: str, action: str) -> str:
    """A step as the x axis names it: "A inserts", "B commits", "deliver", "summarize"."""
    word = STEP_WORDS.get(action, action)
    return f"{actor} {word}" if actor != "worker" else word


@styled
def commit_order_timeline_figure(state: LabState, title: str = "") -> Figure:
    """Id against step: each row drawn from its insert (hollow) to its commit (filled), the
    delivery as a tick, each rule's coverage as a step line, orphans ringed in red."""
    ax = single_axes(8.4, 4.2, left=0.07, right=0.66, top=0.9, bottom=0.24)
    fig = figure_of(ax)
    last = max(len(state.events) - 1, 1)
    for row in state.rows:
        color = WRITER_COLORS.get(row.writer, "black")
        end = row.committed if row.committed is not None else last
        ax.plot([row.inserted, end], [row.row_id] * 2, ":", color=color, lw=1.5)
        ax.plot(row.inserted, row.row_id, "o", mfc="white", mec=color, ms=7)
        if row.committed is not None:
            ax.plot(row.committed, row.row_id, "o", color=color, ms=7)
        if row.delivered is not None:
            ax.plot(row.delivered, row.row_id, "|", color=COLORS["delivered"], ms=14, mew=2)
    steps = [e.step for e in state.events]
    for rule in RULES:
        color, label = RULE_STYLE[rule]
        ax.step(
            steps,
            [e.coverage[rule] for e in state.events],
            where="post",
            color=color,
            lw=2,
            label=f"coverage: {label}",
        )
        lost = state.orphans[rule]
        if lost:
            ax.plot(
                [last] * len(lost),
                lost,
                "o",
                ms=16,
                mfc="none",
                mec=COLORS["orphan"],
                mew=2,
                label=f"orphaned by {label}",
            )
    for writer, color in WRITER_COLORS.items():
        ax.plot([], [], "o", color=color, label=f"writer {writer}: insert ○ → commit ●")
    ax.plot([], [], "|", color=COLORS["delivered"], ms=10, mew=2, label="delivered")
    ax.set_xlabel("step")
    ax.set_ylabel("row id")
    top = max([r.row_id for r in state.rows] + [1])
    ax.set_ylim(-0.3, top + 0.7)
    ax.set_yticks(range(0, top + 1))
    ax.set_xticks(steps)
    ax.set_xticklabels(
        [step_label(e.actor, e.action) for e in state.events],
        rotation=60,
        ha="right",
        rotation_mode="anchor",
        fontsize=9,
    )
    ax.set_title(
        title or "A smaller id commits late: the no-wait frontier passes it, the horizon waits"
    )
    ax.legend(**RIGHT_LEGEND)
    return fig


@styled
def fixes_figure(outcomes: Sequence, title: str = "") -> Figure:
    """Orphans per fix on the same scripted interleavings, each bar labelled with its cost."""
    ax = single_axes(6.4, 3.4, left=0.1, right=0.97, top=0.86, bottom=0.2)
    names = [o.fix for o in outcomes]
    lost = [o.orphans for o in outcomes]
    colors = [COLORS["max"] if n.startswith("no-wait") else COLORS["frontier"] for n in names]
    ax.bar(range(len(names)), lost, color=colors, width=0.6)
    for i, o in enumerate(outcomes):
        cost = (
            f"{o.waits} writer waits"
            if o.waits
            else f"{o.held} summaries held"
            if o.held
            else "never waits"
        )
        ax.text(
            i,
            o.orphans + 0.3,
            f"{o.orphans} of {o.rows} rows lost\n{cost}",
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylabel("orphaned rows")
    ax.set_ylim(0, max(lost + [1]) * 1.5 + 1)
    ax.set_title(title or "Same interleavings, three rules: who loses rows, and what it costs")
    return figure_of(ax)


@styled
def throughput_figure(results: Sequence[StressResult], title: str = "") -> Figure:
    """Rows/s committed and summarized per rule in the stress test, orphans written on top."""
    ax = single_axes(6.8, 3.6, left=0.1, right=0.72, top=0.86, bottom=0.14)
    fig = figure_of(ax)
    xs = range(len(results))
    width = 0.38
    ax.bar(
        [x - width / 2 for x in xs],
        [r.committed_per_s for r in results],
        width,
        color="#9ecae1",
        label="rows/s committed",
    )
    ax.bar(
        [x + width / 2 for x in xs],
        [r.summarized_per_s for r in results],
        width,
        color=COLORS["frontier"],
        label="rows/s summarized",
    )
    for x, r in zip(xs, results, strict=True):
        top = max(r.committed_per_s, r.summarized_per_s)
        ax.text(
            x,
            top * 1.03,
            f"{r.orphans} orphans / {r.rows}",
            ha="center",
            va="bottom",
            fontsize=8,
            color=COLORS["orphan"] if r.orphans else "black",
        )
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r.rule for r in results])
    ax.set_ylabel("rows per second")
    ax.set_ylim(0, max(max(r.committed_per_s, r.summarized_per_s) for r in results) * 1.25)
    ax.set_title(title or f"{results[0].writers} writers, late commits: throughput per rule")
    ax.legend(**RIGHT_LEGEND)
    return fig


WORKER_PALETTE = tuple(OKABE_ITO.values())


@styled
def ballots_over_time_figure(run: BallotRun, title: str = "") -> Figure:
    """The head over time: the reader's samples as a grey step line, each worker's commits as
    filled dots in its colour, and its refused ballots as small crosses at the watermark they
    were reserved on."""
    ax = single_axes(8.4, 4.0, left=0.08, right=0.7, top=0.9, bottom=0.13)
    fig = figure_of(ax)
    end = max((t.t for t in run.ticks), default=0.0) * 1.05 + 1e-3
    ax.step(
        [t * 1e3 for t, _ in run.reader],
        [h for _, h in run.reader],
        where="post",
        color=COLORS["reject"],
        lw=1.5,
        label="head seen by the reader",
    )
    for worker in range(run.workers):
        color = WORKER_PALETTE[worker % len(WORKER_PALETTE)]
        mine = [t for t in run.ticks if t.worker == worker]
        won = [t for t in mine if t.committed]
        lost = [t for t in mine if not t.committed]
        ax.plot(
            [t.t * 1e3 for t in lost],
            [t.watermark for t in lost],
            "x",
            color=color,
            ms=4,
            alpha=0.6,
        )
        ax.plot(
            [t.t * 1e3 for t in won],
            [t.version for t in won],
            "o",
            color=color,
            ms=5,
            label=f"worker {worker}: {len(won)} won, {len(lost)} refused",
        )
    ax.plot([], [], "x", color="black", ms=4, label="refused (at its watermark)")
    ax.set_xlabel("milliseconds since the workers started")
    ax.set_ylabel("catalog version (head)")
    ax.set_xlim(0, end * 1e3)
    ax.set_ylim(-0.5, run.invariants.head + 1)
    ax.set_title(title or f"{run.workers} workers, one catalog: each version committed once")
    ax.legend(**RIGHT_LEGEND)
    return fig
