"""Widget apps for part two: the five designs on one fault trace (notebook 05), the
inverted arrival step by step, and the arrival-order workbench (notebooks 04 and 05).

Each control change runs `labkit.designs.simulator.run` for every design (memoised per design and
the parameters that design actually reads), redraws a reused `FiveDesignsCanvas` and shows the
PNG in an Output widget, next to a metrics table from the runs' summaries. The canvas blits:
axes and ticks are rendered once per frame and only traces and titles are redrawn. While the
kernel is idle, the five designs' app simulates and draws the next seed and the one before,
and the frame a longer run would need, so the seed control finds them ready.
"""

from __future__ import annotations

import functools
import html
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

import ipywidgets as widgets
import pandas as pd

from labkit.catalog.rule import REASON_WHY
from labkit.designs.arrival_orders import ScheduleResult, StepOutcome, explore, run_schedule
from labkit.designs.design import CAS_CONFLICT, CAS_CONFLICT_WHY
from labkit.designs.registry import DESIGNS, DISPLAY_NAMES, WINDOWED
from labkit.designs.run_stats import RunSummary, summary_table
from labkit.designs.schedule_builder import (
    EXPLORE_N,
    PRESETS,
    Availability,
    DesignRun,
    ScheduleBuilder,
    StepError,
    as_first_and_again,
    break_search,
)
from labkit.designs.schedules import Kind, Step, as_steps, format_schedule
from labkit.designs.simulator import FAULTS, SimulationRun, run
from labkit.plots.canvases import (
    AHEAD_HEIGHTS,
    DESIGN_LABELS,
    FiveDesignsCanvas,
    Prepared,
    WorkbenchCanvas,
)
from labkit.plots.catalog import arrival_lanes_figure
from labkit.plots.saved import ArrivalLanes, FiveDesigns, Workbench
from labkit.plots.style import png_bytes
from labkit.widgets.common import (
    WIDGET_DPI,
    BatchedApp,
    SavesFigure,
    WorkAhead,
    classed,
    html_table,
    png_output,
    scrolling,
    seed_box,
)

NONE, ALL, CUSTOM = "none", "all", "custom"
STEPPER_TICKS = 1000  # the stepper's planner never runs out of ticks on a short schedule
FAULT_PRESETS: dict[str, tuple[str, ...]] = {
    NONE: (),
    **{f: (f,) for f in FAULTS},
    ALL: tuple(FAULTS),
}
# Article 2's story with request numbers: 12 is in flight, the loop gives up on it and 13
# commits, 14 commits on top, then 12's response finally lands.
SEED_INVERTED: tuple[Step, ...] = (
    Step.timeout(),
    Step.deliver(13),
    Step.deliver(14),
    Step.deliver(12),
)
SEED_FIRST_REQUEST = 12
_MEMO_SIZE = 256
PICTURES_KEPT = 4  # pictures drawn ahead (the next seed's and the one before's, ~16 KB each)
AHEAD_DELAY_S = 0.05  # after an update is sent, when an idle kernel starts the work ahead
AHEAD_STEP_S = 0.005  # between two steps of it (one simulated design, or one picture)
# ("run", design, seed), ("picture", seed) or ("frame",)
AheadStep = (
    tuple[Literal["run"], str, int] | tuple[Literal["picture"], int] | tuple[Literal["frame"]]
)
_BUTTON = widgets.Layout(width="auto", flex="0 0 auto")
_WRAP = widgets.Layout(flex_flow="row wrap")
VIEWS = ("lanes and heads", "verdict per design")  # the workbench's two views (a Tab)
SHORTEST_TITLE = "Shortest arrival order that rewinds each design"
# The five designs' table: the columns the notebook reads first, so none is scrolled out of view.
FIRST_COLUMNS = [
    "design",
    "name",
    "rewinds",
    "throughput (kept commits per time unit)",
    "latency p95",
    "wasted calls / commit",
    "overwrites",
    "commits",
    "accepted",
    "kept",
]
SKEW_READER = "lww"  # the one design that reads the hosts' clocks (its updated_at stamps)
# The per-request buttons keep one width whatever the request number, so a row never re-wraps.
_REQUEST_BUTTON_PX = {"deliver": 160, "dup": 215, "stale": 140, "give_up": 185}
# Why an answer that came in order was refused, by the loop's reason (each written once, with
# the rule's reasons and with `cas`'s).
REFUSAL_WHY = {**REASON_WHY, CAS_CONFLICT: CAS_CONFLICT_WHY}
VERDICT_COLORS = {"broken": "#b00020", "lost update": "#b26a00", "safe": "#2e7d32"}


@functools.lru_cache(maxsize=8)
def shortest_counterexamples(n: int = 3, window: int = 2) -> dict[str, list[Step] | None]:
    """Per design, the shortest arrival order (of `n` deliveries) that makes the head fall."""
    return {d: explore(d, n, window=window).shortest for d in DESIGNS}


