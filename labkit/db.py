"""Opening SQLite, one way for the whole workbook, and the transactions every writer uses.

`connect` gives an autocommit connection (transactions are explicit: `immediate`, `atomic`)
with a busy timeout, and WAL on a file; opening waits out a concurrent opener like any other
statement, and an error opening a file names it. `connect_readonly` opens an existing file
read-only through a quoted `file:` URI.
`FileIdentity` notices that the path no longer names the file a connection opened.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

BUSY_TIMEOUT_MS = 10_000
# A write-ahead log is a 32-byte header, then frames (one per page written by a commit).
_WAL_HEADER_BYTES = 32
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class DatabaseReplacedError(RuntimeError):
    """The database file a connection opened was deleted or replaced behind its back."""


class WalLostError(DatabaseReplacedError):
    """The write-ahead log of an open database was deleted or replaced: the commits it held are
    only in the file this connection still has open (`FileIdentity.rescue` saves them)."""


def connect(
    path: str | Path = ":memory:", *, timeout_ms: int = BUSY_TIMEOUT_MS
) -> sqlite3.Connection:
    """Open `path` (default: a private in-memory database) in autocommit mode.

    A writer waits up to `timeout_ms` for the lock; a file is switched to WAL so readers never
    block the writer. Several processes opening a fresh file at once wait for each other
    (SQLite's busy handler does not cover the journal-mode switch, so it is retried here).
    Every error opening a file names it, in one line.
    """
    in_memory = str(path) == ":memory:"
    if not in_memory:
        _refuse_emptied(Path(path))
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=timeout_ms / 1000)
    except sqlite3.Error as exc:
        raise _named(path, exc) from exc
    conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
    if not in_memory:
        try:
            _retry_busy(conn, "PRAGMA journal_mode = WAL", timeout_ms)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_busy(exc):
                raise _named(
                    path, exc, f"could not switch to WAL within {timeout_ms} ms: {exc}"
                ) from exc
            raise _named(path, exc) from exc
    return conn


def _named(path: str | Path, exc: sqlite3.Error, message: str = "") -> sqlite3.Error:
    """`exc` again, same type and SQLite error code, its one line led by the file's path."""
    named = type(exc)(f"{path}: {message or exc}")
    for attr in ("sqlite_errorcode", "sqlite_errorname"):
        if hasattr(exc, attr):
            setattr(named, attr, getattr(exc, attr))
    return named


def _refuse_emptied(path: Path) -> None:
    """Refuse a database file emptied behind SQLite's back while its write-ahead log still
    holds commits: SQLite would open it as a new, empty database and delete the log.

    This looks without a lock (SQLite's first lock on an empty file is what deletes the log),
    so the order of the two looks is what makes it exact: the log first, then the file. A
    creator in another process writes the file's first page (its switch to WAL) before the log
    exists, and SQLite never empties a file again, so a file seen empty after its log was seen
    holding frames was emptied from outside. Looked at the other way round, a creator's file
    could be seen still empty and, a moment later, its first commit in the log (issue 35).
    """
    try:
        wal = Path(f"{path}-wal").stat().st_size
        main = path.stat().st_size
    except (FileNotFoundError, NotADirectoryError):
        return
    if main == 0 and wal > _WAL_HEADER_BYTES:  # a log of its header alone holds no commit
        raise DatabaseReplacedError(
            f"{path}: the database file is empty but its write-ahead log holds {wal} bytes of"
            " commits (the file was emptied from outside); refusing to open it as a new database"
        )


def connect_readonly(path: str | Path, *, timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open an existing database file read-only; never creates a file.

    The absolute path is percent-quoted into the `file:` URI, so names with `#`, `?` or `%`
    open that very file instead of a different one.
    """
    target = Path(path).resolve()
    if not target.is_file():
        raise FileNotFoundError(f"{path}: no such SQLite file")
    uri = f"file:{quote(str(target))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout_ms / 1000)
    except sqlite3.Error as exc:
        raise _named(path, exc) from exc
    conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
    return conn


def _retry_busy(conn: sqlite3.Connection, sql: str, timeout_ms: int) -> None:
    """Run `sql`, retrying with backoff while the database is busy, up to `timeout_ms`."""
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 0.001
    while True:
        try:
            conn.execute(sql).fetchall()
            return
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if not _is_busy(exc) or left <= 0:
                raise
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.05)


def _is_busy(exc: sqlite3.Error) -> bool:
    """True for "database is locked/busy": another connection holds a lock we need."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY_CODES


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


@dataclass(frozen=True)
class FileIdentity:
    """Which files a path named when a connection opened it: (device, inode) of the main file
    and of its write-ahead log.

    A WAL database deleted, replaced or emptied while open, or whose `-wal` file was deleted or
    replaced, keeps accepting commits that are lost on close; `check` before a write turns that
    into a clear refusal.
    """

    path: str
    device: int
    inode: int
    wal: tuple[int, int] | None = None

    @classmethod
    def of(cls, conn: sqlite3.Connection) -> FileIdentity | None:
        """The identity of `conn`'s main database file and WAL; None for an in-memory database."""
        path = next(
            (row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), ""
        )
        if not path:
            return None
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise DatabaseReplacedError(
                f"{path}: the open database file no longer exists"
            ) from None
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            return cls(path, st.st_dev, st.st_ino)
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # opens the -wal file
        try:
            wal = os.stat(f"{path}-wal")
        except FileNotFoundError:
            raise WalLostError(
                f"{path}-wal: the write-ahead log of the database just opened is gone"
                " (deleted from outside); refusing to use it, reopen it"
            ) from None
        return cls(path, st.st_dev, st.st_ino, (wal.st_dev, wal.st_ino))

    def check(self) -> None:
        """Raise `DatabaseReplacedError` unless the path still names the files that were opened
        and the main file was not emptied."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise DatabaseReplacedError(
                f"{self.path}: the database file was deleted after it was opened;"
                " refusing to write (a commit would be lost), reopen it"
            ) from None
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            raise DatabaseReplacedError(
                f"{self.path}: the database file was replaced by another file after it was"
                " opened; refusing to write, reopen it"
            )
        if st.st_size == 0:  # a WAL database always has its header page once opened
            raise DatabaseReplacedError(
                f"{self.path}: the database file was emptied after it was opened;"
                " refusing to write (a commit would be lost)"
            )
        if self.wal is None:
            return
        try:
            wal = os.stat(f"{self.path}-wal")
        except FileNotFoundError:
            raise WalLostError(
                f"{self.path}-wal: the write-ahead log was deleted while the database was open;"
                " refusing to write (a commit would be lost), reopen it"
            ) from None
        if (wal.st_dev, wal.st_ino) != self.wal:
            raise WalLostError(
                f"{self.path}-wal: the write-ahead log was replaced while the database was open;"
                " refusing to write, reopen it"
            )

    @staticmethod
    def rescue(conn: sqlite3.Connection) -> None:
        """After a `WalLostError`: copy every commit of the log this connection still has open
        into the main file (a full checkpoint), so the commits already reported survive it."""
        conn.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
