"""The room on the exercises (`python -m labkit progress`): per exercise, how many solved, are
still trying or have not started, the median attempts and hints, and the median minutes to ✓.

Draws what `labkit.exercises.progress.room` counted; one row per exercise, top to bottom in
the order the room reached them, so a long orange bar is where the room is stuck.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from labkit.plots.style import COLORS, OKABE_ITO, new_figure, styled

if TYPE_CHECKING:
    from labkit.exercises.progress import ExerciseRoom

# The three states in the colours of a delivery's: done, under way, waiting.
STATE_COLORS = {
    "solved": COLORS["delivered"],
    "trying": COLORS["running"],
    "not started": COLORS["pending"],
}
HINT_COLOR = OKABE_ITO["blue"]


@styled
def room_figure(rooms: Sequence[ExerciseRoom], title: str = "Where the room is") -> Figure:
    """Three panels sharing the exercises: participants by state (stacked), the median attempts
    to ✓, attempts so far and hints, and the median minutes to ✓."""
    n = max(len(rooms), 1)
    fig = new_figure(11.0, 1.6 + 0.42 * n, layout="constrained")
    states, medians_ax, minutes = fig.subplots(1, 3, sharey=True, width_ratios=(3, 2, 2))
    y = np.arange(len(rooms))
    names = [r.exercise for r in rooms]

    left = np.zeros(len(rooms))
    for state, counts in (
        ("solved", [r.solved for r in rooms]),
        ("trying", [r.trying for r in rooms]),
        ("not started", [r.not_started for r in rooms]),
    ):
        bars = states.barh(y, counts, left=left, color=STATE_COLORS[state], label=state)
        labels = [str(c) if c else "" for c in counts]
        states.bar_label(bars, labels=labels, label_type="center", fontsize=9)
        left = left + np.asarray(counts)
    states.set_yticks(y, names)
    states.invert_yaxis()
    states.set_xlabel("participants")
    states.xaxis.set_major_locator(MaxNLocator(integer=True))

    for shift, values, color, marker, label in (
        (-0.25, [r.attempts_to_solve for r in rooms], STATE_COLORS["solved"], "o", "attempts to ✓"),
        (0.0, [r.attempts_so_far for r in rooms], STATE_COLORS["trying"], "D", "attempts so far"),
        (0.25, [r.hints for r in rooms], HINT_COLOR, "s", "hints"),
    ):  # a little apart, so equal medians do not hide each other
        _dots(medians_ax, y + shift, values, color, marker, label)
    medians_ax.set_xlabel("median count")
    medians = [v for r in rooms for v in (r.attempts_to_solve, r.attempts_so_far, r.hints) if v]
    medians_ax.set_xlim(-0.4, max(medians, default=1.0) + 0.6)  # a 0 stays clear of the spine
    medians_ax.xaxis.set_major_locator(MaxNLocator(integer=True))

    mins = [r.minutes_to_solve for r in rooms]
    minutes.barh(y, [m or 0.0 for m in mins], color=STATE_COLORS["solved"])
    for yi, m in zip(y, mins, strict=True):
        text = "nobody yet" if m is None else f"{m:g}"
        minutes.annotate(text, (m or 0.0, yi), xytext=(3, 0), textcoords="offset points",
                         va="center", fontsize=9)  # fmt: skip
    minutes.set_xlabel("median minutes to ✓")
    minutes.set_xlim(0, max([m for m in mins if m is not None], default=1.0) * 1.25 or 1.0)
    handles = [*states.get_legend_handles_labels()[0], *medians_ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=9)
    fig.suptitle(title)
    return fig


def _dots(
    ax: Axes, y: np.ndarray, values: Sequence[float | None], color: str, marker: str, label: str
) -> None:
    """One marker per exercise at its median (none where nobody counts)."""
    shown = [(yi, v) for yi, v in zip(y, values, strict=True) if v is not None]
    ax.plot([v for _, v in shown], [yi for yi, _ in shown], marker, color=color, label=label,
            markersize=7, linestyle="none")  # fmt: skip
