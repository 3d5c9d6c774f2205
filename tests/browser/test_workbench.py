"""The arrival-order workbench (notebook 04) in a real JupyterLab: buttons build a schedule,
the lanes image and the verdicts change, a mistyped step is reported inline, and "shortest
schedule that breaks" fills the schedule in.

Expected values come from `ArrivalWorkbench(preset="inverted")`: Article 2's late tick, on
which callback and lww fall from v2 to v1 at step 4 and the ballot designs never fall.
"""

from __future__ import annotations

from .jlab import WAIT_MS, screenshot, wait_image, widget_text

NOTEBOOK = "notebooks/04_late_tick_rewinds.ipynb"


def test_workbench_buttons_typing_and_shortest_break(lab):
    from playwright.sync_api import expect

    lab.page.set_viewport_size({"width": 1400, "height": 1700})
    nb = lab.notebook(NOTEBOOK, fresh="ArrivalWorkbench(preset=")
    cell = nb.cell_with("ArrivalWorkbench(preset=")
    cell.scroll_into_view_if_needed()
    schedule = cell.locator(".wb-schedule input")
    verdicts = cell.locator(".wb-verdicts .widget-html-content")
    error = cell.locator(".wb-error")
    message = cell.locator(".wb-message")

    def verdict(design: str) -> str:
        row = verdicts.locator("tbody tr", has=lab.page.locator(f"td b:text-is('{design}')"))
        return row.locator("td").nth(1).inner_text().strip()

    def press(button) -> None:
        """Click a button where it is now: the cell's layout moves as images and hints
        change size, and a coordinate click can land beside the button."""
        expect(button).to_be_enabled(timeout=WAIT_MS)
        button.dispatch_event("click")

    def redrawn(old_src: str) -> str:
        src = wait_image(cell, changed_from=old_src)
        assert cell.locator(".wb-lanes img").get_attribute("src") == src
        return src

    src = wait_image(cell)
    expect(schedule).to_have_value("timeout 1; deliver 2; deliver 3; deliver 1", timeout=WAIT_MS)
    assert verdict("callback").startswith("BROKEN: reader saw v2 → v1 at step 4")
    assert verdict("ballot").startswith("safe")
    screenshot(cell, "workbench-0-inverted")

    # Build a schedule with the buttons: reset, deliver 1, deliver 2, then 1 again.
    press(cell.locator("button.wb-reset"))
    src = redrawn(src)
    expect(schedule).to_have_value("", timeout=WAIT_MS)
    dup = cell.locator("button.wb-dup")
    expect(dup).to_be_disabled()
    assert "not arrived yet" in widget_text(cell.locator(".wb-why"))
    deliver = cell.locator("button.wb-deliver")
    expect(deliver).to_have_text("deliver response 1", timeout=WAIT_MS)
    press(deliver)
    src = redrawn(src)
    expect(schedule).to_have_value("deliver 1", timeout=WAIT_MS)
    expect(deliver).to_have_text("deliver response 2", timeout=WAIT_MS)
    press(deliver)
    src = redrawn(src)
    cell.locator(".wb-request select").select_option(index=0)  # request 1
    expect(dup).to_have_text("deliver 1 again (duplicate)", timeout=WAIT_MS)
    expect(dup).to_be_enabled()
    press(dup)
    src = redrawn(src)
    expect(schedule).to_have_value("deliver 1; deliver 2; dup 1", timeout=WAIT_MS)
    expect(verdicts).to_contain_text("BROKEN: reader saw v2 → v1 at step 3", timeout=WAIT_MS)
    assert verdict("lww").startswith("safe") and verdict("fenced").startswith("safe")
    screenshot(cell, "workbench-1-buttons")

    # A typo in the typed schedule: an inline error naming the step, nothing else changes.
    schedule.fill("deliver 1; delivr 2")
    schedule.press("Enter")
    expect(error).to_contain_text("step 2 delivr 2", timeout=WAIT_MS)
    assert "Traceback" not in widget_text(error)
    assert verdict("callback").startswith("BROKEN: reader saw v2 → v1 at step 3")
    screenshot(cell, "workbench-2-typo")

    # Shortest break for lww: the explorer's counterexample fills the schedule in.
    cell.locator(".wb-focus select").select_option(index=1)  # lww
    src = redrawn(src)
    shortest = cell.locator("button.wb-shortest")
    expect(shortest).to_have_text("shortest schedule that breaks lww", timeout=WAIT_MS)
    press(shortest)
    src = redrawn(src)
    expect(schedule).to_have_value("timeout; deliver 2; deliver 3; deliver 1", timeout=WAIT_MS)
    expect(message).to_contain_text("Shortest schedule that breaks lww", timeout=WAIT_MS)
    expect(error).to_have_text("", timeout=WAIT_MS)
    assert verdict("lww").startswith("BROKEN: reader saw v2 → v1 at step 4")
    screenshot(cell, "workbench-3-shortest-lww")

    # ...and for ballot there is none: said in words, schedule unchanged.
    cell.locator(".wb-focus select").select_option(index=2)  # ballot
    src = redrawn(src)
    press(shortest)
    expect(message).to_contain_text("No schedule breaks ballot", timeout=WAIT_MS)
    expect(schedule).to_have_value("timeout; deliver 2; deliver 3; deliver 1", timeout=WAIT_MS)
