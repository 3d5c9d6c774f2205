"""Widget updates end to end: a real key press or click in JupyterLab (headless Chromium) until
the redrawn image is decoded and painted, for notebook 01's sliders, the controls of 05 and 05b and
the arrival workbench's buttons (notebook 04), plus a 14-step schedule typed into the workbench.

One JupyterLab serves a copy of the notebooks (`harness/lab.py`); each notebook is opened
and run (Run All). In the page, an input listener takes the time of the press (the event's own
timestamp) and a MutationObserver on the app's cell waits for an `<img>` with a new `src`; once
that image is decoded, the next animation frame and a task after it mark it painted. Every
press therefore includes the widget message to the kernel, the Python update (recompute, draw,
PNG encode), the message back, the Output's re-render and the image decode. After each
control, the kernel reports its own update times (`app.timings`), which splits the total into
Python and everything else. The first press of each control is a warm-up and is not counted.
The typed schedule is measured cold (first schedule typed into a freshly run notebook) and
warm (after a reset, the same text again).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, percentile, print_table
from harness.lab import CHROMIUM, browser_missing, copy_workbook, open_notebook, start_lab

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

NAME = "widget_browser"
PRESSES, SMOKE_PRESSES = 30, 1  # the smoke: one press, no warm-up (its times are not read)
COLD_RUNS, SMOKE_COLD_RUNS = 3, 1
WARM_TYPED, SMOKE_WARM_TYPED = 10, 1
TARGET_P95_S = 0.100
TARGET_TYPED_S = 0.250
PAUSE_S = 0.25  # between presses: a person's pace, and the kernel settles
WAIT_MS = 60_000
VIEWPORT = {"width": 1400, "height": 1700}
SCHEDULE = (
    "timeout 1; deliver 2; deliver 3; deliver 1; dup 2; deliver 4; timeout; deliver 5; "
    "deliver 6; dup 5; crash; deliver 7; stale 8; deliver 9"
)
NB01 = "notebooks/01_max_is_not_a_watermark.ipynb"
NB04 = "notebooks/04_late_tick_rewinds.ipynb"
NB05 = "notebooks/05_five_designs.ipynb"
NB05B = "notebooks/05b_pipelined_ballots.ipynb"
ROOT = Path(__file__).resolve().parent.parent


def available() -> bool:
    """True when Debian's chromium and Playwright are there (the benchmark drives both)."""
    return browser_missing() is None


# --- in the page --------------------------------------------------------------------------------

# Arm a measurement on `cell`: t0 is the timestamp of the next key press, mouse press or change
# event anywhere in the page; t1 is when the cell's n-th output image, with a new src, has been
# decoded and the frame after it has run (so it was painted).
_ARM = """([cell, n]) => {
  const imgs = () => cell.querySelectorAll('.jp-Cell-outputArea img');
  const old = (imgs()[n] || {}).src;
  const st = {t0: null, t1: null, src: null};
  window.__wbMeasure = st;
  const types = ['keydown', 'mousedown', 'change'];
  const onInput = (e) => {
    if (st.t0 === null) st.t0 = e.timeStamp;
    for (const t of types) document.removeEventListener(t, onInput, true);
  };
  for (const t of types) document.addEventListener(t, onInput, true);
  let seen = false;
  const check = () => {
    const img = imgs()[n];
    if (seen || !img || !img.src || img.src === old) return;
    seen = true;
    obs.disconnect();
    img.decode().catch(() => null).then(() => requestAnimationFrame(
      () => setTimeout(() => { st.src = img.src; st.t1 = performance.now(); }, 0)));
  };
  const obs = new MutationObserver(check);
  obs.observe(cell, {subtree: true, childList: true, attributes: true, attributeFilter: ['src']});
  return old ? old.length : 0;
}"""

_DONE = "() => window.__wbMeasure && window.__wbMeasure.t1 !== null"
_RESULT = "() => ({t0: window.__wbMeasure.t0, t1: window.__wbMeasure.t1})"

_PANEL = "[...window.jupyterapp.shell.widgets('main')].find(w => w.id === id)"
# Run `code` in the notebook's kernel and return what it printed.
_KERNEL_PRINT = f"""async ([id, code]) => {{
  const panel = {_PANEL};
  const future = panel.sessionContext.session.kernel.requestExecute(
    {{code, silent: false, store_history: false}});
  let text = '';
  future.onIOPub = (msg) => {{
    if (msg.header.msg_type === 'stream') text += msg.content.text;
  }};
  await future.done;
  return text;
}}"""