class FiveDesignsApp(BatchedApp):
    """Fault classes and planner knobs in; one simulated run per design, metrics and
    counterexamples out.

    `ui` is the container to display; `runs` maps design -> `SimulationRun`, `traces` and
    `summaries` design -> its trace and `RunSummary`; `last_png` is the image shown and
    `timings` each update's duration in seconds. While the kernel is idle after an update, the
    app simulates and draws the seeds one step away (the next, then the one before), one
    design or one picture per turn of the event loop: `done_ahead` counts those steps,
    `frames_drawn_ahead` the frames drawn for a longer run, `pictures_used` the updates that
    showed a picture drawn ahead. The shortest rewinding orders sit in a closed Accordion
    below the table, so controls, picture and table fit one 1280x800 screen.
    """

    def __init__(
        self,
        highlight: str = "ballot",
        preset: str = "inverted",
        seed: int = 0,
        ticks: int = 20,
        designs: Sequence[str] = DESIGNS,
    ) -> None:
        self.designs = list(designs)
        self.ticks = ticks
        self.runs: dict[str, SimulationRun] = {}
        self.traces: dict[str, pd.DataFrame] = {}
        self.summaries: dict[str, RunSummary] = {}
        self.last_png = b""
        self.timings: list[float] = []
        self.memo_hits = 0
        self.frames_drawn_ahead = 0
        self.pictures_used = 0
        self._memo: OrderedDict[tuple, SimulationRun] = OrderedDict()
        self._pictures: OrderedDict[tuple, Prepared] = OrderedDict()
        self._ahead = WorkAhead(self._step_ahead)
        self.canvas = FiveDesignsCanvas(self.designs, width=7.6, height=3.9, live_titles=False)

        self.design = classed(
            widgets.Dropdown(
                options=[(f"{d}: {DESIGN_LABELS[d]}", d) for d in self.designs],
                value=highlight,
                description="highlight",
                layout=widgets.Layout(width="370px"),
            ),
            "wb-design",
        )
        self.faults = classed(
            widgets.Dropdown(
                options=[*FAULT_PRESETS, CUSTOM],
                value=preset,
                description="faults",
                style={"description_width": "44px"},
                layout=widgets.Layout(width="230px"),
            ),
            "wb-faults",
        )
        self.fault_boxes = {
            f: classed(
                widgets.Checkbox(
                    value=f in FAULT_PRESETS.get(preset, ()),
                    description=f.replace("_", " "),
                    indent=False,
                    layout=widgets.Layout(width="auto", flex="0 0 auto", margin="0 14px 0 0"),
                ),
                f"wb-fault-{f}",
            )
            for f in FAULTS
        }
        slider = {"continuous_update": False, "style": {"description_width": "125px"}}
        self.latency = classed(
            widgets.FloatSlider(
                value=1.0, min=0.2, max=3.0, step=0.1, description="latency", **slider
            ),
            "wb-latency",
        )
        self.duplicate_rate = classed(
            widgets.FloatSlider(
                value=0.25, min=0.0, max=1.0, step=0.05, description="duplicate rate", **slider
            ),
            "wb-duplicate-rate",
        )
        self.clock_skew = classed(
            widgets.FloatSlider(
                value=0.5, min=0.0, max=3.0, step=0.1, description="clock skew", **slider
            ),
            "wb-clock-skew",
        )
        self.window = classed(
            widgets.IntSlider(value=3, min=2, max=6, description="window (hedged)", **slider),
            "wb-window",
        )
        self.why_duplicate = classed(widgets.HTML(), "wb-why-duplicate-rate")
        self.why_skew = classed(widgets.HTML(), "wb-why-clock-skew")
        self.seed = seed_box(seed, "wb-seed")
        self.message = classed(
            widgets.HTML(layout=widgets.Layout(min_height="1.6em")), "wb-message"
        )
        self.out = classed(widgets.Output(), "wb-traces")
        self.metrics = classed(widgets.HTML(), "wb-metrics")
        self.counterexamples = classed(widgets.HTML(), "wb-counterexamples")
        # closed until asked for: the controls, the picture and the table fit one screen
        shortest = widgets.Accordion(children=[self.counterexamples], titles=(SHORTEST_TITLE,))
        shortest.selected_index = None

        self.design.observe(self._changed, "value")
        self.faults.observe(self._preset_picked, "value")
        for box in self.fault_boxes.values():
            box.observe(self._box_ticked, "value")
        for w in (self.latency, self.duplicate_rate, self.window, self.seed):
            w.observe(self._changed, "value")
        self.clock_skew.observe(self._skew_moved, "value")

        self.ui = widgets.VBox(
            [
                widgets.HBox([self.design, self.faults, self.seed], layout=_WRAP),
                widgets.HBox(list(self.fault_boxes.values()), layout=_WRAP),
                widgets.HBox(
                    [
                        widgets.VBox([self.latency, self.clock_skew, self.window]),
                        widgets.VBox([self.duplicate_rate, self.why_duplicate, self.why_skew]),
                    ],
                    layout=_WRAP,
                ),
                self.message,
                self.out,
                self.metrics,
                shortest,
            ]
        )
        self.ui.add_class("wb-five-designs-app")
        self._show_live_controls()
        self._show_counterexamples()
        self.update()

    # --- controls ----------------------------------------------------------------------------

    @property
    def selected_faults(self) -> tuple[str, ...]:
        """The fault classes ticked, in `FAULTS` order."""
        return tuple(f for f, box in self.fault_boxes.items() if box.value)

    def _set_quietly(self, values: list[tuple[widgets.ValueWidget, Any]]) -> None:
        """Set several controls with no update per control (the caller updates once)."""
        with self.hold():
            for widget, value in values:
                widget.value = value

    def _show_live_controls(self) -> None:
        """Grey out the duplicate rate unless the duplicate fault is ticked, and the clock skew
        without last-write-wins, saying why; say what the clock skew moves."""
        reads_clocks = SKEW_READER in self.designs
        self.clock_skew.disabled = not reads_clocks
        self.why_skew.value = (
            "<i style='color:#666;font-size:12px'>clock skew moves only <b>lww</b>: it orders "
            "answers by host clock</i>"
            if reads_clocks
            else "<i style='color:#666;font-size:12px'>disabled: only <b>lww</b> reads the "
            "hosts' clocks, and it is not among these designs</i>"
        )
        live = "duplicate" in self.selected_faults
        self.duplicate_rate.disabled = not live
        self.why_duplicate.value = (
            ""
            if live
            else (
                "<i style='color:#666;font-size:12px'>disabled: the duplicate rate only matters "
                "with the <b>duplicate</b> fault ticked</i>"
            )
        )

    def _skew_moved(self, change: Any) -> None:
        """Redraw for the new clock skew; when no run changed, say so and why."""
        if self._holding:
            return
        before = self.runs.get(SKEW_READER)
        self.update()
        after = self.runs.get(SKEW_READER)
        if before is not None and after is not None and _same_run(before, after):
            self.message.value = (
                f"<i>No change: at clock skew {change['new']:g} (was {change['old']:g}) "
                "last-write-wins keeps the same answers on these faults and this seed, and "
                "no other design reads the clocks.</i>"
            )

    def _preset_picked(self, change: Any) -> None:
        if self._holding:
            return
        if change["new"] == CUSTOM:
            self.message.value = (
                "<i>No change: <b>custom</b> is whatever the fault boxes say; tick or untick "
                "the boxes to make your own set.</i>"
            )
            return
        chosen = FAULT_PRESETS[change["new"]]
        self._set_quietly([(box, f in chosen) for f, box in self.fault_boxes.items()])
        self._show_live_controls()
        self.update()

    def _box_ticked(self, _change: Any) -> None:
        if self._holding:
            return
        picked = self.selected_faults
        name = next((k for k, v in FAULT_PRESETS.items() if v == picked), CUSTOM)
        self._set_quietly([(self.faults, name)])
        self._show_live_controls()
        self.update()

    # --- the update --------------------------------------------------------------------------

    def _params(self, design: str, faults: tuple[str, ...]) -> dict[str, Any]:
        """Only the knobs `design` reads, so e.g. moving the window reruns `fenced` alone; with
        the design, faults and seed, everything its run depends on (the memo's key)."""
        params: dict[str, Any] = {
            "ticks": self.ticks,
            "latency": round(self.latency.value, 6),
            "clock_skew": round(self.clock_skew.value, 6),
        }
        if "duplicate" in faults:
            params["duplicate_rate"] = round(self.duplicate_rate.value, 6)
        if design in WINDOWED:
            params["window"] = self.window.value
        return params

    def _key(self, design: str, faults: tuple[str, ...], seed: int) -> tuple:
        return (design, faults, seed, tuple(sorted(self._params(design, faults).items())))

    def _run(self, design: str, faults: tuple[str, ...], seed: int) -> SimulationRun:
        key = self._key(design, faults, seed)
        if key in self._memo:
            self._memo.move_to_end(key)
            self.memo_hits += 1
            return self._memo[key]
        done = run(design, faults, seed, **dict(key[-1]))
        self._memo[key] = done
        if len(self._memo) > _MEMO_SIZE:
            self._memo.popitem(last=False)
        return done

    def _room(self) -> tuple[float, float]:
        """Axes room for a typical run: 1.5x the fault-free time of `ticks` commits.

        Stable axes let a reader compare seeds by eye, and a frame that need not grow need not
        be redrawn (a full redraw costs ~100 ms, a trace-only one ~20 ms).
        """
        return 1.5 * self.ticks * self.latency.value, float(self.ticks)

    def update(self) -> None:
        """Simulate every design on the chosen faults, redraw, refresh the metrics; time it."""
        start = time.perf_counter()
        self.message.value = ""
        faults, seed = self.selected_faults, int(self.seed.value)
        self.runs = {d: self._run(d, faults, seed) for d in self.designs}
        self.traces = {d: r.trace for d, r in self.runs.items()}
        self.summaries = {d: r.summary for d, r in self.runs.items()}
        label = ", ".join(faults) if faults else "no faults"
        drawing = self._drawing()
        floor = self.canvas.start_limits(drawing["scale"], drawing["at_least"])
        self.last_png = self._picture(faults, seed)
        width, height = self.canvas.fig.get_size_inches()
        self.shown = FiveDesigns(
            self.designs,
            list(faults),
            seed,
            {d: self._params(d, faults) for d in self.designs},
            self.design.value,
            (float(floor[0]), float(floor[1])),
            float(width),
            float(height),
            self.canvas.live_titles,
        )
        png_output(self.out, self.last_png)
        table = summary_table(self.summaries)
        first = [c for c in FIRST_COLUMNS if c in table.columns]
        table = table[first + [c for c in table.columns if c not in first]]
        caption = f"<b>{html.escape(label)}</b>, random seed {seed}: per-design counts"
        self.metrics.value = caption + html_table(table, self.design.value)
        self.timings.append(time.perf_counter() - start)
        self._ahead.start(self._work_ahead(seed), AHEAD_STEP_S, first=AHEAD_DELAY_S)

    def _drawing(self) -> dict[str, Any]:
        """How the canvas draws for the controls now: dpi, the scale its limits keep to, room."""
        return {
            "dpi": WIDGET_DPI,
            "scale": (self.latency.value, self.ticks),
            "at_least": self._room(),
        }

    def _picture_key(self, faults: tuple[str, ...], seed: int) -> tuple:
        """Everything the picture of `seed` depends on now: each design's run, the highlight,
        the dpi, the scale and the limits the canvas would start from."""
        drawing = self._drawing()
        runs = tuple(self._key(d, faults, seed) for d in self.designs)
        start = self.canvas.start_limits(drawing["scale"], drawing["at_least"])
        return runs, self.design.value, drawing["dpi"], drawing["scale"], start

    def _picture(self, faults: tuple[str, ...], seed: int) -> bytes:
        """The PNG of `self.runs`: drawn ahead if an idle kernel did, else drawn now."""
        prepared = self._pictures.pop(self._picture_key(faults, seed), None)
        if prepared is not None:
            self.pictures_used += 1
            return self.canvas.adopt(prepared)
        return self.canvas.png(self.traces, self.design.value, **self._drawing())

    # --- ahead of the user: the next seed moves, while the kernel is idle -------------------

    def _work_ahead(self, seed: int) -> list[AheadStep]:
        """What a seed one step away needs, the next seed first (a slider, an arrow key or the
        number box moves one step): each design's run, then its picture. Between the two
        seeds, the frame a run longer than the axis would need (any seed typed in)."""

        def needs(s: int) -> list[AheadStep]:
            return [*(("run", d, s) for d in self.designs), ("picture", s)]

        return [*needs(seed + 1), ("frame",), *needs(seed - 1)]

    def _step_ahead(self, step: AheadStep) -> bool:
        """One design's run or one picture of a seed a step away, or the longer frame; False
        if it is kept already. Each is keyed by all it depends on, so what a later update
        finds is what it would compute; only when it is computed changes."""
        faults = self.selected_faults
        if step[0] == "run":
            _, design, seed = step
            if self._key(design, faults, seed) in self._memo:
                return False
            self._run(design, faults, seed)
            return True
        if step[0] == "picture":
            key = self._picture_key(faults, step[1])
            if key in self._pictures:
                return False
            traces = {d: self._run(d, faults, step[1]).trace for d in self.designs}
            self._pictures[key] = self.canvas.png_ahead(
                traces, self.design.value, **self._drawing()
            )
            while len(self._pictures) > PICTURES_KEPT:
                self._pictures.popitem(last=False)
            return True
        drawn = self.canvas.draw_ahead(WIDGET_DPI)
        self.frames_drawn_ahead += drawn
        return drawn

    @property
    def done_ahead(self) -> int:
        """Steps an idle kernel did ahead of the user."""
        return self._ahead.done

    def _show_counterexamples(self) -> None:
        found = shortest_counterexamples()
        items = []
        for design in self.designs:
            steps = found.get(design)
            text = (
                "no order of 3 deliveries rewinds it"
                if steps is None
                else " &rarr; ".join(html.escape(str(s)) for s in steps)
            )
            name = html.escape(DISPLAY_NAMES.get(design, design))
            items.append(f"<li><b>{design}</b> ({name}): {text}</li>")
        self.counterexamples.value = (
            "Every order of 3 deliveries, each response up to twice, one give-up, window 2:"
            f"<ul>{''.join(items)}</ul>"
        )


