"""Every notebook re-runs after Run All, and 09's fault switch works by hand (issue 34).

At 1280x800, as an instructor would: 07 and 08 re-run a middle cell after Run All with no
traceback, and again after their shared PostgreSQL server was stopped (07: by
`stop_shared_server`; 08: its process killed hard), when the cell's next use starts a fresh
server and says so in one line; 07's step widget, made before the stop, reconnects on a click.
09's widget, at its defaults, runs long enough to tick a fault box by hand while it goes; the
fault is switched in the run going and strikes it (the reader process sees the callback's head
fall), and the stop button ends it.
"""

from __future__ import annotations

import os
import re

import pytest

from labkit.pg.instance import RESTARTED

from .jlab import WAIT_MS, screenshot, slider_readout, wait_image

VIEWPORT = {"width": 1280, "height": 800}
NB07 = "notebooks/07_postgres_commit_order.ipynb"
NB08 = "notebooks/08_ballots_across_machines.ipynb"
NB09 = "notebooks/09_a_real_planner.ipynb"

_PANEL = "[...window.jupyterapp.shell.widgets('main')].find(w => w.id === id)"

# Run cell `i` again as a person does (select it, Shift-Enter's command without advancing);
# returns the execution count it had, to wait for a new one.
_RUN_CELL = f"""async ([id, i]) => {{
  const app = window.jupyterapp, panel = {_PANEL};
  app.shell.activateById(id);
  const nb = panel.content;
  const before = nb.widgets[i].model.executionCount;
  nb.activeCellIndex = i;
  app.commands.execute('notebook:run-cell');
  return before;
}}"""

# The cell's text outputs once it ran again (its count is new), or its error as one string.
_CELL_DONE = f"""([id, i, before]) => {{
  const cell = {_PANEL}.content.widgets[i];
  const count = cell.model.executionCount;
  if (count === null || count === before) return false;
  const outs = cell.model.outputs, texts = [];
  for (let j = 0; j < outs.length; j++) {{
    const o = outs.get(j).toJSON();
    if (o.output_type === 'error') return {{error: o.ename + ': ' + o.evalue,
                                           lines: (o.traceback || []).length}};
    if (o.output_type === 'stream') texts.push([].concat(o.text).join(''));
  }}
  return {{text: texts.join('')}};
}}"""

# Run `code` in the notebook's kernel outside any cell; its printed text (or its error).
_IN_KERNEL = f"""async ([id, code]) => {{
  const kernel = {_PANEL}.sessionContext.session.kernel;
  const future = kernel.requestExecute({{code, store_history: false}});
  const out = [];
  future.onIOPub = msg => {{
    const c = msg.content;
    if (msg.header.msg_type === 'stream') out.push(c.text);
    if (msg.header.msg_type === 'error') out.push('ERROR ' + c.ename + ': ' + c.evalue);
  }};
  await future.done;
  return out.join('');
}}"""

KILL_SERVER = """
import os, signal, time
from labkit.pg import instance, watchdog
pid = watchdog.postmaster_pid(instance._shared["pgdata"])
os.kill(pid, signal.SIGKILL)
end = time.monotonic() + 20
while watchdog.alive(pid) and time.monotonic() < end:
    time.sleep(0.05)
print("killed" if not watchdog.alive(pid) else "still alive")
"""


def _rerun(nb, text: str, timeout_ms: float = 120_000) -> str:
    """Run the cell whose source contains `text` again; its printed text. Fails on an error
    output (a traceback), naming it."""
    i = nb.index_of(text)
    before = nb.page.evaluate(_RUN_CELL, [nb.panel_id, i])
    state = nb.page.wait_for_function(
        _CELL_DONE, arg=[nb.panel_id, i, before], timeout=timeout_ms, polling=200
    ).json_value()
    assert "error" not in state, f"{nb.path}: cell {i} run again failed: {state}"
    return state["text"]


def _in_kernel(nb, code: str) -> str:
    return nb.page.evaluate(_IN_KERNEL, [nb.panel_id, code])


def _embedded_only() -> None:
    """The stop and kill checks need the embedded server (one named by LABKIT_PG_DSN is only
    let go, never stopped or restarted)."""
    if os.environ.get("LABKIT_PG_DSN"):
        pytest.skip("LABKIT_PG_DSN names the server: nothing here starts or stops it")


def _at_1280(lab, path: str, fresh: str | None = None):
    lab.page.set_viewport_size(VIEWPORT)
    return lab.notebook(path, fresh=fresh)


