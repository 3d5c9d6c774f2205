"""What every workbook widget app shares: image output, CSS classes, batched control changes,
work done ahead while the kernel is idle."""

from __future__ import annotations

import asyncio
import functools
import html
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import ipywidgets as widgets
import pandas as pd
from IPython.core.formatters import DisplayFormatter
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Image

from labkit.plots.saved import State, write_spec

WIDGET_DPI = 80
W = TypeVar("W", bound=widgets.DOMWidget)
S = TypeVar("S", bound=Hashable)  # one step of a `WorkAhead`


def png_output(out: widgets.Output, png: bytes) -> None:
    """Replace the Output's content with one PNG image in a single state change."""
    data, metadata = _display_formatter().format(Image(data=png))
    out.outputs = ({"output_type": "display_data", "data": data, "metadata": metadata},)


def _display_formatter() -> DisplayFormatter:
    """The kernel's formatter; outside one (a script, a test), a plain one. Asking for
    `InteractiveShell.instance()` there would make a whole shell, with a history file it
    writes at exit, to encode one image."""
    if InteractiveShell.initialized():
        formatter = InteractiveShell.instance().display_formatter
        if formatter is not None:  # a shell always has one; the trait merely allows None
            return formatter
    return _plain_formatter()


@functools.cache
def _plain_formatter() -> DisplayFormatter:
    return DisplayFormatter()


_CELL = "white-space:nowrap;padding:0 6px"


def scrolling(table_html: str) -> str:
    """A table in a box as wide as its widget that scrolls sideways on its own when the table is
    wider (`width:0; min-width:100%` keeps the table's width out of the layout's sums)."""
    return (
        f"<div class='wb-scroll' style='overflow-x:auto;width:0;min-width:100%'>{table_html}</div>"
    )


def html_table(table: pd.DataFrame, highlight: str | None) -> str:
    """`table` as a scrolling HTML table; the row whose first cell is `highlight` in bold, a
    nonzero `rewinds` cell in red."""
    # one line a header: the table scrolls sideways on its own rather than grow tall
    head = "".join(f"<th style='{_CELL}'>{html.escape(str(c))}</th>" for c in table.columns)
    body = []
    for row in table.itertuples(index=False):
        style = " style='font-weight:bold;background:#eef3fb'" if row[0] == highlight else ""
        cells = []
        for col, value in zip(table.columns, row, strict=True):
            bad = col == "rewinds" and value
            text = html.escape(str(value))
            cells.append(
                f"<td style='color:#b00020;{_CELL}'><b>{text}</b></td>"
                if bad
                else f"<td style='{_CELL}'>{text}</td>"
            )
        body.append(f"<tr{style}>{''.join(cells)}</tr>")
    return scrolling(
        "<table class='wb-table' style='border-collapse:collapse;font-size:12px'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def classed(widget: W, css: str) -> W:
    """Give `widget` a stable CSS class (`wb-...`) for the browser tests; return it."""
    widget.add_class(css)
    return widget


def seed_box(seed: int, css: str, width: str = "190px") -> widgets.IntText:
    """The "random seed" box every app shows, classed `css` for the browser tests."""
    return classed(
        widgets.IntText(
            value=seed,
            description="random seed",
            style={"description_width": "initial"},
            layout=widgets.Layout(width=width),
        ),
        css,
    )


class SavesFigure:
    """An app that can write what it shows as a figure spec (`labkit.plots.saved`): each draw
    sets `shown` to the state that redraws that picture."""

    shown: State | None = None

    def save_figure(self, path: Path | str) -> Path:
        """Write the picture on screen as a figure spec at `path`;
        `python -m labkit figures --spec PATH` redraws it."""
        if self.shown is None:
            raise RuntimeError(f"{type(self).__name__} has drawn nothing to save yet")
        return write_spec(path, self.shown)


class BatchedApp(SavesFigure):
    """Base of the widget apps: `update()` once per user change, not once per control."""

    _holding = False

    def update(self) -> None:  # pragma: no cover - every app defines it
        raise NotImplementedError

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Set several controls inside this block; the caller updates once afterwards."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False

    def _changed(self, _change: Any = None) -> None:
        if not self._holding:
            self.update()


class WorkAhead(Generic[S]):
    """Steps done while the kernel's event loop is idle, one per turn, so that a user's next
    change waits for one step at most and finds the rest ready.

    `do(step)` does one step and returns False if it found it done already (the next step
    then follows in the same turn). `start` replaces the steps left from the last update.
    Without a running loop (a script, a test) there is no idle time, and nothing is done.
    """

    def __init__(self, do: Callable[[S], bool]) -> None:
        self._do = do
        self._queue: deque[S] = deque()
        self.done = 0  # steps that did work

    def __len__(self) -> int:
        """Steps still waiting."""
        return len(self._queue)

    def start(self, steps: Iterable[S], delay: float, first: float | None = None) -> None:
        """Do `steps` (repeats dropped) in order, `delay` seconds apart, the first after
        `first` (default `delay`): time for the update just sent to reach the page."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._queue = deque(dict.fromkeys(steps))
        loop.call_later(delay if first is None else first, self._step, self._queue, delay)

    def _step(self, queue: deque[S], delay: float) -> None:
        while queue and queue is self._queue:  # else a newer update replaced the queue
            if self._do(queue.popleft()):
                self.done += 1
                asyncio.get_running_loop().call_later(delay, self._step, queue, delay)
                return