class InvertedArrivalStepper(SavesFigure):
    """A step slider over Article 2's inverted arrival, played on every design.

    `results` holds the `run_schedule` result per design; `last_png` the lane diagram up to
    the chosen step; `outcomes` each design's outcome at that step.
    """

    def __init__(
        self,
        steps: Sequence[Step | str] = SEED_INVERTED,
        first_request: int = SEED_FIRST_REQUEST,
        designs: Sequence[str] = DESIGNS,
    ) -> None:
        self.results: dict[str, ScheduleResult] = {
            d: run_schedule(d, steps, first_request=first_request, ticks=STEPPER_TICKS)
            for d in designs
        }
        self._played = ([str(s) for s in as_steps(steps)], first_request, list(designs))
        self.outcomes: dict[str, StepOutcome] = {}
        self.last_png = b""
        self.timings: list[float] = []
        self._pngs: dict[int, bytes] = {}
        self.step = classed(
            widgets.IntSlider(value=len(steps), min=1, max=len(steps), description="step"),
            "wb-step",
        )
        self.out = classed(widgets.Output(), "wb-lanes")
        self.caption = classed(widgets.HTML(), "wb-step-outcomes")
        self.step.observe(lambda _c: self.update(), "value")
        self.ui = widgets.VBox([self.step, self.caption, self.out])
        self.ui.add_class("wb-inverted-stepper")
        self.update()

    def update(self) -> None:
        """Draw the lanes up to the chosen step and list what each design did at it."""
        start = time.perf_counter()
        k = int(self.step.value)
        if k not in self._pngs:
            fig = arrival_lanes_figure(list(self.results.values()), upto=k)
            self._pngs[k] = png_bytes(fig, dpi=WIDGET_DPI)
        self.last_png = self._pngs[k]
        texts, first_request, designs = self._played
        self.shown = ArrivalLanes(texts, first_request, designs, upto=k, ticks=STEPPER_TICKS)
        png_output(self.out, self.last_png)
        first = next(iter(self.results.values()))
        self.outcomes = {d: r.outcomes[k - 1] for d, r in self.results.items()}
        lines = " &middot; ".join(
            f"<span style='white-space:nowrap'><b>{d}</b>: {html.escape(o.label)} "
            f"(head v{o.head})</span>"
            for d, o in self.outcomes.items()
        )
        shown = html.escape(str(first.steps[k - 1]))
        # one or two lines above the picture, not a list: the app fits one screen
        self.caption.value = f"step {k}: <code>{shown}</code>: {lines}"
        self.timings.append(time.perf_counter() - start)


