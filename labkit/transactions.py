"""SQLite transactions that take the write lock up front, shared by the log and the catalog."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the body in one `BEGIN IMMEDIATE` transaction: commit on success, roll back on error.

    IMMEDIATE takes the write lock up front, so a check made inside the body still holds when
    the body writes, even with other processes on the same file; and it waits out the busy
    timeout, where a read-then-write in a deferred transaction fails with "database is locked".
    """
    if conn.in_transaction:
        raise RuntimeError("connection already has an open transaction; commit it first")
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


@contextmanager
def atomic(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`immediate` outside a transaction; inside a caller's, a SAVEPOINT that nests in it."""
    if not conn.in_transaction:
        with immediate(conn):
            yield conn
        return
    conn.execute("SAVEPOINT labkit_atomic")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK TO labkit_atomic")
        conn.execute("RELEASE labkit_atomic")
        raise
    conn.execute("RELEASE labkit_atomic")
