"""What every workbook widget app shares: image output, CSS classes, batched control changes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import ipywidgets as widgets
from IPython.display import Image

WIDGET_DPI = 80
W = TypeVar("W", bound=widgets.DOMWidget)


def png_output(out: widgets.Output, png: bytes) -> None:
    """Replace the Output's content with one PNG image in a single state change."""
    from IPython.core.interactiveshell import InteractiveShell

    data, metadata = InteractiveShell.instance().display_formatter.format(Image(data=png))
    out.outputs = ({"output_type": "display_data", "data": data, "metadata": metadata},)


def classed(widget: W, css: str) -> W:
    """Give `widget` a stable CSS class (`wb-...`) for the browser tests; return it."""
    widget.add_class(css)
    return widget


class BatchedApp:
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
