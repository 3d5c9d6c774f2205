"""Widget app for notebook 09: one design against a real planner service, with the faults
switched on and off while the run goes.

`start` runs `labkit.remote.run` in a thread of its own, inside its own `labkit.remote.serve`
on 127.0.0.1 (so nothing outlives the run, and a later cell can never close what the widget
needs); a fault box ticked during the run switches the service's faults at once through
`labkit.remote.control.set_faults`. A second thread redraws the lanes
(`labkit.plots.part3_remote.lanes_figure`) a few times a second from the rows the loop reports;
when the run ends, the head the reader process saw is drawn under the loop's own.
"""

from __future__ import annotations

import html
import itertools
import threading
import time
from collections.abc import Collection, Sequence

import ipywidgets as widgets

from labkit.designs.design import DESIGNS
from labkit.plots.part2_canvases import DESIGN_LABELS
from labkit.plots.part3_remote import lanes_figure
from labkit.plots.style import png_bytes
from labkit.remote.control import PlannerUnreachable, set_faults
from labkit.remote.driver import RemoteRun, run
from labkit.remote.faults import SERVICE_FAULTS
from labkit.remote.service import serve
from labkit.remote.views import COMMIT, Lanes, reader_trace
from labkit.widgets.common import WIDGET_DPI, BatchedApp, classed, png_output

REFRESH_S = 0.5  # between redraws while a run goes: live enough, and the loop keeps its cores
HEDGED = ("fenced",)  # the designs that read the window
_BUTTON = widgets.Layout(width="auto", flex="0 0 auto")
_WRAP = widgets.Layout(flex_flow="row wrap")
_names = itertools.count(1)


def _grey(text: str) -> str:
    return f"<span style='font-size:12px;color:#555'>{text}</span>"


def _problem(text: str) -> str:
    return f"<span style='color:#b00020'>&#9888; {html.escape(text, quote=False)}</span>"


def fault_switch_note(
    before: Collection[str],
    after: Collection[str],
    *,
    running: bool,
    head: int,
    left: int,
    span: int,
) -> str:
    """What ticking or unticking fault boxes does, in one sentence: at once when a run goes
    (each targeted fault strikes once within `span` versions above `head`, if the run, with
    `left` versions to go, gets that far), at the next start otherwise."""
    on = sorted(set(after) - set(before))
    off = sorted(set(before) - set(after))
    change = (
        "; ".join(
            part
            for part in (
                f"on: {', '.join(on)}" if on else "",
                f"off: {', '.join(off)}" if off else "",
            )
            if part
        )
        or "no change"
    )
    if not running:
        return (
            f"No run is going, so nothing was switched yet ({change}): the next run "
            "starts with the faults ticked."
        )
    text = f"Switched at head v{head} ({change})."
    targeted = [f for f in on if f != "duplicate"]
    if targeted:
        reach = (
            f" The run has {left} version{'s' if left != 1 else ''} to go, so "
            f"{'it may end first' if left < span else 'it will get there'}."
        )
        text += (
            f" {', '.join(targeted)} strike{'s' if len(targeted) == 1 else ''} once, at a "
            f"version within {span} above v{head}.{reach}"
        )
    if "duplicate" in on:
        text += " duplicate: from now on some answers are delivered twice."
    if off:
        text += " Answers already held or scheduled still arrive."
    return text


