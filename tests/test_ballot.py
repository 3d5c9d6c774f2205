"""WatermarkLoop: Article 2's fixture and its four injected failure classes, plus the window.

Each behaviour runs on both backends (`store`: a SQLite file, or a scratch schema on PostgreSQL
under the `postgres` marker); the query-plan and argument checks are SQLite's own.
"""

from __future__ import annotations

import sqlite3

import pytest
from backends import BACKENDS, Store, open_store

from labkit.ballot import INFLIGHT_SQL, Ballot, Response, WatermarkLoop, WindowFullError
from labkit.catalog import versions as catalog
from labkit.db import connect


def body(loop: WatermarkLoop, b: Ballot, tool: str) -> Response:
    """A well-formed planner response for ballot `b`."""
    tools = [*catalog.read_version(loop.conn, b.base_version).tools, tool]
    return b.answer(tools)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Store:
    return open_store(request, request.param)


@pytest.fixture
def loop(store: Store) -> WatermarkLoop:
    return WatermarkLoop(store.connect())


def test_inverted_arrival(loop: WatermarkLoop) -> None:
    """Tick 12 is lost in flight, tick 13 commits, then 12 arrives: rejected, no rewind."""
    b12 = loop.reserve()
    loop.abandon(b12.ballot_id)  # the loop gave up on 12 (timeout / crash-retry)
    b13 = loop.reserve()
    assert loop.apply(body(loop, b13, "t13")).committed
    late = loop.apply(body(loop, b12, "t12"))
    assert (late.committed, late.reason, late.version) == (False, "unknown_ballot", 1)
    assert loop.head_version() == 1 and catalog.verify(loop.conn) == 1


def test_inverted_arrival_without_abandon_is_stale_watermark(store: Store) -> None:
    loop = WatermarkLoop(store.connect(), window=2)
    b12, b13 = loop.reserve(), loop.reserve()
    assert loop.apply(body(loop, b13, "t13")).committed
    out = loop.apply(body(loop, b12, "t12"))
    assert out.reason == "stale_watermark" and loop.head_version() == 1
    assert loop.inflight() == []  # the stale ballot is dead, not waiting


def test_duplicate_delivery(loop: WatermarkLoop) -> None:
    b = loop.reserve()
    resp = body(loop, b, "t1")
    assert loop.apply(resp).committed
    again = loop.apply(resp)
    assert (again.committed, again.reason) == (False, "unknown_ballot")
    assert loop.head_version() == 1


def test_stale_body_is_stale_base(loop: WatermarkLoop) -> None:
    loop.apply(body(loop, loop.reserve(), "t1"))
    b = loop.reserve()
    stale = Response(b.ballot_id, b.watermark, b.base_version - 1, ["old"])
    out = loop.apply(stale)
    assert (out.committed, out.reason, out.version) == (False, "stale_base", 1)
    assert [r.tools for r in catalog.history(loop.conn)] == [[], ["t1"]]
    assert loop.inflight() == [b]  # a bad body does not evict the ballot that owns the watermark
    assert loop.apply(body(loop, b, "t2")).committed
    replay = loop.replay(out)
    assert replay.ballot_id != b.ballot_id and loop.apply(body(loop, replay, "t2")).committed


def test_retry_after_commit_is_unknown_ballot(loop: WatermarkLoop) -> None:
    b13 = loop.reserve()
    r13 = body(loop, b13, "t13")
    loop.apply(r13)
    loop.apply(body(loop, loop.reserve(), "t14"))
    retry = loop.apply(r13)
    assert (retry.committed, retry.reason, retry.version) == (False, "unknown_ballot", 2)


def test_echoed_watermark_must_match_the_reserved_one(loop: WatermarkLoop) -> None:
    b = loop.reserve()
    forged = Response(b.ballot_id, b.watermark + 1, b.base_version, ["x"])
    assert loop.apply(forged).reason == "stale_watermark"
    assert loop.inflight() == [b]  # a forged echo cannot kill the owner
    assert loop.apply(body(loop, b, "t1")).committed


def test_window_full_names_window_and_inflight_ids(store: Store) -> None:
    loop = WatermarkLoop(store.connect(), window=2)
    loop.reserve()
    loop.reserve()
    with pytest.raises(WindowFullError, match=r"window of 2.*\[1, 2\]") as info:
        loop.reserve()
    assert info.value.inflight_ids == [1, 2]


def test_fenced_window_one_commit_per_watermark(store: Store) -> None:
    loop = WatermarkLoop(store.connect(), window=3)
    ballots = [loop.reserve() for _ in range(3)]
    outs = [loop.apply(body(loop, b, f"t{b.ballot_id}")) for b in reversed(ballots)]
    assert [o.committed for o in outs] == [True, False, False]
    assert {o.reason for o in outs[1:]} == {"stale_watermark"}
    assert loop.head_version() == 1 and loop.inflight() == []


def test_reserve_is_durable_before_it_returns(store: Store) -> None:
    loop = WatermarkLoop(store.connect())
    b = loop.reserve()
    other = WatermarkLoop(store.connect())  # a restarted process on the same store
    assert other.inflight() == [b]
    assert other.apply(body(other, b, "t1")).committed
    assert other.reserve().ballot_id == b.ballot_id + 1  # next id was persisted too


def test_abandon_then_late_response_is_unknown(loop: WatermarkLoop) -> None:
    b = loop.reserve()
    assert loop.abandon(b.ballot_id) and not loop.abandon(b.ballot_id)
    assert loop.apply(body(loop, b, "late")).reason == "unknown_ballot"
    assert loop.head_version() == 0


def test_rejections_change_nothing_in_the_catalog(loop: WatermarkLoop) -> None:
    loop.apply(body(loop, loop.reserve(), "t1"))
    before = catalog.history(loop.conn)
    for resp in (Response(99, 1, 1, ["x"]), Response(1, 0, 0, ["y"])):
        assert not loop.apply(resp).committed
    assert catalog.history(loop.conn) == before


def test_inflight_query_uses_the_partial_index() -> None:
    loop = WatermarkLoop(connect())
    plan = " ".join(r[3] for r in loop.conn.execute("EXPLAIN QUERY PLAN " + INFLIGHT_SQL))
    assert "wm_ballots_inflight" in plan
    fresh = sqlite3.connect(":memory:")  # a fresh connection: no cached statement
    fresh.executescript(
        "CREATE TABLE wm_ballots (ballot_id INTEGER PRIMARY KEY, observed_watermark INT,"
        " base_version INT, status TEXT)"
    )
    plan = " ".join(r[3] for r in fresh.execute("EXPLAIN QUERY PLAN " + INFLIGHT_SQL))
    assert "wm_ballots_inflight" not in plan and "SCAN wm_ballots" in plan


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window"):
        WatermarkLoop(sqlite3.connect(":memory:"), window=0)
