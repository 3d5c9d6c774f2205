"""One ballot store on either backend, for tests that run the same rule on SQLite and PostgreSQL.

A `Store` opens new connections to one store: a SQLite file in the test's temporary directory,
or a fresh schema on the session's PostgreSQL server (the `postgres` marker; the server is
started only when a PostgreSQL case runs). `open_store(request, backend)` builds one from a
fixture request; every connection it opened is closed when the test ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from labkit import backend, db

BACKENDS = ("sqlite", pytest.param("postgres", marks=pytest.mark.postgres))


@dataclass
class Store:
    """New connections to one store; `backend` is "sqlite" or "postgres"."""

    backend: str
    _open: Callable[[], Any]
    opened: list[Any] = field(default_factory=list)

    def connect(self) -> Any:
        """A new connection to the same store (a restarted process would open one)."""
        conn = self._open()
        self.opened.append(conn)
        return conn

    def close(self) -> None:
        for conn in self.opened:
            conn.close()


def open_store(request: pytest.FixtureRequest, backend: str) -> Store:
    """A fresh, empty store for the requesting test on `backend`, closed at its end."""
    if backend == "sqlite":
        path = request.getfixturevalue("tmp_path") / "wm.db"
        store = Store("sqlite", lambda: db.connect(path))
    else:
        from labkit.pg import instance as pg

        dsn = request.getfixturevalue("pg_dsn")
        schema = request.getfixturevalue("pg_schema")
        store = Store("postgres", lambda: pg.connect(dsn, options=pg.search_path_option(schema)))
    request.addfinalizer(store.close)
    return store


def rows(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every row of a read written in SQLite's placeholder style, on either backend (rendered by
    the connection's dialect); on PostgreSQL the read's transaction is ended, so the loop's next
    write finds the connection idle."""
    d = backend.dialect(conn)
    with d.reading(conn):
        return [tuple(r) for r in d.execute(conn, sql, params).fetchall()]


def in_transaction(conn: Any) -> bool:
    """Whether the connection has a transaction open (sqlite3 or psycopg)."""
    if not backend.dialect(conn).is_postgres:
        return conn.in_transaction
    from psycopg.pq import TransactionStatus

    return conn.info.transaction_status != TransactionStatus.IDLE
