"""The one seam between SQLite and PostgreSQL: a dialect chosen from the connection, once.

The dialect is chosen when a `labkit.store.Store` (a connection and its dialect) is made, at a
public entry point; everything below it talks to the handle, never to the connection's type.
Statements are written once, in SQLite's placeholder style (`?` or `:name`); `Dialect.sql`
renders them for the connection's driver. The two backends' ways of running them are two
classes side by side (`SQLiteDialect`, `PostgresDialect`). Only what truly differs (DDL, locks,
the snapshot fence, guarded writes) is written per backend, side by side, in the module that
owns it: tables once each, as specs (`labkit.schema`). psycopg is imported only when a psycopg
connection is seen, so SQLite-only work never loads it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

BackendName = Literal["sqlite", "postgres"]
BACKENDS: tuple[BackendName, ...] = ("sqlite", "postgres")


class Connection(Protocol):
    """What every public function here accepts: a `sqlite3.Connection` or a psycopg one."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...

    def close(self) -> None: ...


class UnsupportedBackend(TypeError):
    """A function was handed a connection of a backend it does not support (one line)."""


# A statement's tokens: string literals and quoted names keep their `?` and `:name`, `?` and
# `:name` elsewhere are placeholders, and every `%` (in a literal too: psycopg reads the whole
# text for placeholders, quotes or not) is doubled.
_TOKENS = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")|(\?)|(?<![:\w]):([A-Za-z_]\w*)|(%)""")


@lru_cache(maxsize=512)
def _to_pyformat(sql: str) -> str:
    """`sql` in SQLite's placeholder style rendered in psycopg's (`%s`, `%(name)s`, `%%`)."""

    def one(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1).replace("%", "%%")
        if m.group(2):
            return "%s"
        if m.group(3):
            return f"%({m.group(3)})s"
        return "%%"

    return _TOKENS.sub(one, sql)


def by_position(statement: str, names: Sequence[str]) -> str:
    """`statement` (SQLite's style) with each `:name` written `?N`, N its place in `names`
    (from 1), so that SQLite binds a tuple: the sqlite3 module binds a dict name by name, which
    cost a hot lookup about a tenth of its time. Nothing else changes (literals and quoted
    names are kept), so neither does the plan; a bare `?` or a name not in `names` is refused."""
    place = {name: f"?{i}" for i, name in enumerate(names, 1)}

    def one(m: re.Match[str]) -> str:
        if m.group(2) or (m.group(3) and m.group(3) not in place):
            raise ValueError(
                f"by_position: {m.group(0)!r} in the statement is not one of :{', :'.join(names)}"
            )
        return place[m.group(3)] if m.group(3) else m.group(0)

    return _TOKENS.sub(one, statement)