@dataclass
class Control:
    """One control to press: where it lives, how to press it, and the app whose timings count."""

    notebook: str
    name: str
    cell_text: str  # a string only the app's cell contains
    app: str  # the app's variable in the notebook
    press: Callable[[Locator, int], None]  # press number i on the app's cell
    before: str = ""  # code the kernel runs before each press, outside the measured time


def _key(selector: str, keys: tuple[str, str]) -> Callable[[Locator, int], None]:
    """Alternate two keys on the element `selector` (e.g. a slider handle: one step each)."""
    return lambda cell, i: cell.locator(selector).press(keys[i % 2])


def _select(selector: str, labels: tuple[int, int]) -> Callable[[Locator, int], None]:
    """Alternate between two options (by index) of the <select> `selector`."""
    return lambda cell, i: cell.locator(selector).select_option(index=labels[i % 2])


def _seed(cell: Locator, i: int) -> None:
    """Type a seed not used before into the random-seed box and press Enter."""
    box = cell.locator(".wb-seed input")
    box.fill(str(101 + i))
    _arm_again(cell)  # fill's own events must not count as the press
    box.press("Enter")


def _click(names: tuple[str, str]) -> Callable[[Locator, int], None]:
    """Alternate clicks on two buttons (CSS classes), with real mouse clicks."""
    return lambda cell, i: cell.locator(f"button.{names[i % 2]}").click()


CONTROLS = (
    Control(NB01, "01 priority slider #1", "app = FrontierTimelineApp", "app",
            _key(".wb-priority-1 .noUi-handle", ("ArrowUp", "ArrowDown"))),
    Control(NB01, "01 step slider", "app = FrontierTimelineApp", "app",
            _key(".wb-step .noUi-handle", ("ArrowLeft", "ArrowRight"))),
    Control(NB05, "05 random seed", "FiveDesignsApp(", "app", _seed),
    Control(NB05, "05 latency slider", "FiveDesignsApp(", "app",
            _key(".wb-latency .noUi-handle", ("ArrowRight", "ArrowLeft"))),
    Control(NB05, "05 highlight", "FiveDesignsApp(", "app", _select(".wb-design select", (1, 2))),
    Control(NB05B, "05b pipelined depth slider", "PipelineDepthApp(", "depth_app",
            _key(".wb-pipe-depth .noUi-handle", ("ArrowLeft", "ArrowRight"))),
    Control(NB05B, "05b pipelined fault", "PipelineDepthApp(", "depth_app",
            _select(".wb-pipe-fault select", (1, 2))),
    Control(NB04, "04 workbench deliver/undo", "ArrivalWorkbench(preset=", "workbench",
            _click(("wb-deliver", "wb-undo"))),
    # The same clicks, each to a state the canvas has no picture of: it forgets the pictures
    # it keeps whole before each press (frames and texts stay kept, as for any state whose
    # room and texts were seen). The row above meets kept pictures after its warm-up press.
    Control(NB04, "04 workbench deliver/undo, new states", "ArrivalWorkbench(preset=",
            "workbench", _click(("wb-deliver", "wb-undo")),
            before="getattr(workbench.canvas, 'pngs', {}).clear()"),
)  # fmt: skip
TYPED_COLD_AB = "04 typed 14-step schedule, cold"  # in A/B mode too: a fresh kernel each

_armed: dict[str, Any] = {}


def _arm(cell: Locator) -> None:
    handle = cell.element_handle(timeout=WAIT_MS)
    _armed["cell"] = handle
    cell.page.evaluate(_ARM, [handle, 0])


def _arm_again(cell: Locator) -> None:
    cell.page.evaluate(_ARM, [_armed["cell"], 0])


def _measure(page: Page, cell: Locator, act: Callable[[], None]) -> float:
    """Seconds from the input event `act` causes to the new image painted."""
    _arm(cell)
    act()
    page.wait_for_function(_DONE, timeout=WAIT_MS, polling="raf")
    got = page.evaluate(_RESULT)
    if got["t0"] is None:
        raise RuntimeError("no input event reached the page")
    return (got["t1"] - got["t0"]) / 1e3