@pytest.mark.timeout(400)
def test_07_reruns_a_middle_cell_after_run_all_and_after_its_server_was_stopped(lab) -> None:
    from playwright.sync_api import expect

    nb = _at_1280(lab, NB07, fresh="CommitOrderApp(")
    cell = "fr.horizon_frontier("
    first = _rerun(nb, cell)
    assert "A committed" in first and RESTARTED not in first
    _embedded_only()
    assert "is stopped" in _in_kernel(nb, "from labkit import pg\nprint(pg.stop_shared_server())")
    again = _rerun(nb, cell)  # the cell's `server.dsn` was made by the first cell, before
    assert RESTARTED in again and "A committed" in again
    assert _rerun(nb, "co.LATE_COMMIT)").count("orphans under") == 1
    # the step widget made before the stop: its connections died with the old server; a click
    # reconnects to the fresh one and says so in its message line, no traceback
    app = nb.cell_with("CommitOrderApp(")
    app.scroll_into_view_if_needed()
    app.locator("button.wb-pg-A-insert").click()
    expect(app.locator(".wb-pg-message")).to_contain_text("reconnected", timeout=WAIT_MS)
    app.locator("button.wb-pg-A-insert").click()
    expect(app.locator(".wb-pg-message")).to_contain_text("A holds [1] uncommitted")
    assert app.locator(".jp-OutputArea-output[data-mime-type*='error']").count() == 0
    screenshot(app, "07-widget-after-stop")


@pytest.mark.timeout(400)
def test_08_reruns_a_middle_cell_after_run_all_and_after_its_server_was_killed(lab) -> None:
    nb = _at_1280(lab, NB08)
    cell = "pb.lost_update("
    assert "catalog after the ballot run" in _rerun(nb, cell)
    _embedded_only()
    assert _in_kernel(nb, KILL_SERVER).strip() == "killed"
    again = _rerun(nb, cell)
    assert RESTARTED in again and "catalog after the ballot run" in again
    screenshot(nb.cell_with(cell), "08-rerun-after-kill")


STRUCK = """
sends = app.result.trace[app.result.trace["event"] == "send"]
struck = sends[sends["fault"] == "inverted"]
print(app.switches, int(struck["base_version"].min()) if len(struck) else -1)
"""


@pytest.mark.timeout(400)
def test_09_fault_switch_works_by_hand_at_the_widgets_defaults(lab) -> None:
    from playwright.sync_api import expect

    nb = _at_1280(lab, NB09, fresh="RealPlannerApp(design=")
    nb.rerun("RealPlannerApp(design=")  # the app as made, not as the scripted run left it
    cell = nb.cell_with("RealPlannerApp(design=")
    cell.scroll_into_view_if_needed()
    message, status = cell.locator(".wb-rp-message"), cell.locator(".wb-rp-status")
    inverted = cell.locator(".wb-rp-fault-inverted input")
    # the defaults: 30 versions at the slow default latency (sliders: versions, latency)
    expect(slider_readout(cell, 0)).to_have_text("30", timeout=WAIT_MS)
    expect(slider_readout(cell, 1)).to_have_text("700", timeout=WAIT_MS)
    expect(inverted).not_to_be_checked()
    src = wait_image(cell)
    cell.locator("button.wb-rp-start").click()
    expect(status).to_contain_text("running: head v", timeout=WAIT_MS)
    # a person looks at the lanes for a moment before reaching for a box
    expect(status).to_contain_text(re.compile(r"head v([3-9]|\d\d) of v30"), timeout=WAIT_MS)
    expect(status).to_contain_text(re.compile(r"0 falls of the head; faults on: none$"))
    inverted.click()
    expect(inverted).to_be_checked()
    expect(message).to_contain_text(re.compile(r"Switched at head v\d+ \(on: inverted\)"))
    expect(status).to_contain_text(re.compile(r"running: .*faults on: inverted$"))
    # it takes effect in this run: a late answer lands and the callback's head falls
    expect(status).to_contain_text(re.compile(r"running: .* [1-9]\d* falls? of the head"),
                                   timeout=WAIT_MS)  # fmt: skip
    wait_image(cell, changed_from=src)
    cell.locator("button.wb-rp-stop").click()
    expect(message).to_contain_text("Stopped callback at v", timeout=WAIT_MS)
    expect(status).to_contain_text("finished", timeout=WAIT_MS)
    expect(cell.locator("button.wb-rp-start")).to_be_enabled(timeout=WAIT_MS)
    # the service struck a request built on a version at or above the head of the switch
    switches, first_struck = _in_kernel(nb, STRUCK).rsplit(" ", 1)
    head = int(re.fullmatch(r"\[\((\d+), \('inverted',\)\)\]", switches)[1])
    assert int(first_struck) >= head, (switches, first_struck)
    screenshot(cell, "09-switched-by-hand")
