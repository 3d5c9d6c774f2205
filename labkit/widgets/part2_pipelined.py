"""Widget for notebook 05's pipelined ballots: a depth slider W (1-8), a fault picker and a
random seed; the lanes of one `pipelined` run (its hold and its head), throughput against W,
and the comparison with `ballot` and `fenced` at the chosen W.

Runs come from `labkit.designs.pipeline_study` and are memoised per (W, fault, seed), the depth
curve per (fault, seed): moving the slider back to a depth already seen only redraws.
"""

from __future__ import annotations

import html
import time

import ipywidgets as widgets
import pandas as pd

from labkit.designs.pipeline_study import (
    FLUSHED,
    REFUSED,
    compare_at,
    depth_table,
    lanes,
)
from labkit.designs.simulator import FAULTS, simulate
from labkit.plots.part2_pipelined import pipelined_figure
from labkit.plots.style import png_bytes
from labkit.widgets.common import WIDGET_DPI, BatchedApp, classed, png_output

NO_FAULT = "none"
MAX_DEPTH = 8
TICKS = 20
SHOWN_COLUMNS = (
    "name",
    "W",
    "throughput",
    "latency p50",
    "latency p95",
    "wasted calls / commit",
    "answers refused",
    "ticks replayed",
    "answers held",
    "rewinds",
)


def idle_controls(window: int) -> list[str]:
    """What the controls leave unchanged at depth `window`, in words (shown under them)."""
    notes = ["the single ballot keeps one ballot in flight: W does not change its row"]
    if window == 1:
        notes.append(
            "at W = 1 the hedged ballots have no second call to hedge with, so their "
            "row is left out, and pipelined ballots are the single ballot"
        )
    return notes


def _table_html(table: pd.DataFrame) -> str:
    """The comparison as an HTML table that scrolls sideways inside its own box."""
    head = "".join(f"<th style='padding:0 6px'>{html.escape(c)}</th>" for c in SHOWN_COLUMNS)
    body = []
    for row in table[list(SHOWN_COLUMNS)].itertuples(index=False):
        mine = row[0] == "pipelined ballots"
        style = " style='font-weight:bold;background:#eaf7f9'" if mine else ""
        cells = "".join(
            f"<td style='white-space:nowrap;padding:0 6px'>{html.escape(str(v))}</td>" for v in row
        )
        body.append(f"<tr{style}>{cells}</tr>")
    return (
        "<div class='wb-scroll' style='overflow-x:auto;width:0;min-width:100%'>"
        "<table class='wb-table' style='border-collapse:collapse;font-size:12px'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


class PipelineDepthApp(BatchedApp):
    """Depth, fault and seed in; lanes, hold, head and the three designs' metrics out.

    `ui` is the container to display; `trace` is the `pipelined` run drawn, `table` the
    comparison at the chosen W (`compare_at`), `depth` the throughput curve (`depth_table`),
    `last_png` the picture shown and `timings` each update's duration in seconds.
    """

    def __init__(self, window: int = 4, fault: str = "stall", seed: int = 0) -> None:
        self.trace = pd.DataFrame()
        self.table = pd.DataFrame()
        self.depth = pd.DataFrame()
        self.last_png = b""
        self.timings: list[float] = []
        self._runs: dict[tuple[int, str, int], tuple[pd.DataFrame, pd.DataFrame]] = {}
        self._depths: dict[tuple[str, int], pd.DataFrame] = {}

        self.window = classed(
            widgets.IntSlider(
                value=window,
                min=1,
                max=MAX_DEPTH,
                description="W (in flight)",
                continuous_update=False,
                style={"description_width": "95px"},
                layout=widgets.Layout(width="330px"),
            ),
            "wb-pipe-depth",
        )
        self.fault = classed(
            widgets.Dropdown(
                options=[NO_FAULT, *FAULTS],
                value=fault,
                description="fault",
                layout=widgets.Layout(width="230px"),
            ),
            "wb-pipe-fault",
        )
        self.seed = classed(
            widgets.IntText(
                value=seed,
                description="random seed",
                style={"description_width": "initial"},
                layout=widgets.Layout(width="170px"),
            ),
            "wb-pipe-seed",
        )
        self.idle = classed(widgets.HTML(layout=widgets.Layout(min_height="2.6em")), "wb-pipe-idle")
        self.state = classed(widgets.HTML(), "wb-pipe-state")
        self.out = classed(widgets.Output(), "wb-pipe-lanes")
        self.metrics = classed(widgets.HTML(), "wb-pipe-metrics")
        for control in (self.window, self.fault, self.seed):
            control.observe(self._changed, "value")
        self.ui = widgets.VBox(
            [
                widgets.HBox(
                    [self.window, self.fault, self.seed],
                    layout=widgets.Layout(flex_flow="row wrap"),
                ),
                self.idle,
                self.state,
                self.out,
                self.metrics,
            ]
        )
        self.ui.add_class("wb-pipelined-app")
        self.update()

    @property
    def faults(self) -> tuple[str, ...]:
        """The fault classes of the run: none, or the one picked."""
        return () if self.fault.value == NO_FAULT else (self.fault.value,)

    def _run(self, window: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        key = (window, self.fault.value, seed)
        if key not in self._runs:
            trace = simulate("pipelined", self.faults, seed, ticks=TICKS, window=window)
            self._runs[key] = (trace, compare_at(window, self.faults, seed, ticks=TICKS))
        return self._runs[key]

    def _depth(self, seed: int) -> pd.DataFrame:
        key = (self.fault.value, seed)
        if key not in self._depths:
            self._depths[key] = depth_table(faults=self.faults, seed=seed, ticks=TICKS)
        return self._depths[key]

    def _state_line(self) -> str:
        """The run in one line: the head it reached, what the hold took, what was flushed."""
        shown = lanes(self.trace)
        flushed = sum(lane.end == FLUSHED for lane in shown)
        refused = sum(lane.end == REFUSED for lane in shown)
        held = sum(lane.held for lane in shown)
        head = int(self.trace["head_version"].iloc[-1])
        return (
            f"<b>pipelined, W = {self.window.value}, {html.escape(self.fault.value)}</b>: "
            f"{len(shown)} requests; {held} answers waited in the hold; {refused} refused; "
            f"{flushed} flushed (replayed because a ballot below them was lost); "
            f"the head ends at v{head}"
        )

    def update(self) -> None:
        """Simulate (or recall) the runs for the controls, redraw, refresh the table; time it."""
        start = time.perf_counter()
        window, seed = int(self.window.value), int(self.seed.value)
        self.trace, self.table = self._run(window, seed)
        self.depth = self._depth(seed)
        self.idle.value = (
            "<div style='font-size:12px;color:#555'>Does nothing here: "
            + "; ".join(html.escape(n) for n in idle_controls(window))
            + ".</div>"
        )
        self.state.value = self._state_line()
        title = f"W = {window}, fault: {self.fault.value}, random seed {seed}"
        fig = pipelined_figure(
            self.trace, self.depth, title=title, window=window, width=8.4, height=4.0
        )
        self.last_png = png_bytes(fig, dpi=WIDGET_DPI)
        png_output(self.out, self.last_png)
        self.metrics.value = _table_html(self.table)
        self.timings.append(time.perf_counter() - start)
