"""Widget apps for part one: the priority/delivery-order timeline (notebook 01) and the
edge-case browser (notebook 02).

Each control change runs the scenario through `labkit.scenarios` on a fresh SQLite log,
redraws with `labkit.plots.part1_frontier` and shows the PNG in an Output widget. Bad input goes to
a message line, never a traceback.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import pandas as pd

from labkit import scenarios as sc
from labkit import summarizer as sm
from labkit.frontier import POLICIES
from labkit.plots.part1_frontier import TimelineCanvas, checkpoint_ranges_figure
from labkit.plots.style import png_bytes
from labkit.widgets.common import WIDGET_DPI, BatchedApp, classed, png_output

DISPATCH = "dispatch"
ID_ORDER = "id"
RANDOM = "random"
CUSTOM = "custom"
_MODE_LABELS = {
    DISPATCH: "dispatch order (priority, id)",
    ID_ORDER: "id order",
    RANDOM: "random (seed)",
    CUSTOM: "custom",
}
_SPLIT_RE = re.compile(r"[\s,;]+")
@dataclass(frozen=True)
class Preset:
    """A delivery order taken from a bundled scenario file with one shard of n messages."""

    name: str
    title: str
    priorities: tuple[int, ...]
    order: tuple[int, ...]
    failures: tuple[int, ...]


def presets_for(n: int) -> dict[str, Preset]:
    """Bundled scenarios whose single shard starts with `n` messages, as delivery orders.

    The order is the sequence of deliver/fail events on ids 1..n (rows added later are left
    out); ids the file never finishes stay pending.
    """
    found = {}
    for path in sc.list_scenarios():
        scenario = sc.load_scenario(path)
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


def parse_order(text: str, n: int) -> list[int]:
    """Parse "3,5,1,2,4,6" into ids; `ValueError` with a reader-facing reason if it is not
    a list of distinct ids from 1..n. Ids left out stay pending."""
    parts = [p for p in _SPLIT_RE.split(text.strip()) if p]
    if not parts:
        raise ValueError(f"type ids from 1..{n} separated by commas, e.g. 3,5,1,2")
    ids = []
    for part in parts:
        if not part.isdigit():
            raise ValueError(f"{part!r} is not a message id (use whole numbers 1..{n})")
        value = int(part)
        if not 1 <= value <= n:
            raise ValueError(f"id {value} does not exist: the shard has ids 1..{n}")
        if value in ids:
            raise ValueError(f"id {value} appears twice; each message finishes once")
        ids.append(value)
    return ids


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)


class FrontierTimelineApp(BatchedApp):
    """Priorities and a delivery order in; the MAX-vs-frontier timeline and orphan count out.

    `ui` is the container to display; `state` the `run_scenario` DataFrame in use;
    `orphan_count` the MAX policy's orphans at the selected step (the frontier's is
    `frontier_orphan_count`, always 0); `last_png` the image shown; `timings` each update's
    duration in seconds.
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
        self.order: list[int] = []
        self.failures: list[int] = []
        self.orphan_count = 0
        self.frontier_orphan_count = 0
        self.last_png = b""
        self.timings: list[float] = []
        self._key: tuple | None = None
        self.canvas = TimelineCanvas(width=7.2, height=3.4, live_text=False)

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
        options = [
            (f"{p.name}: {p.title} ({_ids(p.order)})", f"preset:{p.name}")
            for p in self.presets.values()
        ]
        options += [(label, mode) for mode, label in _MODE_LABELS.items()]
        first = options[0][1]
        self.order_dropdown = classed(
            widgets.Dropdown(
                options=options,
                value=first,
                description="delivery",
                layout=widgets.Layout(width="440px"),
            ),
            "wb-order",
        )
        self.custom_text = classed(
            widgets.Text(
                value=_ids(sc.dispatch_order(priorities)),
                description="custom",
                placeholder="3,5,1,2,4,6",
                continuous_update=False,
            ),
            "wb-custom-order",
        )
        self.seed_text = classed(
            widgets.IntText(value=seed, description="seed", layout=widgets.Layout(width="160px")),
            "wb-seed",
        )
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
                widgets.HTML("<b>priority per message</b> (1 = most urgent)"),
                widgets.HBox(self.priority_sliders),
                widgets.HBox([self.order_dropdown, self.seed_text]),
                self.custom_text,
                self.message,
                widgets.HBox([self.play, self.step_slider]),
                self.orphans_html,
                self.out,
            ]
        )
        self.ui.add_class("wb-frontier-app")
        if first.startswith("preset:"):
            self._apply_preset(first)
        self.update()

    # --- reading the controls ----------------------------------------------------------------

    @property
    def priorities(self) -> list[int]:
        return [s.value for s in self.priority_sliders]

    def _resolve_order(self) -> tuple[list[int], list[int], str]:
        """(order, failures, description) for the selected mode; ValueError on bad input."""
        mode = self.order_dropdown.value
        if mode.startswith("preset:"):
            preset = self.presets[mode.split(":", 1)[1]]
            return list(preset.order), list(preset.failures), f"preset {preset.name!r}"
        if mode == DISPATCH:
            return sc.dispatch_order(self.priorities), [], _MODE_LABELS[DISPATCH]
        if mode == ID_ORDER:
            return list(range(1, self.n + 1)), [], _MODE_LABELS[ID_ORDER]
        if mode == RANDOM:
            seed = self.seed_text.value
            return sc.random_order(self.n, seed), [], f"random order, seed {seed}"
        try:
            return parse_order(self.custom_text.value, self.n), [], "custom order"
        except ValueError as exc:
            raise ValueError(f"custom order {self.custom_text.value!r}: {exc}") from None

    # --- callbacks ---------------------------------------------------------------------------

    def _apply_preset(self, mode: str) -> None:
        preset = self.presets[mode.split(":", 1)[1]]
        with self.hold():
            for slider, p in zip(self.priority_sliders, preset.priorities, strict=True):
                slider.value = max(slider.min, min(slider.max, p))

    def _order_picked(self, change: Any) -> None:
        if str(change["new"]).startswith("preset:"):
            self._apply_preset(change["new"])
        self._changed()

    def _custom_typed(self, _change: Any) -> None:
        if self.order_dropdown.value != CUSTOM:
            self.order_dropdown.value = CUSTOM  # triggers the update
        else:
            self._changed()

    def _seed_changed(self, _change: Any) -> None:
        if self.order_dropdown.value == RANDOM:
            self._changed()

    # --- the update --------------------------------------------------------------------------

    def update(self) -> None:
        """Recompute (if the inputs changed), redraw, and show; record the duration."""
        start = time.perf_counter()
        try:
            order, failures, described = self._resolve_order()
        except ValueError as exc:
            self.message.value = (
                f"<span style='color:#b00020'>&#9888; {html.escape(str(exc))}</span> "
                "(still showing the last valid order)"
            )
            self.timings.append(time.perf_counter() - start)
            return
        key = (tuple(self.priorities), tuple(order), tuple(failures))
        if key != self._key:
            at_end = self.state is None or self.step_slider.value == self.step_slider.max
            scenario = sc.scenario_from_order(self.priorities, order, failures)
            self.state = sc.run_scenario(scenario)
            self.order, self.failures, self._key = order, failures, key
            last = int(self.state["step"].max())
            with self.hold():
                self.step_slider.max = self.play.max = last
                if at_end:
                    self.step_slider.value = last
        pending = [i for i in range(1, self.n + 1) if i not in order]
        self.message.value = (
            f"{html.escape(described)}: delivery order <b>{_ids(order)}</b>"
            + (f", dead-lettered {_ids(failures)}" if failures else "")
            + (f"; still pending {_ids(pending)}" if pending else "")
        )
        self._draw()
        self.timings.append(time.perf_counter() - start)

    def _draw(self) -> None:
        step = self.step_slider.value
        row = self.state[self.state["step"] == step].iloc[0]
        lost_max, lost_front = row["orphan_ids_max"], row["orphan_ids_frontier"]
        self.orphan_count, self.frontier_orphan_count = len(lost_max), len(lost_front)
        ids = f" (ids {_ids(lost_max)})" if lost_max else ""
        self.orphans_html.value = (
            f"step {step} ({html.escape(str(row['event']))}): "
            f"<b>{len(lost_max)}</b> orphan(s) under MAX(delivered){ids}; "
            f"<b>{len(lost_front)}</b> under the gap-free frontier"
        )
        self.canvas.render(self.state, step=step)
        self.last_png = self.canvas.png(dpi=WIDGET_DPI)
        png_output(self.out, self.last_png)


