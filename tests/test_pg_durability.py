"""Nothing reported is lost on PostgreSQL (issue 20.1): a loop or a reader refuses a session
whose commits are reported before they are on disk, and a crash of the server in the middle of
a running loop loses none of the commits it reported."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from labkit import pg
from labkit.ballot import DurabilityError, Response, WatermarkLoop
from labkit.catalog import CatalogReader
from labkit.catalog import versions as catalog
from labkit.pg import ballots as pb

pytestmark = pytest.mark.postgres


def _connect(dsn: str, schema: str, extra: str = "", autocommit: bool = False):
    return pg.connect(dsn, autocommit=autocommit, options=pg.search_path_option(schema) + extra)


@pytest.mark.parametrize("extra", [" -c synchronous_commit=off"])
def test_a_session_that_reports_commits_before_they_are_on_disk_is_refused(
    pg_dsn: str, pg_schema: str, extra: str
) -> None:
    with _connect(pg_dsn, pg_schema, extra) as conn:
        with pytest.raises(DurabilityError, match="^WatermarkLoop on PostgreSQL: synchronous_") as info:
            WatermarkLoop(conn)
        assert "\n" not in str(info.value)
        with _connect(pg_dsn, pg_schema) as good:
            WatermarkLoop(good)  # made by a durable session: the store exists
            with pytest.raises(DurabilityError, match="^CatalogReader on PostgreSQL"):
                CatalogReader(good, state=conn)


@pytest.mark.parametrize("value", ["on", "local", "remote_write"])
def test_every_setting_that_flushes_locally_is_accepted(
    pg_dsn: str, pg_schema: str, value: str
) -> None:
    with _connect(pg_dsn, pg_schema, f" -c synchronous_commit={value}") as conn:
        loop = WatermarkLoop(conn)
        b = loop.reserve()
        assert loop.apply(Response(b.ballot_id, b.watermark, b.base_version, ["t"])).committed


def test_the_workbooks_own_workers_commit_durably(pg_dsn: str, pg_schema: str) -> None:
    with pb._connect(pg_dsn, pg_schema) as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)


@pytest.fixture
def private_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An embedded server of this test's own: crashing it resets every session on it."""
    monkeypatch.delenv(pg.ENV, raising=False)
    with pg.server() as dsn:
        yield dsn


def _reconnect(dsn: str, schema: str, attempts: int = 200):
    for _ in range(attempts):
        try:
            return _connect(dsn, schema)
        except pg.PgUnavailable:
            time.sleep(0.05)
    raise AssertionError("the server did not come back after its crash")


@pytest.mark.slow
def test_a_server_crash_mid_loop_loses_no_reported_commit(private_server: str) -> None:
    with pg.scratch_schema(private_server, prefix="crash") as schema:
        reported: list[tuple[int, int]] = []  # (version, ballot) of every commit apply reported
        stopped: list[BaseException] = []

        def run() -> None:
            conn = _connect(private_server, schema)
            loop = WatermarkLoop(conn)
            try:
                while True:
                    b = loop.reserve()
                    out = loop.apply(Response(b.ballot_id, b.watermark, b.base_version, [b.ballot_id]))
                    assert out.committed
                    reported.append((out.version, b.ballot_id))
            except psycopg.OperationalError as exc:
                stopped.append(exc)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        while len(reported) < 150:
            time.sleep(0.01)
        # SIGKILL one backend: the postmaster ends every session and recovers from the WAL on
        # disk, as after a crash; whatever was only in shared memory is gone.
        with _connect(private_server, schema, autocommit=True) as victim:
            pid = victim.execute("SELECT pg_backend_pid()").fetchone()[0]
            os.kill(pid, signal.SIGKILL)
        worker.join(60)
        assert stopped and not worker.is_alive()
        with _reconnect(private_server, schema) as conn:
            kept = {v.version: v.ballot_id for v in catalog.history(conn)}
            conn.commit()
            lost = [(v, b) for v, b in reported if kept.get(v) != b]
            assert lost == [], f"{len(lost)} reported commits lost, e.g. {lost[:3]}"
            assert max(kept) >= reported[-1][0]
            loop = WatermarkLoop(conn)  # a ballot id handed out before the crash is never reused
            for stalled in loop.inflight():  # reserved before the crash, never answered
                loop.abandon(stalled.ballot_id)
            b = loop.reserve()
            assert b.ballot_id > max(bid for _, bid in reported)


def test_a_store_in_unlogged_tables_is_refused(pg_dsn: str, pg_schema: str) -> None:
    """PostgreSQL empties an UNLOGGED table after a crash: commits and the reader's mark gone."""
    with _connect(pg_dsn, pg_schema) as conn:
        WatermarkLoop(conn)
        CatalogReader(conn)
        for table in ("catalog_versions", "wm_ballots", "catalog_reader_state"):
            conn.execute(f"ALTER TABLE {table} SET UNLOGGED")  # noqa: S608 - a fixed name
        conn.commit()
        with pytest.raises(DurabilityError, match="^WatermarkLoop on PostgreSQL: catalog_versions, wm_ballots not crash-safe"):
            WatermarkLoop(conn)
        with pytest.raises(DurabilityError, match="^CatalogReader on PostgreSQL: catalog_reader_state"):
            CatalogReader(conn)
