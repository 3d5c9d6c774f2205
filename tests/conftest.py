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
