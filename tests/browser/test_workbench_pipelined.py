"""The workbench with `pipelined` among its designs (as notebook 05b shows it), in a real
JupyterLab at 1280x800 with the file browser open: the W picker and the lanes of `pipelined`
redraw, a hold and a flush show in the verdict table, and no text of the widget is cut.
"""

from __future__ import annotations

from .jlab import WAIT_MS, image_src, screenshot, wait_image
from .test_widgets_fit import _CUT, _OPEN_FILE_BROWSER, OWN_SCROLL_MAX_PX, VIEWPORT

CELL = """from labkit.designs.registry import ALL_DESIGNS
from labkit.widgets.catalog import ArrivalWorkbench

workbench = ArrivalWorkbench(preset=None, focus="lww", designs=ALL_DESIGNS)
workbench.ui"""


def test_workbench_plays_pipelined_at_1280(lab) -> None:
    from playwright.sync_api import expect

    lab.page.set_viewport_size(VIEWPORT)
    nb = lab.open(lab.write_notebook("scratch/workbench_pipelined.ipynb", [CELL]))
    assert lab.page.evaluate(_OPEN_FILE_BROWSER), "the file browser did not open"
    nb.run_all(timeout_ms=120_000)
    cell = nb.cell_with("ArrivalWorkbench(")
    cell.scroll_into_view_if_needed()
    src = wait_image(cell)
    note = cell.locator(".wb-depth-note")
    expect(note).to_contain_text("W changes pipelined only", timeout=WAIT_MS)

    cell.locator(".wb-focus select").select_option(index=5)  # pipelined, after the five
    src = wait_image(cell, changed_from=src)
    cell.locator(".wb-depth select").select_option(index=2)  # W = 3
    src = wait_image(cell, changed_from=src)
    expect(note).to_contain_text("up to 3 tick(s) in flight", timeout=WAIT_MS)

    schedule = cell.locator(".wb-schedule input")
    schedule.fill("deliver 2; stale 3; deliver 1")  # 2 held then committed, 3 refused: flush
    schedule.press("Enter")
    wait_image(cell, changed_from=src)
    expect(cell.locator(".wb-verdicts")).to_contain_text("held \u00d72", timeout=WAIT_MS)
    expect(cell.locator(".wb-verdicts")).to_contain_text("flushed \u00d72", timeout=WAIT_MS)
    expect(cell.locator(".wb-error")).to_have_text("", timeout=WAIT_MS)
    cut = cell.page.evaluate(_CUT, [cell.element_handle(timeout=WAIT_MS), OWN_SCROLL_MAX_PX])
    assert not cut, f"workbench with pipelined cut at 1280x800: {cut}"
    screenshot(cell, "workbench-pipelined")

    # after a crash the picker's entries run longest, e.g. "3: in flight x3, not sent x1,
    # delivered x1, held, refused x1"
    src = image_src(cell)
    cell.locator("button.wb-crash").dispatch_event("click")
    wait_image(cell, changed_from=src)
    expect(cell.locator(".wb-schedule input")).to_have_value(
        "deliver 2; stale 3; deliver 1; crash", timeout=WAIT_MS
    )
    cut = cell.page.evaluate(_CUT, [cell.element_handle(timeout=WAIT_MS), OWN_SCROLL_MAX_PX])
    assert not cut, f"workbench with pipelined cut at 1280x800 after a crash: {cut}"