class EdgeCaseApp(BatchedApp):
    """Pick a bundled scenario: its description, where each shard ended, and its checkpoints.

    `state` is the `run_scenario` DataFrame, `table` the `final_state` of every shard,
    `last_png` the checkpoint-range image of the selected shard.
    """

    def __init__(self, name: str = "seed") -> None:
        self.names = [p.stem for p in sc.list_scenarios()]
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
        scenario = sc.load_scenario(self.case.value)
        self.scenario = scenario
        self.state = sc.run_scenario(scenario)
        self.table = sc.final_state(self.state)
        self.description.value = (
            f"<b>{html.escape(scenario.title)}</b>: {html.escape(scenario.description)}"
        )
        self.table_html.value = self.table.to_html(index=False, escape=True)
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
        conn = sc.replay_scenario(self.scenario)
        try:
            ranges = {p: sm.summaries(conn, shard, p) for p in POLICIES}
            lost = {p: sm.orphans(conn, shard, p) for p in POLICIES}
            ids = [i for s in self.state[self.state["shard"] == shard]["statuses"] for i in s]
        finally:
            conn.close()
        fig = checkpoint_ranges_figure(
            ranges,
            lost,
            last_id=max(ids, default=None),
            title=f"Chained checkpoints of shard {shard!r}",
        )
        self.last_png = png_bytes(fig, dpi=WIDGET_DPI)
        png_output(self.out, self.last_png)
        self.timings.append(time.perf_counter() - start)
