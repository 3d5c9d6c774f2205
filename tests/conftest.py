"""Shared pytest set-up: a headless matplotlib backend, Hypothesis profiles, a PostgreSQL server."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import matplotlib
import pytest
from hypothesis import HealthCheck, settings

matplotlib.use("Agg")

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "default")


# --- PostgreSQL (part three): one server for the whole session ---------------------------------

_running: list[pytest.Item] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


def _guard_pg_server() -> None:
    """Keep the `postgres` marker honest: a test that asks `labkit.pg` for a server (through
    `server()`, `shared_server()` or the `pg_dsn` fixture) in this process fails unless it is
    marked `postgres`, so `-m "not postgres"` really runs without one. Notebook kernels and
    other child processes are out of its reach: those tests are marked by hand."""
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the `pg_dsn` fixture must be marked `postgres` (checked before any
    server starts, so one unmarked test cannot fail the session's shared server for others)."""
    unmarked = [
        item.nodeid for item in items
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
    from labkit import pg

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


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema on the session's server for one test, dropped afterwards."""
    from labkit import pg

    with pg.scratch_schema(pg_dsn, prefix="t") as name:
        yield name


@pytest.fixture
def pg_connect(pg_dsn: str, pg_schema: str) -> Iterator[Callable[..., Any]]:
    """Open connections into the test's schema (log created); all closed after the test."""
    from labkit import frontier as fr
    from labkit import pg

    opened = []

    def open_one(autocommit: bool = False):
        conn = pg.connect(pg_dsn, autocommit=autocommit, options=pg.search_path_option(pg_schema))
        opened.append(conn)
        return conn

    fr.create_schema(open_one())
    yield open_one
    for conn in opened:
        conn.close()
