"""One run drives a store at a time. A second run on a store another run was driving returned as
if done with the head far short (it found nothing awaited between two of the first's calls),
or filled the first loop's window; now it is refused in one line. The claim ends with the run
(a restart after it goes) or with its process. A run on a PostgreSQL store that exists is a
restart, as on a SQLite file that exists; a run that reaches its deadline or is stopped says
which on its `truncated` row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import labkit.remote.driver as driver
from labkit.remote import run, serve
from labkit.remote.store_claim import StoreBusy, claim

LOOSE_S = 30.0


@pytest.fixture(scope="module")
def slow() -> Iterator[str]:
    with serve(latency=0.05) as url:
        yield url


def _wait(condition: Callable[[], bool]) -> None:
    until = time.monotonic() + LOOSE_S
    while not condition():
        assert time.monotonic() < until, "not within the test's bound"
        time.sleep(0.01)


def _a_run_going(url: str, **where: Any) -> tuple[threading.Thread, threading.Event, dict]:
    """A run of 1,000 versions in a thread, stopped by the event; its result lands in the dict."""
    stop, out = threading.Event(), {}
    thread = threading.Thread(
        target=lambda: out.setdefault("run", run("ballot", url, ticks=1000, stop=stop, **where))
    )
    thread.start()
    return thread, stop, out


def test_a_second_run_on_a_store_being_driven_is_refused(slow: str, tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    thread, stop, out = _a_run_going(slow, store=store, name="first")
    try:
        _wait(store.exists)
        with pytest.raises(StoreBusy, match=f"another loop is driving store {store} now"):
            run("ballot", slow, ticks=5, store=store, name="second")
    finally:
        stop.set()
        thread.join(LOOSE_S)
    first = out["run"].trace.iloc[-1]
    assert first["event"] == "truncated" and first["reason"] == driver.STOPPED
    again = run("ballot", slow, ticks=3, store=store, name="first", deadline=10.0)
    assert again.trace["event"].iloc[0] == "restart"


def test_a_run_at_its_deadline_says_so(slow: str) -> None:
    result = run("ballot", slow, ticks=1000, deadline=0.5)
    last = result.trace.iloc[-1]
    assert last["event"] == "truncated" and last["reason"] == driver.DEADLINE
    assert result.summary.truncated


def test_the_claim_goes_with_the_process_that_held_it(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\n"
            "from labkit.remote.store_claim import claim\n"
            "with claim(Path(sys.argv[1]), None):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(60)\n",
            str(store),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(StoreBusy), claim(store, None):
            pass
    finally:
        holder.kill()
        holder.wait()
    with claim(store, None) as held:
        assert not held.restart  # the holder only claimed it; nothing made the store


def test_a_link_to_a_claimed_store_is_the_same_store(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    alias = tmp_path / "alias.db"
    alias.symlink_to(store)
    with claim(store, None), pytest.raises(StoreBusy), claim(alias, None):
        pass


def test_a_child_forked_during_a_run_does_not_keep_the_store(tmp_path: Path) -> None:
    """A child forked while a claim is held gets a copy of its descriptor, and an flock holds
    until every copy is closed: a notebook's forked worker kept a finished run's store busy."""
    store = tmp_path / "store.db"
    read, write = os.pipe()
    with claim(store, None):
        child = os.fork()
        if child == 0:  # the fork hooks have run by now
            os.write(write, b"x")
            time.sleep(LOOSE_S)
            os._exit(0)
        os.read(read, 1)
    try:
        with claim(store, None):
            pass
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(read)
        os.close(write)


@pytest.mark.postgres
def test_on_postgresql_one_run_at_a_time_and_a_second_is_a_restart(slow: str, pg_dsn: str) -> None:
    from psycopg.conninfo import make_conninfo

    from labkit.pg import instance as pg

    with pg.scratch_schema(pg_dsn, prefix="claim") as schema:
        dsn = make_conninfo(pg_dsn, options=pg.search_path_option(schema))
        thread, stop, out = _a_run_going(slow, dsn=dsn, name="first")
        try:
            with pg.connect(dsn, autocommit=True) as conn:
                _wait(lambda: conn.execute("SELECT to_regclass('wm_store')").fetchone()[0])
            with pytest.raises(StoreBusy, match="another loop is driving the PostgreSQL store"):
                run("ballot", slow, ticks=5, dsn=dsn, name="second")
            # the same tables found through a search path whose first schema is another, empty
            with pg.scratch_schema(pg_dsn, prefix="empty") as empty:
                other = make_conninfo(pg_dsn, options=f"-c search_path={empty},{schema}")
                with pytest.raises(StoreBusy, match="another loop is driving"):
                    run("ballot", slow, ticks=5, dsn=other, name="third")
        finally:
            stop.set()
            thread.join(LOOSE_S)
        assert out["run"].trace["event"].iloc[0] != "restart"
        again = run("ballot", slow, ticks=3, dsn=dsn, name="first", deadline=10.0)
        assert again.trace["event"].iloc[0] == "restart"
