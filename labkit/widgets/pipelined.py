"""Widget for notebook 05b's pipelined ballots: a depth slider W (1-8), a fault picker and a
random seed; the lanes of one `pipelined` run (its hold and its head), throughput against W,
and the comparison with `ballot` and `fenced` at the chosen W.

The rules come from `labkit.designs.pipeline_study`; each simulated run is memoised per
(design, W, fault, seed), so the table at W and the depth curve share runs, and what is shown
is kept per (W, fault, seed): moving the slider back to a depth already seen redraws nothing.
"""

from __future__ import annotations

import html
import time
from collections import OrderedDict
from dataclasses import dataclass

import ipywidgets as widgets
import pandas as pd

from labkit.designs.pipeline_study import (
    DEPTHS,
    FLUSHED,
    GAVE_UP,
    NO_FAULT,
    PIPELINED_NAME,
    Lane,
    lanes,
    plan_at,
    summary_row,
)
from labkit.designs.simulator import FAULTS, SimulationRun, run
from labkit.plots.pipelined import (
    END_LABELS,
    END_STYLE,
    HOLD_COLOR,
    LATE_LABEL,
    PipelinedCanvas,
)
from labkit.plots.saved import PipelineDepth
from labkit.plots.style import COLORS
from labkit.widgets.common import (
    WIDGET_DPI,
    BatchedApp,
    WorkAhead,
    classed,
    html_table,
    png_output,
    seed_box,
)

MAX_DEPTH = 8
TICKS = 20
KEPT = 400  # runs, depth curves and shown settings remembered (each kind), oldest forgotten
DEPTH_TOP = 6.0  # throughput axis room: at 20 ticks the curves stay below it for most seeds
AHEAD_DELAY_S = 0.02  # between two steps done ahead while the kernel is idle
SHOWN_COLUMNS = [
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
]
Setting = tuple[int, str, int]  # (W, fault, seed): what the controls say
AheadStep = tuple[str, tuple]  # ("run", (design, W, fault, seed)) or ("view", setting)
_MARKS = {"o": "&#9679;", "X": "&#10006;", "D": "&#9671;", "s": "&#9632;"}


def idle_controls(window: int) -> list[str]:
    """What the controls leave unchanged at depth `window`, in words (shown under them)."""
    notes = ["the single ballot keeps one ballot in flight: W does not change its row"]
    if window == 1:
        notes.append(
            "at W = 1 the hedged ballots have no second call to hedge with, so their "
            "row is left out, and pipelined ballots are the single ballot"
        )
    return notes


def legend_html() -> str:
    """The lanes' legend (`labkit.plots.pipelined.lane_handles`) as one line of HTML:
    it never changes, so the picture does not redraw it."""

    def item(mark: str, color: str, label: str) -> str:
        return (
            f"<span style='white-space:nowrap;margin-right:12px'>"
            f"<span style='color:{color};font-weight:bold'>{mark}</span> {html.escape(label)}"
            "</span>"
        )

    items = [
        item("&#9473;&#9473;", COLORS["pipelined"], "asked, planner working"),
        item("&#9477;&#9477;", HOLD_COLOR, "answered, held"),
        item("&#9473;&#9473;", "black", "the head (a reader's view)"),
    ]
    for outcome, end in END_STYLE.items():
        color = str(end.get("color", "black"))
        items.append(item(_MARKS[str(end["marker"])], color, END_LABELS[outcome]))
    items.append(item("&#9475;", COLORS["reject"], LATE_LABEL))
    style = "font-size:12px;line-height:1.5;white-space:normal;width:0;min-width:100%"
    return f"<div style='{style}'>{' '.join(items)}</div>"  # it wraps between items


def _keep(kept: OrderedDict, key: object, value: object) -> None:
    """Remember `value`, forgetting the oldest entries beyond `KEPT` (a long session's memory
    stays bounded: about 20 MB of runs and pictures at the cap, measured)."""
    kept[key] = value
    while len(kept) > KEPT:
        kept.popitem(last=False)


