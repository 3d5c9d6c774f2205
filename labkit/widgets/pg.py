"""Widget app for notebook 07: step two real writer connections and a summarizer by hand.

Each button runs one step of `labkit.pg.commit_order.CommitOrderLab` on the server, then redraws
the timeline with `labkit.plots.pg`. A step that cannot be taken now is greyed out
with the reason beside it; a refused step, a closed connection or a server that is gone goes to
the message line in one sentence, never a traceback. A closed connection (a later cell closed
the app, or the server restarted) is replaced by a fresh lab on its own.
"""

from __future__ import annotations

import contextlib
import html

import ipywidgets as widgets

from labkit.pg.commit_order import RULES, WRITERS, CommitOrderLab
from labkit.pg.instance import PgUnavailable, mask_dsn
from labkit.plots.pg import RULE_NAMES, commit_order_timeline_figure
from labkit.plots.saved import CommitOrderTimeline
from labkit.plots.style import png_bytes
from labkit.widgets.common import WIDGET_DPI, SavesFigure, classed, png_output

STEPS = (
    *((w, "insert", f"{w} inserts") for w in WRITERS),
    *((w, "commit", f"{w} commits") for w in WRITERS),
    ("worker", "deliver", "deliver what is visible"),
    ("worker", "summarize", "run the summarizers"),
)
_BUTTON = widgets.Layout(width="auto", flex="0 0 auto")
_WRAP = widgets.Layout(flex_flow="row wrap")


def _db_error(exc: BaseException) -> bool:
    """A psycopg error (a closed connection, a server gone) rather than a bug of ours."""
    return isinstance(exc, PgUnavailable) or type(exc).__module__.startswith("psycopg")


def _problem(text: str) -> str:
    return f"<span style='color:#b00020'>&#9888; {html.escape(text, quote=False)}</span>"


def _no_change(lab: CommitOrderLab, action: str, coverage_before: dict[str, int]) -> str:
    """ "No change: ..." when a worker step moved nothing, with why; "" otherwise."""
    last = lab.events[-1]
    if action == "deliver" and not last.note:
        return "No change: no committed row was waiting to be delivered. "
    if action == "summarize" and lab.coverage == coverage_before:
        held = " (the horizon wait held: an older transaction is still open)"
        return f"No change: neither checkpoint moved{held if last.note else ''}. "
    return ""


