"""Fixtures for the real-browser tests: one JupyterLab, one Chromium and one tab for this folder.

Locally the tests skip when /usr/bin/chromium (or Playwright) is missing; with CI=true they
fail instead, so CI can never pass by skipping them. See jlab.py for how to write a test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

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
INSTALL_HINT = "apt-get update && apt-get install -y chromium"
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
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        _missing(f"{CHROMIUM} not found; install it with: {INSTALL_HINT}")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("playwright is not installed (pip install -e '.[dev]')")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this folder `browser`, with a 180 s backstop timeout."""
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(180))


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


@dataclass
class Lab:
    """What a test gets: the page, the server, the served copy, and notebook helpers."""

    page: Page
    server: LabServer

    @property
    def root(self) -> Path:
        return self.server.root

    def open(self, path: str) -> Notebook:
        """Open a notebook by its path in the served copy, e.g. 'notebooks/01_x.ipynb'."""
        return _open_notebook(self.page, self.server, path)

    def write_notebook(self, path: str, cells: list[str]) -> str:
        """Write a throwaway notebook into the served copy; return the path to `open`."""
        _write_notebook(self.root / path, cells)
        return path


@pytest.fixture(scope="package")
def _lab_tab(browser: Browser) -> Iterator[list[Page]]:
    """The tests' one browser tab (at most one page in the list; a failed test empties it)."""
    tab: list[Page] = []
    yield tab
    for page in tab:
        page.context.close()


@pytest.fixture
def lab(
    lab_server: LabServer, browser: Browser, _lab_tab: list[Page], request: pytest.FixtureRequest
) -> Iterator[Lab]:
    """The one browser tab on the one JupyterLab, at the default size; the test's
    notebooks are closed unsaved and their kernels shut down after it.

    One tab serves every test, so JupyterLab loads once rather than once per notebook (about
    5 s of CPU each, see jlab.open_notebook); after a failed test the tab is thrown away and the
    next test starts in a fresh browser context."""
    if not _lab_tab:
        context = browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(WAIT_MS)
        context.route("**/*", _local_only)
        _lab_tab.append(context.new_page())
    page = _lab_tab[0]
    page.set_viewport_size(VIEWPORT)
    try:
        yield Lab(page, lab_server)
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
                close_notebooks(page)
                kept = True
        finally:
            if not kept:
                _lab_tab.clear()
                with contextlib.suppress(Exception):
                    page.context.close()
            lab_server.shutdown_kernels()
