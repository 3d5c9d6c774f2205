"""Widget apps for part one: the priority/delivery-order timeline and the predict-then-reveal
puzzle (notebook 01), and the edge-case browser (notebook 02).

Each control change runs the scenario through `labkit.frontier.scenarios` on a fresh SQLite log,
redraws with `labkit.plots.frontier` and shows the PNG in an Output widget. Bad input goes
to a message line, never a traceback. Controls that do nothing in the current mode are disabled,
with the reason beside them.
"""

from __future__ import annotations

import html
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import pandas as pd

import labkit.frontier.scenario_format as fmt
import labkit.frontier.scenarios as sc
from labkit.plots.frontier import TimelineCanvas
from labkit.plots.saved import CheckpointRanges, FrontierTimeline, checkpoint_ranges_of
from labkit.plots.style import png_bytes
from labkit.widgets.common import (
    WIDGET_DPI,
    BatchedApp,
    SavesFigure,
    classed,
    html_table,
    png_output,
    seed_box,
)

_MAX, _FRONTIER = sc.POLICY_COLUMNS["max"], sc.POLICY_COLUMNS["frontier"]

DISPATCH = "dispatch"
ID_ORDER = "id"
RANDOM = "random"
CUSTOM = "custom"
PRESET = "preset:"
_MODE_LABELS = {
    DISPATCH: "dispatch by priority (ORDER BY priority, id)",
    ID_ORDER: "id order (1, 2, 3, ...)",
    RANDOM: "random order (from a random seed)",
    CUSTOM: "custom: type the order",
}
NO_PRIORITY = "The priority sliders play no part here."
MODE_HELP = {
    DISPATCH: (
        "<b>Dispatch by priority.</b> One worker asks labkit's dispatcher for the next row "
        "(<code>ORDER BY priority, id</code>: lowest priority number first, ties by the lower "
        "id), delivers it, and the summarizer checkpoints after every delivery. "
        "<b>Move a priority slider</b> (1 = most urgent) to change which row goes first."
    ),
    ID_ORDER: f"<b>Id order.</b> Rows finish 1, 2, 3, ..., a summary after each. {NO_PRIORITY}",
    RANDOM: (
        "<b>Random order.</b> Rows finish in a shuffled order drawn from the <b>random seed</b>, "
        f"a summary after each; type another random seed for another order. {NO_PRIORITY}"
    ),
    CUSTOM: (
        "<b>Custom.</b> Type the order rows finish in, separated by spaces or commas: "
        "<code>3</code> delivers row 3, <code>f1</code> dead-letters row 1 (it fails for good), "
        "<code>r1</code> redrives row 1's dead letter as a <i>new</i> pending row with the next "
        "id ({next_id} for the first redrive), which you then finish by typing that id. Rows you "
        f"leave out stay pending. A summary follows every token. {NO_PRIORITY}"
    ),
}
PRESET_HELP = (
    "<b>Preset {name}.</b> {title}: the order and the priorities come from the bundled "
    "scenario file. Pick <i>dispatch by priority</i> or <i>custom</i> to change them."
)
WHY_PRIORITY = "priorities only matter in dispatch mode"
WHY_PRIORITY_PRESET = "this preset fixes its own priorities"
WHY_SEED = "the random seed only drives the random order"
WHY_CUSTOM = "pick 'custom' in the menu to type an order"


@dataclass(frozen=True)
class Preset:
    """A delivery order taken from a bundled scenario file with one shard of n messages."""

    name: str
    title: str
    priorities: tuple[int, ...]
    order: tuple[int, ...]
    failures: tuple[int, ...]

    @property
    def label(self) -> str:
        """The name a reader sees: the file `seed` holds Article 1's scenario, not a random seed."""
        return "Article 1" if self.name == "seed" else self.name


def presets_for(n: int) -> dict[str, Preset]:
    """Bundled scenarios whose single shard starts with `n` messages, as delivery orders.

    The order is the sequence of deliver/fail events on ids 1..n (rows added later are left
    out); ids the file never finishes stay pending.
    """
    found = {}
    for path in fmt.list_scenarios():
        scenario = fmt.load_scenario(path)
        if len(scenario.tracked_shards) != 1 or len(scenario.messages) != n:
            continue
        finished = [
            (ev["id"], ev["op"] == "fail")
            for ev in scenario.events
            if ev["op"] in ("deliver", "fail") and ev["id"] <= n
        ]
        found[scenario.name] = Preset(
            scenario.name,
            scenario.title,
            tuple(m.priority for m in scenario.messages),
            tuple(i for i, _ in finished),
            tuple(i for i, failed in finished if failed),
        )
    return found


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)


