"""Every widget fits a 1280x800 window with JupyterLab's file browser open (issues 19, 34).

No app is taller than `APP_MAX_PX`, so the change a click makes is on the same screen.

Each notebook with widgets runs all; then every control label, button, HTML block and table
inside a widget must show all of its text: its scroll width is at most its client width, or
it scrolls on its own (overflow auto, and short enough that its scrollbar is in view), never
through the whole widget's scrollbar far below. Notebook 07's step-it-yourself widget must
still work after Run All, whose last cell used to close its connection; the workbench's
picture must not move as the hints above it change. Notebook 05b's depth slider must redraw
and, at W = 1, say what it leaves unchanged, still fitting. Notebook 09's widget must start a
run of its own after Run All, switch a fault while that run goes, and stop it.
"""

from __future__ import annotations

import pytest

from .jlab import WAIT_MS, screenshot, slider_handle, slider_readout, wait_image, widget_text

VIEWPORT = {"width": 1280, "height": 800}
# An app's whole height, so that a click's effect shows without scrolling: 800 px less
# JupyterLab's menu, tab bar and toolbar (about 40 px).
APP_MAX_PX = 760
NOTEBOOKS = (
    "notebooks/01_max_is_not_a_watermark.ipynb",
    "notebooks/02_gap_free_frontier.ipynb",
    "notebooks/04_late_tick_rewinds.ipynb",
    "notebooks/05_five_designs.ipynb",
    "notebooks/05b_pipelined_ballots.ipynb",
    "notebooks/07_postgres_commit_order.ipynb",
    "notebooks/09_a_real_planner.ipynb",
    "notebooks/10_audit_your_own_system.ipynb",
)


def _named(prefix: str) -> str:
    """The notebook of NOTEBOOKS whose name starts with `prefix` ("07_")."""
    return next(p for p in NOTEBOOKS if p.split("/")[-1].startswith(prefix))


def _short(path: str) -> str:
    """A notebook's test id: its number ("05", "05b")."""
    return path.split("/")[-1].split("_")[0]


# The notebooks the first test checks alone (07 and 09 have tests of their own).
PLAIN = tuple(p for p in NOTEBOOKS if _short(p) not in ("07", "09"))
# A box that scrolls on its own must be short enough to show its own scrollbar in the window.
OWN_SCROLL_MAX_PX = VIEWPORT["height"] // 2

_OPEN_FILE_BROWSER = """() => {
  const app = window.jupyterapp;
  app.shell.activateById('filebrowser');
  return !app.shell.leftCollapsed;
}"""

# Every element of the cell's widgets whose text is wider than its box, unless the element
# scrolls by itself and its scrollbar is in view; tables wider than the widget they sit in.
_CUT = """([cell, ownScrollMax]) => {
  const sel = ['button', '.widget-label', 'label', '.widget-readout', '.widget-html-content',
               '.widget-box', '.widget-output', '.jp-OutputArea-output', 'table',
               'select'].join(',');
  const pen = document.createElement('canvas').getContext('2d');
  const cut = [];
  for (const el of cell.querySelectorAll('.jp-Cell-outputArea .jupyter-widgets, '
                                         + '.jp-Cell-outputArea .jupyter-widgets *')) {
    if (!el.matches(sel) || el.offsetParent === null) continue;
    if (el.tagName === 'SELECT') {  // a closed menu shows one choice: would each fit?
      const st = getComputedStyle(el);
      pen.font = `${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
      const room = el.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
      for (const choice of el.options) {
        const need = pen.measureText(choice.text).width;
        if (need > room + 1) {
          cut.push(`select "${choice.text.slice(0, 50)}" ${Math.round(need)}>${room}px`);
        }
      }
      continue;
    }
    if (el.scrollWidth <= el.clientWidth + 1) continue;
    const style = getComputedStyle(el);
    const own = ['auto', 'scroll'].includes(style.overflowX)
      && el.getBoundingClientRect().height <= ownScrollMax;
    if (own) continue;
    const cls = (el.className && el.className.baseVal === undefined ? el.className : '');
    cut.push(`${el.tagName.toLowerCase()}.${String(cls).split(' ').filter(c => c.startsWith('wb-')
      || c.startsWith('widget-')).join('.')} "${(el.innerText || '').trim().slice(0, 40)}" `
      + `${el.scrollWidth}>${el.clientWidth}px`);
  }
  return cut;
}"""


