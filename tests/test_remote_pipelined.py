"""Pipelined ballots against the real planner service (issue 22 with issue 21's service): W
ballots in flight at once, each fenced on the version its predecessor will commit; answers
that land early held in the store and settled in fence order; a refused predecessor flushes
its successors; the planner states the base each answer was built on and that base's hash.

Latencies are tens of milliseconds, so each run takes well under a second.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

import labkit.catalog.hold as hold
import labkit.catalog.versions as catalog
from labkit.db import connect
from labkit.designs.planner import answer_tools
from labkit.remote import run, serve
from labkit.remote.inbox import Inbox

WINDOW, TICKS = 3, 8


def _answers_to(url: str, plans: list[dict]) -> list:
    """Register a loop whose callback is an `Inbox`, send `plans` one after the other (each
    answered before the next is sent) and return the checked answers, in order."""

    async def scenario() -> list:
        events: asyncio.Queue = asyncio.Queue()
        inbox = Inbox(events)
        callback = await inbox.start()
        got = []
        try:
            async with aiohttp.ClientSession() as session:
                body = {"callback": callback, "seed": 0, "fresh": True}
                async with session.post(f"{url}/loops/probe", json=body) as reply:
                    assert reply.status == 204
                for plan in plans:
                    async with session.post(f"{url}/plan", json=plan) as reply:
                        assert reply.status == 202
                    kind, answer = await asyncio.wait_for(events.get(), timeout=5.0)
                    assert kind == "deliver"
                    got.append(answer)
        finally:
            await inbox.stop()
        return got

    return asyncio.run(scenario())


def _plan(request_id: int, fence: int, tools: list[str]) -> dict:
    return {
        "loop": "probe",
        "request_id": request_id,
        "ballot_id": request_id,
        "observed_watermark": fence,
        "base_version": fence,
        "tools": tools,
        "replay_of": None,
    }


def test_the_service_states_the_base_and_the_hash_of_what_it_built_on() -> None:
    """The promise speculation rests on: every answer names its base and the hash of the tool
    list it was really built on; a stale body names the older base and that base's hash."""
    with serve(faults=["stale_body"], seed=0, latency=0.005, duplicate_rate=0.0, span=1) as url:
        fresh, stale = _answers_to(url, [_plan(1, 0, ["g"]), _plan(2, 1, ["g", "tool-r1"])])
    assert fresh.response.base_version == 0
    assert fresh.response.base_hash == catalog.tools_hash(["g"])
    assert fresh.response.tools == answer_tools(["g"], 1)
    assert stale.fault == "stale_body"
    assert stale.response.base_version == 0  # built on version 0, not the fence's version 1
    assert stale.response.base_hash == catalog.tools_hash(["g"])
    assert stale.response.tools == answer_tools(["g"], 2)


@pytest.fixture(scope="module")
def flushed(tmp_path_factory) -> tuple:
    """One pipelined run whose second tick draws a stale body (refused, so its successors are
    flushed) and every answer delivered twice; the trace and the store's path. The loop waits
    a second (50 latencies) before it gives up on a call, so that on a loaded machine the
    stale body, not a timer, is what refuses the tick."""
    store = tmp_path_factory.mktemp("pipelined") / "store.db"
    knobs = {"latency": 0.02, "duplicate_rate": 1.0, "span": 1}
    with serve(faults=["stale_body", "duplicate"], seed=4, **knobs) as url:
        result = run(
            "pipelined", url, ticks=TICKS, window=WINDOW, store=store, name="flush", timeout=1.0
        )
    return result, store


def test_w_ballots_are_in_flight_at_once_each_on_the_next_fence(flushed) -> None:
    trace = flushed[0].trace
    first = trace[trace["event"] == "send"].head(WINDOW)
    assert first["t"].nunique() == 1  # sent together, each its own HTTP call in flight
    assert first["observed_watermark"].tolist() == list(range(WINDOW))  # head, head+1, head+2
    assert first["ballot_id"].nunique() == WINDOW


def test_early_answers_are_held_then_settled_in_fence_order(flushed) -> None:
    trace = flushed[0].trace
    held = trace[(trace["event"] == "deliver") & (trace["reason"] == "held")]
    settled = trace[trace["event"] == "settle"]
    assert not held.empty
    assert set(settled["ballot_id"]) <= set(held["ballot_id"])  # only held answers settle
    commits = settled[settled["committed"].astype(bool)]
    assert (commits["observed_watermark"] + 1 == commits["head_version"]).all()  # on its fence


def test_a_refused_predecessor_flushes_and_replays_every_successor(flushed) -> None:
    trace = flushed[0].trace.reset_index(drop=True)
    sends = trace[trace["event"] == "send"]
    fence_of = dict(zip(sends["ballot_id"], sends["observed_watermark"], strict=True))
    refused = trace[trace["reason"] == "stale_base"]
    assert not refused.empty, "the stale body was not refused"
    at = refused.index[0]
    ballot = int(refused.loc[at, "ballot_id"])
    fence = fence_of[ballot]
    replays = trace.loc[at + 1 :]
    replays = replays[(replays["event"] == "send") & replays["replay_of"].notna()].head(WINDOW)
    assert int(replays["replay_of"].iloc[0]) == ballot  # its own tick first
    # then each ballot above it, fence by fence: built on an answer that will never commit
    assert [fence_of[int(b)] for b in replays["replay_of"]] == list(range(fence, fence + WINDOW))
    assert replays["observed_watermark"].tolist() == list(range(fence, fence + WINDOW))


def test_the_reader_sees_no_fall_and_the_store_reads_back_contiguous(flushed) -> None:
    result, store = flushed
    assert result.reader_falls == [] and result.reader_polls > 0
    assert result.summary.rewinds == 0 and result.summary.kept == TICKS
    conn = connect(store)
    try:
        assert catalog.verify(conn) == TICKS
        log = catalog.history(conn)
        for below, above in zip(log, log[1:], strict=False):  # each body built on the one below
            assert above.tools[:-1] == below.tools
        assert hold.held(conn) == []
    finally:
        conn.close()


@pytest.mark.postgres
def test_pipelined_on_postgresql_holds_early_answers_and_never_falls(pg_dsn: str) -> None:
    from psycopg.conninfo import make_conninfo

    from labkit.pg import instance as pg

    knobs = {"latency": 0.02, "duplicate_rate": 1.0, "span": 1, "stall_time": 0.1}
    faults = ["inverted", "duplicate", "stale_body", "retry_after_commit", "stall"]
    with (
        serve(faults=faults, seed=4, **knobs) as url,
        pg.scratch_schema(pg_dsn, prefix="remote") as schema,
    ):
        dsn = make_conninfo(pg_dsn, options=pg.search_path_option(schema))
        result = run("pipelined", url, ticks=TICKS, window=WINDOW, dsn=dsn, name="pg-pipelined")
        trace = result.trace
        assert (trace["reason"] == "held").any()
        # A held answer leaves the hold by a settle, or with its ballot when a timeout gives it
        # up (a loaded machine's timers fire first); either way nothing stays held (below).
        assert trace["event"].isin(["settle", "timeout"]).any()
        assert result.reader_falls == [] and result.summary.rewinds == 0
        assert result.summary.kept == TICKS
        with pg.connect(dsn) as conn:
            assert catalog.verify(conn) == TICKS and hold.held(conn) == []
