"""Several workers on one file-backed log: they wait for the write lock instead of failing.

Each thread has its own connection (as separate worker processes would). A read-then-write
under a deferred transaction cannot wait for the lock (SQLite refuses the upgrade at once
with "database is locked"); dispatch and summarize must take the write lock up front.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from labkit.frontier import log as fr
from labkit.frontier import summarizer as sm

WORKERS = 6


def run_workers(target: Callable[[int], None], workers: int = WORKERS) -> list[BaseException]:
    """Start `workers` threads on `target(k)` together; return whatever they raised."""
    errors: list[BaseException] = []
    gate = threading.Barrier(workers)

    def body(k: int) -> None:
        try:
            gate.wait()
            target(k)
        except BaseException as exc:  # collected, asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def test_concurrent_dispatch_hands_out_every_row_exactly_once(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    setup = fr.connect(path)
    rows = 400
    for i in range(rows):
        fr.enqueue(setup, "main" if i % 3 else "side", i % 7)
    setup.commit()
    got: list[list[int]] = [[] for _ in range(WORKERS)]

    def worker(k: int) -> None:
        conn = fr.connect(path)
        while (row_id := fr.dispatch_next(conn)) is not None:
            got[k].append(row_id)
            fr.mark_delivered(conn, row_id)
        conn.close()

    errors = run_workers(worker)
    assert errors == []
    handed = Counter(i for ids in got for i in ids)
    assert sorted(handed) == list(range(1, rows + 1))
    assert set(handed.values()) == {1}
    assert setup.execute("SELECT DISTINCT status FROM conversations").fetchall() == [("delivered",)]
    # each worker still saw its own picks in dispatch order
    priority = dict(setup.execute("SELECT id, priority FROM conversations").fetchall())
    for ids in got:
        assert ids == sorted(ids, key=lambda i: (priority[i], i))


def test_concurrent_summarizers_wait_and_chain_without_gaps(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    setup = fr.connect(path)
    rows = 240
    for i in range(rows):
        fr.enqueue(setup, "main", 5 - i % 3)
    setup.commit()

    def worker(k: int) -> None:
        conn = fr.connect(path)
        while (row_id := fr.dispatch_next(conn)) is not None:
            (fr.mark_failed if row_id % 11 == 0 else fr.mark_delivered)(conn, row_id)
            for policy in fr.POLICIES:
                sm.summarize_range(conn, "main", policy)
        for policy in fr.POLICIES:
            sm.summarize_range(conn, "main", policy)
        conn.close()

    errors = run_workers(worker)
    assert errors == []
    assert sm.coverage_end(setup, "main", "frontier") == rows
    assert sm.chain_problems(setup, "main", "frontier") == []
    assert sm.orphans(setup, "main", "frontier") == []
    items = Counter(
        r[0]
        for r in setup.execute(
            "SELECT si.conversation_id FROM summary_items AS si "
            "JOIN summaries AS s ON s.id = si.summary_id WHERE s.policy = 'frontier'"
        )
    )
    assert sorted(items) == list(range(1, rows + 1)) and set(items.values()) == {1}


def test_atomic_nests_inside_a_callers_transaction(tmp_path: Path) -> None:
    conn = fr.connect(str(tmp_path / "log.db"))
    conn.execute("BEGIN")
    row_id = fr.enqueue(conn, "main", 1)
    assert fr.dispatch_next(conn) == row_id
    conn.rollback()  # the caller's transaction owns both writes
    assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0] == 0


def test_a_held_write_lock_makes_dispatch_wait_not_fail(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    fr.enqueue(fr.connect(path), "main", 1)
    holder = sqlite3.connect(path, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.3, holder.commit)
    released.start()
    waiter = sqlite3.connect(path, timeout=5)
    assert fr.dispatch_next(waiter) == 1  # waited ~0.3 s for the lock
    released.join()
    assert fr.status_of(waiter, 1) == "running"