@dataclass(frozen=True)
class Dialect:
    """How one backend runs the workbook's statements; `name` is "sqlite" or "postgres".

    The two backends' ways sit side by side below, one class each (`SQLiteDialect`,
    `PostgresDialect`): what differs is a method of each, never an `if` on the backend. Code
    above this module holds a `labkit.store.Store` (a connection and its dialect, chosen once)
    rather than asking for the dialect again.
    """

    name: BackendName
    # Kept for callers outside labkit; labkit itself asks the dialect's methods, never this.
    is_postgres: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_postgres", self.name == "postgres")

    def sql(self, statement: str) -> str:
        """`statement` (written once, SQLite placeholder style) as this backend runs it."""
        raise NotImplementedError

    def execute(self, conn: Any, statement: str, params: Any = ()) -> Any:
        """Run one statement written in SQLite's style on `conn`; returns the cursor."""
        return conn.execute(self.sql(statement), params)

    def executemany(self, conn: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run `statement` once per row."""
        raise NotImplementedError

    def fetchall(self, conn: Any, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Every row of one read outside a write (`reading`), as tuples."""
        raise NotImplementedError

    def insert_returning_id(self, conn: Any, statement: str, params: Any = ()) -> int:
        """Run an INSERT and return the new row's id (`RETURNING id` is valid on both)."""
        return int(self.execute(conn, statement + " RETURNING id", params).fetchone()[0])

    def atomic(self, conn: Any) -> AbstractContextManager[Any]:
        """One write transaction on `conn` (a savepoint inside a caller's)."""
        raise NotImplementedError

    def reading(self, conn: Any) -> AbstractContextManager[Any]:
        """Reads outside a write, leaving the session as they found it."""
        raise NotImplementedError


class SQLiteDialect(Dialect):
    """SQLite's way: statements run as written; a write is BEGIN IMMEDIATE."""

    def sql(self, statement: str) -> str:
        return statement

    def executemany(self, conn: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        conn.executemany(statement, rows)

    def fetchall(self, conn: Any, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return conn.execute(statement, params).fetchall()  # a read needs no transaction

    @contextmanager
    def atomic(self, conn: Any) -> Iterator[Any]:
        """BEGIN IMMEDIATE, or a savepoint inside a caller's transaction (`labkit.db.atomic`)."""
        from labkit.db import atomic

        with atomic(conn):
            yield conn

    @contextmanager
    def reading(self, conn: Any) -> Iterator[Any]:
        """Nothing to do: a read opens no transaction that could be left open."""
        yield conn


class PostgresDialect(Dialect):
    """PostgreSQL's way (psycopg): placeholders rendered `%s`/`%(name)s`; a write is psycopg's
    `transaction()`; reads end the transaction they opened."""

    def sql(self, statement: str) -> str:
        return _to_pyformat(statement)

    def executemany(self, conn: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        """psycopg has `executemany` on cursors only."""
        with conn.cursor() as cur:
            cur.executemany(self.sql(statement), list(rows))

    def fetchall(self, conn: Any, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        with self.reading(conn):
            return [tuple(r) for r in self.execute(conn, statement, params).fetchall()]

    @contextmanager
    def atomic(self, conn: Any) -> Iterator[Any]:
        """psycopg's `transaction()` (a savepoint inside a caller's transaction)."""
        with conn.transaction():
            yield conn

    @contextmanager
    def reading(self, conn: Any) -> Iterator[Any]:
        """If no transaction was open, the one the reads opened is ended, so the session never
        sits idle in a transaction."""
        from psycopg.pq import TransactionStatus

        idle = conn.info.transaction_status == TransactionStatus.IDLE
        try:
            yield conn
        finally:
            if idle and conn.info.transaction_status != TransactionStatus.IDLE:
                conn.rollback()  # only reads ran: nothing to keep


SQLITE: Dialect = SQLiteDialect("sqlite")
POSTGRES: Dialect = PostgresDialect("postgres")


# Each connection type's dialect, found once: `dialect` is asked on every hot call.
_DIALECT_OF_TYPE: dict[type, Dialect] = {}


def dialect(conn: object) -> Dialect:
    """The dialect of `conn`: SQLite for a `sqlite3.Connection`, PostgreSQL for psycopg's.

    Anything else is refused in one line naming its type.
    """
    try:
        return _DIALECT_OF_TYPE[type(conn)]
    except KeyError:
        return dialect_of_type(type(conn))


def dialect_of_type(kind: type) -> Dialect:
    """`dialect` for a connection of type `kind`, worked out the first time the type is seen."""
    found = _DIALECT_OF_TYPE.get(kind)
    if found is None:
        found = _DIALECT_OF_TYPE[kind] = _dialect_of_type(kind)
    return found


def _dialect_of_type(kind: type) -> Dialect:
    """`dialect` for a connection of type `kind`, worked out the first time one is seen."""
    if issubclass(kind, sqlite3.Connection):
        return SQLITE
    module = kind.__module__ or ""
    if module.split(".")[0] == "psycopg":
        return POSTGRES
    raise UnsupportedBackend(
        f"expected a sqlite3 or psycopg connection, got {kind.__module__}.{kind.__qualname__}"
    )


def require(conn: object, function: str, *supported: BackendName) -> Dialect:
    """`dialect(conn)` if `function` supports it, else `UnsupportedBackend` in one line."""
    found = dialect(conn)
    if found.name not in supported:
        raise UnsupportedBackend(
            f"{function} works on {' and '.join(supported)} only; it was handed a "
            f"{found.name} connection"
        )
    return found
