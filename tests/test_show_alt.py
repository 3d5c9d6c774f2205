"""`plots.style.show` carries the figure's text alternative into the notebook output."""

from __future__ import annotations

from typing import Any

import IPython.display

from labkit.plots.style import new_figure, show


def test_show_puts_alt_text_in_the_png_output_metadata(monkeypatch: Any) -> None:
    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    show(new_figure(2, 2), alt="two lines; the red one falls once")
    (image,) = shown
    assert image.data.startswith(b"\x89PNG")
    assert image._repr_png_()[1] == {"alt": "two lines; the red one falls once"}
