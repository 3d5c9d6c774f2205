"""A JupyterLab on 127.0.0.1 serving a copy of the workbook, and its notebooks opened and run
in headless Debian Chromium: what the browser benchmark (`benchmarks/widget_browser.py`) and the
browser tests (`tests/browser`, whose `jlab.py` adds the widget helpers) both drive.

`start_lab(copy_workbook(dir / "workbook"), dir / "state")` starts a server with private Jupyter
directories on a free port; `open_notebook(page, server, path)` opens a notebook in a clean
workspace and waits for an idle kernel; `Notebook.run_all()` runs it and fails on an error
output. Playwright is imported only inside functions, so importing this module needs no browser.
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
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

ROOT = Path(__file__).resolve().parent.parent
# Debian's Chromium (Playwright's own download cannot reach its server here); CHROMIUM names
# another binary on other machines.
CHROMIUM = Path(os.environ.get("CHROMIUM") or shutil.which("chromium") or "chromium")
WAIT_MS = 60_000
_PR_SET_PDEATHSIG = 1
INSTALL_HINT = "apt-get update && apt-get install -y chromium"


def browser_missing() -> str | None:
    """Why Chromium cannot be driven here (no executable at CHROMIUM, or no Playwright), or None
    if it can: the one answer the browser tests, the benchmarks and the test selection share."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} not found; install it with: {INSTALL_HINT}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


# --------------------------------------------------------------------------- server


@dataclass
class LabServer:
    """A running JupyterLab: where it listens, what it serves, and its process."""

    url: str
    token: str
    root: Path
    log: Path
    proc: subprocess.Popen[bytes] = field(repr=False)
    sockets: Path | None = None  # the folder of its kernels' Unix sockets, removed at stop

    def api(self, method: str, path: str) -> Any:
        """Call the server's REST API (e.g. `api("GET", "/api/sessions")`); JSON or None."""
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self, path: str | None = None) -> None:
        """Delete every session (or only those of notebook `path`): shuts their kernels down."""
        for session in self.api("GET", "/api/sessions"):
            if path is None or session.get("path") == path:
                self.api("DELETE", f"/api/sessions/{session['id']}")

    def stop(self, grace_s: float = 10) -> None:
        """SIGTERM the server (it shuts its kernels down), then SIGKILL its process group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        if hasattr(os, "killpg"):  # POSIX: the kernels too (start_new_session: pgid == pid)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            self.proc.kill()
        self.proc.wait(10)
        if self.sockets is not None:
            shutil.rmtree(self.sockets, ignore_errors=True)


def copy_workbook(dest: Path) -> Path:
    """The workshop folder `make lab` serves, made in `dest` (lessons, student exercises, the
    docs they link to, the scenarios; same layout as the repository)."""
    from labkit.docs.workspace import make_workspace

    make_workspace(dest, repo=ROOT)
    return dest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _private_env(state: Path) -> dict[str, str]:
    """Environment with private Jupyter dirs, and the news notification and autosave off."""
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
    # No autosave: a save timer that fires while a test closes a notebook unsaved opens a
    # "File Save Error ... Disposed" dialog over the page, and the next click lands on it.
    docs = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "docmanager-extension"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    env.setdefault("LABKIT_PROGRESS", "off")  # a test's checks record no learner's progress
    return env


def _die_with_parent_fn() -> Any:
    """A preexec_fn that makes the child get SIGTERM when the test process dies."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not after fork
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if hasattr(os, "kill") and os.getppid() != parent:  # the parent died before prctl
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _die_with_parent() -> dict[str, Any]:
    """Popen's keywords that tie the server to this process's life (Linux only: prctl)."""
    return {"preexec_fn": _die_with_parent_fn()} if sys.platform == "linux" else {}


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
        # Kernels on Unix sockets in a short folder of their own (a socket's path is at most
        # 107 bytes): TCP ports picked for a kernel can be taken by another process before it
        # binds them, and the notebook then waits for a kernel that died.
        sockets = Path(tempfile.mkdtemp(prefix="jlab-kernels-"))
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
            "--ServerApp.terminals_enabled=False",
            "--KernelManager.transport=ipc", f"--KernelManager.ip={sockets / 'kernel'}",
        ]  # fmt: skip
        with log.open("ab") as out:
            proc = subprocess.Popen(
                cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
                **_die_with_parent(),
            )  # fmt: skip
        server = LabServer(f"http://127.0.0.1:{port}", token, root, log, proc, sockets)
        if _wait_ready(server, time.monotonic() + timeout_s):
            return server
        server.stop()
    tail = log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"JupyterLab did not start in {attempts} attempts; log {log}:\n{tail}")


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

    def show(self) -> None:
        """Bring this notebook's tab to the front, with the side panels as the app loaded."""
        self.page.evaluate(_SHOW, self.panel_id)

    def executed(self) -> dict[str, Any]:
        """The notebook with the outputs the page shows now, as nbformat JSON (what saving it
        would write)."""
        return self.page.evaluate(_MODEL_JSON, self.panel_id)

    def close(self) -> None:
        """Close this tab without saving (its kernel is the caller's to shut down)."""
        self.page.evaluate(_CLOSE_ONE, self.panel_id)

    def index_of(self, text: str) -> int:
        """The index of the first cell whose source contains `text` (counting every cell)."""
        return self.page.evaluate(_CELL_INDEX, [self.panel_id, text])

    def rerun(self, text: str, timeout_ms: float = WAIT_MS) -> None:
        """Run the first cell whose source contains `text` again (a fresh app in the same
        kernel); wait until its widgets are shown, and fail on an error output."""
        i = self.page.evaluate(_RERUN_CELL, [self.panel_id, text])
        state = self.page.wait_for_function(
            _RERUN_DONE, arg=[self.panel_id, i], timeout=timeout_ms, polling=100
        ).json_value()
        if "error" in state:
            raise AssertionError(f"{self.path}: cell {i} failed when run again: {state['error']}")

    def run_all(self, timeout_ms: float = WAIT_MS) -> None:
        """Run All through the command registry; wait until every code prompt shows [n]:."""
        self.page.evaluate(_RUN_ALL, self.panel_id)
        state = self.page.wait_for_function(
            _RUN_STATE, arg=self.panel_id, timeout=timeout_ms, polling=100
        ).json_value()
        if "error" in state:
            where = f" in cell {state['cell']}" if "cell" in state else ""
            raise AssertionError(f"{self.path}: Run All failed{where}: {state['error']}")


