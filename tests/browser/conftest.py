"""Fixtures for the real-browser tests: one JupyterLab, one Chromium and one tab for this folder.

Locally the tests skip when /usr/bin/chromium (or Playwright) is missing; with CI=true they
fail instead, so CI can never pass by skipping them. See jlab.py for how to write a test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from harness.lab import browser_missing

from .jlab import (
    ARTIFACTS,
    CHROMIUM,
    WAIT_MS,
    LabServer,
    Notebook,
    close_notebooks,
    copy_workbook,
    start_lab,
)
from .jlab import open_notebook as _open_notebook
from .jlab import write_notebook as _write_notebook

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

HERE = Path(__file__).resolve().parent
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
VIEWPORT = {"width": 1400, "height": 1000}


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _missing(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"CI=true and the browser tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def _require_browser() -> None:
    """Skip (locally) or fail (CI) unless Debian's chromium and Playwright are present."""
    reason = browser_missing()
    if reason is not None:
        _missing(reason)


# The order the tests run in: first those that open a notebook of their own (`lab.open` closes
# every other tab), then each notebook's tests one after another, so it is Run All'ed once
# (`Lab.notebook`): the widget fit check first (it looks at the notebook as Run All left it),
# then the check of its outputs and the tests that change its apps. The benchmark's presses
# come once notebooks 01, 05, 05b and 04 are all open (KEEP_OPEN below). A test not listed
# runs after these; a notebook it Run Alls again (pushed out, or closed by `lab.open`) is an
# error at the end of the folder (`_lab_tab`), so a new test takes its place here.
ORDER = (
    "test_lab_smoke.py::",
    "test_workbench_pipelined.py::",  # a notebook of its own, as test_lab_smoke
    "test_workspace_links.py::",  # the lessons, each opened on its own
    "test_widgets_fit.py::test_no_widget_text_is_cut_at_1280[02]",
    "test_notebook_results.py::test_run_all_shows_its_result[02]",
    "test_widgets_fit.py::test_no_widget_text_is_cut_at_1280[01]",
    "test_notebook_results.py::test_run_all_shows_its_result[01]",
    "test_notebook_01.py::",
    "test_widgets_fit.py::test_no_widget_text_is_cut_at_1280[05]",
    "test_notebook_results.py::test_run_all_shows_its_result[05]",
    "test_notebook_05.py::",
    "test_widgets_fit.py::test_no_widget_text_is_cut_at_1280[05b]",
    "test_notebook_results.py::test_run_all_shows_its_result[05b]",
    "test_widgets_fit.py::test_no_widget_text_is_cut_at_1280[04]",
    "test_notebook_results.py::test_run_all_shows_its_result[04]",
    "test_workbench.py::",
    "test_widget_browser_smoke.py::",
    "test_widgets_fit.py::test_notebook_07",
    "test_notebook_results.py::test_run_all_shows_its_result[07]",
    "test_rerun.py::test_07",
    "test_widgets_fit.py::test_notebook_09",
    "test_notebook_results.py::test_run_all_shows_its_result[09]",
    "test_rerun.py::test_09",
    "test_widgets_fit.py::test_no_widget_text_is_cut_at_1280[10]",
    "test_notebook_results.py::test_run_all_shows_its_result[10]",
    "test_notebook_results.py::test_run_all_shows_its_result[08]",
    "test_rerun.py::test_08",
)


def _rank(item: pytest.Item) -> int:
    return next((i for i, key in enumerate(ORDER) if key in item.nodeid), len(ORDER))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder `browser`, with a 180 s backstop timeout; put them in
    ORDER, where the first of them was."""
    mine = [item for item in items if HERE in Path(str(item.fspath)).parents]
    for item in mine:
        item.add_marker(pytest.mark.browser)
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(180))
    if mine:
        ids = {id(item) for item in mine}
        at = next(i for i, item in enumerate(items) if id(item) in ids)
        rest = [item for item in items if id(item) not in ids]
        items[:] = rest[:at] + sorted(mine, key=_rank) + rest[at:]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


# The server, the browser and the tab last as long as this folder's tests (package scope), not
# the session: while Playwright's sync API is open its event loop counts as running in this
# thread, so a later test on the same worker that calls asyncio.run() would fail.


@pytest.fixture(scope="package")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab on 127.0.0.1 serving a copy of notebooks/ and data/ (shared by the tests)."""
    _require_browser()  # before starting anything, so a missing browser costs no time
    base = tmp_path_factory.mktemp("jlab")
    server = start_lab(copy_workbook(base / "workbook"), base / "state")
    yield server
    server.stop()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(server.log, ARTIFACTS / "jupyterlab.log")


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """Debian's headless Chromium, driven by Playwright (its own download is not needed)."""
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()


def _local_only(route: Route) -> None:
    # With no network a stray CDN request would hang until its timeout: refuse it at once.
    if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
        route.continue_()
    else:
        route.abort()


# Notebooks run and kept open in the tab at once (each has its kernel): enough for the
# benchmark's four; opening one more closes the one run longest ago.
KEEP_OPEN = 4