class ArrivalWorkbench(BatchedApp):
    """Compose an arrival order step by step (or type it), play it on every design at once.

    `builder` is the `ScheduleBuilder` (its `steps` and `runs`); `buttons` maps an action to
    its button; `last_png` is the picture shown and `timings` each update's duration;
    `done_ahead` counts the steps done while the kernel was idle (tick marks made, a taller
    frame drawn: `WorkbenchCanvas.draw_ahead`). Every
    design in `labkit.designs.registry.DESIGNS` (read when the app is built), or in `designs`,
    runs the same schedule; with `pipelined` among them a W picker sets its depth (`depth`).
    So that the app fits one 1280x800 screen, `view` (a Tab) shows the lanes or the verdict
    table in one place, and `hints` holds the error, the message and the greyed-out reasons
    in one box of fixed height.
    """

    # the per-request buttons and the kind of step each adds for the request picked
    KINDS: dict[str, Kind] = {
        "deliver": Kind.DELIVER,
        "dup": Kind.DUP,
        "stale": Kind.STALE,
        "give_up": Kind.TIMEOUT,
    }

    DEPTHS = (1, 2, 3, 4)  # the explorer covers W = 4 with 5 deliveries in about half a second

    def __init__(
        self,
        preset: str | None = "inverted",
        focus: str | None = None,
        designs: Sequence[str] | None = None,
        depth: int = 2,
    ) -> None:
        self.builder = ScheduleBuilder(designs, depth=depth)
        self.designs = list(self.builder.designs)
        self.canvas = WorkbenchCanvas(self.designs)
        self.last_png = b""
        self.timings: list[float] = []
        # a step is one of the taller figures' heights (`AHEAD_HEIGHTS`)
        self._ahead: WorkAhead[int] = WorkAhead(lambda _step: self.canvas.draw_ahead(WIDGET_DPI))
        self.broke: dict[str, list[Step] | None] = {}
        self._advance = True  # after a step, offer the oldest request still in flight

        self.schedule = classed(
            widgets.Text(
                description="schedule",
                continuous_update=False,
                placeholder="e.g. timeout 1; deliver 2; deliver 3; deliver 1  (then press Enter)",
                layout=widgets.Layout(width="390px"),
            ),
            "wb-schedule",
        )
        self.play = classed(
            widgets.Button(description="play this schedule", layout=_BUTTON), "wb-play"
        )
        self.preset = classed(
            widgets.Dropdown(
                options=[("pick a preset...", "")] + [(p.label, p.name) for p in PRESETS.values()],
                value="",
                description="preset",
                style={"description_width": "48px"},
                layout=widgets.Layout(width="330px"),
            ),
            "wb-preset",
        )
        # with pipelined a request has more fates across the designs: its entries run longer
        picker = "540px" if "pipelined" in self.designs else "400px"
        self.request = classed(
            widgets.Dropdown(description="request k", layout=widgets.Layout(width=picker)),
            "wb-request",
        )
        fixed = {
            name: widgets.Layout(width=f"{px}px", flex="0 0 auto")
            for name, px in _REQUEST_BUTTON_PX.items()
        }
        self.buttons = {
            "deliver": widgets.Button(button_style="primary", layout=fixed["deliver"]),
            "dup": widgets.Button(layout=fixed["dup"]),
            "stale": widgets.Button(layout=fixed["stale"]),
            "give_up": widgets.Button(layout=fixed["give_up"]),
            "oldest": widgets.Button(description="give up on the oldest wait", layout=_BUTTON),
            "crash": widgets.Button(
                description="crash and restart the loop", layout=_BUTTON, button_style="warning"
            ),
            "undo": widgets.Button(description="undo", icon="undo", layout=_BUTTON),
            "reset": widgets.Button(description="reset", layout=_BUTTON),
        }
        for name, button in self.buttons.items():
            classed(button, f"wb-{name.replace('_', '-')}")
        self.focus = classed(
            widgets.Dropdown(
                options=[(f"{d}: {DESIGN_LABELS.get(d, d)}", d) for d in self.designs],
                value=focus or self.designs[0],
                description="lanes of",
                style={"description_width": "56px"},
                layout=widgets.Layout(width="330px"),
            ),
            "wb-focus",
        )
        self.shortest = classed(
            widgets.Button(layout=_BUTTON, button_style="danger"), "wb-shortest"
        )
        self.depth = classed(
            widgets.Dropdown(
                options=[(f"W = {w}", w) for w in self.DEPTHS],
                value=depth,
                description="pipelined",
                layout=widgets.Layout(width="190px"),
            ),
            "wb-depth",
        )
        self.depth_note = classed(widgets.HTML(), "wb-depth-note")
        # One box of fixed height for the error, the message and the reasons buttons are
        # greyed out: the picture below must not jump as these texts come and go.
        self.why = classed(widgets.HTML(), "wb-why")
        self.error = classed(widgets.HTML(), "wb-error")
        self.message = classed(widgets.HTML(), "wb-message")
        self.out = classed(widgets.Output(), "wb-lanes")
        self.verdicts = classed(widgets.HTML(), "wb-verdicts")
        # The lanes or the verdict table, in the same place: the app fits one screen.
        self.view = classed(
            widgets.Tab(children=[self.out, self.verdicts], titles=VIEWS), "wb-view"
        )

        self.schedule.observe(lambda _c: self._typed(), "value")
        self.play.on_click(lambda _b: self._typed(force=True))
        self.preset.observe(self._preset_picked, "value")
        self.request.observe(self._changed, "value")
        self.focus.observe(self._changed, "value")
        self.depth.observe(self._depth_picked, "value")
        for name, kind in self.KINDS.items():
            self.buttons[name].on_click(lambda _b, kind=kind: self._add(kind))
        self.buttons["oldest"].on_click(lambda _b: self._attempt(self.builder.add, Step.timeout()))
        self.buttons["crash"].on_click(lambda _b: self._attempt(self.builder.add, Step.crash()))
        self.buttons["undo"].on_click(lambda _b: self._edit(self.builder.undo))
        self.buttons["reset"].on_click(lambda _b: self._edit(self.builder.reset, fresh=True))
        self.shortest.on_click(lambda _b: self.fill_shortest())

        b = self.buttons
        # Every control stays in view, so the lanes a click changes are on the same screen.
        # With pipelined, its W picker ends the step buttons' rows and its note joins the
        # others above the picture.
        pipelined = [self.depth] if "pipelined" in self.designs else []
        notes = [self.depth_note] if pipelined else []
        self.hints = widgets.VBox(
            [self.error, self.message, *notes, self.why], layout=_fixed_height("4.4em")
        )
        self.ui = widgets.VBox(
            [
                widgets.HBox([self.preset, b["undo"], b["reset"], self.focus], layout=_WRAP),
                widgets.HBox(
                    [
                        self.request,
                        *(b[name] for name in ("deliver", "dup", "stale", "give_up")),
                        b["oldest"],
                        b["crash"],
                        *pipelined,
                    ],
                    layout=_WRAP,
                ),
                widgets.HBox([self.schedule, self.play, self.shortest], layout=_WRAP),
                self.hints,
                self.view,
            ]
        )
        self.ui.add_class("wb-workbench")
        if preset:
            self.builder.use_preset(preset)
            with self.hold():
                self.preset.value = preset
        self.update()

    # --- edits -------------------------------------------------------------------------

    @property
    def k(self) -> int | None:
        """The request the per-request buttons act on."""
        return self.request.value

    def _add(self, kind: Kind) -> None:
        """A per-request button: add the `kind` step for the request picked."""
        if self.k is not None:
            self._attempt(self.builder.add, Step(kind, self.k))

    def _attempt(self, change: Any, *args: Any) -> None:
        """Call `change(*args)` on the builder; a bad step is shown inline and changes nothing."""
        try:
            change(*args)
        except StepError as exc:
            self.error.value = _error_html(exc)
            return
        self._edited(fresh=change == self.builder.load)

    def _edit(self, action: Any, fresh: bool = False) -> None:
        action()
        self._edited(fresh=fresh)

    def _edited(self, preset: str = "", fresh: bool = False) -> None:
        """After a change: clear the error and message, show `preset` (or none), move the
        request picker on to the oldest request still in flight, redraw (on `fresh` axes when
        the whole schedule was replaced: a short schedule after a long one gets its own scale)."""
        if fresh:
            self.canvas.rescale()
        self._advance = True
        self.error.value = ""
        self.message.value = ""
        with self.hold():
            self.preset.value = preset
        self.update()

    def _typed(self, force: bool = False) -> None:
        if self._holding:
            return
        text = self.schedule.value
        if not force and text.strip() == self.builder.text:
            return
        self._attempt(self.builder.load, text)

    def _preset_picked(self, change: Any) -> None:
        if self._holding or not change["new"]:
            return
        self.builder.use_preset(change["new"])
        self._edited(change["new"], fresh=True)

    def _depth_picked(self, change: Any) -> None:
        """The W picker: play the schedule again with `pipelined` at the new depth; say where
        the schedule had to be cut if a step named a request only the old depth sent."""
        if self._holding:
            return
        cut = self.builder.set_depth(change["new"])
        self._edited(fresh=True)
        if cut is not None:
            self.message.value = (
                f"At W = {change['new']} no design can take step {cut} any more (it named a "
                "request only the deeper pipeline sent): the schedule stops before it."
            )

    def type_schedule(self, text: str) -> None:
        """What typing `text` into the schedule box and pressing Enter does."""
        self.schedule.value = text
        self._typed(force=True)

    def fill_shortest(self) -> None:
        """Replace the schedule by the shortest one that breaks the design in focus, if any."""
        design = self.focus.value
        window = self.builder.window_of(design)
        searched = break_search(design, EXPLORE_N, window)
        found = None if searched.shortest is None else as_first_and_again(searched.shortest)
        self.broke[design] = found
        if found is None:
            pipelined = design == "pipelined"
            depth = f" at W = {window}" if pipelined else ""
            orders = f"all {searched.orders:,} orders" if pipelined else "every order"
            self.message.value = (
                f"<b>No schedule breaks {html.escape(design)}</b>{depth}: the explorer tried "
                f"{orders} of up to {EXPLORE_N} deliveries (each response up to twice, one "
                "give-up) and the head never fell. The schedule is unchanged."
            )
            return
        self.builder.load(found)
        self._edited(fresh=True)
        self.message.value = (
            f"Shortest schedule that breaks <b>{html.escape(design)}</b> "
            f"({len(found)} steps, found by <code>labkit.designs.arrival_orders.explore</code>): "
            f"<code>{html.escape(format_schedule(found))}</code>"
        )

    # --- the update --------------------------------------------------------------------

    def _refresh_controls(self) -> None:
        """Request choices, button labels and which buttons apply now (with the reason)."""
        builder, focus = self.builder, self.focus.value
        lanes = builder.runs[focus].lanes
        options = [(_request_label(builder, rid), rid) for rid in builder.requests]
        keep = self.k if self.k in builder.requests and not self._advance else None
        self._advance = False
        if keep is None:
            flying = [rid for rid, ln in sorted(lanes.items()) if ln.status == "in flight"]
            keep = next(iter(flying or builder.requests), None)
        # hold_sync: each widget's changes go to the page as one message, not one per property
        with self.hold(), self.request.hold_sync():
            self.request.options = options
            self.request.value = keep
            k = self.k
            self.request.tooltip = "" if k is None else _request_detail(builder, k)
        labels = {
            "deliver": f"deliver response {k}",
            "dup": f"deliver {k} again (duplicate)",
            "stale": f"stale body for {k}",
            "give_up": f"time out / give up on {k}",
        }
        steps = {name: None if k is None else Step(kind, k) for name, kind in self.KINDS.items()}
        steps["oldest"] = Step.timeout()
        reasons = []
        for name, step in steps.items():
            button = self.buttons[name]
            if step is None:
                ok = Availability(False, "no request sent yet")
            else:
                ok = builder.availability(step, useful=name == "oldest")
            with button.hold_sync():
                if name in labels:
                    button.description = labels[name]
                button.disabled = not ok.ok
                button.tooltip = ok.why or f"add the step '{step}'"
            if not ok.ok:
                reasons.append(f"<i>{html.escape(button.description)}</i>: {html.escape(ok.why)}")
        self.buttons["undo"].disabled = not builder.steps
        self.why.value = (
            "<div style='font-size:12px;color:#555;line-height:1.3'>Greyed out now: "
            + "; ".join(reasons)
            + ".</div>"
            if reasons
            else ""
        )
        self.shortest.description = f"shortest schedule that breaks {focus}"
        self.depth_note.value = _depth_note(focus, self.builder)

    def update(self) -> None:
        """Redraw lanes and heads, refresh verdicts, controls and the typed line; time it."""
        start = time.perf_counter()
        builder = self.builder
        # the picture first: its message reaches the page before the controls' and tables'
        self.last_png = self.canvas.png(
            builder.runs, builder.steps, self.focus.value, dpi=WIDGET_DPI
        )
        self.shown = Workbench(
            self.designs,
            builder.window,
            builder.depth,
            builder.ticks,
            [str(step) for step in builder.steps],
            self.focus.value,
            self.canvas.rooms,
            self.canvas.width,
        )
        png_output(self.out, self.last_png)
        self._refresh_controls()
        with self.hold():
            self.schedule.value = builder.text
        self.verdicts.value = _verdict_table(builder)
        self.timings.append(time.perf_counter() - start)
        # Once this update is out, an idle kernel makes the tick marks and draws the frames of
        # the taller figures a longer schedule would need, one `draw_ahead` step per turn.
        self._ahead.start(range(1 + AHEAD_HEIGHTS), AHEAD_STEP_S, first=AHEAD_DELAY_S)

    @property
    def done_ahead(self) -> int:
        """Steps done while the kernel was idle (tick marks made, a taller frame drawn)."""
        return self._ahead.done