def _note(reason: str) -> str:
    """The greyed word beside a disabled control saying why (empty while it is live)."""
    return (
        f"<i style='color:#666'>disabled: {html.escape(reason, quote=False)}</i>" if reason else ""
    )


def _problem(text: str) -> str:
    return f"<span style='color:#b00020'>&#9888; {html.escape(text, quote=False)}</span>"


def _timeline_spec(
    canvas: TimelineCanvas,
    priorities: Sequence[int],
    steps: Sequence[sc.OrderStep],
    step: int | None,
) -> FrontierTimeline:
    """The figure spec of what `canvas` shows: the priorities, the order played, the step."""
    order = sc.format_delivery_order(steps)
    live = canvas.live_text
    return FrontierTimeline(list(priorities), order, step, canvas.width, canvas.height, live)


class FrontierTimelineApp(BatchedApp):
    """Priorities and a delivery order in; the MAX-vs-frontier timeline and orphan count out.

    Opens in dispatch-by-priority mode, where the priority sliders set the order through
    labkit's dispatcher. `ui` is the container to display; `steps` the `OrderStep`s played;
    `order` / `failures` the ids finished / dead-lettered; `state` the `run_scenario`
    DataFrame; `orphan_count` the MAX policy's orphans at the selected step (the frontier's is
    `frontier_orphan_count`, always 0); `last_png` the image shown; `timings` each update's
    duration in seconds (read by `benchmarks/`, never shown).
    """

    def __init__(self, n: int = 6, priorities: Sequence[int] | None = None, seed: int = 0):
        if not 2 <= n <= 12:
            raise ValueError(f"n must be between 2 and 12, got {n}")
        self.n = n
        if priorities is None:
            priorities = [1 if i == 3 else 5 for i in range(1, n + 1)]
        if len(priorities) != n:
            raise ValueError(f"expected {n} priorities, got {len(priorities)}")
        self.presets = presets_for(n)
        self.state: pd.DataFrame | None = None
        self.steps: tuple[sc.OrderStep, ...] = ()
        self.order: list[int] = []
        self.failures: list[int] = []
        self.orphan_count = 0
        self.frontier_orphan_count = 0
        self.last_png = b""
        self.timings: list[float] = []
        self._key: tuple | None = None
        self._typed = False  # the reader typed a custom order: keep it across mode changes
        self.canvas = TimelineCanvas(width=7.2, height=3.4, live_text=False)

        options = [(label, mode) for mode, label in _MODE_LABELS.items()]
        options += [
            (f"preset {p.label}: {p.title} ({_ids(p.order)})", f"{PRESET}{p.name}")
            for p in self.presets.values()
        ]
        self.order_dropdown = classed(
            widgets.Dropdown(
                options=options,
                value=DISPATCH,
                description="delivery order",
                style={"description_width": "initial"},
                layout=widgets.Layout(width="600px"),
            ),
            "wb-order",
        )
        self.help_html = classed(widgets.HTML(), "wb-help")
        self.priority_sliders = [
            classed(
                widgets.IntSlider(
                    value=int(p),
                    min=1,
                    max=9,
                    description=f"#{i}",
                    orientation="vertical",
                    continuous_update=False,
                    layout=widgets.Layout(width="56px", height="140px"),
                ),
                f"wb-priority-{i}",
            )
            for i, p in enumerate(priorities, 1)
        ]
        self.why_priority = classed(widgets.HTML(), "wb-why-priority")
        self.seed_text = seed_box(seed, "wb-seed", width="180px")
        self.why_seed = classed(widgets.HTML(), "wb-why-seed")
        self.custom_text = classed(
            widgets.Text(
                value="",
                description="custom",
                placeholder=sc.ORDER_EXAMPLE,
                continuous_update=False,
                layout=widgets.Layout(width="360px"),
            ),
            "wb-custom-order",
        )
        self.why_custom = classed(widgets.HTML(), "wb-why-custom")
        self.step_slider = classed(
            widgets.IntSlider(
                value=0,
                min=0,
                max=0,
                description="step",
                continuous_update=True,
                layout=widgets.Layout(width="420px"),
            ),
            "wb-step",
        )
        self.play = classed(widgets.Play(value=0, min=0, max=0, interval=500), "wb-play")
        widgets.jslink((self.play, "value"), (self.step_slider, "value"))
        self.message = classed(widgets.HTML(), "wb-message")
        self.orphans_html = classed(widgets.HTML(), "wb-orphans")
        self.out = classed(widgets.Output(), "wb-timeline")

        for slider in self.priority_sliders:
            slider.observe(self._changed, "value")
        self.order_dropdown.observe(self._order_picked, "value")
        self.custom_text.observe(self._custom_typed, "value")
        self.seed_text.observe(self._seed_changed, "value")
        self.step_slider.observe(self._changed, "value")

        self.ui = widgets.VBox(
            [
                self.order_dropdown,
                self.help_html,
                widgets.HBox(
                    [
                        widgets.HTML("<b>priority per message</b> (1 = most urgent)"),
                        self.why_priority,
                    ]
                ),
                widgets.HBox(self.priority_sliders),
                widgets.HBox([self.seed_text, self.why_seed]),
                widgets.HBox([self.custom_text, self.why_custom]),
                self.message,
                widgets.HBox([self.play, self.step_slider]),
                self.orphans_html,
                self.out,
            ]
        )
        self.ui.add_class("wb-frontier-app")
        self._show_mode()
        self.update()

    # --- reading the controls ----------------------------------------------------------------

    @property
    def priorities(self) -> list[int]:
        return [s.value for s in self.priority_sliders]

    @property
    def mode(self) -> str:
        """DISPATCH, ID_ORDER, RANDOM, CUSTOM, or "preset:<name>"."""
        return str(self.order_dropdown.value)

    def _resolve_steps(self) -> tuple[tuple[sc.OrderStep, ...], str]:
        """(steps, description) for the selected mode; ValueError on a bad typed order."""
        mode = self.mode
        if mode.startswith(PRESET):
            preset = self.presets[mode.removeprefix(PRESET)]
            return sc.order_steps(preset.order, preset.failures), f"preset {preset.label!r}"
        if mode == DISPATCH:
            return sc.order_steps(sc.dispatched_order(self.priorities)), "dispatch by priority"
        if mode == ID_ORDER:
            return sc.order_steps(range(1, self.n + 1)), "id order"
        if mode == RANDOM:
            seed = self.seed_text.value
            return sc.order_steps(sc.random_order(self.n, seed)), f"random order, seed {seed}"
        try:
            return sc.parse_delivery_order(self.custom_text.value, self.n), "custom order"
        except ValueError as exc:
            raise ValueError(f"custom order: {exc}") from None

    # --- callbacks ---------------------------------------------------------------------------

    def _show_mode(self) -> None:
        """Enable the controls the mode uses, disable the rest with a reason, explain the mode."""
        mode = self.mode
        preset = mode.startswith(PRESET)
        for slider in self.priority_sliders:
            slider.disabled = mode != DISPATCH
        why_priority = WHY_PRIORITY_PRESET if preset else WHY_PRIORITY
        self.why_priority.value = _note("" if mode == DISPATCH else why_priority)
        self.seed_text.disabled = mode != RANDOM
        self.why_seed.value = _note("" if mode == RANDOM else WHY_SEED)
        self.custom_text.disabled = mode != CUSTOM
        self.why_custom.value = _note("" if mode == CUSTOM else WHY_CUSTOM)
        if preset:
            chosen = self.presets[mode.removeprefix(PRESET)]
            self.help_html.value = PRESET_HELP.format(
                name=html.escape(chosen.label), title=html.escape(chosen.title)
            )
        else:
            self.help_html.value = MODE_HELP[mode].format(next_id=self.n + 1)

    def _order_picked(self, change: Any) -> None:
        mode = str(change["new"])
        with self.hold():
            if mode.startswith(PRESET):
                preset = self.presets[mode.removeprefix(PRESET)]
                for slider, p in zip(self.priority_sliders, preset.priorities, strict=True):
                    slider.value = max(slider.min, min(slider.max, p))
            elif mode == CUSTOM and not self._typed:
                # start from the order on screen, so the reader edits rather than retypes
                self.custom_text.value = sc.format_delivery_order(self.steps)
        self._show_mode()
        self._changed()

    def _custom_typed(self, _change: Any) -> None:
        if self._holding:
            return
        self._typed = True
        if self.mode == CUSTOM:
            self.update()

    def _seed_changed(self, _change: Any) -> None:
        if self.mode == RANDOM:
            self._changed()

    # --- the update --------------------------------------------------------------------------

    def update(self) -> None:
        """Recompute (if the inputs changed), redraw, and show; record the duration."""
        start = time.perf_counter()
        try:
            steps, described = self._resolve_steps()
        except ValueError as exc:
            self.message.value = _problem(str(exc)) + " (still showing the last valid order)"
            self.timings.append(time.perf_counter() - start)
            return
        key = (tuple(self.priorities), steps)
        # a priority moved, yet the dispatcher's order (so the whole picture) stayed the same
        unchanged = (
            self.mode == DISPATCH
            and self._key is not None
            and key[0] != self._key[0]
            and steps == self._key[1]
        )
        if key != self._key:
            at_end = self.state is None or self.step_slider.value == self.step_slider.max
            self.state = sc.run_scenario(sc.scenario_from_steps(self.priorities, steps))
            self.steps, self._key = steps, key
            self.order = [s.id for s in steps if s.op != "redrive"]
            self.failures = [s.id for s in steps if s.op == "fail"]
            last = int(self.state["step"].max())
            with self.hold():
                self.step_slider.max = self.play.max = last
                if at_end:
                    self.step_slider.value = last
        self._draw()  # the picture first: its message reaches the page before the text's
        self.message.value = self._describe(described)
        if unchanged:
            self.message.value = (
                "<i>No change: with these priorities the dispatcher still takes the rows in "
                "the same order, so the timeline stays as it was.</i><br>" + self.message.value
            )
        self.timings.append(time.perf_counter() - start)

    def _describe(self, described: str) -> str:
        assert self.state is not None, "update() runs the scenario before it describes it"
        final = self.state.iloc[-1]["statuses"]
        pending = [i for i, status in final.items() if status == "pending"]
        redrives = "".join(
            f"; redriven {s.id} as row {s.new_id}" for s in self.steps if s.op == "redrive"
        )
        return (
            f"{html.escape(described)}: delivery order <b>{', '.join(s.token for s in self.steps)}"
            "</b>"
            + (f", dead-lettered {_ids(self.failures)}" if self.failures else "")
            + redrives
            + (f"; still pending {_ids(pending)}" if pending else "")
        )

    def _draw(self) -> None:
        assert self.state is not None, "update() runs the scenario before anything draws it"
        step = self.step_slider.value
        row = self.state[self.state["step"] == step].iloc[0]
        lost_max, lost_front = row[_MAX.orphan_ids], row[_FRONTIER.orphan_ids]
        self.orphan_count, self.frontier_orphan_count = len(lost_max), len(lost_front)
        self.canvas.render(self.state, step=step)
        self.shown = _timeline_spec(self.canvas, self.priorities, self.steps, step)
        self.last_png = self.canvas.png(dpi=WIDGET_DPI)
        png_output(self.out, self.last_png)
        ids = f" (ids {_ids(lost_max)})" if lost_max else ""
        self.orphans_html.value = (
            f"step {step} ({html.escape(str(row['event']))}): "
            f"<b>{len(lost_max)}</b> orphan(s) under MAX(delivered){ids}; "
            f"<b>{len(lost_front)}</b> under the gap-free frontier"
        )


