"""Widget app for notebook 07: step two real writer connections and a summarizer by hand.

Each button runs one step of `labkit.pg.commit_order.CommitOrderLab` on the server, then redraws
the timeline with `labkit.plots.part3_postgres`. A step the lab refuses goes to the message
line, never a traceback.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from labkit.pg.commit_order import RULES, WRITERS, CommitOrderLab
from labkit.plots.part3_postgres import commit_order_timeline_figure
from labkit.plots.style import png_bytes
from labkit.widgets.common import WIDGET_DPI, classed, png_output

STEPS = (
    *((w, "insert", f"{w} inserts") for w in WRITERS),
    *((w, "commit", f"{w} commits") for w in WRITERS),
    ("worker", "deliver", "deliver what is visible"),
    ("worker", "summarize", "run the summarizers"),
)


class CommitOrderApp:
    """Buttons in, the id-against-step timeline and each rule's coverage and orphans out.

    `ui` is the container to display; `lab` the live lab; `last_png` the image shown.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.lab = CommitOrderLab(dsn)
        self.last_png = b""
        self.buttons = []
        for actor, action, label in STEPS:
            button = classed(widgets.Button(description=label), f"wb-pg-{actor}-{action}")
            button.on_click(lambda _b, a=actor, s=action: self.step(a, s))
            self.buttons.append(button)
        self.reset_button = classed(widgets.Button(description="start over"), "wb-pg-reset")
        self.reset_button.on_click(lambda _b: self.reset())
        self.message = classed(widgets.HTML(), "wb-pg-message")
        self.image = classed(widgets.Output(), "wb-pg-timeline")
        self.ui = widgets.VBox(
            [
                widgets.HBox(self.buttons[:4]),
                widgets.HBox([*self.buttons[4:], self.reset_button]),
                self.message,
                self.image,
            ]
        )
        self.update()

    def step(self, actor: str, action: str) -> None:
        """Run one step on the server and redraw."""
        try:
            self.lab.step(actor, action)
        except ValueError as exc:
            self.message.value = f"<b>refused:</b> {html.escape(str(exc))}"
            return
        self.update()

    def reset(self) -> None:
        """Drop the lab's schema and start again with empty writers."""
        self.lab.close()
        self.lab = CommitOrderLab(self.dsn)
        self.update()

    def update(self) -> None:
        """Redraw the timeline and the one-line summary of both rules."""
        state = self.lab.state()
        parts = []
        for rule in RULES:
            lost = state.orphans[rule]
            parts.append(
                f"{rule}: coverage {self.lab.coverage[rule]}, "
                f"orphans {', '.join(map(str, lost)) if lost else 'none'}"
            )
        open_rows = {w: ids for w, ids in self.lab.open.items() if ids}
        pending = "; ".join(f"{w} holds {ids} uncommitted" for w, ids in open_rows.items())
        self.message.value = html.escape(" | ".join(parts + ([pending] if pending else [])))
        fig = commit_order_timeline_figure(state, title="Your interleaving")
        self.last_png = png_bytes(fig, dpi=WIDGET_DPI)
        png_output(self.image, self.last_png)

    def close(self) -> None:
        """Close the lab's connections and drop its schema."""
        self.lab.close()