def _same_run(a: SimulationRun, b: SimulationRun) -> bool:
    """True if two runs show the same: equal counts and the same head at every event."""
    return a.summary == b.summary and a.trace["head_version"].equals(b.trace["head_version"])


def _depth_note(focus: str, builder: ScheduleBuilder) -> str:
    """What the W picker changes, said for the design whose lanes are shown."""
    w = builder.depth
    if focus == "pipelined":
        text = f"pipelined: up to {w} tick(s) in flight; an early answer is held for its fence."
    else:
        text = (
            f"W changes pipelined only: the lanes of {focus} do not move"
            + (f" (fenced keeps its hedge of {builder.window})" if focus == "fenced" else "")
            + "."
        )
    return f"<span style='font-size:12px;color:#444'>{html.escape(text)}</span>"


def _hold_note(played: DesignRun) -> str:
    """For `pipelined`: answers held and how they were decided, requests flushed ("" if none)."""
    if not played.held and not played.flushed:
        return ""
    lanes = played.lanes.values()
    later = sum(1 for ln in lanes if ln.settled is not None and ln.settled.committed)
    return (
        f"held \u00d7{played.held} ({later} committed when the head reached the fence), "
        f"flushed \u00d7{played.flushed} (refused with a predecessor, tick replayed)."
    )


