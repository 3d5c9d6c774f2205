"""Widget app for notebook 09: one design against a real planner service, with the faults
switched on and off while the run goes.

`start` runs `labkit.remote.run` in a thread of its own, inside its own `labkit.remote.serve`
on 127.0.0.1 (so nothing outlives the run, and a later cell can never close what the widget
needs); a fault box ticked during the run switches the service's faults at once through
`labkit.remote.control.set_faults`. A second thread redraws the lanes
(`labkit.plots.remote.lanes_figure`) a few times a second from the rows the loop reports;
when the run ends, the head the reader process saw is drawn under the loop's own. Each run
keeps its own state (`_Run`), handed to its two threads, so a run started right after another
never reads or draws the old one's. The default latency is slow on purpose: a run at the
defaults lasts long enough for a person to tick a fault mid-run (every time of the service
scales with its latency, so a slow run is the same run in slow motion).
"""

from __future__ import annotations

import atexit
import html
import itertools
import threading
import time
import weakref
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import ipywidgets as widgets

from labkit import validation
from labkit.designs.registry import DESIGNS
from labkit.plots.canvases import DESIGN_LABELS
from labkit.plots.remote import lanes_figure
from labkit.plots.saved import RemoteLanes, table_of
from labkit.plots.style import png_bytes
from labkit.remote.control import PlannerUnreachable, set_faults
from labkit.remote.driver import RemoteRun, run
from labkit.remote.faults import SERVICE_FAULTS
from labkit.remote.service import serve
from labkit.remote.views import COMMIT, Lanes, falls_text, reader_trace
from labkit.widgets.common import WIDGET_DPI, BatchedApp, classed, png_output, seed_box

REFRESH_S = 0.5  # between redraws while a run goes: live enough, and the loop keeps its cores
LATENCY_MS = 700  # the default mean latency: 30 versions then take some 15-20 s, time to click
DEADLINE_S = 60.0  # a widget run is cut off after this long, or after DEADLINE_CALLS latencies
DEADLINE_CALLS = 4  # per version (a version takes about one latency, a fault a few more)
EXIT_JOIN_S = 10.0  # how long the interpreter's exit waits for a run it stopped
HEDGED = ("fenced",)  # the designs that read the window
_BUTTON = widgets.Layout(width="auto", flex="0 0 auto")
_WRAP = widgets.Layout(flex_flow="row wrap")
_names = itertools.count(1)


@dataclass(eq=False)
class _Run:
    """One run of the widget: what its threads share. `wanted` is the fault set ticked,
    `faults_on` the one the service accepted; `url` is None until the service is up and again
    once the run ended (`ended`)."""

    design: str
    ticks: int
    faults_on: tuple[str, ...]
    deadline: float = DEADLINE_S
    lanes: Lanes = field(default_factory=Lanes)
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)  # the loop ended
    drawn: threading.Event = field(default_factory=threading.Event)  # its last picture shown
    released: threading.Event = field(default_factory=threading.Event)  # controls given back
    lock: threading.Lock = field(default_factory=threading.Lock)  # url, ended, wanted
    switching: threading.Lock = field(default_factory=threading.Lock)  # one switch at a time
    url: str | None = None
    ended: bool = False
    wanted: tuple[str, ...] = ()
    result: RemoteRun | None = None
    error: str = ""
    threads: list[threading.Thread] = field(default_factory=list)


_LIVE: weakref.WeakSet[_Run] = weakref.WeakSet()


