"""Drive the workbook's notebooks in a real JupyterLab, in headless Debian Chromium.

How to write a browser test (fixtures come from `tests/browser/conftest.py`; every test in
this folder is marked `browser` and gets a 180 s timeout automatically):

    from .jlab import dropdown, label, screenshot, slider_handle, wait_image, wait_text_changed

    def test_priority_widget_redraws(lab):
        # Run All'ed once for every test that asks (waits for every prompt to show [n]:);
        # a later test gets it as the earlier left it, with the app's cell run again
        nb = lab.notebook("notebooks/01_frontier.ipynb", fresh="interact_priorities(")
        cell = nb.cell_with("interact_priorities")   # or nb.cell(i), i counts all cells
        before = wait_image(cell)     # src of the first decoded <img> in the cell's output
        dropdown(cell).select_option(label="by priority")
        after = wait_image(cell, changed_from=before)  # new src, and the bitmap is decoded
        slider_handle(cell).press("ArrowRight")       # one press = one redraw
        assert wait_text_changed(label(cell), "orphans: 0") != "orphans: 0"
        screenshot(cell, "01-priority")  # LABKIT_SCREENSHOTS=1: artifacts/browser/01-priority.png

The server serves a copy of `notebooks/` and `data/` (`lab.root`), so tests never rewrite the
sources; `lab.write_notebook(...)` puts a throwaway notebook into that copy, and `lab.open(path)`
opens one for the test alone (closed, its kernel shut down, after it; `nb.run_all()` runs it).
The tests share one browser tab (a fresh one after a failure), at 1400x1000 when each test
starts; the tests of one notebook run one after another (conftest.ORDER), so each notebook is
Run All'ed once: a test that changes what a later one looks at asks for that app `fresh`.
Every wait defaults to 60 s.
Playwright is imported only inside functions so that plain `pytest` runs without it. The server
and the notebook tab live in `harness/lab.py`, which the browser benchmark drives too; this
module hands them on and adds the widget helpers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.lab import (
    CHROMIUM,
    ROOT,
    WAIT_MS,
    LabServer,
    Notebook,
    close_notebooks,
    copy_workbook,
    open_notebook,
    start_lab,
)

if TYPE_CHECKING:
    from playwright.sync_api import Locator

__all__ = [
    "ARTIFACTS", "CHROMIUM", "WAIT_MS", "LabServer", "Notebook", "close_notebooks",
    "copy_workbook", "dropdown", "figure", "html", "image_src", "label", "open_notebook",
    "output", "screenshot", "slider_handle", "slider_readout", "start_lab", "wait_image",
    "wait_text_changed", "widget_text", "write_notebook",
]  # fmt: skip

ARTIFACTS = ROOT / "artifacts" / "browser"


def write_notebook(path: Path, cells: list[str]) -> Path:
    """Write a minimal nbformat-4 notebook; a cell starting with '# md' becomes markdown."""
    nb_cells = []
    for i, source in enumerate(cells):
        cell: dict[str, Any] = {"id": f"cell-{i}", "metadata": {}, "source": source}
        if source.startswith("# md"):
            cell.update(cell_type="markdown", source=source.removeprefix("# md").lstrip())
        else:
            cell.update(cell_type="code", execution_count=None, outputs=[])
        nb_cells.append(cell)
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = {"cells": nb_cells, "metadata": {"kernelspec": kernelspec},
          "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- widgets


def _finder(selector: str, doc: str) -> Callable[..., Locator]:
    """A locator helper: `find(scope, n=0)` is the n-th `selector` inside `scope` (a cell)."""

    def find(scope: Locator, n: int = 0) -> Locator:
        return scope.locator(selector).nth(n)

    find.__doc__ = doc
    return find


slider_handle = _finder(".widget-slider .noUi-handle", "A slider's handle; press ArrowRight/Left.")
slider_readout = _finder(".widget-slider .widget-readout", "A slider's value readout.")
dropdown = _finder(".widget-dropdown select", "A Dropdown's <select>: `.select_option(label=)`.")
output = _finder(".widget-output", "An Output widget.")
label = _finder("div.widget-label", "A Label widget (a description is a <label>, not matched).")
html = _finder(".widget-html-content", "The rendered content of an HTML widget.")
figure = _finder(".jp-Cell-outputArea img", "An output image; matplotlib's is a data: PNG.")


def widget_text(loc: Locator, timeout_ms: float = WAIT_MS) -> str:
    """Visible text of a widget (Label, HTML, readout ...), whitespace-trimmed.

    Scrolls it into view first: JupyterLab does not lay out cells outside the viewport, and
    an element that is not laid out has no inner text.
    """
    loc.scroll_into_view_if_needed(timeout=timeout_ms)
    return loc.inner_text(timeout=timeout_ms).strip()


def wait_text_changed(loc: Locator, old: str, timeout_ms: float = WAIT_MS) -> str:
    """Wait until the widget's text is no longer `old`; return the new text."""
    from playwright.sync_api import expect

    # Compare like with like: `old` comes from inner_text, so must the wait.
    expect(loc).not_to_have_text(old, timeout=timeout_ms, use_inner_text=True)
    return widget_text(loc, timeout_ms)


def image_src(scope: Locator, n: int = 0, timeout_ms: float = WAIT_MS) -> str:
    """The `src` of the n-th output image now (it may not be decoded yet)."""
    return figure(scope, n).get_attribute("src", timeout=timeout_ms) or ""


_IMAGE_READY = """([cell, n, old]) => {
  const img = cell.querySelectorAll('.jp-Cell-outputArea img')[n];
  if (!img || !img.src || img.src === old) return false;
  return img.complete && img.naturalWidth > 0 ? img.src : false;
}"""


def wait_image(
    cell: Locator, n: int = 0, changed_from: str | None = None, timeout_ms: float = WAIT_MS
) -> str:
    """Wait for the cell's n-th output image to be decoded (and differ from `changed_from`).

    The src changes before the bitmap is ready, so a redraw counts only once both happened.
    """
    handle = cell.element_handle(timeout=timeout_ms)
    result = cell.page.wait_for_function(
        _IMAGE_READY, arg=[handle, n, changed_from], timeout=timeout_ms, polling=100
    )
    return result.json_value()


def screenshot(loc: Locator, name: str) -> Path | None:
    """Save a PNG of `loc` (a cell, not the page: JupyterLab scrolls inside its own panel)
    where LABKIT_SCREENSHOTS=1; return its path (None where not asked for). Not by default:
    each costs Chromium about 0.2 s of CPU, and the tests take 22. A failed test's page is
    always saved (conftest)."""
    if os.environ.get("LABKIT_SCREENSHOTS", "").strip().lower() in ("", "0", "false", "no"):
        return None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    loc.screenshot(path=str(path), timeout=WAIT_MS)
    return path