def _fixed_height(height: str) -> widgets.Layout:
    return widgets.Layout(height=height, overflow="auto", flex="0 0 auto")


def _statuses(builder: ScheduleBuilder, rid: int) -> dict[str, str]:
    """Design -> what became of request `rid` there ("not sent" where it never went out)."""
    return {
        d: run.lanes[rid].status if rid in run.lanes else "not sent"
        for d, run in builder.runs.items()
    }


def _request_label(builder: ScheduleBuilder, rid: int) -> str:
    """A picker entry that holds for every design: "2: in flight", or counts where the designs
    differ, e.g. "2: in flight ×3, not sent ×2"."""
    counts = Counter(_statuses(builder, rid).values())
    if len(counts) == 1:
        return f"{rid}: {next(iter(counts))}"
    return f"{rid}: " + ", ".join(f"{status} \u00d7{n}" for status, n in counts.items())


def _request_detail(builder: ScheduleBuilder, rid: int) -> str:
    """Request `rid` design by design, for the picker's tooltip."""
    return f"request {rid}: " + "; ".join(f"{d} {s}" for d, s in _statuses(builder, rid).items())


def _verdict_kind(played: DesignRun) -> str:
    """ "broken" (a reader saw the head fall), "lost update" (a version overwritten in place)
    or "safe"."""
    if played.falls:
        return "broken"
    return "lost update" if played.overwrites else "safe"


