"""Proof that the browser machinery works: widgets in a throwaway notebook redraw for real."""

from __future__ import annotations

from .jlab import (
    dropdown,
    html,
    label,
    screenshot,
    slider_handle,
    wait_image,
    wait_text_changed,
    widget_text,
)

SETUP = """\
import ipywidgets as widgets
import matplotlib.pyplot as plt
from ipykernel.kernelapp import IPKernelApp
from IPython.display import display

import labkit

print("labkit", labkit.__version__, "on", IPKernelApp.instance().transport)
"""

WIDGETS = """\
kind = widgets.Dropdown(options=["line", "bars"], value="line", description="kind")
points = widgets.IntSlider(value=3, min=1, max=10, description="points")
out = widgets.Output()
count = widgets.Label()
summary = widgets.HTML()


def redraw(_change=None):
    xs = list(range(points.value))
    with out:
        out.clear_output(wait=True)
        fig, ax = plt.subplots(figsize=(3, 2))
        (ax.plot if kind.value == "line" else ax.bar)(xs, [x * x for x in xs])
        plt.show()
    count.value = f"{kind.value} with {points.value} points"
    summary.value = f"<b>{len(xs)}</b> points drawn"


kind.observe(redraw, "value")
points.observe(redraw, "value")
redraw()
display(widgets.VBox([kind, points, out, count, summary]))
"""


def test_widgets_redraw_figure_and_labels(lab):
    path = lab.write_notebook("notebooks/_smoke.ipynb", ["# md # Smoke", SETUP, WIDGETS])
    nb = lab.open(path)
    nb.run_all()

    said = widget_text(nb.cell(1).locator(".jp-Cell-outputArea"))
    assert "labkit 0.1" in said
    assert "on ipc" in said  # the kernel listens on Unix sockets: no TCP port to lose (lab.py)
    cell = nb.cell_with("kind.observe(redraw")
    first = wait_image(cell)
    assert widget_text(label(cell)) == "line with 3 points"
    assert widget_text(html(cell)) == "3 points drawn"
    screenshot(cell, "smoke-0-initial")

    dropdown(cell).select_option(label="bars")
    bars = wait_image(cell, changed_from=first)
    assert wait_text_changed(label(cell), "line with 3 points") == "bars with 3 points"
    screenshot(cell, "smoke-1-bars")

    slider_handle(cell).press("ArrowRight")
    wait_image(cell, changed_from=bars)
    assert wait_text_changed(label(cell), "bars with 3 points") == "bars with 4 points"
    assert widget_text(html(cell)) == "4 points drawn"
    screenshot(cell, "smoke-2-four-points")
