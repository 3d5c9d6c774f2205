"""Notebook 01 in a real JupyterLab: the timeline app opens in dispatch-by-priority mode, where a
priority slider redraws the MAX-vs-frontier timeline; other modes grey the sliders out with the
reason; a typed order with a dead letter and a redrive plays, and a bad token is named inline.
The predict-then-reveal puzzle shows no timeline until the reader locks an answer in.

Expected counts come from `FrontierTimelineApp(n=6)` (priorities 5,5,1,5,5,5): dispatch order
3,1,2,4,5,6 orphans 1, 2; making #6 more urgent (priority 4) gives 3,6,1,2,4,5 and orphans
1, 2, 4, 5; id order orphans nothing; `3 5 f1 2 r1 4 6` orphans 1, 2, 4 and leaves the redriven
row 7 pending. `PredictOrphansApp(seed=0)` asks about priorities 2,5,5,1,5,3: MAX orphans
1, 2, 3, 5.
"""

from __future__ import annotations

import re

from .jlab import WAIT_MS, screenshot, wait_image, widget_text

NOTEBOOK = "notebooks/01_max_is_not_a_watermark.ipynb"
DISPATCH = "dispatch by priority (ORDER BY priority, id)"
DISABLED = "el => el.querySelector('[disabled]') !== null || el.matches('[disabled]')"


def _orphans(text: str) -> int:
    """The MAX orphan count in the `wb-orphans` line, e.g. 'step 12 (...): 3 orphan(s) ...' -> 3."""
    found = re.search(r"step \d+ \(.*?\): (\d+) orphan\(s\) under MAX", text)
    assert found, f"no orphan count in {text!r}"
    return int(found.group(1))


