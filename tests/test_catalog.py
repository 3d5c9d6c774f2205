"""The catalog log: genesis, contiguous appends, hash checks, and the rewind-detecting reader."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from labkit.catalog import versions as catalog
from labkit.catalog.versions import CatalogCorruptError, CatalogReader, RewindError
from labkit.db import connect, immediate


@pytest.fixture
def conn() -> sqlite3.Connection:
    c = connect(":memory:")
    catalog.create_schema(c, ["search"], now=0.0)
    return c


def test_genesis_is_version_zero_and_idempotent(conn: sqlite3.Connection) -> None:
    catalog.create_schema(conn, ["other"], now=1.0)
    rec = catalog.read_version(conn, 0)
    assert rec is not None and rec.tools == ["search"] and rec.ballot_id is None
    assert catalog.head(conn) == 0


def test_append_is_contiguous_and_hashed(conn: sqlite3.Connection) -> None:
    with immediate(conn):
        assert catalog.append(conn, ["a"], ballot_id=1, base_version=0, now=1.0) == 1
        assert catalog.append(conn, ["a", "b"], ballot_id=2, base_version=1, now=2.0) == 2
    assert catalog.verify(conn) == 2
    assert catalog.read_version(conn, 2).tools_hash == catalog.tools_hash(["a", "b"])


def test_log_refuses_a_fork_or_a_reused_ballot(conn: sqlite3.Connection) -> None:
    with immediate(conn):
        catalog.append(conn, ["a"], ballot_id=1, base_version=0)
    with pytest.raises(sqlite3.IntegrityError), immediate(conn):
        catalog.append(conn, ["b"], ballot_id=2, base_version=0)  # version 1 again
    with pytest.raises(sqlite3.IntegrityError), immediate(conn):
        catalog.append(conn, ["c"], ballot_id=1, base_version=1)  # ballot 1 committed twice
    assert catalog.head(conn) == 1


def test_verify_names_a_tampered_version(conn: sqlite3.Connection) -> None:
    with immediate(conn):
        catalog.append(conn, ["a"], ballot_id=1, base_version=0)
    conn.execute("UPDATE catalog_versions SET tools = ? WHERE version = ?", ('["x"]', 1))
    with pytest.raises(CatalogCorruptError, match="version 1"):
        catalog.verify(conn)


def test_tools_hash_is_canonical() -> None:
    assert catalog.tools_hash([{"b": 1, "a": 2}]) == catalog.tools_hash([{"a": 2, "b": 1}])
    assert catalog.tools_hash(["a", "b"]) != catalog.tools_hash(["b", "a"])


def _grow(path: Path, n: int) -> None:
    c = connect(path)
    catalog.create_schema(c)
    with immediate(c):
        for v in range(catalog.head(c), n):
            catalog.append(c, [f"t{v + 1}"], ballot_id=v + 1, base_version=v)
    c.close()


def test_reader_detects_a_rewind_across_process_restarts(tmp_path: Path) -> None:
    db, state = tmp_path / "cat.db", tmp_path / "reader.db"
    _grow(db, 3)
    reader = CatalogReader(connect(db), "r", state=connect(state))
    assert reader.poll() == 3
    # A "restore from an old backup" truncates the log behind the reader's back.
    c = connect(db)
    c.execute("DELETE FROM catalog_versions WHERE version > ?", (1,))
    # A brand-new reader (as after a restart) still remembers version 3.
    fresh = CatalogReader(connect(db), "r", state=connect(state))
    assert fresh.last_seen() == 3
    with pytest.raises(RewindError, match="saw version 3, now sees 1"):
        fresh.poll()


def test_reader_state_can_live_in_the_catalog_file(tmp_path: Path) -> None:
    db = tmp_path / "cat.db"
    _grow(db, 2)
    assert CatalogReader(connect(db)).poll() == 2
    _grow(db, 4)
    assert CatalogReader(connect(db)).poll() == 4


def test_immediate_refuses_a_nested_transaction(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN")
    with pytest.raises(RuntimeError, match="open transaction"), immediate(conn):
        pass


def test_history_frame_reads_as_a_table() -> None:
    from labkit.ballot import WatermarkLoop

    loop = WatermarkLoop(connect())
    b = loop.reserve()
    loop.apply(b.answer(["search"]))
    frame = catalog.history_frame(loop.conn)
    assert list(frame["version"]) == [0, 1]
    assert str(frame["ballot_id"].dtype) == "Int64" and frame["ballot_id"].iloc[1] == 1
    assert frame["ballot_id"].isna().iloc[0]  # genesis has no ballot
    assert frame["tools_hash"].iloc[1] == catalog.tools_hash(["search"])[:12]


def test_poll_leaves_the_callers_transaction_open_and_uncommitted(tmp_path: Path) -> None:
    db, state = tmp_path / "cat.db", tmp_path / "reader.db"
    _grow(db, 2)
    conn = connect(db)
    conn.execute("CREATE TABLE notes (x)")
    reader = CatalogReader(conn, "r", state=connect(state))
    conn.execute("BEGIN")
    conn.execute("INSERT INTO notes VALUES (1)")
    assert reader.poll() == 2
    assert conn.in_transaction  # poll neither committed nor ended it
    conn.rollback()
    assert conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 0


def test_poll_with_state_on_the_same_connection_nests_in_the_callers_transaction(
    tmp_path: Path,
) -> None:
    db = tmp_path / "cat.db"
    _grow(db, 1)
    conn = connect(db)
    reader = CatalogReader(conn, "r")
    conn.execute("BEGIN")
    assert reader.poll() == 1
    assert conn.in_transaction
    conn.rollback()  # the record was part of the caller's transaction
    assert reader.last_seen() is None


@pytest.mark.parametrize(
    ("stored", "problem"),
    [('["a", ', "not valid JSON"), ('["a", NaN]', "not valid JSON"), ('{"a": 1}', "not a list")],
)
def test_a_broken_stored_body_is_corruption_naming_the_version(
    conn: sqlite3.Connection, stored: str, problem: str
) -> None:
    with immediate(conn):
        catalog.append(conn, ["a"], ballot_id=1, base_version=0)
        catalog.append(conn, ["b"], ballot_id=2, base_version=1)
    conn.execute("UPDATE catalog_versions SET tools = ? WHERE version = 2", (stored,))
    for read in (catalog.verify, catalog.history, lambda c: catalog.read_version(c, 2)):
        with pytest.raises(CatalogCorruptError, match=f"version 2: .*{problem}"):
            read(conn)


def test_tools_json_refuses_nan_and_infinity() -> None:
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="JSON"):
            catalog.tools_json([{"w": bad}])