# The height of the tallest widget in the cell's output (the app's outer box), and the heights
# of its parts (its children, for the failure message).
_APP_HEIGHT = """cell => {
  let app = null, height = 0;
  for (const el of cell.querySelectorAll('.jp-Cell-outputArea .jupyter-widgets')) {
    const h = el.getBoundingClientRect().height;
    if (h > height) { app = el; height = h; }
  }
  const parts = app === null ? [] : Array.from(app.children, el =>
    `${String(el.className).split(' ').filter(c => c.startsWith('wb-')
      || c.startsWith('widget-')).slice(0, 2).join('.')}: ${Math.round(
      el.getBoundingClientRect().height)}`);
  return [height, parts];
}"""


def _too_tall_in(nb) -> dict[int, str]:
    """Per code cell with widgets whose app is over `APP_MAX_PX`: its height and its parts'."""
    tall: dict[int, str] = {}
    for i in range(nb.cells.count()):
        cell = nb.cell(i)
        if cell.locator(".jp-Cell-outputArea .jupyter-widgets").count() == 0:
            continue
        cell.scroll_into_view_if_needed()
        height, parts = cell.page.evaluate(_APP_HEIGHT, cell.element_handle(timeout=WAIT_MS))
        if height > APP_MAX_PX:
            tall[i] = f"{round(height)} px ({', '.join(parts)})"
    return tall


def _cut_in(nb) -> dict[int, list[str]]:
    """Per code cell with widgets, the elements whose content is cut (scrolled into view first:
    JupyterLab does not lay out cells out of view)."""
    found: dict[int, list[str]] = {}
    for i in range(nb.cells.count()):
        cell = nb.cell(i)
        widgets = cell.locator(".jp-Cell-outputArea .jupyter-widgets")
        if widgets.count() == 0:
            continue
        cell.scroll_into_view_if_needed()
        handle = cell.element_handle(timeout=WAIT_MS)
        cut = cell.page.evaluate(_CUT, [handle, OWN_SCROLL_MAX_PX])
        if cut:
            found[i] = cut
    return found


# The app each check below changes (`Lab.notebook`'s `fresh`).
CHANGED = {
    "04": "ArrivalWorkbench(preset=",
    "05b": "PipelineDepthApp(",
    "07": "CommitOrderApp(",
    "09": "RealPlannerApp(design=",
}


def _open_at_1280(lab, path: str):
    """The notebook as Run All left it (these checks come first in the tests' order, see
    conftest.ORDER), at 1280x800 with the file browser open."""
    lab.page.set_viewport_size(VIEWPORT)
    nb = lab.notebook(path, fresh=CHANGED.get(_short(path)))
    assert lab.page.evaluate(_OPEN_FILE_BROWSER), "the file browser did not open"
    return nb


_IMAGE_TOP = (
    "el => el.querySelector('.wb-lanes img').getBoundingClientRect().top"
    " - el.getBoundingClientRect().top"
)