class RealPlannerApp(BatchedApp):
    """Design, faults and knobs in; a live run against a real planner service out.

    `ui` is the container to display; `lanes` the requests of the current (or last) run;
    `result` the last finished `RemoteRun` (None while one goes); `last_png` the image shown;
    `switches` the fault sets switched during the runs, as (head, faults).
    """

    def __init__(
        self,
        design: str = "callback",
        faults: Sequence[str] = (),
        ticks: int = 30,
        latency_ms: int = 30,
        window: int = 3,
        seed: int = 0,
        span: int = 5,
    ) -> None:
        self.span = span
        self.lanes: Lanes | None = None
        self.result: RemoteRun | None = None
        self.url: str | None = None
        self.error = ""
        self.last_png = b""
        self.switches: list[tuple[int, tuple[str, ...]]] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._done = threading.Event()
        self._done.set()
        self._drawn = threading.Event()  # the finished run's last picture is shown
        self._drawn.set()
        self._draw_lock = threading.Lock()
        self._faults_now: tuple[str, ...] = ()

        self.design = classed(
            widgets.Dropdown(
                options=[(f"{d}: {DESIGN_LABELS[d]}", d) for d in DESIGNS],
                value=design,
                description="design",
                layout=widgets.Layout(width="370px"),
            ),
            "wb-rp-design",
        )
        self.fault_boxes = {
            f: classed(
                widgets.Checkbox(
                    value=f in faults,
                    description=f.replace("_", " "),
                    indent=False,
                    layout=widgets.Layout(width="150px"),
                ),
                f"wb-rp-fault-{f}",
            )
            for f in SERVICE_FAULTS
        }
        slider = {
            "continuous_update": False,
            "style": {"description_width": "125px"},
            "layout": widgets.Layout(width="350px"),
        }
        self.ticks = classed(
            widgets.IntSlider(value=ticks, min=5, max=80, description="ticks", **slider),
            "wb-rp-ticks",
        )
        self.latency = classed(
            widgets.IntSlider(
                value=latency_ms, min=10, max=150, step=5, description="latency (ms)", **slider
            ),
            "wb-rp-latency",
        )
        self.window = classed(
            widgets.IntSlider(value=window, min=2, max=6, description="window (hedged)", **slider),
            "wb-rp-window",
        )
        self.seed = classed(
            widgets.IntText(
                value=seed,
                description="random seed",
                style={"description_width": "initial"},
                layout=widgets.Layout(width="190px"),
            ),
            "wb-rp-seed",
        )
        self.start_button = classed(
            widgets.Button(description="start a run", layout=_BUTTON, button_style="primary"),
            "wb-rp-start",
        )
        self.stop_button = classed(widgets.Button(description="stop", layout=_BUTTON), "wb-rp-stop")
        self.start_button.on_click(lambda _b: self.start())
        self.stop_button.on_click(lambda _b: self.stop())
        self.why = classed(widgets.HTML(layout=widgets.Layout(min_height="1.6em")), "wb-rp-why")
        self.message = classed(
            widgets.HTML(layout=widgets.Layout(min_height="2.8em")), "wb-rp-message"
        )
        self.status = classed(
            widgets.HTML(layout=widgets.Layout(min_height="1.6em")), "wb-rp-status"
        )
        self.out = classed(widgets.Output(), "wb-rp-lanes")

        for box in self.fault_boxes.values():
            box.observe(self._changed, "value")
        self.design.observe(lambda _c: self._refresh_controls(), "value")

        self.ui = widgets.VBox(
            [
                widgets.HBox(
                    [self.design, self.seed, self.start_button, self.stop_button], layout=_WRAP
                ),
                widgets.HBox(list(self.fault_boxes.values()), layout=_WRAP),
                widgets.HBox([self.ticks, self.latency, self.window], layout=_WRAP),
                self.why,
                self.message,
                self.status,
                self.out,
            ]
        )
        self.ui.add_class("wb-real-planner-app")
        self._faults_now = self.selected_faults
        self.message.value = _grey(
            "Press <b>start a run</b>: a planner service starts on 127.0.0.1 for this run only. "
            "Tick or untick faults while it goes; the lanes fill as answers arrive."
        )
        self._refresh_controls()
        self.draw()

    # --- state -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    @property
    def selected_faults(self) -> tuple[str, ...]:
        """The fault classes ticked, in `SERVICE_FAULTS` order."""
        return tuple(f for f, box in self.fault_boxes.items() if box.value)

    def why_not(self, control: str) -> str:
        """Why `control` ("design", "ticks", "latency", "window", "seed", "start", "stop")
        does nothing now, in words ("" when it does something)."""
        if control == "stop":
            return "" if self.running else "no run is going"
        if control == "window" and self.design.value not in HEDGED:
            return "only the hedged design (fenced) keeps several ballots in flight"
        if self.running:
            return "a run is going: it applies to the next run (stop this one or let it end)"
        return ""

    def _controls(self) -> dict[str, widgets.DOMWidget]:
        return {
            "design": self.design,
            "seed": self.seed,
            "ticks": self.ticks,
            "latency": self.latency,
            "window": self.window,
            "start": self.start_button,
            "stop": self.stop_button,
        }

    def _refresh_controls(self) -> None:
        greyed = []
        for name, control in self._controls().items():
            why = self.why_not(name)
            control.disabled = bool(why)
            if why:
                greyed.append(f"<i>{name}</i>: {html.escape(why)}")
        self.why.value = _grey("greyed out: " + "; ".join(greyed)) if greyed else ""

    # --- faults ------------------------------------------------------------------------------

    def set_faults(self, faults: Collection[str]) -> None:
        """Tick exactly `faults` (what clicking the boxes does; switched once)."""
        with self.hold():
            for f, box in self.fault_boxes.items():
                box.value = f in faults
        self.update()

    def update(self) -> None:
        """The fault boxes changed: switch the service's faults now if a run goes."""
        before, after = self._faults_now, self.selected_faults
        self._faults_now = after
        url, lanes = self.url, self.lanes
        running = self.running and url is not None and lanes is not None
        head = lanes.snapshot().head if lanes is not None else 0
        if running:
            try:
                set_faults(url, after)
            except (PlannerUnreachable, ValueError):
                running = False  # the run ended in between: the boxes apply to the next one
            else:
                lanes.switched(after)
                self.switches.append((head, after))
        left = max(0, self.ticks.value - head)
        self.message.value = _grey(
            html.escape(
                fault_switch_note(
                    before, after, running=running, head=head, left=left, span=self.span
                )
            )
        )

    # --- a run -------------------------------------------------------------------------------

    def start(self) -> bool:
        """Start a run in the background (what the start button does); False, said in the
        message line, if one is going already."""
        if self.running:
            self.message.value = _problem("Not started: a run is going; stop it first.")
            return False
        self.lanes, self.result, self.error = Lanes(), None, ""
        self._stop = threading.Event()
        self._done.clear()
        self._drawn.clear()
        self._faults_now = self.selected_faults
        knobs = {
            "design": self.design.value,
            "faults": self._faults_now,
            "ticks": int(self.ticks.value),
            "latency": self.latency.value / 1000,
            "window": int(self.window.value),
            "seed": int(self.seed.value),
        }
        self._thread = threading.Thread(
            target=self._run, kwargs=knobs, name="labkit-widget-run", daemon=True
        )
        self._thread.start()
        threading.Thread(
            target=self._redraw_while_running, name="labkit-widget-draw", daemon=True
        ).start()
        self._refresh_controls()
        on = ", ".join(knobs["faults"]) or "none"
        self.message.value = _grey(
            html.escape(
                f"Running {knobs['design']} for {knobs['ticks']} versions; faults on: {on}."
            )
        )
        return True

    def _run(
        self,
        design: str,
        faults: tuple[str, ...],
        ticks: int,
        latency: float,
        window: int,
        seed: int,
    ) -> None:
        lanes = self.lanes
        try:
            with serve(faults, seed, latency=latency, span=self.span, duplicate_rate=0.5) as url:
                self.url = url
                try:
                    self.result = run(
                        design,
                        url,
                        ticks=ticks,
                        window=window,
                        seed=seed,
                        name=f"widget-{next(_names)}",
                        progress=lanes.add,
                        stop=self._stop,
                        deadline=60.0,
                    )
                finally:
                    self.url = None
        except Exception as exc:  # shown in the message line, never a traceback in a thread
            self.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        finally:
            lanes.finish()
            self._done.set()

    def _redraw_while_running(self) -> None:
        while not self._done.wait(REFRESH_S):
            self.draw()
        self._refresh_controls()
        self.draw()
        if self.error:
            self.message.value = _problem(f"The run failed: {self.error}")
        elif self.result is not None:
            self.message.value = _grey(html.escape(self.verdict()))
        self._drawn.set()

    def stop(self) -> bool:
        """Stop the run going (what the stop button does); False, said, if none is."""
        if not self.running:
            self.message.value = _problem("Nothing stopped: no run is going.")
            return False
        self._stop.set()
        return True

    def wait(self, timeout: float = 60.0) -> RemoteRun | None:
        """Block until the run ends (and its last picture is drawn); its result, or None."""
        self._drawn.wait(timeout)
        return self.result

    def wait_for_head(self, version: int, timeout: float = 30.0) -> bool:
        """Block until the loop's head reaches `version` (True) or the run ends (False)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            lanes = self.lanes
            if lanes is not None and lanes.snapshot().head >= version:
                return True
            if not self.running:
                return False
            time.sleep(0.01)
        return False

    def verdict(self) -> str:
        """One line on the finished run: what it committed and the falls the reader saw."""
        r = self.result
        if r is None:
            return ""
        falls = r.reader_falls
        seen = ", ".join(f"v{f.before} → v{f.after}" for f in falls[:4])
        more = f" and {len(falls) - 4} more" if len(falls) > 4 else ""
        reader = f"saw {len(falls)} fall{'s' if len(falls) != 1 else ''}" + (
            f" ({seen}{more})" if falls else ""
        )
        return (
            f"Finished {r.design}: {r.summary.kept} versions kept of {r.summary.commits} "
            f"commits; the reader process {reader}."
        )

    # --- drawing -----------------------------------------------------------------------------

    def draw(self) -> None:
        """Redraw the lanes and the status line from the rows so far."""
        with self._draw_lock:
            lanes = self.lanes or Lanes()
            view = lanes.snapshot()
            result = self.result if view.done else None
            reader = reader_trace(result) if result is not None and not result.trace.empty else None
            design = result.design if result is not None else self.design.value
            state = "finished" if view.done else ("running" if self.running else "no run yet")
            title = f"{design}: {DESIGN_LABELS.get(design, design)}, {state}"
            fig = lanes_figure(view, design, reader=reader, title=title)
            self.last_png = png_bytes(fig, dpi=WIDGET_DPI)
            png_output(self.out, self.last_png)
            answered = sum(1 for lane in view.lanes if lane.answers)
            refused = sum(1 for lane in view.lanes for _, o in lane.answers if o != COMMIT)
            self.status.value = html.escape(
                f"{state}: head v{view.head}, {view.in_flight} in flight, {answered} answered, "
                f"{refused} answers refused, {view.falls} fall{'s' if view.falls != 1 else ''} of the head; "
                f"faults on: "
                f"{', '.join(self._faults_now) or 'none'}"
            )