def _kernel_timings(page: Page, panel_id: str, app: str, count: int) -> list[float]:
    """The app's own last `count` update durations, read from the kernel."""
    code = f"import json; print(json.dumps({app}.timings[-{count}:]))"
    text = page.evaluate(_KERNEL_PRINT, [panel_id, code])
    return [float(x) for x in json.loads(text.strip().splitlines()[-1])]


# --- the run ------------------------------------------------------------------------------------


def _row(name: str, kind: str, wall: list[float], python: list[float], target: float) -> dict:
    return {
        "control": name,
        "kind": kind,
        "presses": len(wall),
        "p50_s": percentile(wall, 0.50),
        "p95_s": percentile(wall, 0.95),
        "max_s": max(wall),
        "python_p50_s": percentile(python, 0.50) if python else "",
        "python_p95_s": percentile(python, 0.95) if python else "",
        "target_s": target,
        "load_1min": os.getloadavg()[0],
        "samples": " ".join(f"{w:.4f}" for w in wall),
    }


def _open(page: Page, server: Any, path: str) -> Any:
    nb = open_notebook(page, server, path)
    nb.run_all(timeout_ms=180_000)
    return nb


def _press(
    page: Page, nb: Any, control: Control, presses: int, warm_up: bool = True
) -> tuple[list[float], list[float]]:
    """Press `control` `presses` times after a warm-up press (none with `warm_up` False: the
    smoke, whose times are not read): the wall times of the counted presses, and the app's
    own update times for them."""
    cell = nb.cell_with(control.cell_text)
    cell.scroll_into_view_if_needed()
    wall = []
    skip = 1 if warm_up else 0
    for i in range(presses + skip):
        if control.before:
            page.evaluate(_KERNEL_PRINT, [nb.panel_id, control.before])
        took = _measure(page, cell, lambda i=i, c=control, at=cell: c.press(at, i))
        if i >= skip:
            wall.append(took)
        time.sleep(PAUSE_S)
    return wall, _kernel_timings(page, nb.panel_id, control.app, presses)


# Gives a notebook opened and run, its app (the cell containing the text) as after Run All.
Opener = Callable[[str, str], Any]


def _controls(
    page: Page, open_run: Opener, presses: int, warm_up: bool = True
) -> list[dict[str, object]]:
    rows = []
    nb, app = None, None
    for control in CONTROLS:
        if (control.notebook, control.cell_text) != app:  # the controls of one app follow on
            app = (control.notebook, control.cell_text)
            nb = open_run(*app)
        wall, python = _press(page, nb, control, presses, warm_up)
        rows.append(_row(control.name, "press", wall, python, TARGET_P95_S))
        print(
            f"  {control.name}: p50 {fmt_s(rows[-1]['p50_s'])} p95 {fmt_s(rows[-1]['p95_s'])}",
            flush=True,
        )
    return rows


def _typed(page: Page, open_run: Opener, cold_runs: int, warm: int) -> list[dict[str, object]]:
    cold, cold_py, warm_wall, warm_py = [], [], [], []
    for run in range(cold_runs):
        nb = open_run(NB04, "ArrivalWorkbench(preset=")
        cell = nb.cell_with("ArrivalWorkbench(preset=")
        cell.scroll_into_view_if_needed()
        typed = _typer(cell)
        cold.append(_measure(page, cell, typed))
        cold_py += _kernel_timings(page, nb.panel_id, "workbench", 1)
        time.sleep(PAUSE_S)
        if run == cold_runs - 1:
            reset = cell.locator("button.wb-reset")
            for _ in range(warm):
                _measure(page, cell, reset.click)
                time.sleep(PAUSE_S)
                warm_wall.append(_measure(page, cell, typed))
                warm_py += _kernel_timings(page, nb.panel_id, "workbench", 1)
                time.sleep(PAUSE_S)
    print(f"  typed cold: {', '.join(fmt_s(s) for s in cold)}", flush=True)
    return [
        _row("04 typed 14-step schedule, cold", "typed", cold, cold_py, TARGET_TYPED_S),
        _row("04 typed 14-step schedule, warm", "typed", warm_wall, warm_py, TARGET_TYPED_S),
    ]


def _typer(cell: Locator) -> Callable[[], None]:
    """Typing the 14-step schedule into the workbench of `cell` and pressing Enter (the
    press is the Enter: `fill`'s own events do not count)."""
    box = cell.locator(".wb-schedule input")

    def typed() -> None:
        box.fill(SCHEDULE)
        _arm_again(cell)
        box.press("Enter")

    return typed


