"""labkit.db: one opener for every SQLite file, a read-only opener that quotes its path,
opening that waits for concurrent openers, and the check that the file is still the one opened."""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from labkit import db

ODD_NAMES = ("run#1.db", "what?.db", "100%.db")


def test_connect_is_autocommit_with_a_busy_timeout_and_wal_on_files(tmp_path: Path) -> None:
    mem = db.connect()
    assert mem.isolation_level is None
    mem.execute("CREATE TABLE t (x)")
    mem.execute("INSERT INTO t VALUES (1)")
    assert not mem.in_transaction  # no implicit transaction left open by a DML statement
    f = db.connect(tmp_path / "f.db", timeout_ms=1234)
    assert f.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert f.execute("PRAGMA busy_timeout").fetchone()[0] == 1234


@pytest.mark.parametrize("name", ODD_NAMES)
def test_readonly_opens_that_very_file_and_creates_none(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    w = db.connect(path)
    w.execute("CREATE TABLE marker (name TEXT)")
    w.execute("INSERT INTO marker VALUES (?)", (name,))
    w.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    ro = db.connect_readonly(path)
    assert ro.execute("SELECT name FROM marker").fetchall() == [(name,)]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        ro.execute("INSERT INTO marker VALUES ('x')")
    ro.close()
    sidecars = {f"{name}-wal", f"{name}-shm"}  # WAL's own files of that same database
    assert set(p.name for p in tmp_path.iterdir()) - sidecars == set(before)  # no stray file


@pytest.mark.parametrize("name", ODD_NAMES)
def test_readonly_on_a_missing_odd_name_creates_nothing(tmp_path: Path, name: str) -> None:
    (tmp_path / "run").write_bytes(b"")  # what an unquoted 'run#1.db' URI would have opened
    with pytest.raises(FileNotFoundError, match=name.replace("?", r"\?")):
        db.connect_readonly(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_atomic_nests_in_a_callers_transaction_and_immediate_refuses_to() -> None:
    conn = db.connect()
    conn.execute("CREATE TABLE t (x)")
    conn.execute("BEGIN")
    with pytest.raises(ZeroDivisionError), db.atomic(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        1 / 0  # noqa: B018 - the body fails: only the savepoint is rolled back
    with db.atomic(conn):
        conn.execute("INSERT INTO t VALUES (2)")
    assert conn.in_transaction
    with pytest.raises(RuntimeError, match="open transaction"), db.immediate(conn):
        pass
    conn.commit()
    assert conn.execute("SELECT x FROM t").fetchall() == [(2,)]


def test_file_identity_notices_a_deleted_or_replaced_file(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    conn = db.connect(path)
    ident = db.FileIdentity.of(conn)
    assert ident is not None and ident.path == str(path)
    ident.check()
    db.connect(tmp_path / "other.db").close()
    os.replace(tmp_path / "other.db", path)  # a restore that swaps in another file
    with pytest.raises(db.DatabaseReplacedError, match="replaced by another file"):
        ident.check()
    path.unlink()
    with pytest.raises(db.DatabaseReplacedError, match="deleted after it was opened"):
        ident.check()
    assert db.FileIdentity.of(db.connect()) is None  # in memory: nothing to check


# --- concurrent open ----------------------------------------------------------------------


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """A plain connection holding the write lock on a fresh rollback-journal file.

    Switching to WAL needs that lock, and SQLite reports "database is locked" at once,
    without calling the busy handler: exactly what a concurrent opener runs into.
    """
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE early (x)")
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_opening_waits_for_a_concurrent_writer_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    holder = _hold_write_lock(path)
    release = threading.Timer(0.2, holder.commit)
    release.start()
    conn = db.connect(path)  # retried until the holder commits
    release.join()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_opening_past_the_timeout_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "stuck.db"
    holder = _hold_write_lock(path)
    with pytest.raises(sqlite3.OperationalError, match=r"stuck\.db: could not switch to WAL"):
        db.connect(path, timeout_ms=50)
    holder.rollback()


OPENERS, ROUNDS = 8, 12


def _open_fresh_files(directory: str, barrier: object, errors: object) -> None:
    """One of OPENERS processes: each round, open the same fresh file as all the others at once."""
    from labkit.catalog.loop import WatermarkLoop

    for r in range(ROUNDS):
        barrier.wait()  # type: ignore[attr-defined]
        try:
            loop = WatermarkLoop(db.connect(Path(directory) / f"round{r}.db"), window=OPENERS)
            loop.reserve()
            loop.conn.close()
        except Exception as exc:  # reported to the parent, which fails the test with it
            errors.put(f"round {r}: {type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


def test_processes_opening_a_fresh_file_at_once_all_wait_and_succeed(tmp_path: Path) -> None:
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    barrier, errors = ctx.Barrier(OPENERS, timeout=60), ctx.Queue()
    procs = [
        ctx.Process(target=_open_fresh_files, args=(str(tmp_path), barrier, errors))
        for _ in range(OPENERS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    assert [p.exitcode for p in procs] == [0] * OPENERS
    for r in range(ROUNDS):  # every opener reserved exactly one ballot on every file
        conn = db.connect(tmp_path / f"round{r}.db")
        assert conn.execute("SELECT COUNT(*) FROM wm_ballots").fetchone()[0] == OPENERS


def test_opening_a_file_that_is_not_a_database_names_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("plain text\n" * 100)
    with pytest.raises(sqlite3.DatabaseError, match=r"notes\.txt: file is not a database"):
        db.connect(path)
    assert path.read_text() == "plain text\n" * 100


@pytest.mark.parametrize("where", ["a folder", "a missing folder", "/proc"])
def test_a_path_that_cannot_be_opened_is_named(tmp_path: Path, where: str) -> None:
    if where == "/proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    path = {
        "a folder": tmp_path,
        "a missing folder": tmp_path / "missing" / "x.db",
        "/proc": Path("/proc/x.db"),
    }[where]
    with pytest.raises(sqlite3.OperationalError) as info:
        db.connect(path)
    assert str(info.value) == f"{path}: unable to open database file"
    assert info.value.sqlite_errorcode == sqlite3.SQLITE_CANTOPEN  # the code is kept
    assert not (tmp_path / "missing").exists()
