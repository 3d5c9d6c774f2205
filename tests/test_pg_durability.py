"""Nothing reported is lost on PostgreSQL (issue 20.1): a loop or a reader refuses a session
whose commits are reported before they are on disk, and a crash of the server in the middle of
a running loop loses none of the commits it reported. The sessions pin what they rely on when
they open (issue 35.3), so a server-level `ALTER SYSTEM` and reload while they run cannot turn
their commits' durability, or their level, off under them."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus

import labkit.catalog.hold as hold
import labkit.catalog.versions_pg as versions_pg
import labkit.remote.head_watch as head_watch
from labkit import pg
from labkit.ballot import DurabilityError, WatermarkLoop
from labkit.catalog import CatalogReader
from labkit.catalog import versions as catalog
from labkit.pg import ballots as pb
from labkit.pg.commit_order import CommitOrderLab

pytestmark = pytest.mark.postgres

# What a reload may no longer change under a session that relies on it.
SERVER_OFF = {"synchronous_commit": "off", "default_transaction_isolation": "serializable"}
# The crash test's reload: commits not durable, and the WAL writer writing them out only every
# 10 s (its most), not every 200 ms, so a crash finds nearly all of them still in memory.
RELOADED = {"synchronous_commit": "off", "wal_writer_delay": "10s"}


def _connect(dsn: str, schema: str, extra: str = "", autocommit: bool = False):
    return pg.connect(dsn, autocommit=autocommit, options=pg.search_path_option(schema) + extra)


@pytest.mark.parametrize("extra", [" -c synchronous_commit=off"])
def test_a_session_that_reports_commits_before_they_are_on_disk_is_refused(
    pg_dsn: str, pg_schema: str, extra: str
) -> None:
    with _connect(pg_dsn, pg_schema, extra) as conn:
        with pytest.raises(
            DurabilityError, match="^WatermarkLoop on PostgreSQL: synchronous_"
        ) as info:
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
        assert loop.apply(b.answer(["t"])).committed


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
                    out = loop.apply(b.answer([b.ballot_id]))
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
        with pytest.raises(
            DurabilityError,
            match="^WatermarkLoop on PostgreSQL: catalog_versions, wm_ballots not crash-safe",
        ):
            WatermarkLoop(conn)
        with pytest.raises(
            DurabilityError, match="^CatalogReader on PostgreSQL: catalog_reader_state"
        ):
            CatalogReader(conn)


def _setting(conn, name: str) -> str:
    """The session's value of `name`, read in a transaction of its own (left idle after)."""
    with conn.transaction():
        return conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0]


def test_a_callers_own_set_off_before_opening_is_still_refused(pg_dsn: str, pg_schema: str) -> None:
    with _connect(pg_dsn, pg_schema) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.commit()
        with pytest.raises(DurabilityError, match="^WatermarkLoop on PostgreSQL: synchronous_"):
            WatermarkLoop(conn)
        assert _setting(conn, "synchronous_commit") == "off"  # nothing pinned over the choice


def test_a_reader_or_hold_opened_inside_a_transaction_is_refused(
    pg_dsn: str, pg_schema: str
) -> None:
    """Its pin would be undone if the caller's transaction rolled back."""
    with _connect(pg_dsn, pg_schema) as conn:
        WatermarkLoop(conn)
        for opening, who in (
            (lambda: CatalogReader(conn), "CatalogReader"),
            (lambda: hold.create(conn), "hold.create"),
        ):
            conn.execute("SELECT 1")
            with pytest.raises(
                DurabilityError,
                match=f"^{who} on PostgreSQL needs a connection with no open transaction",
            ):
                opening()
            conn.rollback()
        conn.execute("SELECT 1")
        with pytest.raises(ValueError, match="^pin_settings needs a connection with no open"):
            versions_pg.pin_settings(conn, versions_pg.READ_COMMITTED)


