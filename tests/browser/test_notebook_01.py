"""Notebook 01 in a real JupyterLab: the priority sliders and the delivery-order dropdown redraw
the MAX-vs-frontier timeline and the orphan count (issue #6).

Expected counts come from `FrontierTimelineApp(n=6)` on the bundled seed scenario: the seed
preset orphans ids 1, 2, 4 at the last step; id order orphans nothing; dispatch order with
priorities 5,5,1,5,5,5 orphans 1, 2; making #6 urgent too (priority 4) orphans 1, 2, 4, 5.
"""

from __future__ import annotations

import re

from .jlab import WAIT_MS, screenshot, wait_image, widget_text

NOTEBOOK = "notebooks/01_max_is_not_a_watermark.ipynb"
SEED_ORPHANS = "3 orphan(s) under MAX(delivered) (ids 1, 2, 4); 0 under the gap-free"


def _orphans(text: str) -> int:
    """The MAX orphan count in the `wb-orphans` line, e.g. 'step 12 (...): 3 orphan(s) ...' -> 3."""
    found = re.search(r"step \d+ \(.*?\): (\d+) orphan\(s\) under MAX", text)
    assert found, f"no orphan count in {text!r}"
    return int(found.group(1))


def test_priority_and_order_redraw_timeline_and_orphans(lab):
    from playwright.sync_api import expect

    nb = lab.open(NOTEBOOK)
    nb.run_all()
    cell = nb.cell_with("FrontierTimelineApp(n=6)")
    cell.scroll_into_view_if_needed()  # JupyterLab does not lay out cells out of view
    orphans = cell.locator(".wb-orphans .widget-html-content")
    message = cell.locator(".wb-message .widget-html-content")
    order = cell.locator(".wb-order select")
    handle6 = cell.locator(".wb-priority-6 .noUi-handle")
    readout6 = cell.locator(".wb-priority-6 .widget-readout")

    def changed(old_src: str, old_orphans: str, count: int) -> tuple[str, str]:
        """Wait for a new decoded timeline image and a new orphan line with `count` orphans."""
        src = wait_image(cell, changed_from=old_src)
        expect(orphans).not_to_have_text(old_orphans, use_inner_text=True, timeout=WAIT_MS)
        text = widget_text(orphans)
        assert _orphans(text) == count, text
        assert cell.locator(".wb-timeline img").get_attribute("src") == src
        return src, text

    src = wait_image(cell)
    assert src.startswith("data:image/png;base64,")
    assert cell.locator(".wb-timeline img").count() == 1
    text = widget_text(orphans)
    assert text.startswith("step 12 (") and SEED_ORPHANS in text, text
    # ipywidgets uses each label as its option's value (the text shows spaces as &nbsp;).
    values = order.locator("option").evaluate_all("options => options.map(o => o.value)")
    seed = next(v for v in values if v.startswith("seed: "))
    assert order.input_value() == seed
    assert widget_text(readout6) == "5"
    assert widget_text(cell.locator(".wb-priority-3 .widget-readout")) == "1"
    screenshot(cell, "01-0-seed-preset")

    order.select_option(value="id order")
    src, text = changed(src, text, 0)
    expect(message).to_contain_text("delivery order 1, 2, 3, 4, 5, 6", timeout=WAIT_MS)
    screenshot(cell, "01-1-id-order")

    order.select_option(value="dispatch order (priority, id)")
    src, text = changed(src, text, 2)
    expect(message).to_contain_text("delivery order 3, 1, 2, 4, 5, 6", timeout=WAIT_MS)

    # The sliders are vertical: ArrowDown lowers the value, i.e. makes #6 more urgent.
    handle6.press("ArrowDown")
    expect(readout6).to_have_text("4", timeout=WAIT_MS)
    src, text = changed(src, text, 4)
    assert "(ids 1, 2, 4, 5)" in text
    expect(message).to_contain_text("delivery order 3, 6, 1, 2, 4, 5", timeout=WAIT_MS)
    screenshot(cell, "01-2-dispatch-priority6-4")

    # Back to the seed preset: it resets the priorities and orphans 1, 2, 4 again.
    order.select_option(value=seed)
    src, text = changed(src, text, 3)
    assert text.startswith("step 12 (") and SEED_ORPHANS in text, text
    expect(readout6).to_have_text("5", timeout=WAIT_MS)
    screenshot(cell, "01-3-seed-again")