@dataclass
class Tab:
    """The one browser tab (None until a test needs it, or after a failure), the notebooks
    Run All'ed in it that later tests may use (oldest first), for each the apps a test
    asked for `fresh` since (and so may have changed), by cell index, its outputs as Run
    All left them (nbformat JSON), and how often each was Run All'ed since the tab opened."""

    page: Page | None = None
    ran: dict[str, Notebook] = field(default_factory=dict)
    changed: dict[str, set[int]] = field(default_factory=dict)
    run_all_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_alls: Counter[str] = field(default_factory=Counter)


@dataclass
class Lab:
    """What a test gets: the page, the server, the served copy, and notebook helpers."""

    page: Page
    server: LabServer
    tab: Tab
    opened: bool = False  # the test opened a notebook of its own: closed after it

    @property
    def root(self) -> Path:
        return self.server.root

    def open(self, path: str) -> Notebook:
        """Open a notebook by its path in the served copy, e.g. 'notebooks/01_x.ipynb', for
        this test alone (the other tabs close, their kernels shut down)."""
        self.opened = True
        self.tab.ran.clear()
        self.tab.changed.clear()
        self.server.shutdown_kernels()
        return _open_notebook(self.page, self.server, path)

    def notebook(self, path: str, fresh: str | None = None) -> Notebook:
        """Notebook `path` Run All'ed, shared with the other tests: the first to ask opens and
        runs it, later ones get it as the earlier left it. `fresh`: text of the cell of an app
        this test needs as after Run All and may change; run again if an earlier test asked
        for it too (the only way a test may change an app)."""
        ran, changed = self.tab.ran, self.tab.changed
        if path in ran:
            nb = ran[path]
            nb.show()
            if fresh is not None and nb.index_of(fresh) in changed[path]:
                nb.rerun(fresh)
        else:
            if len(ran) >= KEEP_OPEN:
                oldest = next(iter(ran))
                ran.pop(oldest).close()
                self.server.shutdown_kernels(oldest)
            nb = _open_notebook(self.page, self.server, path, keep=True)
            nb.run_all(timeout_ms=180_000)
            self.tab.run_alls[path] += 1
            ran[path], changed[path] = nb, set()
            self.tab.run_all_outputs[path] = nb.executed()
        if fresh is not None:
            changed[path].add(nb.index_of(fresh))
        return nb

    def write_notebook(self, path: str, cells: list[str]) -> str:
        """Write a throwaway notebook into the served copy; return the path to `open`."""
        _write_notebook(self.root / path, cells)
        return path


@pytest.fixture(scope="package")
def _lab_tab(browser: Browser) -> Iterator[Tab]:
    """The tests' one browser tab (a failed test throws it away). Each notebook is Run All'ed
    once in it: a second run means ORDER or KEEP_OPEN no longer fit the tests."""
    tab = Tab()
    yield tab
    if tab.page is not None:
        tab.page.context.close()
    again = sorted(path for path, n in tab.run_alls.items() if n > 1)
    if again:
        pytest.fail(
            "notebooks Run All'ed more than once in one tab (list their tests together in "
            "ORDER, after the tests that open a notebook of their own, or keep more open: "
            f"KEEP_OPEN = {KEEP_OPEN}): {', '.join(again)}",
            pytrace=False,
        )


@pytest.fixture
def lab(
    lab_server: LabServer, browser: Browser, _lab_tab: Tab, request: pytest.FixtureRequest
) -> Iterator[Lab]:
    """The one browser tab on the one JupyterLab, at the default size. Notebooks from
    `lab.notebook` stay open for the next tests; one from `lab.open` is closed unsaved and its
    kernel shut down after the test.

    One tab serves every test, so JupyterLab loads once rather than once per notebook (about
    5 s of CPU each, see jlab.open_notebook), and each notebook is run once, not once per test
    (its kernel's work and Chromium's drawing of every output); after a failed test the tab is
    thrown away and the next test starts in a fresh browser context."""
    if _lab_tab.page is None:
        context = browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(WAIT_MS)
        context.route("**/*", _local_only)
        _lab_tab.page = context.new_page()
    page = _lab_tab.page
    page.set_viewport_size(VIEWPORT)
    lab = Lab(page, lab_server, _lab_tab)
    try:
        yield lab
    finally:
        reports = [getattr(request.node, f"_report_{when}", None) for when in ("setup", "call")]
        failed = any(report is not None and report.failed for report in reports)
        if failed:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^\w.-]+", "_", request.node.name)
            with contextlib.suppress(Exception):  # a debugging aid must not mask the failure
                page.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"))
        kept = False
        try:
            if not failed:
                if lab.opened:
                    close_notebooks(page)
                kept = True
        finally:
            if not kept:
                _lab_tab.page = None
                _lab_tab.ran.clear()
                _lab_tab.changed.clear()
                _lab_tab.run_alls.clear()
                with contextlib.suppress(Exception):
                    page.context.close()
            if not kept or lab.opened:
                lab_server.shutdown_kernels()
