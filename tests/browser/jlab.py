"""Drive the workbook's notebooks in a real JupyterLab, in headless Debian Chromium.

How to write a browser test (fixtures come from `tests/browser/conftest.py`; every test in
this folder is marked `browser` and gets a 180 s timeout automatically):

    from .jlab import dropdown, label, screenshot, slider_handle, wait_image, wait_text_changed

    def test_priority_widget_redraws(lab):
        nb = lab.open("notebooks/01_frontier.ipynb")  # a path inside the served copy
        nb.run_all()                  # Run All, waits for every prompt to show [n]:
        cell = nb.cell_with("interact_priorities")   # or nb.cell(i), i counts all cells
        before = wait_image(cell)     # src of the first decoded <img> in the cell's output
        dropdown(cell).select_option(label="by priority")
        after = wait_image(cell, changed_from=before)  # new src, and the bitmap is decoded
        slider_handle(cell).press("ArrowRight")       # one press = one redraw
        assert wait_text_changed(label(cell), "orphans: 0") != "orphans: 0"
        screenshot(cell, "01-priority")  # -> artifacts/browser/01-priority.png

The server serves a copy of `notebooks/` and `data/` (`lab.root`), so tests never rewrite the
sources; `lab.write_notebook(...)` puts a throwaway notebook into that copy. Each test gets a
fresh browser context; its kernels are shut down afterwards. Every wait defaults to 60 s.
Playwright is imported only inside functions so that plain `pytest` runs without it.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
WAIT_MS = 60_000
_PR_SET_PDEATHSIG = 1


# --------------------------------------------------------------------------- server


@dataclass
class LabServer:
    """A running JupyterLab: where it listens, what it serves, and its process."""

    url: str
    token: str
    root: Path
    log: Path
    proc: subprocess.Popen[bytes] = field(repr=False)

    def api(self, method: str, path: str) -> Any:
        """Call the server's REST API (e.g. `api("GET", "/api/sessions")`); JSON or None."""
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Delete every session, which shuts its kernel down."""
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def stop(self, grace_s: float = 10) -> None:
        """SIGTERM the server (it shuts its kernels down), then SIGKILL its process group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # start_new_session: pgid == pid
        except ProcessLookupError:
            pass
        self.proc.wait(10)


def copy_workbook(dest: Path) -> Path:
    """Copy notebooks/ and data/ into `dest` (same layout, so `../data` paths still work)."""
    skip = shutil.ignore_patterns(".ipynb_checkpoints", "*.sqlite", "*.db", "__pycache__")
    for name in ("notebooks", "data"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=skip, dirs_exist_ok=True)
    (dest / "notebooks").mkdir(parents=True, exist_ok=True)
    return dest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _private_env(state: Path) -> dict[str, str]:
    """Environment with private Jupyter dirs and the news notification switched off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "MPLBACKEND"))}
    dirs = {
        "JUPYTER_CONFIG_DIR": state / "config",
        "JUPYTER_DATA_DIR": state / "data",
        "JUPYTER_RUNTIME_DIR": state / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": state / "config" / "lab" / "user-settings",
        "JUPYTERLAB_WORKSPACES_DIR": state / "config" / "lab" / "workspaces",
        "IPYTHONDIR": state / "ipython",
    }
    for key, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        env[key] = str(path)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    news = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    return env


def _die_with_parent_fn() -> Any:
    """A preexec_fn that makes the child get SIGTERM when the test process dies."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not after fork
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _wait_ready(server: LabServer, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return False
        try:
            server.api("GET", "/api/status")
            return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    return False


def start_lab(root: Path, state: Path, timeout_s: float = 60, attempts: int = 3) -> LabServer:
    """Start JupyterLab on 127.0.0.1 (free port, token) serving `root`; wait until it answers."""
    env = _private_env(state)
    token = os.urandom(16).hex()
    log = state / "jupyterlab.log"
    for _ in range(attempts):  # a free port can be taken between probe and bind
        port = _free_port()
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
            "--ServerApp.terminals_enabled=False",
        ]  # fmt: skip
        with log.open("ab") as out:
            proc = subprocess.Popen(
                cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent_fn(),
            )  # fmt: skip
        server = LabServer(f"http://127.0.0.1:{port}", token, root, log, proc)
        if _wait_ready(server, time.monotonic() + timeout_s):
            return server
        server.stop()
    tail = log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"JupyterLab did not start in {attempts} attempts; log {log}:\n{tail}")


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