def measure(smoke: bool) -> list[dict[str, object]]:
    """Start JupyterLab and Chromium, drive every control, return one row per control."""
    _kernels_import(ROOT)
    base = Path(tempfile.mkdtemp(prefix="bench-widget-browser-"))
    server = start_lab(copy_workbook(base / "workbook"), base / "state")
    try:
        # Playwright's sync API refuses a thread that already runs one (a pytest session with
        # the browser tests' fixtures does): drive the page from a thread of its own.
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(_drive, server, smoke).result()
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _kernels_import(checkout: Path) -> None:
    """Kernels started from now on import `checkout`'s labkit, whatever the venv's editable
    install says (a JupyterLab hands its environment on to its kernels)."""
    paths = [str(checkout), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def _drive(server: Any, smoke: bool) -> list[dict[str, object]]:
    from playwright.sync_api import sync_playwright

    opened: dict[str, Any] = {}  # the notebook open now, and the apps pressed in it so far

    def open_run(path: str, app: str) -> Any:
        """The open notebook if `app` is as Run All left it, else Run All in a new kernel
        (so a typed schedule's cold runs each get a freshly run notebook, as a reader would)."""
        if opened.get("path") != path or app in opened["apps"]:
            server.shutdown_kernels()
            opened.update(path=path, nb=_open(page, server, path), apps=set())
        opened["apps"].add(app)
        return opened["nb"]

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.set_default_timeout(WAIT_MS)
            context.route("**/*", _local_only)
            page = context.new_page()
            rows = drive(page, open_run, smoke)
        finally:
            browser.close()
    return rows


def drive(page: Page, open_run: Opener, smoke: bool) -> list[dict[str, object]]:
    """Press every control and type the schedule on notebooks `open_run` gives, in `page`;
    one row per control. The browser tests call this on the notebooks they already ran."""
    rows = _controls(page, open_run, SMOKE_PRESSES if smoke else PRESSES, warm_up=not smoke)
    return rows + _typed(
        page,
        open_run,
        SMOKE_COLD_RUNS if smoke else COLD_RUNS,
        SMOKE_WARM_TYPED if smoke else WARM_TYPED,
    )


def _local_only(route: Any) -> None:
    from urllib.parse import urlsplit

    if urlsplit(route.request.url).hostname in {"127.0.0.1", "localhost"}:
        route.continue_()
    else:
        route.abort()


def plot(rows: list[dict[str, object]]):
    """Each press's latency per control, its p95 (dashed) and the target it is held to."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(7.6, 4.2, layout="constrained")
    ax = fig.add_subplot()
    palette = ("frontier", "running", "fenced", "lww", "cas", "callback", "max", "ballot")
    for k, (row, color) in enumerate(zip(rows, palette, strict=False)):
        ms = [float(x) * 1e3 for x in str(row["samples"]).split()]
        ax.plot([k] * len(ms), ms, "o", ms=3, alpha=0.6, color=COLORS[color])
        ax.plot([k - 0.3, k + 0.3], [float(row["p95_s"]) * 1e3] * 2, "--", color=COLORS[color])
        ax.plot([k - 0.3, k + 0.3], [float(row["target_s"]) * 1e3] * 2, color="black", lw=1.5)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([str(r["control"]).replace(", ", "\n") for r in rows], fontsize=7,
                       rotation=30, ha="right")  # fmt: skip
    ax.set_ylim(bottom=0)
    ax.set_ylabel("input to painted image, ms\n(dashed: p95; solid: target)")
    ax.set_title("Widget updates in JupyterLab + Chromium, end to end")
    return fig


def run(
    smoke: bool = False,
    out: Path = FIGURES,
    measured: Callable[[bool], list[dict[str, object]]] = measure,
) -> BenchResult:
    """Drive the real page, print p50/p95 per control, write CSV and figure. `measured` gives
    the rows: by default `measure` (its own JupyterLab and Chromium)."""
    if not available():
        raise RuntimeError("needs /usr/bin/chromium and Playwright")
    import matplotlib

    matplotlib.use("Agg")
    rows = measured(smoke)
    print(f"  load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
    print_table(
        [
            {
                **r,
                "p50": fmt_s(float(r["p50_s"])),
                "p95": fmt_s(float(r["p95_s"])),
                "max": fmt_s(float(r["max_s"])),
                "python p50": fmt_s(float(r["python_p50_s"])) if r["python_p50_s"] != "" else "",
                "load": f"{float(r['load_1min']):.2f}",
            }
            for r in rows
        ],
        ("control", "presses", "p50", "p95", "max", "python p50", "load"),
    )
    ratios = {
        f"{r['control']}: p95 / target": float(r["p95_s"]) / float(r["target_s"]) for r in rows
    }
    targets = {
        f"{r['control']}: p95 under {float(r['target_s']) * 1e3:.0f} ms": float(r["p95_s"])
        < float(r["target_s"])
        for r in rows
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)


# --- A/B: the same presses on several checkouts, in alternation -------------------------------

_HAS_IMAGE = """(cell) => {
  const img = cell.querySelector('.jp-Cell-outputArea img');
  return !!img && img.complete && img.naturalWidth > 0;
}"""


def compare(
    checkouts: list[Path], names: list[str], presses: int = PRESSES, rounds: int = 3
) -> list[dict[str, object]]:
    """Press `names` (controls of one notebook) on each checkout's labkit in turn, `rounds`
    times (order A B, then B A, ...), each round on a fresh app (its cell run again), so every
    side meets the same seeds, machine and moment. `TYPED_COLD_AB` among `names` also types the
    14-step schedule into freshly run notebooks (`_typed_cold_ab`). One row per checkout,
    control and round."""
    controls = [c for c in CONTROLS if c.name in names]
    typed = TYPED_COLD_AB in names
    notebooks = {c.notebook for c in controls} | ({NB04} if typed else set())
    if len(notebooks) != 1:
        choices = [c.name for c in CONTROLS] + [TYPED_COLD_AB]
        raise ValueError(f"pick controls of one notebook from {choices}")
    base = Path(tempfile.mkdtemp(prefix="bench-widget-ab-"))
    saved = os.environ.get("PYTHONPATH")
    servers = []
    try:
        for k, checkout in enumerate(checkouts):
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), saved]))
            servers.append(start_lab(copy_workbook(base / f"workbook{k}"), base / f"state{k}"))
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(
                _drive_ab, servers, checkouts, controls, presses, rounds, notebooks.pop(), typed
            ).result()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        for server in servers:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _drive_ab(
    servers: list[Any],
    checkouts: list[Path],
    controls: list[Control],
    presses: int,
    rounds: int,
    notebook: str,
    typed: bool,
) -> list[dict[str, object]]:
    from playwright.sync_api import sync_playwright

    rows: list[dict[str, object]] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        try:
            pages, notebooks = [], []
            for server in servers:
                context = browser.new_context(viewport=VIEWPORT)
                context.set_default_timeout(WAIT_MS)
                context.route("**/*", _local_only)
                pages.append(context.new_page())
                notebooks.append(_open(pages[-1], server, notebook))
                code = "import labkit; print(labkit.__file__)"
                where = pages[-1].evaluate(_KERNEL_PRINT, [notebooks[-1].panel_id, code]).strip()
                print(f"  kernel {len(notebooks)} imports {where}", flush=True)
            for r in range(rounds):
                order = range(len(servers)) if r % 2 == 0 else reversed(range(len(servers)))
                for k in order:
                    page, nb = pages[k], notebooks[k]
                    page.bring_to_front()
                    for control in controls:
                        cell = nb.cell_with(control.cell_text)
                        nb.rerun(control.cell_text)
                        page.wait_for_function(_HAS_IMAGE, arg=cell.element_handle(), polling=100)
                        load = os.getloadavg()[0]
                        wall, python = _press(page, nb, control, presses)
                        row = _row(control.name, "press", wall, python, TARGET_P95_S)
                        row.update(checkout=str(checkouts[k]), round=r + 1, load_start=load)
                        row["frames_drawn_ahead"] = _ahead(page, nb, control.app)
                        rows.append(row)
                        _say(row)
                    if typed:
                        row, notebooks[k] = _typed_cold_ab(page, servers[k], notebook)
                        row.update(checkout=str(checkouts[k]), round=r + 1)
                        rows.append(row)
                        _say(row)
        finally:
            browser.close()
    return rows


COLD_AB_RUNS = 2  # per round and checkout, each in a fresh kernel


def _ahead(page: Page, nb: Any, app: str) -> str:
    """What the app did ahead while the kernel was idle, by its counter's name (or '-')."""
    code = f"print(getattr({app}, 'frames_drawn_ahead', getattr({app}, 'done_ahead', '-')))"
    return page.evaluate(_KERNEL_PRINT, [nb.panel_id, code]).strip()


def _typed_cold_ab(page: Page, server: Any, notebook: str) -> tuple[dict[str, object], Any]:
    """The 14-step schedule typed `COLD_AB_RUNS` times into a freshly run notebook, as in the
    full run: each time the kernel is shut down and the notebook run again (Run All). Returns
    the row and the notebook as left open."""
    text = "ArrivalWorkbench(preset="
    load = os.getloadavg()[0]
    wall, python, ahead = [], [], []
    for _ in range(COLD_AB_RUNS):
        server.shutdown_kernels()
        nb = _open(page, server, notebook)
        cell = nb.cell_with(text)
        cell.scroll_into_view_if_needed()
        wall.append(_measure(page, cell, _typer(cell)))
        python += _kernel_timings(page, nb.panel_id, "workbench", 1)
        ahead.append(_ahead(page, nb, "workbench"))
        time.sleep(PAUSE_S)
    row = _row(TYPED_COLD_AB, "typed", wall, python, TARGET_TYPED_S)
    row.update(load_start=load, frames_drawn_ahead=" ".join(ahead))
    return row, nb


def _say(row: dict[str, object]) -> None:
    print(
        f"  round {row['round']} {row['checkout']}: {row['control']}: "
        f"p50 {fmt_s(float(row['p50_s']))} p95 {fmt_s(float(row['p95_s']))} "
        f"python p50 {fmt_s(float(row['python_p50_s']))} "
        f"load {float(row['load_start']):.2f}-{float(row['load_1min']):.2f}, "
        f"frames drawn ahead {row['frames_drawn_ahead']}",
        flush=True,
    )


def _pooled(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per checkout and control: every round's presses together."""
    out = []
    for key in dict.fromkeys((str(r["checkout"]), str(r["control"])) for r in rows):
        mine = [r for r in rows if (str(r["checkout"]), str(r["control"])) == key]
        wall = [float(x) for r in mine for x in str(r["samples"]).split()]
        p95s = " ".join(f"{float(r['p95_s']) * 1e3:.0f}" for r in mine)
        loads = [float(r[k]) for r in mine for k in ("load_start", "load_1min")]
        out.append({
            "checkout": key[0], "control": key[1], "presses": len(wall),
            "p50": fmt_s(percentile(wall, 0.5)), "p95": fmt_s(percentile(wall, 0.95)),
            "max": fmt_s(max(wall)),
            "python p50": fmt_s(percentile([float(r["python_p50_s"]) for r in mine], 0.5)),
            "p95 per round (ms)": p95s, "load": f"{min(loads):.1f}-{max(loads):.1f}",
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.widget_browser --control NAME [--labkit DIR ...]`: some controls
    only, on one or more checkouts in alternation; prints, writes nothing unless `--csv`."""
    import argparse
    import csv
    import io

    from labkit.files import replace_file

    parser = argparse.ArgumentParser(prog="python -m benchmarks.widget_browser")
    parser.add_argument(
        "--control",
        action="append",
        required=True,
        choices=[c.name for c in CONTROLS] + [TYPED_COLD_AB],
        help="a control to press (the typed schedule: cold, in a fresh kernel per run)",
    )
    parser.add_argument(
        "--labkit",
        action="append",
        type=Path,
        help="a checkout whose labkit the kernels import (default: this one); "
        "several are measured in alternation",
    )
    parser.add_argument("--presses", type=int, default=PRESSES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--csv", type=Path, help="write every round's row here")
    args = parser.parse_args(argv)  # fmt: skip
    if not available():
        parser.error("needs /usr/bin/chromium and Playwright")
    checkouts = [p.resolve() for p in args.labkit or [ROOT]]
    rows = compare(checkouts, args.control, args.presses, args.rounds)
    pooled = _pooled(rows)
    print_table(pooled, list(pooled[0]))
    if args.csv:  # written beside and renamed: an interrupted write leaves the old file whole
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        replace_file(args.csv, text.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