_CLOSE_ALL = """() => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return;
  for (const w of [...app.shell.widgets('main')]) {
    if (w.context && w.context.model) w.context.model.dirty = false;
    w.dispose();
  }
}"""

# A page that already shows this server's JupyterLab opens the next notebook in place: every
# open tab is closed unsaved (their kernels are shut down by the caller), the side panels go
# back to how the page's own load left them, and the notebook opens as from the file browser.
# Loading the app again would cost about 5 s of CPU a notebook (mostly Chromium compiling
# JupyterLab's scripts); opening in place about 1 s. False: the page must load the app.
# `keep`: leave the other tabs open (each keeps its kernel), as `Notebook.show` can go back.
_RESTORE_LAYOUT = """() => {
  const app = window.jupyterapp, [left, right] = window.__jlabLayout;
  if (left) app.shell.collapseLeft(); else app.shell.expandLeft();
  if (right) app.shell.collapseRight(); else app.shell.expandRight();
}"""

_OPEN_IN_PLACE = f"""([origin, path, keep]) => {{
  const app = window.jupyterapp;
  if (location.origin !== origin || !app || !app.shell || !window.__jlabLayout
      || document.querySelector('.jp-Dialog')) return false;
  if (!keep) ({_CLOSE_ALL})();
  ({_RESTORE_LAYOUT})();
  app.commands.execute('docmanager:open', {{path}});
  return true;
}}"""

# The notebook as the page holds it, outputs included, in nbformat's JSON.
_MODEL_JSON = f"""(id) => {{
  const panel = {_PANEL};
  return panel.context.model.toJSON();
}}"""

_SHOW = f"""(id) => {{
  window.jupyterapp.shell.activateById(id);
  ({_RESTORE_LAYOUT})();
}}"""

_CLOSE_ONE = f"""(id) => {{
  const w = {_PANEL};
  if (!w) return;
  if (w.context && w.context.model) w.context.model.dirty = false;
  w.dispose();
}}"""

_CELL_INDEX = f"""([id, text]) => {{
  const i = {_PANEL}.content.widgets.findIndex(
    c => c.model.sharedModel.getSource().includes(text));
  if (i < 0) throw new Error('no cell contains ' + text);
  return i;
}}"""

# Run the (first) cell whose source contains `text` again: a fresh app, as after Run All.
_RERUN_CELL = f"""async ([id, text]) => {{
  const app = window.jupyterapp, panel = {_PANEL};
  app.shell.activateById(id);
  const nb = panel.content;
  const i = ({_CELL_INDEX})([id, text]);
  nb.activeCellIndex = i;
  await app.commands.execute('notebook:run-cell');
  return i;
}}"""

_RERUN_DONE = f"""([id, i]) => {{
  const cell = {_PANEL}.content.widgets[i];
  const outs = cell.model.outputs;
  for (let j = 0; j < outs.length; j++) {{
    const o = outs.get(j).toJSON();
    if (o.output_type === 'error') return {{error: o.ename + ': ' + o.evalue}};
  }}
  return cell.node.querySelector('.jp-Cell-outputArea .jupyter-widgets') ? {{ok: true}} : false;
}}"""

_REMEMBER_LAYOUT = """() => {
  const shell = window.jupyterapp.shell;
  window.__jlabLayout = window.__jlabLayout || [shell.leftCollapsed, shell.rightCollapsed];
}"""


def open_notebook(
    page: Page, server: LabServer, path: str, timeout_ms: float = WAIT_MS, keep: bool = False
) -> Notebook:
    """Open `path` (relative to the served root) in a clean workspace; wait for an idle kernel.

    The first notebook loads JupyterLab in the page (`?reset`: the default workspace); later
    ones on the same page open in place (see `_OPEN_IN_PLACE`), closing the other tabs unless
    `keep`."""
    if not page.evaluate(_OPEN_IN_PLACE, [server.url, path, keep]):
        page.goto(f"{server.url}/lab/tree/{path}?reset&token={server.token}")
    panel_id = page.wait_for_function(
        _FIND_PANEL, arg=[path], timeout=timeout_ms, polling=100
    ).json_value()
    page.evaluate(_REMEMBER_LAYOUT)
    return Notebook(page, path, panel_id)


def close_notebooks(page: Page) -> None:
    """Close every tab of the page's JupyterLab without saving (before its kernels go)."""
    page.evaluate(_CLOSE_ALL)