# --------------------------------------------------------------------------- page

_FIND_PANEL = """([path]) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return false;
  for (const w of app.shell.widgets('main')) {
    if (!w.context || w.context.path !== path || !w.sessionContext) continue;
    const s = w.sessionContext, k = s.session && s.session.kernel;
    if (w.context.isReady && s.isReady && k && k.status === 'idle') return w.id;
  }
  return false;
}"""

_PANEL = "[...window.jupyterapp.shell.widgets('main')].find(w => w.id === id)"

_RUN_ALL = f"""(id) => {{
  const app = window.jupyterapp, panel = {_PANEL};
  app.shell.activateById(id);
  window.__jlabRunAll = 'running';
  app.commands.execute('notebook:run-all-cells').then(
    () => {{ window.__jlabRunAll = 'done'; }},
    (e) => {{ window.__jlabRunAll = 'failed: ' + e; }});
  return panel.content.widgets.length;
}}"""

# Finished when Run All settled and every code prompt reads [n]:; an error output ends it early.
_RUN_STATE = f"""(id) => {{
  const panel = {_PANEL};
  let pending = 0;
  for (const [i, cell] of panel.content.widgets.entries()) {{
    if (cell.model.type !== 'code') continue;
    const outs = cell.model.outputs;
    for (let j = 0; j < outs.length; j++) {{
      const o = outs.get(j).toJSON();
      if (o.output_type === 'error') return {{cell: i, error: o.ename + ': ' + o.evalue}};
    }}
    const prompt = cell.node.querySelector('.jp-InputPrompt');
    if (!prompt || !/^\\[\\d+\\]:$/.test(prompt.textContent.trim())) pending++;
  }}
  const run = window.__jlabRunAll;
  if (run && run.startsWith('failed')) return {{error: run}};
  return pending === 0 && run === 'done' ? {{ok: true}} : false;
}}"""


@dataclass
class Notebook:
    """An open notebook tab: its cells as Playwright locators, and Run All."""

    page: Page
    path: str
    panel_id: str

    @property
    def panel(self) -> Locator:
        return self.page.locator(f'[id="{self.panel_id}"]')

    @property
    def cells(self) -> Locator:
        """All cells (markdown too), in notebook order."""
        return self.panel.locator(".jp-Notebook .jp-Cell")

    def cell(self, index: int) -> Locator:
        """The cell at `index`, counting every cell from 0."""
        return self.cells.nth(index)

    def cell_with(self, text: str) -> Locator:
        """The one cell whose source contains `text` (fails if none or several match)."""
        return self.cells.filter(has=self.page.locator(".jp-InputArea", has_text=text))

    def run_all(self, timeout_ms: float = WAIT_MS) -> None:
        """Run All through the command registry; wait until every code prompt shows [n]:."""
        self.page.evaluate(_RUN_ALL, self.panel_id)
        state = self.page.wait_for_function(
            _RUN_STATE, arg=self.panel_id, timeout=timeout_ms, polling=100
        ).json_value()
        if "error" in state:
            where = f" in cell {state['cell']}" if "cell" in state else ""
            raise AssertionError(f"{self.path}: Run All failed{where}: {state['error']}")


def open_notebook(
    page: Page, server: LabServer, path: str, timeout_ms: float = WAIT_MS
) -> Notebook:
    """Open `path` (relative to the served root) in a clean workspace; wait for an idle kernel."""
    page.goto(f"{server.url}/lab/tree/{path}?reset&token={server.token}")
    panel_id = page.wait_for_function(
        _FIND_PANEL, arg=[path], timeout=timeout_ms, polling=100
    ).json_value()
    return Notebook(page, path, panel_id)


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


def screenshot(loc: Locator, name: str) -> Path:
    """Save a PNG of `loc` (a cell, not the page: JupyterLab scrolls inside its own panel)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    loc.screenshot(path=str(path), timeout=WAIT_MS)
    return path
