"""The pipelined loop's steps are one transaction each, and opening a store repairs what a cut or
an older version left: no store stalls, on SQLite or PostgreSQL (issue 35, item 1)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from backends import BACKENDS, open_store, rows

import labkit.catalog.hold as hold
from labkit.designs.pipeline_crash import crash_and_resume, crash_and_resume_pg
from labkit.designs.pipelined import PipelinedDesign
from labkit.designs.planner import respond
from labkit.designs.simulator import run as simulate

TICKS = 10
# A run of `crash_and_resume` with refusals whose statements cover every protocol step: reserves,
# holds, commits on the head and at settle, hash-check refusals that flush held successors,
# and give-ups (checked below, so a change of the play cannot quietly drop a kind of step).
REFUSING = {"ticks": 4, "window": 3, "seed": 3, "refusals": True}


def _finish(design: PipelinedDesign, limit: int = 200) -> None:
    """Answer every awaited request honestly and settle, until nothing is awaited."""
    for _ in range(limit):
        while design.settle(1.0) is not None:
            pass
        awaited = design.awaited()
        if not awaited:
            return
        req = awaited[0]
        design.on_response(req, respond(design, req, 1.0), 1.0)
    raise AssertionError("the loop kept asking")


def _statuses(conn) -> dict[int, str]:
    return dict(rows(conn, "SELECT ballot_id, status FROM wm_ballots"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_cut_after_abandoning_the_heads_ballot_finishes_every_tick(request, backend):
    """The state an older version left when it was killed inside a refusal: the ballot on the
    head's fence abandoned, the ballots above still in flight, one of their answers held. The
    store reopens, flushes the ballots above and replays their ticks, and every tick commits."""
    store = open_store(request, backend)
    first = PipelinedDesign(store.connect(), window=3, ticks=TICKS)
    r1, r2, r3 = first.start(0.0)
    assert first.on_response(r3, respond(first, r3, 1.0), 1.0).reason == "held"
    first.loop.abandon(r1.ballot_id)  # the first write of the old three-write refusal
    first.conn.close()

    second = PipelinedDesign(store.connect(), window=3, ticks=TICKS, first_request=1000)
    assert second.pipe.repaired == (r2.ballot_id, r3.ballot_id)
    assert second.stalled() is None and hold.held(second.conn) == []
    sends = second.start(0.0)
    assert [s.observed_watermark for s in sends] == [0, 1, 2]
    assert [s.replay_of for s in sends] == [r2.ballot_id, r3.ballot_id, None]
    _finish(second)
    assert second.read_head()[0] == TICKS


def test_the_unrepaired_cut_is_what_stalled_a_store() -> None:
    """Without the repair the same cut leaves every ballot in flight held or above a fence with
    no ballot: nothing is awaited and the head cannot move (the stall `stalled` names)."""
    design = PipelinedDesign(window=3, ticks=TICKS)
    r1, r2, r3 = design.start(0.0)
    design.on_response(r3, respond(design, r3, 1.0), 1.0)
    design.loop.abandon(r1.ballot_id)
    assert "none on the head's fence 0" in design.stalled()
    assert [r.ballot_id for r in design.awaited()] == [r2.ballot_id]
    assert design.pipe.repair() == (r2.ballot_id, r3.ballot_id) and design.stalled() is None


@pytest.mark.parametrize(
    ("fences", "gone"),
    [
        ([0, 1, 2], []),  # sound: nothing leaves flight
        ([1, 2], [0, 1]),  # none on the head's fence
        ([0, 2, 3], [1, 2]),  # a gap above fence 0
        ([0, 0, 1], [1, 2]),  # a second ballot on fence 0, and all above it
    ],
)
def test_repair_keeps_only_the_unbroken_run_of_fences_from_the_head(fences, gone) -> None:
    """`gone`: which of the ballots reserved on `fences`, in that order, the repair flushes."""
    pipe = PipelinedDesign(window=4, ticks=TICKS).pipe
    ids = [pipe.base.reserve(ahead=f).ballot_id for f in fences]
    assert pipe.repair() == tuple(ids[i] for i in gone)
    assert [b.watermark for b in pipe.inflight()] == list(range(len(fences) - len(gone)))
    assert pipe.stalled() is None and pipe.repair() == ()


def test_repair_takes_ballots_below_the_head_out_of_flight_and_drops_stale_holds() -> None:
    design = PipelinedDesign(window=4, ticks=TICKS)
    r1, r2, r3, r4 = design.start(0.0)
    design.on_response(r2, respond(design, r2, 1.0), 1.0)  # held on fence 1
    design.loop.abandon(r4.ballot_id)
    old = design.loop.reserve(ahead=0)  # an older version's second ballot on fence 0
    commit = design.on_response(r1, respond(design, r1, 1.0), 1.0)  # head 1, refilled
    assert commit.committed and [s.observed_watermark for s in commit.sends] == [3]
    design.loop.abandon(r2.ballot_id)  # its held answer is now stale
    refill = commit.sends[0].ballot_id
    assert design.pipe.repair() == (old.ballot_id, r3.ballot_id, refill)
    assert hold.held(design.conn) == [] and design.loop.inflight() == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refusal_abandons_flushes_and_releases_in_one_transaction(request, backend) -> None:
    """A stale body on the head: the refused ballot, the ballots above it and their held answers
    leave together; if the step fails half-way, none of it is kept."""
    store = open_store(request, backend)
    design = PipelinedDesign(store.connect(), window=3, ticks=TICKS)
    r1, r2, r3 = design.start(0.0)
    design.on_response(r2, respond(design, r2, 1.0), 1.0)
    design.on_response(r3, respond(design, r3, 1.0), 1.0)
    stale = respond(design, r1, 1.0, stale=True)
    before = (_statuses(design.conn), hold.held(design.conn))

    real = design.pipe._flush

    def cut(*args):
        real(*args)
        raise KeyboardInterrupt("killed inside the refusal")

    design.pipe._flush = cut
    with pytest.raises(KeyboardInterrupt):
        design.on_response(r1, stale, 2.0)
    assert (_statuses(design.conn), hold.held(design.conn)) == before  # all of it rolled back
    del design.pipe._flush
    decision = design.on_response(r1, stale, 2.0)
    assert decision.reason == "stale_watermark" or decision.reason == "stale_base"
    statuses = _statuses(design.conn)
    assert [statuses[r.ballot_id] for r in (r1, r2, r3)] == ["abandoned"] * 3
    assert hold.held(design.conn) == []
    assert [s.replay_of for s in decision.sends] == [r1.ballot_id, r2.ballot_id, r3.ballot_id]


def test_the_refusing_play_covers_every_protocol_step(tmp_path: Path) -> None:
    from labkit import db

    run = crash_and_resume(tmp_path / "whole.db", 0, **REFUSING)
    conn = db.connect(tmp_path / "whole.db")
    try:
        reasons = {r for (r,) in rows(conn, "SELECT reason FROM wm_responses WHERE committed = 0")}
        statuses = set(_statuses(conn).values())
    finally:
        conn.close()
    assert run.versions[-1][0] == REFUSING["ticks"]
    assert "base_hash_mismatch" in reasons and statuses == {"committed", "abandoned"}


def _assert_finished(run, ticks: int) -> None:
    steps = [b - a for a, b in zip(run.heads, run.heads[1:], strict=False)]
    assert set(steps) <= {0, 1}  # never a fall, one version at a time, across the kill
    assert [v[0] for v in run.versions] == list(range(ticks + 1)) and run.held_left == 0
    for (v, _, below), (_, base, tools) in zip(run.versions, run.versions[1:], strict=False):
        assert base == v and tools[:-1] == below


# A kill just before each write (or COMMIT) of the first life: every cut between two writes of
# any step. A kill at a read leaves what a kill at the next write leaves (reads change nothing,
# and a step's transaction is rolled back whole), so these are all the states a kill can leave.


@pytest.mark.slow
def test_a_kill_before_every_write_of_a_refusing_run_on_sqlite(tmp_path: Path) -> None:
    """Each restarted loop finishes every tick with no fall, refusals and flushes included."""
    whole = crash_and_resume(tmp_path / "whole.db", 0, **REFUSING)
    assert len(whole.writes) > 40
    for k in whole.writes:
        run = crash_and_resume(tmp_path / f"k{k}.db", k, **REFUSING)
        assert run.killed
        _assert_finished(run, REFUSING["ticks"])


@pytest.mark.slow
@pytest.mark.postgres
def test_a_kill_before_every_write_of_a_refusing_run_on_postgres(pg_dsn) -> None:
    """The same on PostgreSQL: the loop's connection dies before write k, the server rolls back
    what it had not committed, a loop on a new connection finishes."""
    from labkit.pg import instance as pg

    def lab(kill_at: int):
        with pg.scratch_schema(pg_dsn, prefix="cut") as schema:
            opts = pg.search_path_option(schema)
            return crash_and_resume_pg(
                lambda: pg.connect(pg_dsn, options=opts), kill_at, **REFUSING
            )

    whole = lab(0)
    assert whole.versions[-1][0] == REFUSING["ticks"] and len(whole.writes) > 20
    for k in whole.writes:
        run = lab(k)
        assert run.killed
        _assert_finished(run, REFUSING["ticks"])


def test_the_simulator_ends_a_stalled_run_truncated_with_the_reason(monkeypatch) -> None:
    """A design that says it cannot move ends the run with a `truncated` row naming why."""
    monkeypatch.setattr(PipelinedDesign, "stalled", lambda self: "stuck for the test")
    with pytest.warns(RuntimeWarning, match="stalled before the run finished: stuck"):
        result = simulate("pipelined", faults=(), seed=0, ticks=3)
    last = result.trace.iloc[-1]
    assert last["event"] == "truncated" and last["reason"] == "stalled: stuck for the test"
    assert result.summary.truncated


def test_a_sound_simulated_run_is_not_truncated() -> None:
    result = simulate("pipelined", faults=(), seed=0, ticks=3)
    assert "truncated" not in set(result.trace["event"]) and not result.summary.truncated


def test_a_held_answer_is_not_displaced_once_the_head_reaches_its_fence() -> None:
    """Between the commit that moves the head to a held answer's fence and the settle that
    decides it, a second, different answer for that ballot is refused; the held one commits."""
    design = PipelinedDesign(window=2, ticks=TICKS)
    r1, r2 = design.start(0.0)
    kept = respond(design, r2, 1.0)
    assert design.pipe.answer(kept, 1.0).reason == "held"
    assert design.pipe.answer(respond(design, r1, 2.0), 2.0).committed  # the head is at fence 1
    other = dataclasses.replace(kept, tools=(*kept.tools, "another"))
    step = design.pipe.answer(other, 3.0)
    assert (step.committed, step.reason, step.replays) == (False, "already_held", ())
    assert (
        design.pipe.ready() is not None and design.pipe.answer(design.pipe.ready(), 4.0).committed
    )
    assert design.tools_at(2) == tuple(kept.tools)