def _refusal_note(played: DesignRun) -> str:
    """Why this design first refused an answer that came in order ("" if it never did)."""
    if played.in_order_refusal is None:
        return ""
    step, rid, reason = played.in_order_refusal
    why = REFUSAL_WHY.get(reason, "")
    return (
        f"step {step}: request {rid}'s answer came in order and was refused ({reason})"
        + (f": {why}" if why else "")
        + "."
    )


def _error_html(exc: StepError) -> str:
    return (
        "<div style='color:#b00020;font-size:13px'>&#9888; Not applied: step "
        f"<b>{exc.index}</b> <code>{html.escape(exc.text)}</code>: "
        f"{html.escape(exc.problem)}</div>"
    )


def _verdict_table(builder: ScheduleBuilder) -> str:
    """One row per design: verdict, commits, rejects by reason, falls, steps it skipped."""
    rows = []
    for design, played in builder.runs.items():
        rejects = ", ".join(f"{r} \u00d7{n}" for r, n in sorted(played.rejects.items()))
        skipped = "; ".join(f"step {i}: {why}" for i, why in played.skipped.items())
        kind = _verdict_kind(played)
        verdict = html.escape(played.verdict)
        if kind != "safe":
            verdict = f"<b>{verdict}</b>"
        note = " ".join(n for n in (_refusal_note(played), _hold_note(played)) if n)
        if note:
            verdict += f"<br><span style='color:#555;font-size:11px'>{html.escape(note)}</span>"
        rows.append(
            f"<tr><td><b>{html.escape(design)}</b></td>"
            f"<td style='color:{VERDICT_COLORS[kind]}' data-verdict='{kind}'>{verdict}</td>"
            f"<td>{played.commits}</td><td>{html.escape(rejects) or '-'}</td>"
            f"<td>{len(played.falls)}</td><td>v{played.heads[-1]}</td>"
            f"<td>{html.escape(skipped) or '-'}</td></tr>"
        )
    head = "".join(
        f"<th>{c}</th>"
        for c in (
            "design",
            "verdict",
            "versions committed",
            "rejected (by reason)",
            "falls the reader saw",
            "head now",
            "steps that did not apply",
        )
    )
    return scrolling(
        "<table class='wb-table' style='border-collapse:collapse;font-size:12px'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