@pytest.fixture(scope="module")
def settings_server() -> Iterator[str]:
    """An embedded server for the tests that change the server's own settings (ALTER SYSTEM):
    no other test's server sees them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(pg.ENV, raising=False)
        try:
            cm = pg.server()
            dsn = cm.__enter__()
        except pg.PgUnavailable as exc:
            if os.environ.get("CI") == "true":
                raise
            pytest.skip(f"no embedded PostgreSQL: {exc}")
    try:
        yield dsn
    finally:
        cm.__exit__(None, None, None)


def _alter_system(dsn: str, settings: dict[str, str], reset: bool = False) -> None:
    """`ALTER SYSTEM SET` (or `RESET`) each setting and reload; once set, wait until a new
    session sees them (the server has re-read its files and signalled every session)."""
    with _reconnect_admin(dsn) as admin:
        for name, value in settings.items():
            if reset:
                admin.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
            else:
                admin.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)
                    )
                )
        admin.execute("SELECT pg_reload_conf()")
    if reset:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with pg.connect(dsn, autocommit=True) as fresh:
            if all(_setting(fresh, n) == v for n, v in settings.items()):
                return
        time.sleep(0.02)
    raise AssertionError(f"the server did not take {settings} within 30 s")


def _reconnect_admin(dsn: str, wait: float = 60.0):
    deadline = time.monotonic() + wait
    while True:
        try:
            return pg.connect(dsn, autocommit=True)
        except pg.PgUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("autocommit", [False, True])
def test_a_reload_cannot_change_what_an_open_session_relies_on(
    settings_server: str, monkeypatch: pytest.MonkeyPatch, autocommit: bool
) -> None:
    dsn = settings_server
    with pg.scratch_schema(dsn, prefix="pin") as schema:
        opened: dict[str, psycopg.Connection] = {}

        def session(name: str):
            opened[name] = _connect(dsn, schema, autocommit=autocommit)
            return opened[name]

        monkeypatch.setenv(head_watch.DSN_VARIABLE, dsn)
        try:
            control = session("control")  # pins nothing: the reload reaches it
            loop = WatermarkLoop(session("loop"))
            hold.create(session("hold"))
            CatalogReader(opened["loop"], state=session("reader"))
            opened["head reader process"] = head_watch._open("-")
            lab = CommitOrderLab(dsn)
            opened["frontier reader"] = lab.worker
            for conn in opened.values():  # left idle, autocommit as it was
                assert conn.info.transaction_status == TransactionStatus.IDLE
            assert opened["loop"].autocommit is autocommit
            _alter_system(dsn, SERVER_OFF)
            for conn in opened.values():
                conn.rollback()  # a rollback now undoes nothing the pin did
            assert _setting(control, "synchronous_commit") == "off"
            assert _setting(control, "default_transaction_isolation") == "serializable"
            durable = {n: _setting(c, "synchronous_commit") for n, c in opened.items()}
            assert durable == {
                "control": "off",
                "loop": "on",
                "hold": "on",
                "reader": "on",
                # they write nothing that must outlive a crash: nothing pinned
                "head reader process": "off",
                "frontier reader": "off",
            }
            levels = {n: _setting(c, "default_transaction_isolation") for n, c in opened.items()}
            assert levels == {
                "control": "serializable",
                "loop": "read committed",
                # a hold or a reader's record that raises a serialization error loses nothing
                "hold": "serializable",
                "reader": "serializable",
                "head reader process": "read committed",
                "frontier reader": "read committed",
            }
            b = loop.reserve()  # the loop runs on, on what it pinned
            assert loop.apply(b.answer(["t"])).committed
        finally:
            _alter_system(dsn, SERVER_OFF, reset=True)
            for name, conn in opened.items():
                if name != "frontier reader":
                    conn.close()
            if "frontier reader" in opened:
                lab.close()


@pytest.mark.slow
def test_a_reload_turning_synchronous_commit_off_mid_loop_loses_no_commit_in_a_crash(
    private_server: str,
) -> None:
    """Issue 35.3: `ALTER SYSTEM SET synchronous_commit = off` and a reload while a loop runs,
    then a server crash. Without the pin the loop's session takes the reload, its commits are
    reported before their WAL is written, and the crash loses the last of them."""
    dsn = private_server
    with pg.scratch_schema(dsn, prefix="reload") as schema:
        reported: list[tuple[int, int]] = []  # (version, ballot) of every commit apply reported
        stopped: list[BaseException] = []
        asked, answered = threading.Event(), []  # the loop's own synchronous_commit, mid-run
        conn = _connect(dsn, schema)
        loop = WatermarkLoop(conn)

        def run() -> None:
            try:
                while True:
                    if asked.is_set() and not answered:
                        answered.append(_setting(conn, "synchronous_commit"))
                    b = loop.reserve()
                    out = loop.apply(b.answer([b.ballot_id]))
                    assert out.committed
                    reported.append((out.version, b.ballot_id))
            except psycopg.OperationalError as exc:
                stopped.append(exc)

        def wait_for(done: Callable[[], bool]) -> None:
            deadline = time.monotonic() + 60
            while not done():
                assert worker.is_alive() and time.monotonic() < deadline, stopped
                time.sleep(0.005)

        worker = threading.Thread(target=run, daemon=True)
        try:
            worker.start()
            wait_for(lambda: len(reported) >= 10)
            _alter_system(dsn, RELOADED)
            asked.set()
            wait_for(lambda: bool(answered))
            mark = len(reported)
            wait_for(lambda: len(reported) >= mark + 100)
            # SIGKILL one backend: the postmaster ends every session and recovers from the WAL
            # written before; what was only in the server's shared memory is gone.
            with pg.connect(dsn, autocommit=True) as victim:
                os.kill(victim.info.backend_pid, signal.SIGKILL)
            worker.join(60)
            assert stopped and not worker.is_alive()
        finally:
            _alter_system(dsn, RELOADED, reset=True)
            conn.close()
        with _reconnect(dsn, schema) as after:
            kept = {v.version: v.ballot_id for v in catalog.history(after)}
            after.commit()
        lost = [(v, b) for v, b in reported if kept.get(v) != b]
        assert lost == [], f"{len(lost)} of {len(reported)} reported commits lost, e.g. {lost[:3]}"
        assert answered == ["on"]
