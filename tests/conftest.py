"""Shared pytest set-up: a headless matplotlib backend, Hypothesis profiles, a PostgreSQL server."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cpu_report
import matplotlib
import pytest
from ctrl_c import restore_ctrl_c, take_ctrl_c
from fresh_exercises import fresh_exercises  # noqa: F401 - every test meets fresh exercises
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")

# nbformat validates with jsonschema, whose format checkers import rfc3987_syntax where it is
# installed (jupyter-events brings it in): that module builds a Lark grammar as it is imported,
# about 1.4 s of CPU in every test process, for an "iri" format no notebook schema uses.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "default")


@pytest.fixture(autouse=True, scope="session")
def _progress_in_a_temporary_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every exercise check records progress (labkit.exercises.progress): in tests, and in the
    notebook kernels and servers they start (which inherit this environment), it goes to a
    temporary file, never to the repository's workshop/ or the home folder."""
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("progress")
        mp.setenv("LABKIT_PROGRESS", str(folder / "progress.jsonl"))
        yield


# --- garbage collection in a test process ------------------------------------------------------


def pytest_collection_finish(session: pytest.Session) -> None:
    """A test process holds what every test module imported (matplotlib, pandas, Hypothesis,
    labkit's memos): about a million objects that each full garbage collection walks again.
    Frozen once collected, and collected a tenth as often, the heavy drawing and replay
    modules took 4 s less CPU in 60 (GC time 5.5 -> 2.8 s). No test's result depends on when
    cyclic garbage goes: the memory walls of the sandboxes cap a child relative to its size at
    the start, and no test counts objects or weak references."""
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


# --- parallel runs (pytest-xdist, `make test`) -------------------------------------------------

# Tests that share an expensive set-up run on one worker, so it happens once per run; every
# other test goes to whichever worker is free. (Not `xdist_group` marks: under pytest 9.2,
# pytest-xdist 3.8's --dist loadgroup ignores them without a word.)
SHARED_SETUP = {
    "tests/browser/": "one JupyterLab, one Chromium and one tab (package fixtures)",
    "tests/test_figures.py": "every docs figure built once (a module fixture)",
}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n N`: load scheduling, with each SHARED_SETUP path kept whole on one worker."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedSetupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return next((path for path in SHARED_SETUP if nodeid.startswith(path)), nodeid)

    return SharedSetupScheduling(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check the `postgres` marks (below); run each notebook once (`_run_once`); under xdist,
    hand out the long tests first (browser, then slow and notebook runs), so no worker starts
    one while the others are running out of work."""
    _check_pg_dsn_users(items)
    _run_once(config, items)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("browser"):
            return 0
        return 1 if item.get_closest_marker("slow") or item.get_closest_marker("notebooks") else 2

    items.sort(key=rank)  # stable: the collection order within each rank


def _run_once(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A notebook the browser tests Run All and check the outputs of
    (tests/browser/test_notebook_results.py) is not also run headless by
    tests/test_notebooks.py, when both are selected and Chromium can run: one run proves what
    two did, at half the cost. Without Chromium the headless run stays."""
    in_browser = {
        Path(item.callspec.params["path"]).name
        for item in items
        if item.path.name == "test_notebook_results.py" and hasattr(item, "callspec")
    }
    if not in_browser:
        return
    from harness.lab import browser_missing

    if browser_missing() is not None:
        return
    twice = [
        item
        for item in items
        if getattr(item, "originalname", "") == "test_notebook_runs_headless_and_shows_its_result"
        and Path(item.callspec.params["path"]).name in in_browser
    ]
    if twice:
        config.hook.pytest_deselected(items=twice)
        items[:] = [item for item in items if item not in twice]


# --- Ctrl-C (tests/ctrl_c.py) -----------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    cpu_report.addoption(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGINT Python's handler if the run started with it ignored; `restore_ctrl_c`,
    after each test below, keeps it so. `--cpu-report=N` adds the CPU table (`cpu_report`)."""
    take_ctrl_c()
    cpu_report.configure(config)


# --- PostgreSQL (part three): one server for the whole session ---------------------------------

_running: list[pytest.Item] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()
        restore_ctrl_c(item)


def _guard_pg_server() -> None:
    """Keep the `postgres` marker honest: a test that asks `labkit.pg` for a server (through
    `server()`, `shared_server()` or the `pg_dsn` fixture) in this process fails unless it is
    marked `postgres`, so `-m "not postgres"` really runs without one. Notebook kernels and
    other child processes are out of its reach: tests/test_notebooks.py marks the notebook runs
    (harness.nbrun.starts_postgres), the other tests that start one are marked by hand."""
    from labkit import pg

    real = pg.server

    def server(*args: Any, **kwargs: Any) -> Any:
        item = _running[-1] if _running else None
        if item is not None and item.get_closest_marker("postgres") is None:
            pytest.fail(
                f"{item.nodeid} starts PostgreSQL (labkit.pg.server) but is not marked "
                "`postgres`: add @pytest.mark.postgres",
                pytrace=False,
            )
        return real(*args, **kwargs)

    pg.server = server


_guard_pg_server()


def _check_pg_dsn_users(items: list[pytest.Item]) -> None:
    """A test that takes the `pg_dsn` fixture must be marked `postgres` (checked before any
    server starts, so one unmarked test cannot fail the session's shared server for others)."""
    unmarked = [
        item.nodeid
        for item in items
        if "pg_dsn" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("postgres") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "these tests use the pg_dsn fixture but are not marked `postgres`: "
            + ", ".join(unmarked)
        )


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A DSN for the `postgres` tests: LABKIT_PG_DSN, else one embedded server for the session.

    Locally the tests skip, with the reason, only when no server can be had; with CI=true
    they fail instead.
    """
    from labkit.pg import instance as pg

    try:
        cm = pg.server()
        dsn = cm.__enter__()
    except pg.PgUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs a PostgreSQL server: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        yield dsn
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture(scope="session")
def quiet_pg_dsn(pg_dsn: str) -> Iterator[str]:
    """A server no other test run shares, for checks that judge only while no transaction
    outside them runs (part three's condition exercise): pg_dsn's own embedded server, or, where
    LABKIT_PG_DSN names a shared one, a private embedded server (skipped if none can start)."""
    from labkit.pg import instance as pg

    if not os.environ.get(pg.ENV):
        yield pg_dsn
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(pg.ENV)
        cm = pg.server()
        try:
            dsn = cm.__enter__()
        except pg.PgUnavailable as exc:
            pytest.skip(f"{pg.ENV} names a shared server and no private one could start: {exc}")
    try:
        yield dsn
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema on the session's server for one test, dropped afterwards."""
    from labkit.pg import instance as pg

    with pg.scratch_schema(pg_dsn, prefix="t") as name:
        yield name


@pytest.fixture
def pg_connect(pg_dsn: str, pg_schema: str) -> Iterator[Callable[..., Any]]:
    """Open connections into the test's schema (log created); all closed after the test."""
    from labkit.frontier import log as fr
    from labkit.pg import instance as pg

    opened = []

    def open_one(autocommit: bool = False):
        conn = pg.connect(pg_dsn, autocommit=autocommit, options=pg.search_path_option(pg_schema))
        opened.append(conn)
        return conn

    fr.create_schema(open_one())
    yield open_one
    for conn in opened:
        conn.close()