def _workbench_holds_still(nb) -> None:
    """The lanes image stays put while the greyed-out list, the error line and the buttons'
    request number change above it."""
    from playwright.sync_api import expect

    cell = nb.cell_with("ArrivalWorkbench(preset=")
    cell.scroll_into_view_if_needed()
    bench = cell.locator(".wb-workbench")
    src = wait_image(cell)
    tops = [bench.evaluate(_IMAGE_TOP)]
    for button in ("button.wb-reset", "button.wb-deliver", "button.wb-crash"):
        cell.locator(button).dispatch_event("click")
        src = wait_image(cell, changed_from=src)
        tops.append(bench.evaluate(_IMAGE_TOP))
    schedule = cell.locator(".wb-schedule input")
    schedule.fill("deliver 1; deliver 1")  # refused with an error line, as the button would
    schedule.press("Enter")
    expect(cell.locator(".wb-error")).to_contain_text("dup 1", timeout=WAIT_MS)
    tops.append(bench.evaluate(_IMAGE_TOP))
    assert len(set(tops)) == 1, f"the workbench's picture moved: tops {tops}"
    # after the crash the picker's entries are at their longest ("lost in crash ×n, ...")
    cut = cell.page.evaluate(_CUT, [cell.element_handle(timeout=WAIT_MS), OWN_SCROLL_MAX_PX])
    assert not cut, f"cut after a crash: {cut}"


def _depth_slider_redraws_and_says_what_is_idle(nb) -> None:
    """Notebook 05b's pipelined widget: three presses take W from 4 to 1; each redraws the
    lanes, and at W = 1 the line under the controls says the hedge has no row; still no cut."""
    from playwright.sync_api import expect

    cell = nb.cell_with("PipelineDepthApp(")
    cell.scroll_into_view_if_needed()
    idle = cell.locator(".wb-pipe-idle")
    src = wait_image(cell)
    expect(idle).not_to_contain_text("no second call", timeout=WAIT_MS)
    for _ in range(3):
        slider_handle(cell).press("ArrowLeft")
        src = wait_image(cell, changed_from=src)
    expect(idle).to_contain_text("no second call", timeout=WAIT_MS)
    expect(cell.locator(".wb-pipe-state")).to_contain_text("W = 1", timeout=WAIT_MS)
    cut = cell.page.evaluate(_CUT, [cell.element_handle(timeout=WAIT_MS), OWN_SCROLL_MAX_PX])
    assert not cut, f"pipelined widget cut at W = 1: {cut}"
    screenshot(cell, "05-pipelined-w1")


# The table columns each notebook's prose tells the reader to look at: in view in every output
# table (pandas or a widget's) that has them, not scrolled out past its right edge.
NAMED_COLUMNS = {
    "02": ("orphan_ids_frontier", "orphan_ids_max"),
    "05": ("rewinds",),
}

# Headers of the cell's output tables named in `names` whose box is not wholly inside the
# output area (cut by a scrolling box), each with how far it sticks out.
_COLUMNS_OUT = """([cell, names]) => {
  const area = cell.querySelector('.jp-Cell-outputArea');
  if (area === null) return [];
  const room = area.getBoundingClientRect();
  const out = [];
  for (const th of area.querySelectorAll('table th')) {
    const name = th.innerText.trim();
    if (!names.includes(name) || th.offsetParent === null) continue;
    const box = th.getBoundingClientRect();
    if (box.right > room.right + 1 || box.left < room.left - 1) {
      out.push(`${name} ${Math.round(box.right - room.right)}px past the edge`);
    }
  }
  return out;
}"""


def _named_columns_cut(nb, names: tuple[str, ...]) -> dict[int, list[str]]:
    """Per code cell, the headers in `names` its output tables show cut."""
    found: dict[int, list[str]] = {}
    for i in range(nb.cells.count()):
        cell = nb.cell(i)
        if cell.locator(".jp-Cell-outputArea table th").count() == 0:
            continue
        cell.scroll_into_view_if_needed()
        out = cell.page.evaluate(_COLUMNS_OUT, [cell.element_handle(timeout=WAIT_MS), names])
        if out:
            found[i] = out
    return found