class CommitOrderApp(SavesFigure):
    """Buttons in, the id-against-step timeline and each rule's coverage and orphans out.

    `ui` is the container to display; `lab` the live lab (None while the server is gone);
    `last_png` the image shown; `buttons` the step buttons in `STEPS` order.
    """

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.lab: CommitOrderLab | None = CommitOrderLab(dsn)
        self.last_png = b""
        self.buttons = []
        for actor, action, label in STEPS:
            button = classed(
                widgets.Button(description=label, layout=_BUTTON), f"wb-pg-{actor}-{action}"
            )
            button.on_click(lambda _b, a=actor, s=action: self.step(a, s))
            self.buttons.append(button)
        self.reset_button = classed(
            widgets.Button(description="start over", layout=_BUTTON), "wb-pg-reset"
        )
        self.reset_button.on_click(lambda _b: self.reset())
        self.why = classed(widgets.HTML(layout=widgets.Layout(min_height="1.6em")), "wb-pg-why")
        self.message = classed(
            widgets.HTML(layout=widgets.Layout(min_height="2.8em")), "wb-pg-message"
        )
        self.image = classed(widgets.Output(), "wb-pg-timeline")
        self.ui = widgets.VBox(
            [
                widgets.HBox(self.buttons[:4], layout=_WRAP),
                widgets.HBox([*self.buttons[4:], self.reset_button], layout=_WRAP),
                self.why,
                self.message,
                self.image,
            ]
        )
        self.update()

    # --- what can be done now ----------------------------------------------------------------

    def why_not(self, actor: str, action: str) -> str:
        """Why a step cannot be taken now, in words ("" when it can)."""
        if self.lab is None:
            return "the server is gone: click 'start over' or re-run the cell that made this widget"
        if action == "commit" and actor in WRITERS and not self.lab.open[actor]:
            return f"{actor} holds no uncommitted row: '{actor} inserts' first"
        return ""

    def _refresh_buttons(self) -> None:
        greyed = []
        for (actor, action, label), button in zip(STEPS, self.buttons, strict=True):
            why = self.why_not(actor, action)
            button.disabled = bool(why)
            button.tooltip = why or f"{label}: one step on the server"
            if why:
                greyed.append(f"<i>{html.escape(label)}</i>: {html.escape(why)}")
        self.why.value = (
            "<span style='font-size:12px;color:#555'>greyed out: " + "; ".join(greyed) + "</span>"
            if greyed
            else ""
        )

    # --- steps -------------------------------------------------------------------------------

    def step(self, actor: str, action: str) -> None:
        """Run one step on the server and redraw; refuse an impossible step in words."""
        why = self.why_not(actor, action)
        lab = self.lab
        if why or lab is None:  # why_not names a server gone too
            self.message.value = _problem(f"Not done: {actor} {action}: {why}.")
            return
        before = dict(lab.coverage)
        try:
            lab.step(actor, action)
        except ValueError as exc:
            self.message.value = _problem(f"Not done: {exc}.")
            return
        except Exception as exc:
            if not _db_error(exc):
                raise
            self._reconnect(exc)
            return
        self.update(_no_change(lab, action, before))

    def reset(self) -> None:
        """Drop the lab's schema and start again with empty writers."""
        self._discard()
        try:
            self.lab = CommitOrderLab(self.dsn)
        except Exception as exc:
            if not _db_error(exc):
                raise
            self._server_gone()
            return
        self.update()

    def _discard(self) -> None:
        """Close the lab; a connection already closed or a server gone is no error here."""
        if self.lab is not None:
            with contextlib.suppress(Exception):
                self.lab.close()
        self.lab = None

    def _reconnect(self, exc: BaseException) -> None:
        """The lab's connection failed: start a fresh lab on the same server, or say it is gone."""
        self.reset()
        if self.lab is not None:
            reason = " ".join(str(exc).split())[:80] or type(exc).__name__
            self.message.value = _problem(
                f"The lab's connection had failed ({reason}), so the widget reconnected and "
                "started over with empty writers: click your step again."
            )

    def _server_gone(self) -> None:
        self._refresh_buttons()
        self.message.value = _problem(
            f"The PostgreSQL server at {mask_dsn(self.dsn)} no longer answers (a kernel restart "
            "or pg.stop_shared_server() stops it): click 'start over' (the notebook's own "
            "server starts again) or re-run the cell that made this widget."
        )

    # --- drawing -----------------------------------------------------------------------------

    def update(self, note: str = "") -> None:
        """Redraw the timeline and the one-line summary of both rules (after `note`)."""
        lab = self.lab
        if lab is None:
            self._server_gone()
            return
        try:
            state = lab.state()
        except Exception as exc:
            if not _db_error(exc):
                raise
            self._reconnect(exc)
            return
        parts = []
        for rule in RULES:
            lost = state.orphans[rule]
            parts.append(
                f"{RULE_NAMES[rule]}: coverage {lab.coverage[rule]}, "
                f"orphans {', '.join(map(str, lost)) if lost else 'none'}"
            )
        open_rows = {w: ids for w, ids in lab.open.items() if ids}
        pending = "; ".join(f"{w} holds {ids} uncommitted" for w, ids in open_rows.items())
        self.message.value = html.escape(note + " | ".join(parts + ([pending] if pending else [])))
        self._refresh_buttons()
        fig = commit_order_timeline_figure(state, title="Your interleaving")
        self.shown = CommitOrderTimeline(state, "Your interleaving")
        self.last_png = png_bytes(fig, dpi=WIDGET_DPI)
        png_output(self.image, self.last_png)

    def close(self) -> None:
        """Close the lab's connections and drop its schema (a later click reconnects)."""
        if self.lab is not None:
            self.lab.close()