# --- predict, then reveal --------------------------------------------------------------------

PUZZLE_PRIORITIES = (2, 5, 5, 1, 5, 3)


@dataclass(frozen=True)
class Verdict:
    """The ids a reader predicted MAX(delivered) would orphan, against what labkit computed."""

    predicted: tuple[int, ...]
    actual: tuple[int, ...]

    @property
    def right(self) -> bool:
        return set(self.predicted) == set(self.actual)

    @property
    def missed(self) -> tuple[int, ...]:
        """Orphans the reader did not predict."""
        return tuple(sorted(set(self.actual) - set(self.predicted)))

    @property
    def extra(self) -> tuple[int, ...]:
        """Ids the reader predicted that were not orphaned."""
        return tuple(sorted(set(self.predicted) - set(self.actual)))


def _some(ids: Sequence[int]) -> str:
    if not ids:
        return "no id"
    return f"id {ids[0]}" if len(ids) == 1 else f"ids {_ids(ids)}"


class PredictOrphansApp(SavesFigure):
    """Predict, then reveal: which ids will the MAX rule orphan for these priorities?

    The reader ticks ids and locks the answer in; only then does labkit run the scenario
    (its dispatcher, one worker, a summary after each delivery) and show the timeline and
    whether the prediction was right (`verdict`). "New puzzle" draws other priorities from
    `seed`, reproducibly.
    """

    def __init__(self, priorities: Sequence[int] = PUZZLE_PRIORITIES, seed: int = 0) -> None:
        if not 2 <= len(priorities) <= 12:
            raise ValueError(f"expected 2 to 12 priorities, got {len(priorities)}")
        self.seed = seed
        self.puzzle = 0
        self.priorities = tuple(int(p) for p in priorities)
        self.verdict: Verdict | None = None
        self.state: pd.DataFrame | None = None
        self.last_png = b""
        self.canvas = TimelineCanvas(width=7.2, height=3.4, live_text=False)
        self.question = classed(widgets.HTML(), "wb-puzzle")
        self.guesses = [
            classed(widgets.Checkbox(value=False, indent=False), f"wb-guess-{i}")
            for i in range(1, len(self.priorities) + 1)
        ]
        for box in self.guesses:
            box.layout = widgets.Layout(width="110px")
        self.reveal_button = classed(
            widgets.Button(
                description="Lock in my answer and reveal",
                button_style="primary",
                layout=widgets.Layout(width="260px"),
            ),
            "wb-reveal",
        )
        self.new_button = classed(widgets.Button(description="New puzzle"), "wb-new-puzzle")
        self.why_new = classed(widgets.HTML(), "wb-why-new-puzzle")
        self.verdict_html = classed(widgets.HTML(), "wb-verdict")
        self.out = classed(widgets.Output(), "wb-reveal-timeline")
        self.reveal_button.on_click(lambda _button: self.reveal())
        self.new_button.on_click(lambda _button: self.new_puzzle())
        self.ui = widgets.VBox(
            [
                self.question,
                widgets.HBox(self.guesses),
                widgets.HBox([self.reveal_button, self.new_button, self.why_new]),
                self.verdict_html,
                self.out,
            ]
        )
        self.ui.add_class("wb-predict-app")
        self._ask()

    def _ask(self) -> None:
        """Show the puzzle with every control reset; nothing of the answer is computed yet."""
        cells = "".join(
            f"<td style='padding:0 8px'>#{i}: <b>{p}</b></td>"
            for i, p in enumerate(self.priorities, 1)
        )
        self.question.value = (
            f"<b>Puzzle {self.puzzle + 1}.</b> {len(self.priorities)} messages with these "
            f"priorities (1 = most urgent):<table><tr>{cells}</tr></table>"
            "One worker takes them <code>ORDER BY priority, id</code>, delivers each, and the "
            "summarizer checkpoints at <code>MAX(delivered)</code> after every delivery. "
            "<b>Which ids end up orphaned</b> (delivered, yet in no summary)? Tick them (ticking "
            "none means you predict no orphans) and lock in your answer."
        )
        for i, (box, p) in enumerate(zip(self.guesses, self.priorities, strict=True), 1):
            box.value, box.disabled, box.description = False, False, f"#{i} (p{p})"
        self.reveal_button.disabled = False
        self.new_button.disabled = True
        self.why_new.value = _note("answer this puzzle first")
        self.verdict_html.value = "<i>The timeline appears here once you lock in an answer.</i>"
        self.out.outputs = ()
        self.verdict, self.state, self.last_png, self.shown = None, None, b"", None

    def reveal(self) -> Verdict:
        """Lock in the ticked ids, run the scenario in labkit, show the verdict and timeline."""
        if self.verdict is not None:
            return self.verdict
        predicted = tuple(i for i, box in enumerate(self.guesses, 1) if box.value)
        order = sc.dispatched_order(self.priorities)
        state = sc.run_scenario(sc.scenario_from_steps(self.priorities, sc.order_steps(order)))
        verdict = Verdict(predicted, tuple(state.iloc[-1][_MAX.orphan_ids]))
        self.state, self.verdict = state, verdict
        for box in self.guesses:
            box.disabled = True
        self.reveal_button.disabled = True
        self.new_button.disabled = False
        self.why_new.value = ""
        self.verdict_html.value = self._explain(order, verdict, state)
        self.canvas.render(state)
        self.shown = _timeline_spec(self.canvas, self.priorities, sc.order_steps(order), None)
        self.last_png = self.canvas.png(dpi=WIDGET_DPI)
        png_output(self.out, self.last_png)
        return verdict

    def _explain(self, order: Sequence[int], verdict: Verdict, rows: pd.DataFrame) -> str:
        if verdict.right:
            head = (
                "<b style='color:#1b7f3b'>&#10004; Right.</b> "
                f"MAX(delivered) orphans {_some(verdict.actual)}."
            )
        else:
            head = (
                f"<b style='color:#b00020'>&#10008; Not quite.</b> You predicted "
                f"{_some(verdict.predicted)}; MAX(delivered) orphans {_some(verdict.actual)}."
                + (f" Missed: {_ids(verdict.missed)}." if verdict.missed else "")
                + (f" Not orphaned: {_ids(verdict.extra)}." if verdict.extra else "")
            )
        lines = [head, f"The dispatcher's order was {_ids(order)}."]
        for row_id in verdict.actual:
            first = rows[rows[_MAX.orphan_ids].map(lambda lost, i=row_id: i in lost)].iloc[0]
            lines.append(
                f"#{row_id} finished at step {first['step']}, behind a MAX checkpoint "
                f"already at {first[_MAX.coverage]}."
            )
        kept = rows.iloc[-1][_FRONTIER.orphan_ids]
        lines.append(
            f"The gap-free frontier orphans {_some(kept)}: it waits for the oldest open row."
        )
        return "<br>".join(lines)

    def new_puzzle(self) -> None:
        """Draw new priorities (same count) from the seed and ask again."""
        self.puzzle += 1
        rng = random.Random(self.seed * 1_000_003 + self.puzzle)
        self.priorities = tuple(rng.randint(1, 5) for _ in self.priorities)
        self._ask()


