"""The store handle (issue 32): a connection and its dialect, the dialect chosen once when the
handle is made; public entry points accept a connection or a handle and wrap a connection once;
everything below them passes the handle on."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from backends import BACKENDS, open_store

import labkit.catalog.versions as catalog
from labkit import backend, db, store
from labkit.catalog import hold
from labkit.catalog.loop import LoopOnPostgres, LoopOnSQLite, WatermarkLoop
from labkit.catalog.pipeline import PipelinedLoop
from labkit.frontier import log as fr
from labkit.frontier import summarizer as sm
from labkit.remote import head_row
from labkit.store import Store


@pytest.fixture
def dialect_calls(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `backend.dialect` call made while the test runs (the connections asked about)."""
    calls: list[Any] = []
    real = backend.dialect

    def counted(conn: object) -> backend.Dialect:
        calls.append(conn)
        return real(conn)

    monkeypatch.setattr(backend, "dialect", counted)
    return calls


def test_a_handle_carries_its_connection_and_the_dialect_chosen_when_it_was_made() -> None:
    conn = sqlite3.connect(":memory:")
    s = Store(conn)
    assert s.conn is conn and s.dialect is backend.SQLITE and s.name == "sqlite"
    assert "sqlite" in repr(s)
    assert store.of(s) is s  # a handle passes through
    wrapped = store.of(conn)
    assert type(wrapped) is Store and wrapped.conn is conn and wrapped.dialect is backend.SQLITE


@pytest.mark.parametrize("thing", [{}, "db.sqlite", None])
def test_anything_but_a_connection_is_refused_in_one_line_naming_its_type(thing: Any) -> None:
    with pytest.raises(backend.UnsupportedBackend, match="expected a sqlite3 or psycopg") as info:
        store.of(thing)
    assert "\n" not in str(info.value)


def test_a_handle_is_not_wrapped_in_another() -> None:
    s = Store(sqlite3.connect(":memory:"))
    with pytest.raises(backend.UnsupportedBackend, match=r"got labkit\.store\.Store"):
        Store(s)  # type: ignore[arg-type]


def test_pick_takes_this_backend_s_version_of_what_is_written_side_by_side() -> None:
    s = Store(sqlite3.connect(":memory:"))
    assert s.pick({"sqlite": "?", "postgres": "%s"}) == "?"
    with pytest.raises(KeyError):
        s.pick({"postgres": "only"})


def test_the_handle_runs_statements_written_once_on_sqlite() -> None:
    s = Store(db.connect())
    s.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT)")
    with s.atomic() as conn:
        assert conn is s.conn and conn.in_transaction
        first = s.insert_returning_id("INSERT INTO t (k) VALUES (?)", ("a",))
        s.executemany("INSERT INTO t (k) VALUES (?)", [("b",), ("c",)])
    assert first == 1 and not s.conn.in_transaction
    with s.reading() as conn:
        assert conn is s.conn
    assert s.fetchall("SELECT k FROM t WHERE k > :low ORDER BY k", {"low": "a"}) == [
        ("b",),
        ("c",),
    ]


def test_require_names_the_function_and_accepts_a_handle() -> None:
    conn = sqlite3.connect(":memory:")
    s = store.require(conn, "f", "sqlite")
    assert s.conn is conn and store.require(s, "f", "sqlite", "postgres") is s
    with pytest.raises(backend.UnsupportedBackend, match=r"^g works on postgres only; .* sqlite"):
        store.require(s, "g", "postgres")


def test_by_backend_runs_the_version_of_the_connection_s_backend_with_the_connection() -> None:
    seen: list[tuple[str, Any, int]] = []
    both = store.ByBackend(
        sqlite=lambda conn, n: seen.append(("sqlite", conn, n)) or n + 1,
        postgres=lambda conn, n: seen.append(("postgres", conn, n)) or n - 1,
    )
    conn = sqlite3.connect(":memory:")
    s = Store(conn)
    assert both[type(conn)](conn, 1) == 2 and both[type(conn)](conn, 2) == 3
    assert both[type(s)](s, 3) == 4
    assert seen == [("sqlite", conn, 1), ("sqlite", conn, 2), ("sqlite", conn, 3)]
    assert both[sqlite3.Connection] is both.versions["sqlite"]  # found once for the type
    with pytest.raises(backend.UnsupportedBackend, match=r"got builtins\.dict"):
        both[dict]
    with pytest.raises(TypeError, match="one version per backend"):
        store.ByBackend(sqlite=len)