@dataclass(frozen=True)
class _View:
    """What the app shows for one (W, fault, seed), kept so that coming back only shows it."""

    trace: pd.DataFrame
    table: pd.DataFrame
    depth: pd.DataFrame
    png: bytes
    state: str
    metrics: str
    title: str


class PipelineDepthApp(BatchedApp):
    """Depth, fault and seed in; lanes, hold, head and the three designs' metrics out.

    `ui` is the container to display; `trace` is the `pipelined` run drawn, `table` the
    comparison at the chosen W (as `compare_at` builds it), `depth` the throughput curve (as
    `depth_table`), `last_png` the picture shown and `timings` each update's duration in
    seconds. Every simulated run is kept per (design, W, fault, seed) and shared by the table
    and the curve; the picture is built once (`PipelinedCanvas`) and what the app shows is
    kept per (W, fault, seed), so a setting seen before costs no drawing at all. While the
    kernel is idle the app simulates and draws the settings one move away (`done_ahead`
    counts those steps).
    """

    def __init__(self, window: int = 4, fault: str = "stall", seed: int = 0) -> None:
        self.trace = pd.DataFrame()
        self.table = pd.DataFrame()
        self.depth = pd.DataFrame()
        self.last_png = b""
        self.timings: list[float] = []
        self._runs: OrderedDict[tuple[str, int, str, int], SimulationRun] = OrderedDict()
        self._depths: OrderedDict[tuple[str, int], pd.DataFrame] = OrderedDict()
        self._views: OrderedDict[tuple[int, str, int], _View] = OrderedDict()
        self._ahead = WorkAhead(self._step_ahead)  # the settings one move away, while idle
        self.canvas = PipelinedCanvas(8.4, 3.3, legend=False, depth_top=DEPTH_TOP)

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
        self.seed = seed_box(seed, "wb-pipe-seed", width="170px")
        self.idle = classed(widgets.HTML(layout=widgets.Layout(min_height="2.6em")), "wb-pipe-idle")
        self.state = classed(widgets.HTML(), "wb-pipe-state")
        self.out = classed(widgets.Output(), "wb-pipe-lanes")
        self.legend = classed(widgets.HTML(legend_html()), "wb-pipe-legend")
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
                self.legend,
                self.metrics,
            ]
        )
        self.ui.add_class("wb-pipelined-app")
        self.update()

    @property
    def faults(self) -> tuple[str, ...]:
        """The fault classes of the run: none, or the one picked."""
        return () if self.fault.value == NO_FAULT else (self.fault.value,)

    def _run(self, design: str, window: int, fault: str, seed: int) -> SimulationRun:
        key = (design, window, fault, seed)
        if key not in self._runs:
            faults = () if fault == NO_FAULT else (fault,)
            _keep(self._runs, key, run(design, faults, seed, ticks=TICKS, window=window))
        return self._runs[key]

    def _table(self, window: int, fault: str, seed: int) -> pd.DataFrame:
        """The comparison at `window`: the runs `plan_at` names, each simulated once."""
        rows = [
            summary_row(design, window, self._run(design, w, fault, seed).summary)
            for design, w in plan_at(window)
        ]
        return pd.DataFrame(rows)

    def _depth(self, fault: str, seed: int) -> pd.DataFrame:
        key = (fault, seed)
        if key not in self._depths:
            tables = [self._table(w, fault, seed) for w in DEPTHS]
            _keep(self._depths, key, pd.concat(tables, ignore_index=True))
        return self._depths[key]

    @staticmethod
    def _state_line(setting: Setting, shown: list[Lane], trace: pd.DataFrame, refused: int) -> str:
        """The run in one line: the head it reached, what the hold took, what was given up and
        flushed, and `refused`, the table's answers refused (a late or repeated answer counts
        there although its lane had already ended)."""
        window, fault, _ = setting
        flushed = sum(lane.end == FLUSHED for lane in shown)
        gave_up = sum(lane.end == GAVE_UP for lane in shown)
        held = sum(lane.held for lane in shown)
        head = int(trace["head_version"].iloc[-1])
        return (
            f"<b>pipelined, W = {window}, {html.escape(fault)}</b>: "
            f"{len(shown)} requests; {held} answers waited in the hold; {gave_up} given up; "
            f"{flushed} flushed (replayed because a ballot below them was lost); "
            f"{refused} answers refused; the head ends at v{head}"
        )

    def _view(self, setting: Setting) -> _View:
        """Simulate (or recall) the runs for this setting, draw them and keep what is shown."""
        if setting not in self._views:
            window, fault, seed = setting
            trace = self._run("pipelined", window, fault, seed).trace
            table, depth = self._table(window, fault, seed), self._depth(fault, seed)
            shown = lanes(trace)
            refused = int(table.loc[table["design"] == "pipelined", "answers refused"].iloc[0])
            title = f"W = {window}, fault: {fault}, random seed {seed}"
            self.canvas.update(trace, depth, window, title, shown=shown)
            view = _View(
                trace,
                table,
                depth,
                self.canvas.png(WIDGET_DPI),
                self._state_line(setting, shown, trace, refused),
                html_table(table[SHOWN_COLUMNS], PIPELINED_NAME),
                title,
            )
            _keep(self._views, setting, view)
        return self._views[setting]

    # --- ahead of the user: what the next moves need, while the kernel is idle -------------

    def _next_settings(self, setting: Setting) -> list[Setting]:
        """The settings one move away, nearest first: the neighbouring depths, every other
        depth, the next seed, then each other fault."""
        window, fault, seed = setting
        depths = sorted(range(1, MAX_DEPTH + 1), key=lambda w: (abs(w - window), w))[1:]
        return [
            *((w, fault, seed) for w in depths),
            (window, fault, seed + 1),
            *((window, f, seed) for f in self.fault.options if f != fault),
        ]

    def _work_ahead(self, setting: Setting) -> list[AheadStep]:
        """One small step per item: each run a next setting needs, then drawing that setting."""
        steps: list[AheadStep] = []
        for window, fault, seed in self._next_settings(setting):
            for k in (window, *DEPTHS):
                steps += [("run", (d, w, fault, seed)) for d, w in plan_at(k)]
            steps.append(("view", (window, fault, seed)))
        return steps

    def _step_ahead(self, step: AheadStep) -> bool:
        """One run or one picture a next setting needs; False if it is kept already. What it
        prepares is what the update would compute; only when it is computed changes."""
        kind, key = step
        if kind == "run" and key not in self._runs:
            design, window, fault, seed = key
            self._run(design, window, fault, seed)
        elif kind == "view" and key not in self._views:
            window, fault, seed = key
            self._view((window, fault, seed))
        else:
            return False
        return True

    @property
    def done_ahead(self) -> int:
        """Steps an idle kernel did ahead of the user."""
        return self._ahead.done

    def update(self) -> None:
        """Show the runs for the controls (simulated and drawn once per setting); time it."""
        start = time.perf_counter()
        setting = (int(self.window.value), str(self.fault.value), int(self.seed.value))
        view = self._view(setting)
        self.trace, self.table, self.depth = view.trace, view.table, view.depth
        self.idle.value = (
            "<div style='font-size:12px;color:#555'>Does nothing here: "
            + "; ".join(html.escape(n) for n in idle_controls(setting[0]))
            + ".</div>"
        )
        self.state.value = view.state
        width, height = self.canvas.fig.get_size_inches()
        self.shown = PipelineDepth(
            *setting, TICKS, view.title, float(width), float(height), self.canvas.depth_top
        )
        if view.png != self.last_png:
            self.last_png = view.png
            png_output(self.out, view.png)
        self.metrics.value = view.metrics
        self.timings.append(time.perf_counter() - start)
        self._ahead.start(self._work_ahead(setting), AHEAD_DELAY_S)
