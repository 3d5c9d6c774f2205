"""The store handle: a connection and its dialect, the dialect chosen once, when it is made.

Modelled on sqlite-utils' `Database`: `Store(conn)` wraps a sqlite3 or a psycopg connection and
is what every function below labkit's public entry points takes and passes on. A public entry
point (what notebooks and tests call) accepts either a connection or a `Store` and wraps it once
(`of`); nothing below it asks for the dialect again. Statements are written once, in SQLite's
placeholder style, and the handle runs them through its dialect (`labkit.backend`).

Where the backends truly differ, the two versions sit side by side in the module that owns the
difference (a mapping from backend name to each one's text or function, or one class per
backend) and the handle picks its own (`Store.pick`), rather than an `if` on the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from labkit import backend
from labkit.backend import BACKENDS, BackendName, Connection, Dialect

T = TypeVar("T")
R = TypeVar("R")


class Store:
    """A sqlite3 or psycopg connection (`conn`) and its `dialect`, chosen when the handle is
    made (`UnsupportedBackend`, in one line naming its type, for anything else)."""

    __slots__ = ("conn", "dialect")

    conn: Any
    dialect: Dialect

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dialect = backend.dialect(conn)  # refuses anything else, a Store too, in one line

    def __repr__(self) -> str:
        return f"Store({self.dialect.name}, {self.conn!r})"

    @property
    def name(self) -> BackendName:
        """The backend's name: "sqlite" or "postgres"."""
        return self.dialect.name

    def pick(self, per_backend: Mapping[str, T]) -> T:
        """This backend's entry of `per_backend` (both backends' versions side by side)."""
        return per_backend[self.dialect.name]

    def execute(self, statement: str, params: Any = ()) -> Any:
        """Run one statement written in SQLite's style; returns the cursor."""
        return self.dialect.execute(self.conn, statement, params)

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run `statement` once per row."""
        self.dialect.executemany(self.conn, statement, rows)

    def fetchall(self, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Every row of one read outside a write; on PostgreSQL the transaction the read opened
        is ended, so the session never idles inside one."""
        return self.dialect.fetchall(self.conn, statement, params)

    def insert_returning_id(self, statement: str, params: Any = ()) -> int:
        """Run an INSERT and return the new row's id."""
        return self.dialect.insert_returning_id(self.conn, statement, params)

    def atomic(self) -> AbstractContextManager[Any]:
        """One write transaction (a savepoint inside a caller's); yields the connection."""
        return self.dialect.atomic(self.conn)

    def reading(self) -> AbstractContextManager[Any]:
        """Reads outside a write, leaving the session as they found it; yields the connection."""
        return self.dialect.reading(self.conn)


def of(conn: Connection | Store) -> Store:
    """`conn` itself if it is a `Store`, else a new one around the connection: what a public
    entry point calls once, so that it accepts either."""
    return conn if isinstance(conn, Store) else Store(conn)


class ByBackend(dict[type, Callable[..., R]]):
    """One operation written per backend, side by side (`sqlite=`, `postgres=`), for a hot path:
    `op[type(conn)](conn, *args)` runs the version for the backend of `conn` (a connection, or a
    `Store`, which is unwrapped), with no handle made and one dict lookup per call. The version
    for a connection's type is found the first time the type is seen, as
    `labkit.backend.dialect` finds a dialect; anything else is refused in one line."""

    def __init__(self, **versions: Callable[..., R]) -> None:
        if set(versions) != set(BACKENDS):
            raise TypeError(f"ByBackend needs one version per backend: {', '.join(BACKENDS)}")
        super().__init__()
        self.versions = versions
        self[Store] = self._unwrapped

    def _unwrapped(self, handle: Store, *args: Any) -> R:
        """The version for a handle's backend, run with its connection."""
        return self.versions[handle.dialect.name](handle.conn, *args)

    def __missing__(self, kind: type) -> Callable[..., R]:
        version = self[kind] = self.versions[backend.dialect_of_type(kind).name]
        return version


def require(conn: Connection | Store, function: str, *supported: BackendName) -> Store:
    """`of(conn)` if `function` supports its backend, else `UnsupportedBackend` in one line."""
    handle = of(conn)
    if handle.dialect.name not in supported:
        backend.require(handle.conn, function, *supported)  # raises, naming both
    return handle