def test_each_public_entry_point_chooses_the_dialect_once(
    tmp_path: Any, dialect_calls: list[Any]
) -> None:
    """Issue 32: the loop asked `dialect(conn)` three times on its way in (and each catalog
    function it called once more); now the handle is made once, at the entry, and passed on."""
    conn = db.connect(tmp_path / "wm.db")
    WatermarkLoop(conn, 2)
    assert dialect_calls == [conn]
    dialect_calls.clear()
    PipelinedLoop(conn, 2)
    assert dialect_calls == [conn]
    dialect_calls.clear()
    fr.create_schema(conn)
    row = fr.enqueue(conn, "a", 1)
    fr.mark_delivered(conn, row)
    assert sm.summarize_range(conn, "a") is not None
    assert dialect_calls == [conn] * 4  # one per call, whatever each calls below it


def test_a_handle_passed_in_is_used_as_it_is(tmp_path: Any, dialect_calls: list[Any]) -> None:
    conn = db.connect(tmp_path / "wm.db")
    s = Store(conn)
    dialect_calls.clear()
    loop = WatermarkLoop(s, 2)
    pipelined = PipelinedLoop(s, 2)
    catalog.CatalogReader(s).poll()
    hold.held(s)
    head_row.create(s, 0, "h")
    assert head_row.read(s) == (0, "h")
    fr.create_schema(s)
    fr.mark_delivered(s, fr.enqueue(s, "a", 1))
    assert fr.delivered_frontier(s, "a") == 1 and fr.status_of(s, 1) == "delivered"
    assert sm.summarize_range(s, "a") is not None and sm.orphans(s, "a") == []
    assert dialect_calls == []  # nothing asked the connection's type again
    assert loop.store is s and loop.conn is conn and loop.dialect is backend.SQLITE
    assert pipelined.store is s and pipelined.base.store is s


@pytest.mark.parametrize("backend_name", BACKENDS)
def test_the_loop_runs_its_backend_s_way_chosen_once(
    request: pytest.FixtureRequest, backend_name: str
) -> None:
    """Where the backends differ, the loop holds one of two classes side by side, chosen when it
    opens: PostgreSQL tries a commit before it reads, SQLite never needs to."""
    conn = open_store(request, backend_name).connect()
    loop = WatermarkLoop(conn)
    way = {"sqlite": LoopOnSQLite, "postgres": LoopOnPostgres}[backend_name]
    assert type(loop._on) is way and way.commits_first is (backend_name == "postgres")
    b = loop.reserve()
    assert loop.apply(b.answer(["t"])).committed
    assert loop.head_version() == 1 and loop.inflight() == []


@pytest.mark.postgres
def test_the_handle_reads_on_postgres_without_leaving_a_transaction_open(
    pg_connect: Any,
) -> None:
    from psycopg.pq import TransactionStatus

    s = Store(pg_connect())
    assert s.dialect is backend.POSTGRES and s.name == "postgres"
    assert s.fetchall("SELECT 1 + 1, CAST(:x AS int)", {"x": 2}) == [(2, 2)]
    assert s.conn.info.transaction_status == TransactionStatus.IDLE
    with s.atomic():
        new = s.insert_returning_id(
            "INSERT INTO conversations (channel_key, direction, status, priority)"
            " VALUES (?, 'inbound', 'pending', ?)",
            ("a", 1),
        )
    assert fr.status_of(s, new) == "pending" and fr.delivered_frontier(s, "a") == new - 1
    assert s.conn.info.transaction_status == TransactionStatus.IDLE