class EdgeCaseApp(BatchedApp):
    """Pick a bundled scenario: its description, where each shard ended, and its checkpoints.

    `state` is the `run_scenario` DataFrame, `table` the `final_state` of every shard,
    `last_png` the checkpoint-range image of the selected shard.
    """

    def __init__(self, name: str = "seed") -> None:
        self.names = [p.stem for p in fmt.list_scenarios()]
        self.state: pd.DataFrame | None = None
        self.table: pd.DataFrame | None = None
        self.last_png = b""
        self.timings: list[float] = []
        self.case = classed(
            widgets.Dropdown(options=self.names, value=name, description="scenario"), "wb-case"
        )
        self.shard = classed(widgets.Dropdown(options=[], description="shard"), "wb-shard")
        self.description = classed(widgets.HTML(), "wb-case-description")
        self.table_html = classed(widgets.HTML(), "wb-case-table")
        self.out = classed(widgets.Output(), "wb-ranges")
        self.case.observe(self._case_picked, "value")
        self.shard.observe(self._changed, "value")
        self.ui = widgets.VBox(
            [widgets.HBox([self.case, self.shard]), self.description, self.table_html, self.out]
        )
        self.ui.add_class("wb-edge-case-app")
        self._case_picked()

    def _case_picked(self, _change: Any = None) -> None:
        scenario = fmt.load_scenario(self.case.value)
        self.scenario = scenario
        self.state = sc.run_scenario(scenario)
        self.table = sc.final_state(self.state)
        self.description.value = (
            f"<b>{html.escape(scenario.title)}</b>: {html.escape(scenario.description)}"
        )
        # the orphans first: the columns the notebook's prose reads; the rest scroll sideways
        first = ["shard", "orphan_ids_frontier", "orphan_ids_max"]
        shown = self.table[first + [c for c in self.table.columns if c not in first]]
        self.table_html.value = html_table(shown, None)
        shards = list(scenario.tracked_shards)
        if list(self.shard.options) != shards:
            with self.hold():
                self.shard.options = shards
                self.shard.value = shards[0]
        self.update()

    def update(self) -> None:
        """Replay the scenario and draw the selected shard's chained checkpoint ranges."""
        start = time.perf_counter()
        shard = self.shard.value
        if shard is None:
            return
        state = self.state
        assert state is not None, "a case is picked (and run) before the first update"
        fig = checkpoint_ranges_of(self.scenario, shard, state)
        self.shown = CheckpointRanges(scenario=self.case.value, shard=shard)
        self.last_png = png_bytes(fig, dpi=WIDGET_DPI)
        png_output(self.out, self.last_png)
        self.timings.append(time.perf_counter() - start)