def _fits(nb, path: str) -> None:
    """No app taller than `APP_MAX_PX`, no text cut, no column the prose names out of view, as
    Run All left the notebook."""
    tall, cut = _too_tall_in(nb), _cut_in(nb)
    named = _named_columns_cut(nb, NAMED_COLUMNS.get(_short(path), ()))
    assert not tall and not cut and not named, (
        f"{path} at 1280x800 with the file browser open: apps taller than {APP_MAX_PX} px "
        f"(cell: px) {tall}; cut {cut}; columns the prose names, out of view {named}"
    )


@pytest.mark.parametrize("path", PLAIN, ids=_short)
def test_no_widget_text_is_cut_at_1280(lab, path: str) -> None:
    nb = _open_at_1280(lab, path)
    _fits(nb, path)
    if path.startswith("notebooks/04_"):
        _workbench_holds_still(nb)
    if _short(path) == "05b":
        _depth_slider_redraws_and_says_what_is_idle(nb)


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_notebook_07_widget_fits_and_works_after_run_all(lab) -> None:
    from playwright.sync_api import expect

    nb = _open_at_1280(lab, _named("07_"))
    _fits(nb, "07")

    cell = nb.cell_with("CommitOrderApp(")
    cell.scroll_into_view_if_needed()
    message = cell.locator(".wb-pg-message")
    src = wait_image(cell)
    before = widget_text(message)
    cell.locator("button.wb-pg-A-insert").dispatch_event("click")
    src = wait_image(cell, changed_from=src)
    expect(message).to_contain_text("A holds [1] uncommitted", timeout=WAIT_MS)
    assert widget_text(message) != before
    # an impossible step is refused in words: B has nothing to commit
    expect(cell.locator("button.wb-pg-B-commit")).to_be_disabled()
    cell.locator("button.wb-pg-A-commit").dispatch_event("click")
    wait_image(cell, changed_from=src)
    expect(message).not_to_contain_text("uncommitted", timeout=WAIT_MS)
    screenshot(cell, "07-after-run-all")


@pytest.mark.timeout(300)
def test_notebook_09_widget_fits_and_switches_a_fault_mid_run_after_run_all(lab) -> None:
    from playwright.sync_api import expect

    nb = _open_at_1280(lab, _named("09_"))
    _fits(nb, "09")

    cell = nb.cell_with("RealPlannerApp(design=")
    cell.scroll_into_view_if_needed()
    message, status = cell.locator(".wb-rp-message"), cell.locator(".wb-rp-status")
    expect(message).to_contain_text("Finished callback", timeout=WAIT_MS)  # the notebook's run
    # controls that would do nothing say so: the window is only the hedged design's
    expect(cell.locator(".wb-rp-why")).to_contain_text("window", timeout=WAIT_MS)
    expect(cell.locator("button.wb-rp-stop")).to_be_disabled()
    src = wait_image(cell)
    slider_handle(cell, 0).press("End")  # the most ticks: a run long enough to switch in
    expect(slider_readout(cell, 0)).to_have_text("80", timeout=WAIT_MS)
    cell.locator("button.wb-rp-start").dispatch_event("click")
    expect(status).to_contain_text("running", timeout=WAIT_MS)
    cell.locator(".wb-rp-fault-duplicate input").check()  # off in the notebook's run
    expect(message).to_contain_text("Switched at head", timeout=WAIT_MS)
    src = wait_image(cell, changed_from=src)  # the lanes redraw while the run goes
    # stopped here rather than run to v80: cheaper, and the stop button is proved too
    cell.locator("button.wb-rp-stop").dispatch_event("click")
    expect(status).to_contain_text("finished", timeout=WAIT_MS)
    expect(message).to_contain_text("Stopped callback at v", timeout=WAIT_MS)
    expect(cell.locator("button.wb-rp-start")).to_be_enabled(timeout=WAIT_MS)
    cut = cell.page.evaluate(_CUT, [cell.element_handle(timeout=WAIT_MS), OWN_SCROLL_MAX_PX])
    assert not cut, f"09: cut after a run: {cut}"
    screenshot(cell, "09-after-a-switched-run")
