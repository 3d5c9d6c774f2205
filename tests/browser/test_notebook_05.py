"""Notebook 05 in a real JupyterLab: the design picker, the fault picker and a fault checkbox
redraw the five designs' trace image and the metrics table (issue #6).

Expected values come from `FiveDesignsApp(highlight="ballot", preset="inverted")`, seed 0:
with the inverted fault the callback and lww catalogs rewind once; with no faults nothing does.
"""

from __future__ import annotations

from .jlab import WAIT_MS, screenshot, wait_image, widget_text

NOTEBOOK = "notebooks/05_five_designs.ipynb"
# The designs, in the order of the picker and of the metrics table's rows.
DESIGNS = ("callback", "lww", "ballot", "fenced", "cas")


def test_design_and_fault_pickers_redraw_traces_and_metrics(lab):
    from playwright.sync_api import expect

    # The app is taller than the default viewport; make room so its screenshots are whole.
    lab.page.set_viewport_size({"width": 1400, "height": 1500})
    nb = lab.notebook(NOTEBOOK, fresh="FiveDesignsApp(")
    cell = nb.cell_with("FiveDesignsApp(")
    # Run All leaves the notebook scrolled to its end, and JupyterLab does not lay out cells
    # out of view (their innerText is empty): bring the app into view first.
    cell.scroll_into_view_if_needed()
    design = cell.locator(".wb-design select")
    faults = cell.locator(".wb-faults select")
    metrics = cell.locator(".wb-metrics .widget-html-content")
    highlighted = metrics.locator("tbody tr[style*='bold'] td").first
    inverted_box = cell.locator(".wb-fault-inverted input[type=checkbox]")
    duplicate_box = cell.locator(".wb-fault-duplicate input[type=checkbox]")

    def rewinds() -> dict[str, str]:
        """Design -> its `rewinds` cell in the metrics table as shown in the page."""
        head = metrics.locator("thead th").all_text_contents()
        col = head.index("rewinds")
        rows = metrics.locator("tbody tr")
        cells = [rows.nth(i).locator("td").all_text_contents() for i in range(rows.count())]
        return {row[0]: row[col] for row in cells}

    def redrawn(old_src: str, old_metrics: str | None) -> tuple[str, str]:
        """Wait for a new decoded trace image (and new metrics text unless None is passed)."""
        src = wait_image(cell, changed_from=old_src)
        assert cell.locator(".wb-traces img").get_attribute("src") == src
        if old_metrics is not None:
            expect(metrics).not_to_have_text(old_metrics, use_inner_text=True, timeout=WAIT_MS)
        return src, widget_text(metrics)

    src = wait_image(cell)
    assert src.startswith("data:image/png;base64,")
    assert cell.locator(".wb-traces img").count() == 1
    expect(highlighted).to_have_text("ballot", timeout=WAIT_MS)
    text = widget_text(metrics)
    assert faults.input_value() == "inverted"
    expect(inverted_box).to_be_checked()
    assert rewinds() == {"callback": "1", "lww": "1", "ballot": "0", "fenced": "0", "cas": "0"}
    screenshot(cell, "05-0-ballot-inverted")

    # The design picker only moves the highlight: the image and the bold row change, the
    # numbers do not.
    values = design.locator("option").evaluate_all("options => options.map(o => o.value)")
    assert [v.split(":")[0] for v in values] == list(DESIGNS)
    design.select_option(value=next(v for v in values if v.startswith("fenced:")))
    src, same = redrawn(src, None)
    expect(highlighted).to_have_text("fenced", timeout=WAIT_MS)
    assert same == text
    screenshot(cell, "05-1-fenced-inverted")

    faults.select_option(value="none")
    src, text = redrawn(src, text)
    expect(inverted_box).not_to_be_checked()
    assert rewinds() == {"callback": "0", "lww": "0", "ballot": "0", "fenced": "0", "cas": "0"}
    expect(highlighted).to_have_text("fenced", timeout=WAIT_MS)
    screenshot(cell, "05-2-fenced-none")

    faults.select_option(value="inverted")
    src, text = redrawn(src, text)
    expect(inverted_box).to_be_checked()
    assert rewinds() == {"callback": "1", "lww": "1", "ballot": "0", "fenced": "0", "cas": "0"}

    # Ticking a second fault by hand turns the picker to "custom" and redraws once more.
    duplicate_box.check()
    src, text = redrawn(src, text)
    expect(faults).to_have_value("custom", timeout=WAIT_MS)
    screenshot(cell, "05-3-fenced-inverted-duplicate")