def test_dispatch_mode_priorities_modes_and_typed_orders(lab):
    from playwright.sync_api import expect

    nb = lab.notebook(NOTEBOOK, fresh="FrontierTimelineApp(n=6)")
    cell = nb.cell_with("FrontierTimelineApp(n=6)")
    cell.scroll_into_view_if_needed()  # JupyterLab does not lay out cells out of view
    orphans = cell.locator(".wb-orphans .widget-html-content")
    message = cell.locator(".wb-message .widget-html-content")
    order = cell.locator(".wb-order select")
    priority6 = cell.locator(".wb-priority-6")
    handle6 = priority6.locator(".noUi-handle")
    readout6 = priority6.locator(".widget-readout")
    why_priority = cell.locator(".wb-why-priority .widget-html-content")
    custom = cell.locator(".wb-custom-order input")

    def changed(old_src: str, old_orphans: str, count: int) -> tuple[str, str]:
        """Wait for a new decoded timeline image and a new orphan line with `count` orphans."""
        src = wait_image(cell, changed_from=old_src)
        expect(orphans).not_to_have_text(old_orphans, use_inner_text=True, timeout=WAIT_MS)
        text = widget_text(orphans)
        assert _orphans(text) == count, text
        assert cell.locator(".wb-timeline img").get_attribute("src") == src
        return src, text

    def disabled(loc) -> bool:
        return bool(loc.evaluate(DISABLED))

    # Opens in dispatch mode: the sliders are live, seed and custom box are greyed out.
    src = wait_image(cell)
    assert src.startswith("data:image/png;base64,")
    assert cell.locator(".wb-timeline img").count() == 1
    text = widget_text(orphans)
    assert text.startswith("step 12 (") and "2 orphan(s) under MAX(delivered) (ids 1, 2)" in text
    assert order.input_value() == DISPATCH
    expect(message).to_contain_text("delivery order 3, 1, 2, 4, 5, 6", timeout=WAIT_MS)
    assert not disabled(priority6) and disabled(custom)
    assert widget_text(why_priority) == ""
    expect(cell.locator(".wb-why-custom")).to_contain_text("pick 'custom'", timeout=WAIT_MS)
    expect(cell.locator(".wb-help")).to_contain_text("Move a priority slider", timeout=WAIT_MS)
    screenshot(cell, "01-0-dispatch-default")

    # The sliders are vertical: ArrowDown lowers the value, i.e. makes #6 more urgent.
    handle6.press("ArrowDown")
    expect(readout6).to_have_text("4", timeout=WAIT_MS)
    src, text = changed(src, text, 4)
    assert "(ids 1, 2, 4, 5)" in text
    expect(message).to_contain_text("delivery order 3, 6, 1, 2, 4, 5", timeout=WAIT_MS)
    screenshot(cell, "01-1-dispatch-priority6-4")

    # Id order: the sliders grey out, with the reason beside them.
    order.select_option(value="id order (1, 2, 3, ...)")
    src, text = changed(src, text, 0)
    expect(message).to_contain_text("delivery order 1, 2, 3, 4, 5, 6", timeout=WAIT_MS)
    expect(why_priority).to_have_text(
        "disabled: priorities only matter in dispatch mode", timeout=WAIT_MS
    )
    assert disabled(priority6)
    screenshot(cell, "01-2-id-order-sliders-disabled")

    # Custom: the box starts from the order on screen; type a dead letter and a redrive.
    order.select_option(value="custom: type the order")
    expect(custom).to_have_value("1 2 3 4 5 6", timeout=WAIT_MS)
    # The box's value and its enabled state are two widget updates: wait for the second too.
    expect(custom).to_be_enabled(timeout=WAIT_MS)
    assert not disabled(custom) and disabled(priority6)
    custom.fill("3 5 f1 2 r1 4 6")
    custom.press("Enter")
    src, text = changed(src, text, 3)
    assert "(ids 1, 2, 4)" in text
    expect(message).to_contain_text("delivery order 3, 5, f1, 2, r1, 4, 6", timeout=WAIT_MS)
    expect(message).to_contain_text("redriven 1 as row 7; still pending 7", timeout=WAIT_MS)
    screenshot(cell, "01-3-custom-dead-letter-redrive")

    # A token that cannot happen is named inline; the last valid timeline stays.
    custom.fill("3 5 2 r9")
    custom.press("Enter")
    expect(message).to_contain_text("token 4 'r9': row 9 has not failed", timeout=WAIT_MS)
    assert cell.locator(".wb-timeline img").get_attribute("src") == src
    screenshot(cell, "01-4-bad-token")

    # Back to dispatch: the sliders come alive again and still hold #6 = 4.
    order.select_option(value=DISPATCH)
    src, text = changed(src, text, 4)
    assert not disabled(priority6) and widget_text(why_priority) == ""


def test_predict_then_reveal(lab):
    from playwright.sync_api import expect

    nb = lab.notebook(NOTEBOOK, fresh="PredictOrphansApp(seed=0)")
    cell = nb.cell_with("PredictOrphansApp(seed=0)")
    cell.scroll_into_view_if_needed()
    verdict = cell.locator(".wb-verdict .widget-html-content")
    expect(cell.locator(".wb-puzzle")).to_contain_text("Which ids end up orphaned", timeout=WAIT_MS)
    expect(verdict).to_contain_text("once you lock in an answer", timeout=WAIT_MS)
    assert cell.locator(".wb-reveal-timeline img").count() == 0  # nothing shown before
    for i in (1, 2, 3, 5):
        cell.locator(f".wb-guess-{i} input[type=checkbox]").check()
    screenshot(cell, "01-5-predict")
    cell.locator("button.wb-reveal").click()
    expect(verdict).to_contain_text("Right.", timeout=WAIT_MS)
    expect(verdict).to_contain_text("order was 4, 1, 6, 2, 3, 5", timeout=WAIT_MS)
    assert wait_image(cell).startswith("data:image/png;base64,")
    assert cell.locator(".wb-guess-1 input[type=checkbox]").is_disabled()
    assert cell.locator("button.wb-reveal").is_disabled()
    screenshot(cell, "01-6-revealed")
