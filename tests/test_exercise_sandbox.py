"""The learner-SQL sandbox: a wrong query is stopped by steps, wall time, value size or memory,
says so in one line, and leaves the connection and the process as it found them."""

from __future__ import annotations

import sqlite3

import pytest

from labkit import exercises as exs
from labkit.exercises.kit import Wrong
from labkit.exercises.sandboxes import sqlite as sandbox
from labkit.frontier import log as fr

RIGHT = (
    "SELECT COALESCE((SELECT MIN(id) - 1 FROM conversations WHERE channel_key = :shard "
    "AND id > :base AND status IN ('pending','leased','running','retrying')), "
    "(SELECT MAX(id) FROM conversations "
    "WHERE channel_key = :shard AND id > :base), :base)"
)
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "


def refused(sql: str, needle: str) -> str:
    """Check `sql` as the frontier answer: refused in one line containing `needle`."""
    fb = exs.frontier_sql_ex.check(sql)
    assert fb.status == "incorrect", fb
    assert needle in fb.message and "\n" not in fb.message, fb.message
    assert exs.frontier_sql_ex.check(RIGHT).passed  # every limit is per query, nothing sticks
    return fb.message


def test_endless_rows_are_not_fetched() -> None:
    refused(ENDLESS + "SELECT :shard || :base FROM c", "returned more than 10 rows")


@pytest.mark.timeout(30, method="thread")
def test_a_runaway_loop_is_stopped_by_the_step_budget(monkeypatch) -> None:
    monkeypatch.setattr(sandbox, "SECONDS", 600.0)  # so that the steps, not the clock, stop it
    refused(ENDLESS + "SELECT :shard || :base || COUNT(*) FROM c", "after 5,000,000 steps")


@pytest.mark.timeout(30, method="thread")
@pytest.mark.slow
def test_slow_steps_are_stopped_by_the_clock() -> None:
    # ~300,000 steps, far below the budget, each building and rewriting a 400 kB string:
    # about 30 s of work unstopped; the deadline ends it after SECONDS
    slow = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) "
        "SELECT :base + :shard + SUM(LENGTH(REPLACE(HEX(ZEROBLOB(200000 + x % 2)), '0', 'ab'))) "
        "FROM c"
    )
    msg = refused(slow, "your query ran longer than 2 s")
    assert msg.endswith("your query ran longer than 2 s, so SQLite stopped it")


def test_a_huge_string_is_refused() -> None:
    doubling = (
        "WITH RECURSIVE c(s, n) AS (SELECT 'x', 0 UNION ALL SELECT s || s, n + 1 FROM c "
        "WHERE n < 40) SELECT :base + :shard + MAX(LENGTH(s)) FROM c"
    )  # unstopped: a 2**40-byte string; a 2**29 one took 12 s and 2.8 GB
    refused(doubling, "built a string or blob over 1,000,000 bytes")


@pytest.mark.timeout(60, method="thread")
@pytest.mark.skipif(sandbox._HEAP is None, reason="this SQLite build hides its heap limit")
def test_a_query_that_holds_too_much_memory_is_stopped(monkeypatch) -> None:
    # On a loaded machine the sorter can take longer than SECONDS to reach HEAP_BYTES, and the
    # clock then stops the query first: lift the clock, so only the memory limit can stop it.
    monkeypatch.setattr(sandbox, "SECONDS", 600.0)
    # 400 rows of 900 kB each, all held by the sorter at once: ~360 MB unstopped
    sorting = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400) "
        "SELECT :base + :shard + COUNT(*) FROM (SELECT HEX(ZEROBLOB(450000)) || x AS y "
        "FROM c ORDER BY y)"
    )
    refused(sorting, f"needed more than {sandbox.HEAP_BYTES // 2**20} MB of memory")


@pytest.mark.timeout(60, method="thread")
@pytest.mark.skipif(sandbox._HEAP is None, reason="this SQLite build hides its heap limit")
def test_the_process_heap_limits_are_restored(monkeypatch) -> None:
    monkeypatch.setattr(sandbox, "SECONDS", 600.0)  # the memory limit, not the clock, stops it
    probe = sqlite3.connect(":memory:")
    probe.execute("PRAGMA soft_heap_limit = 123456789")
    try:
        with pytest.raises(Wrong, match="memory"):
            sandbox.run(probe, "SELECT " + ", ".join(["HEX(ZEROBLOB(450000))"] * 200))
        assert probe.execute("PRAGMA hard_heap_limit").fetchone() == (0,)
        assert probe.execute("PRAGMA soft_heap_limit").fetchone() == (123456789,)
    finally:
        probe.execute("PRAGMA soft_heap_limit = 0")


def test_the_connection_is_left_as_it_was() -> None:
    conn = fr.connect()
    before = conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    with pytest.raises(Wrong, match="may only read"):
        sandbox.run(conn, "DELETE FROM conversations")
    with pytest.raises(Wrong, match="over 1,000,000 bytes"):
        sandbox.run(conn, "SELECT HEX(ZEROBLOB(600000))")
    assert conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == before
    conn.execute("DELETE FROM conversations")  # no authorizer left behind
    assert conn.execute("SELECT HEX(ZEROBLOB(600000))").fetchone()[0].startswith("00")


def test_writes_only_when_the_checker_allows_them() -> None:
    conn = fr.connect()
    sandbox.run(conn, "CREATE INDEX i ON conversations(id)", what="your index", writes=True)
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'i'").fetchone() == (1,)
