"""One `run` at a time on a store: the claim a run holds on its store while it goes, and
whether the store was there before it (then the run is a restart).

A second loop on a store another loop is driving would repair or reserve under it (a full
window for the first) and, whenever the first had nothing awaited, find nothing to wait for and
return as if done. So a run claims its store before it opens it, and a second claim is refused
in one line. The claim ends with the run, or with its process: on SQLite an exclusive `flock`
on a file beside the store (`<store>.run-lock`, kept: removing a lock file races with the next
claim), which the OS drops when the process dies; on PostgreSQL a session advisory lock keyed
by the store's schema (where the search path finds its tables, else the current schema), which
the server drops when the session ends. Elsewhere than POSIX a SQLite store is not claimed.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The store's schema: where its tables are found on the session's search path, else where they
# would be made (the current schema). One key per such schema, apart from the catalog's own
# transaction locks (`versions_pg.LOCK_SQL`).
STORE_SCHEMA_PG_SQL = (
    "SELECT coalesce((SELECT n.nspname FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.oid = coalesce(to_regclass('wm_store'), to_regclass('remote_head'))),"
    " current_schema(), '')"
)
CLAIM_PG_SQL = "SELECT pg_try_advisory_lock(hashtext('labkit.remote.run ' || %s))"
RELEASE_PG_SQL = "SELECT pg_advisory_unlock(hashtext('labkit.remote.run ' || %s))"
# a store that holds a loop's tables already: the catalog's (safe designs) or the head row's
EXISTS_PG_SQL = (
    "SELECT to_regclass('wm_store') IS NOT NULL OR to_regclass('remote_head') IS NOT NULL"
)


class StoreBusy(RuntimeError):
    """Another loop is driving this store now."""


@dataclass(frozen=True)
class Claim:
    """A store claimed for one run; `restart` if it existed before the run."""

    restart: bool


def lock_path(store: Path) -> Path:
    """The file beside a SQLite store that a run's claim locks: beside the file itself, so a
    symbolic link to the store names the same lock."""
    store = store.resolve()
    return store.with_name(store.name + ".run-lock")


# The claims this process holds. A forked child gets a copy of each descriptor, and an flock
# holds until every copy is closed: a child forked while a run went would keep the store
# claimed after the run. So every child closes its copies at once.
_HELD: set[int] = set()


def _forget_in_child() -> None:
    for fd in _HELD:
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


@contextlib.contextmanager
def claim(store: Path | None, dsn: str | None) -> Iterator[Claim]:
    """Hold the SQLite file `store` or the PostgreSQL store at `dsn` for one run; `StoreBusy`
    in one line if another run holds it."""
    if dsn is not None:
        with _claim_pg(dsn) as held:
            yield held
    else:
        assert store is not None, "a run has a SQLite store or a dsn"
        with _claim_file(store) as held:
            yield held


@contextlib.contextmanager
def _claim_file(store: Path) -> Iterator[Claim]:
    try:
        import fcntl
    except ImportError:  # not POSIX: no claim
        yield Claim(restart=store.exists())
        return
    path = lock_path(store)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:  # as the store's own open would be (`driver._build`)
        raise sqlite3.OperationalError(
            f"run(): store {store} cannot be opened: {exc.strerror}"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreBusy(
                f"run(): another loop is driving store {store} now; one loop at a time"
            ) from None
        _HELD.add(fd)
        yield Claim(restart=store.exists())
    finally:
        _HELD.discard(fd)
        os.close(fd)  # drops the lock


@contextlib.contextmanager
def _claim_pg(dsn: str) -> Iterator[Claim]:
    from labkit.pg.instance import connect

    conn: Any = connect(dsn, autocommit=True)
    try:
        schema = conn.execute(STORE_SCHEMA_PG_SQL).fetchone()[0]
        if not conn.execute(CLAIM_PG_SQL, (schema,)).fetchone()[0]:
            raise StoreBusy(
                "run(): another loop is driving the PostgreSQL store in this schema now; one "
                "loop at a time"
            )
        try:
            yield Claim(restart=bool(conn.execute(EXISTS_PG_SQL).fetchone()[0]))
        finally:
            with contextlib.suppress(Exception):  # the session's end drops it anyway
                conn.execute(RELEASE_PG_SQL, (schema,))
    finally:
        conn.close()
