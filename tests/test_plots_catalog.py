"""Part-two figures: titles, labelled axes, legends; rewind markers exactly at rewind rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from labkit.designs.arrival_orders import run_schedule
from labkit.designs.registry import DESIGNS, DISPLAY_NAMES
from labkit.designs.simulator import simulate
from labkit.plots.catalog import (
    arrival_lanes_figure,
    explorer_figure,
    five_designs_figure,
    restarts_figure,
    version_trace_figure,
)
from labkit.plots.style import png_bytes
from labkit.widgets.catalog import SEED_FIRST_REQUEST, SEED_INVERTED


@pytest.fixture(scope="module")
def traces() -> dict[str, pd.DataFrame]:
    return {d: simulate(d, ["inverted", "duplicate"], seed=0) for d in DESIGNS}


def _by_gid(fig: Figure, gid: str) -> list:
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def _assert_labelled(fig: Figure) -> None:
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert visible
    assert fig.get_suptitle() or all(ax.get_title() or ax.get_title(loc="left") for ax in visible)
    assert any(ax.get_xlabel() for ax in visible) and any(ax.get_ylabel() for ax in visible)
    assert fig.legends or any(ax.get_legend() is not None for ax in visible)
    assert png_bytes(fig).startswith(b"\x89PNG")


def _rewind_points(trace: pd.DataFrame) -> np.ndarray:
    rows = trace[trace["rewind"].astype(bool)]
    return np.column_stack([rows["t"].to_numpy(float), rows["head_version"].to_numpy(float)])


def test_version_trace_marks_rewinds_exactly_where_the_trace_rewinds(traces) -> None:
    fig = version_trace_figure(traces)
    _assert_labelled(fig)
    assert fig.axes[0].get_title()
    for design, trace in traces.items():
        (marks,) = _by_gid(fig, f"rewind:{design}")
        np.testing.assert_allclose(marks.get_offsets().reshape(-1, 2), _rewind_points(trace))
    assert trace["rewind"].sum() == 0  # fenced, the last one, never rewinds
    assert traces["callback"]["rewind"].sum() > 0


def test_rejected_responses_are_ticked(traces) -> None:
    fig = version_trace_figure(traces["ballot"])
    (ticks,) = _by_gid(fig, "reject:ballot")
    rejected = traces["ballot"].query("event == 'deliver' and committed == False")
    assert len(ticks.get_offsets()) == len(rejected) > 0


def test_five_designs_small_multiples_share_axes_and_mark_rewinds(traces) -> None:
    fig = five_designs_figure(traces, highlight="callback")
    _assert_labelled(fig)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == len(DESIGNS) == 5 and len(fig.axes) == 6  # 2x3, legend in the spare
    assert fig.axes[0].get_shared_x_axes().joined(fig.axes[0], fig.axes[4])
    for design, trace in traces.items():
        (marks,) = _by_gid(fig, f"rewind:{design}")
        np.testing.assert_allclose(marks.get_offsets().reshape(-1, 2), _rewind_points(trace))
    # the panel above the empty slot labels its own time axis
    assert fig.axes[2].get_xlabel() == "simulated time"
    assert [ax.get_title().split("\n")[0] for ax in shown] == [DISPLAY_NAMES[d] for d in DESIGNS]
    assert "hedged ballots" in [t.get_text() for t in fig.legends[0].get_texts()][3]
    row = five_designs_figure(traces, ncols=5)
    assert len([ax for ax in row.axes if ax.get_visible()]) == 5


def test_arrival_lanes_figure_from_run_schedule() -> None:
    results = [run_schedule(d, SEED_INVERTED, first_request=SEED_FIRST_REQUEST) for d in DESIGNS]
    fig = arrival_lanes_figure(results)
    _assert_labelled(fig)
    assert len(fig.axes) == len(DESIGNS)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "unknown ballot" in texts
    partial = arrival_lanes_figure(results[0], upto=2)
    assert len(partial.axes[0].collections) < len(fig.axes[0].collections)


def test_explorer_figure_labels_each_bar() -> None:
    table = pd.DataFrame(
        {"design": list(DESIGNS), "orders": [32, 32, 32, 124, 32], "rewinding": [6, 1, 0, 0, 0]}
    )
    fig = explorer_figure(table)
    _assert_labelled(fig)
    assert [t.get_text() for t in fig.axes[0].texts] == ["6/32", "1/32", "0/32", "0/124", "0/32"]


def test_restarts_figure_marks_crash_and_restart() -> None:
    trs = {d: simulate(d, ["crash"], seed=0) for d in ("callback", "ballot")}
    fig = restarts_figure(trs)
    _assert_labelled(fig)
    ax = fig.axes[0]
    crash_times = {float(t) for tr in trs.values() for t in tr.loc[tr["event"] == "crash", "t"]}
    vlines = {
        float(line.get_xdata()[0])
        for line in ax.lines
        if line.get_gid() is None and len(set(line.get_xdata())) == 1
    }
    assert crash_times and crash_times <= vlines
    (seen,) = _by_gid(fig, "last_seen:ballot")
    assert list(seen.get_ydata()) == list(trs["ballot"]["head_version"].cummax())


# --- bug 2 made visible, and the workbench picture ----------------------------------------

from labkit.designs.lessons import BUG2_FAULTS, BUG2_SEED  # noqa: E402
from labkit.designs.schedule_builder import ScheduleBuilder  # noqa: E402
from labkit.plots.catalog import rewind_panels_figure, workbench_figure  # noqa: E402


def _share_below_previous_head(line) -> float:
    """Share of the axes' x range during which a step line (where='post') is below its
    running maximum, read from the plotted data."""
    x, y = (np.asarray(a, dtype=float) for a in line.get_data())
    below = y[:-1] < np.maximum.accumulate(y)[:-1]
    lo, hi = line.axes.get_xlim()
    return float(np.sum(np.diff(x)[below]) / (hi - lo))


def test_bug2_figure_shows_the_callback_fall_for_a_visible_share() -> None:
    trs = {d: simulate(d, BUG2_FAULTS, seed=BUG2_SEED) for d in ("callback", "ballot")}
    fig = rewind_panels_figure(trs)
    _assert_labelled(fig)
    (callback,) = _by_gid(fig, "trace:callback")
    (ballot,) = _by_gid(fig, "trace:ballot")
    assert callback.axes is not ballot.axes  # one panel each: no line hides the other
    assert _share_below_previous_head(callback) >= 0.03
    assert _share_below_previous_head(ballot) == 0.0
    (fall,) = _by_gid(fig, "fall:callback")
    assert fall.get_text().startswith("reader saw v") and "\u2192" in fall.get_text()
    assert not _by_gid(fig, "fall:ballot")


def test_workbench_figure_draws_lanes_heads_and_the_fall() -> None:
    b = ScheduleBuilder()
    b.use_preset("inverted")
    fig = workbench_figure(b.runs, b.steps, "callback")
    assert len(fig.axes) == 1 + len(b.designs)
    for design, run in b.runs.items():
        (head,) = _by_gid(fig, f"head:{design}")
        assert list(head.get_ydata()[:-1]) == run.heads
    (fall,) = [a for a in _by_gid(fig, "fall:callback") if a.get_visible()]
    assert fall.get_text() == "reader saw v2 \u2192 v1"
    assert not any(a.get_visible() for a in _by_gid(fig, "fall:ballot"))
    (lanes,) = _by_gid(fig, "lanes")
    assert len(lanes.get_segments()) == len(b.runs["callback"].lanes)
    assert png_bytes(fig).startswith(b"\x89PNG")
