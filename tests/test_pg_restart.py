"""A notebook's shared PostgreSQL server that was stopped (by `stop_shared_server`, or because
its process died) serves the next use again: a fresh server in the same place, so the DSN a
cell holds keeps working. Where that cannot be, the error is one line that says what to do."""

from __future__ import annotations

import os
import signal
import time

import pytest

from labkit.pg import instance
from labkit.pg.watchdog import alive, postmaster_pid


@pytest.fixture
def shared(monkeypatch):
    """The embedded shared server of this process, stopped again afterwards."""
    instance.stop_shared_server()  # one started from LABKIT_PG_DSN by an earlier test: let go
    monkeypatch.delenv(instance.ENV, raising=False)
    try:
        yield instance.shared_server()
    finally:
        instance.stop_shared_server()


def _answers(dsn: str) -> int:
    with instance.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT 41 + 1").fetchone()[0]


def _kill_hard(pgdata) -> None:
    pid = postmaster_pid(pgdata)
    assert pid is not None and alive(pid)
    os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + 10
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(pid)


@pytest.mark.postgres
def test_a_killed_shared_server_is_started_again_under_the_same_dsn(shared, capsys) -> None:
    pgdata = instance._shared["pgdata"]
    assert _answers(shared.dsn) == 42
    _kill_hard(pgdata)
    assert _answers(shared.dsn) == 42  # the next use: a fresh server, the old DSN
    assert instance.RESTARTED in capsys.readouterr().out
    again = instance.shared_server()
    assert again.dsn == shared.dsn and instance._shared["pgdata"] == pgdata
    new_pid = postmaster_pid(pgdata)
    assert new_pid is not None and alive(new_pid)


@pytest.mark.postgres
def test_a_stopped_shared_server_is_started_again_by_its_next_use(shared) -> None:
    assert "is stopped" in instance.stop_shared_server()
    assert "No PostgreSQL server" in instance.stop_shared_server()  # twice is fine
    with instance.scratch_schema(shared.dsn) as schema:  # what a lesson's cell does first
        assert schema.startswith("wb_")
    assert instance.shared_server().dsn == shared.dsn
    _kill_hard(instance._shared["pgdata"])
    # a dead server is not "running": stopping it says so and leaves nothing behind
    assert "No PostgreSQL server" in instance.stop_shared_server()
    assert _answers(shared.dsn) == 42


@pytest.mark.postgres
def test_a_stale_dsn_that_cannot_be_served_again_fails_in_one_line(shared, monkeypatch) -> None:
    """The place is taken when the fresh server starts: it runs elsewhere, and an object
    holding the old DSN is told to be made again, in one line, not with a traceback."""
    old = shared.dsn
    instance.stop_shared_server()
    anywhere = instance._fresh_dir
    monkeypatch.setattr(instance, "_fresh_dir", lambda at: anywhere(None))
    fresh = instance.shared_server()
    assert fresh.dsn != old and _answers(fresh.dsn) == 42
    with pytest.raises(instance.PgUnavailable) as caught:
        instance.connect(old)
    said = str(caught.value)
    assert "was stopped" in said and "re-run the cell that made" in said
    assert caught.value._render_traceback_() == [f"PgUnavailable: {said}"]
    assert "\n" not in said


def test_an_unknown_dsn_that_does_not_answer_is_not_restarted(tmp_path) -> None:
    dsn = f"postgresql://postgres:@/postgres?host={tmp_path}"
    with pytest.raises(instance.PgUnavailable) as caught:
        instance.connect(dsn, timeout=1)
    assert "refused the connection" in str(caught.value)
    assert "server" not in instance._shared or instance._shared["server"].dsn != dsn
