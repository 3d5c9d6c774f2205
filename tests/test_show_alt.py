"""`plots.style.show` carries the figure's text alternative into the notebook output."""

from __future__ import annotations

import base64
from typing import Any

import IPython.display

from labkit.plots.style import new_figure, show


def test_show_puts_alt_text_in_an_img_tag_and_the_plain_text(monkeypatch: Any) -> None:
    shown: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append((obj, kw)))
    show(new_figure(2, 2), alt='two lines; the "red" one falls once')
    ((bundle, kwargs),) = shown
    assert kwargs == {"raw": True}
    assert 'alt="two lines; the &quot;red&quot; one falls once"' in bundle["text/html"]
    assert bundle["text/plain"] == 'two lines; the "red" one falls once'
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")


def test_show_without_alt_is_a_plain_png(monkeypatch: Any) -> None:
    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    show(new_figure(2, 2))
    (image,) = shown
    assert image.data.startswith(b"\x89PNG")
