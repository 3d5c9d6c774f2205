"""CPU seconds per test file, so the suite's growth shows where it happens (`--cpu-report=N`).

Each test process adds up, per file, the CPU its tests took: its own (user + system) and that of
the child processes it reaped meanwhile (kernels, crash children, walls) and their own reaped
children. What the browser tests share (JupyterLab with its kernels, Playwright with Chromium)
is reaped when those fixtures end, so it counts to the browser test that ran last; a PostgreSQL
server detaches from the process that starts it and counts nowhere. Under xdist each worker
sends its table to the controller, which prints the N costliest files and the total. Registered
by `tests/conftest.py`.
"""

from __future__ import annotations

import resource
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

_KEY = "cpu_by_file"


def addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        type=int,
        default=0,
        metavar="N",
        help="after the run, print the N test files that took the most CPU seconds",
    )


def _cpu() -> float:
    """CPU seconds so far of this process and of the children it has reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CpuReport:
    """The plugin: per-file CPU on every process, gathered and printed by the controller."""

    def __init__(self, config: pytest.Config, top: int) -> None:
        self.config, self.top = config, top
        self.by_file: Counter[str] = Counter()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Iterator[None]:
        start = _cpu()
        try:
            return (yield)
        finally:
            self.by_file[item.nodeid.split("::")[0]] += _cpu() - start

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        out = getattr(self.config, "workeroutput", None)
        if out is not None:  # an xdist worker: hand the table to the controller
            out[_KEY] = dict(self.by_file)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.by_file.update(getattr(node, "workeroutput", {}).get(_KEY, {}))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if getattr(self.config, "workeroutput", None) is not None or not self.by_file:
            return
        total = sum(self.by_file.values())
        tr = terminalreporter
        shown = min(self.top, len(self.by_file))
        tr.section(f"CPU seconds per test file (top {shown} of {len(self.by_file)})")
        for path, seconds in self.by_file.most_common(self.top):
            tr.write_line(f"{seconds:8.1f}  {100 * seconds / total:5.1f}%  {path}")
        tr.write_line(f"{total:8.1f}  100.0%  all {len(self.by_file)} files")


def configure(config: pytest.Config) -> None:
    """Register the plugin when `--cpu-report=N` asks for it (N > 0)."""
    top = config.getoption("--cpu-report")
    if top > 0:
        config.pluginmanager.register(CpuReport(config, top), "cpu_report")