@atexit.register
def _stop_live_runs() -> None:
    """At the interpreter's exit, stop every run still going and wait for its threads, so no
    thread is cut off inside the loop's sockets or SQLite."""
    runs = list(_LIVE)
    for r in runs:
        r.stop.set()
    for r in runs:
        for thread in r.threads:
            thread.join(EXIT_JOIN_S)


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
    `switches` the fault sets the service accepted during the runs, as (head, faults).
    """

    def __init__(
        self,
        design: str = "callback",
        faults: Sequence[str] = (),
        ticks: int = 30,
        latency_ms: int = LATENCY_MS,
        window: int = 3,
        seed: int = 0,
        span: int = 5,
    ) -> None:
        self.span = span
        self.last_png = b""
        self.switches: list[tuple[int, tuple[str, ...]]] = []
        self._run_now: _Run | None = None  # the current or last run
        self._draw_lock = threading.Lock()
        self._ticked: tuple[str, ...] = ()  # the boxes as the last update saw them

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
            widgets.IntSlider(value=ticks, min=5, max=80, description="versions", **slider),
            "wb-rp-ticks",
        )
        self.latency = classed(
            widgets.IntSlider(
                value=latency_ms, min=10, max=1000, step=10, description="latency (ms)", **slider
            ),
            "wb-rp-latency",
        )
        self.window = classed(
            widgets.IntSlider(value=window, min=2, max=6, description="window (hedged)", **slider),
            "wb-rp-window",
        )
        self.seed = seed_box(seed, "wb-rp-seed")
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
        self._ticked = self.selected_faults
        self.message.value = _grey(
            "Press <b>start a run</b>: a planner service starts on 127.0.0.1 for this run only. "
            "Tick or untick faults while it goes; the lanes fill as answers arrive."
        )
        self._refresh_controls()
        self.draw()

    # --- state -------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """A run goes, or its last picture or the controls are not given back yet (start
        waits for all three)."""
        return self._run_now is not None and not self._run_now.released.is_set()

    @property
    def _busy(self) -> bool:
        """What the controls follow: a run goes or its last picture is not drawn yet."""
        return self._run_now is not None and not self._run_now.drawn.is_set()

    @property
    def lanes(self) -> Lanes | None:
        return None if self._run_now is None else self._run_now.lanes

    @property
    def result(self) -> RemoteRun | None:
        return None if self._run_now is None else self._run_now.result

    @property
    def error(self) -> str:
        return "" if self._run_now is None else self._run_now.error

    @property
    def selected_faults(self) -> tuple[str, ...]:
        """The fault classes ticked, in `SERVICE_FAULTS` order."""
        return tuple(f for f, box in self.fault_boxes.items() if box.value)

    def why_not(self, control: str) -> str:
        """Why `control` ("design", "ticks", "latency", "window", "seed", "start", "stop")
        does nothing now, in words ("" when it does something)."""
        if control == "stop":
            cur = self._run_now
            if not self._busy or cur is None:  # busy means a run
                return "no run is going"
            return "the run is stopping" if cur.stop.is_set() else ""
        if control == "window" and self.design.value not in HEDGED:
            return "only the hedged design (fenced) keeps several ballots in flight"
        if self._busy:
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
        """The fault boxes changed: switch the service's faults now if a run goes; if its
        service is still starting, the run switches them as soon as it is up."""
        before, after = self._ticked, self.selected_faults
        self._ticked = after
        cur = self._run_now
        if cur is not None:
            with cur.lock:
                live, starting = not cur.ended, cur.url is None
                cur.wanted = after
            if live and starting:
                on = ", ".join(after) or "none"
                self.message.value = _grey(
                    html.escape(
                        f"The run's planner service is still starting: it is switched to "
                        f"these faults ({on}) as soon as it is up."
                    )
                )
                return
            if live and self._switch(cur):
                return
        self.message.value = _grey(
            html.escape(
                fault_switch_note(
                    before, after, running=False, head=0, left=self.ticks.value, span=self.span
                )
            )
        )

    def _switch(self, cur: _Run, *, said: bool = True) -> bool:
        """Switch `cur`'s service to the faults last ticked, if they differ from what it has
        (called by a box change, and by the run once its service is up: `said` False, quiet
        if nothing changed); False if the run ended in between. The message line says what
        the service accepted."""
        with cur.switching:
            with cur.lock:
                url, wanted = cur.url, cur.wanted
            if url is None:
                return False
            before = cur.faults_on
            if wanted == before and not said:
                return True
            head = cur.lanes.snapshot().head
            if wanted != before:
                try:
                    accepted = set_faults(url, wanted)["faults"]
                except (PlannerUnreachable, ValueError):
                    return False  # the run ended in between: the boxes apply to the next one
                cur.faults_on = tuple(f for f in SERVICE_FAULTS if f in accepted)
                cur.lanes.switched(cur.faults_on)
                self.switches.append((head, cur.faults_on))
            note = fault_switch_note(
                before,
                cur.faults_on,
                running=True,
                head=head,
                left=max(0, cur.ticks - head),
                span=self.span,
            )
            self.message.value = _grey(html.escape(note))
            return True

    # --- a run -------------------------------------------------------------------------------

    def start(self, latency_ms: int | None = None) -> bool:
        """Start a run in the background (what the start button does); False, said in the
        message line, if one is going already or the seed is out of range. `latency_ms` sets
        this run's latency instead of the slider's (a scripted run can go fast while the
        slider keeps the pace a person can follow)."""
        if self.running:
            self.message.value = _problem("Not started: a run is going; stop it first.")
            return False
        try:
            seed = validation.int_arg(self.seed.value, "random seed")
        except (TypeError, ValueError):
            self.message.value = _problem(
                f"Not started: the random seed must be a whole number from "
                f"{validation.INT64_MIN:,} to {validation.INT64_MAX:,}."
            )
            return False
        if latency_ms is None:
            latency_ms = int(self.latency.value)
        latency_ms = validation.int_arg(latency_ms, "start(): latency_ms", low=1)
        faults = self.selected_faults
        ticks = int(self.ticks.value)
        deadline = max(DEADLINE_S, DEADLINE_CALLS * ticks * latency_ms / 1000)
        cur = _Run(self.design.value, ticks, faults, deadline=deadline, wanted=faults)
        knobs = {
            "faults": faults,
            "latency": latency_ms / 1000,
            "window": int(self.window.value),
            "seed": seed,
        }
        self._run_now = cur
        self._ticked = faults
        cur.threads = [
            threading.Thread(
                target=self._run, args=(cur,), kwargs=knobs, name="labkit-widget-run", daemon=True
            ),
            threading.Thread(
                target=self._redraw_while_running,
                args=(cur,),
                name="labkit-widget-draw",
                daemon=True,
            ),
        ]
        _LIVE.add(cur)
        for thread in cur.threads:
            thread.start()
        self._refresh_controls()
        on = ", ".join(faults) or "none"
        self.message.value = _grey(
            html.escape(
                f"Running {cur.design} until the head reaches v{cur.ticks}, a call taking "
                f"{latency_ms} ms on average; faults on: {on}. Tick a fault box while it goes."
            )
        )
        return True

    def _run(
        self,
        cur: _Run,
        faults: tuple[str, ...],
        latency: float,
        window: int,
        seed: int,
    ) -> None:
        try:
            with serve(faults, seed, latency=latency, span=self.span, duplicate_rate=0.5) as url:
                with cur.lock:
                    cur.url = url
                self._switch(cur, said=False)  # boxes ticked while it was starting
                try:
                    cur.result = run(
                        cur.design,
                        url,
                        ticks=cur.ticks,
                        window=window,
                        seed=seed,
                        name=f"widget-{next(_names)}",
                        progress=cur.lanes.add,
                        stop=cur.stop,
                        deadline=cur.deadline,
                    )
                finally:
                    with cur.lock:
                        cur.url, cur.ended = None, True
        except Exception as exc:  # shown in the message line, never a traceback in a thread
            cur.error = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        finally:
            with cur.lock:
                cur.ended = True
            cur.lanes.finish()
            cur.done.set()

    def _redraw_while_running(self, cur: _Run) -> None:
        """Redraw `cur` while it goes; then its last picture and verdict, and only then give
        the controls back (so a new run never starts under this run's last drawing). A drawing
        that fails is said in the message line and never keeps the controls."""
        try:
            while not cur.done.wait(REFRESH_S):
                self.draw(cur)
            self.draw(cur)
            if cur.error:
                self.message.value = _problem(f"The run failed: {cur.error}")
            elif cur.result is not None:
                self.message.value = _grey(html.escape(self.verdict(cur)))
        except Exception as exc:  # shown in the message line, never a traceback in a thread
            cur.done.wait()  # a drawing failed while the run goes: it still ends on its own
            failed = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
            ran = f" The run failed: {cur.error}" if cur.error else ""
            self.message.value = _problem(f"The run's picture could not be drawn: {failed}.{ran}")
        finally:
            cur.drawn.set()
            try:
                self._refresh_controls()
            finally:
                cur.released.set()

    def stop(self) -> bool:
        """Stop the run going (what the stop button does); False, said, if none is or it is
        stopping already."""
        cur = self._run_now
        if not self._busy or cur is None:
            self.message.value = _problem("Nothing stopped: no run is going.")
            return False
        if cur.stop.is_set():
            self.message.value = _problem("Already stopping: the run ends after its current event.")
            return False
        cur.stop.set()
        self._refresh_controls()
        head = cur.lanes.snapshot().head
        self.message.value = _grey(
            html.escape(f"Stopping {cur.design} at head v{head} of v{cur.ticks}.")
        )
        return True

    def wait(self, timeout: float = 60.0) -> RemoteRun | None:
        """Block until the current run ends (its last picture drawn, the controls given
        back); its result, or None if it failed or `timeout` passed first."""
        cur = self._run_now
        if cur is None:
            return None
        cur.released.wait(timeout)
        return cur.result

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

    def verdict(self, cur: _Run | None = None) -> str:
        """One line on the finished run: how it ended (finished, stopped, cut off), what it
        committed and the falls the reader saw."""
        cur = cur or self._run_now
        r = None if cur is None else cur.result
        if cur is None or r is None:
            return ""
        falls = r.reader_falls
        reader = f"saw {len(falls)} fall{'s' if len(falls) != 1 else ''}" + (
            f" ({falls_text(falls, most=4)})" if falls else ""
        )
        if r.reader_failure is not None:
            reader = f"failed, so the run ended ({r.reader_failure}); until then it {reader}"
        if not r.summary.truncated:
            ended = f"Finished {r.design}"
        elif cur.stop.is_set():
            ended = f"Stopped {r.design} at v{r.summary.final_head} of v{cur.ticks}"
        else:
            ended = (
                f"Cut off {r.design} after {cur.deadline:g} s at v{r.summary.final_head} "
                f"of v{cur.ticks}"
            )
        return (
            f"{ended}: {r.summary.kept} versions kept of {r.summary.commits} "
            f"commits; the reader process {reader}."
        )

    # --- drawing -----------------------------------------------------------------------------

    def draw(self, cur: _Run | None = None) -> None:
        """Redraw the lanes and the status line from the rows of `cur` (the current run) so
        far."""
        with self._draw_lock:
            cur = cur or self._run_now
            view = (cur.lanes if cur is not None else Lanes()).snapshot()
            result = cur.result if cur is not None and view.done else None
            reader = reader_trace(result) if result is not None and not result.trace.empty else None
            design = cur.design if cur is not None else self.design.value
            state = "finished" if view.done else ("running" if cur is not None else "no run yet")
            title = f"{design}: {DESIGN_LABELS.get(design, design)}, {state}"
            fig = lanes_figure(view, design, reader=reader, title=title)
            recorded = None if reader is None else table_of(reader)
            self.shown = RemoteLanes(view, design, title, recorded)
            self.last_png = png_bytes(fig, dpi=WIDGET_DPI)
            png_output(self.out, self.last_png)
            answered = sum(1 for lane in view.lanes if lane.answers)
            refused = sum(1 for lane in view.lanes for _, o in lane.answers if o != COMMIT)
            goal = f" of v{cur.ticks}" if cur is not None else ""
            self.status.value = html.escape(
                f"{state}: head v{view.head}{goal}, {view.in_flight} in flight, "
                f"{answered} answered, "
                f"{refused} answers refused, "
                f"{view.falls} fall{'s' if view.falls != 1 else ''} of the head; "
                f"faults on: "
                f"{', '.join(cur.faults_on if cur is not None else self._ticked) or 'none'}"
            )
