"""Pipelined ballots (issue 22): W ticks in flight, early answers held and committed in fence
order, a base-hash check, a flush on every refusal; never a rewind, one version per commit."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from backends import BACKENDS, open_store, rows
from hypothesis import given, settings
from hypothesis import strategies as st

import labkit.catalog.hold as hold
import labkit.catalog.versions as catalog
from labkit.catalog.loop import Response
from labkit.designs.arrival_orders import (
    explore,
    explore_by_replay,
    run_schedule,
    verify_model_against_sqlite,
)
from labkit.designs.arrival_search import explore_with_stats
from labkit.designs.pipeline_crash import (
    crash_and_resume,
    kill_and_resume,
    statement_count,
)
from labkit.designs.pipelined import ALREADY_HELD, HASH_MISMATCH, PipelinedDesign
from labkit.designs.planner import answer_tools, respond
from labkit.designs.registry import ALL_DESIGNS, DESIGNS, make_design
from labkit.designs.run_stats import summarize_run
from labkit.designs.simulator import FAULTS, run, simulate
from labkit.frontier import log as part_one

# --- the registry -----------------------------------------------------------------------------


def test_pipelined_is_registered_beside_the_five_compared_designs() -> None:
    assert DESIGNS == ("callback", "lww", "ballot", "fenced", "cas")  # notebook 05's five
    assert ALL_DESIGNS == (*DESIGNS, "pipelined")
    assert make_design("pipelined", window=4).name == "pipelined"
    with pytest.raises(ValueError, match="pipelined"):
        make_design("pipelines")


# --- the simulator ----------------------------------------------------------------------------


@pytest.mark.parametrize("faults", [(), *[(f,) for f in FAULTS], FAULTS])
@pytest.mark.parametrize("seed", range(3))
def test_no_rewind_and_one_version_per_commit_under_every_fault(faults, seed: int) -> None:
    trace = simulate("pipelined", faults, seed, ticks=12, window=4)
    summary = summarize_run(trace)
    assert summary.rewinds == 0 and summary.overwrites == 0 and not summary.truncated
    assert summary.final_head == 12 and summary.kept == 12
    steps = trace["head_version"].diff().fillna(0)
    assert set(steps) <= {0, 1}  # the reader sees one version per commit, never a fall
    assert summary.commits == summary.accepted == 12


@settings(max_examples=25, deadline=None)
@given(
    faults=st.sets(st.sampled_from(FAULTS)),
    seed=st.integers(0, 10_000),
    window=st.integers(1, 6),
)
def test_any_seed_faults_and_depth_keep_the_readers_promise(faults, seed, window) -> None:
    trace = simulate("pipelined", faults, seed, ticks=8, window=window)
    summary = summarize_run(trace)
    assert (summary.rewinds, summary.overwrites, summary.final_head) == (0, 0, 8)
    assert set(trace["head_version"].diff().fillna(0)) <= {0, 1}


def test_a_crash_on_a_file_backed_store_reopens_it_and_finishes(tmp_path: Path) -> None:
    done = run("pipelined", ["crash", "inverted"], 4, ticks=10, window=3, db_path=tmp_path / "s.db")
    assert done.summary.crashes == 1 and done.summary.final_head == 10
    assert done.summary.rewinds == 0 and done.summary.kept == 10


def test_early_answers_are_held_then_committed_one_settle_row_each() -> None:
    trace = simulate("pipelined", (), 0, ticks=20, window=4)
    held = trace[(trace["event"] == "deliver") & (trace["reason"] == "held")]
    settled = trace[trace["event"] == "settle"]
    assert len(held) > 0 and len(settled) == len(held)
    assert settled["committed"].all()
    assert summarize_run(trace).held == len(held)
    assert (settled["base_version"] + 1 == settled["head_version"]).all()  # its fence + 1


def test_same_seed_same_trace() -> None:
    a = simulate("pipelined", FAULTS, 5, ticks=10, window=3)
    assert a.equals(simulate("pipelined", FAULTS, 5, ticks=10, window=3))


def test_a_deeper_pipeline_commits_faster_on_a_slow_planner() -> None:
    speed = {
        w: summarize_run(simulate("pipelined", (), 1, ticks=30, window=w, timeout=20.0)).throughput
        for w in (1, 4)
    }
    ballot = summarize_run(simulate("ballot", (), 1, ticks=30, timeout=20.0)).throughput
    assert speed[1] == pytest.approx(ballot)  # W = 1 is the single ballot
    assert speed[4] > 2 * ballot


# --- the hash check and the flush ---------------------------------------------------------------


def _started(window: int) -> tuple[PipelinedDesign, list]:
    design = PipelinedDesign(window=window, ticks=10)
    return design, design.start(0.0)


def test_a_held_answer_built_on_another_base_is_refused_and_replayed() -> None:
    design, (r1, r2) = _started(2)
    assert (r1.observed_watermark, r2.observed_watermark) == (0, 1)  # fences head, head + 1
    wrong = ("not", "what", "r1", "answered")
    forged = Response(
        r2.ballot_id, 1, 1, answer_tools(wrong, r2.request_id), 2.0, catalog.tools_hash(wrong)
    )
    assert design.on_response(r2, forged, 1.0).reason == "held"
    first = design.on_response(r1, respond(design, r1, 2.0), 2.0)
    assert first.committed
    (r3,) = first.sends  # fence 2, built on r2's held body
    assert r3.observed_watermark == 2 and r3.tools == forged.tools
    request, decision = design.settle(3.0)
    assert request.ballot_id == r2.ballot_id
    assert (decision.committed, decision.reason) == (False, HASH_MISMATCH)
    assert design.read_head()[0] == 1 and hold.held(design.conn) == []
    # r2's tick and r3's (built on r2's answer: flushed) are replayed, on the real head
    assert [r.replay_of for r in decision.sends] == [r2.ballot_id, r3.ballot_id]
    assert decision.sends[0].tools == design.tools_at(1)
    assert design.settle(4.0) is None


def test_every_refusal_of_the_pipeline_is_in_the_response_log() -> None:
    """A base-hash refusal is written to `wm_responses` like the loop's own refusals."""
    design, (r1, r2) = _started(2)
    wrong = ("read", "at", "v0")
    forged = Response(
        r2.ballot_id, 1, 1, answer_tools(wrong, r2.request_id), 1.0, catalog.tools_hash(wrong)
    )
    design.on_response(r2, forged, 1.0)
    design.on_response(r1, respond(design, r1, 2.0), 2.0)
    _, decision = design.settle(3.0)
    logged = design.conn.execute(
        "SELECT ballot_id, committed, reason, tools_hash FROM wm_responses ORDER BY rowid"
    ).fetchall()
    assert logged == [
        (r1.ballot_id, 1, None, catalog.tools_hash(design.tools_at(1))),
        (r2.ballot_id, 0, decision.reason, catalog.tools_hash(forged.tools)),
    ]
    assert decision.reason == HASH_MISMATCH and design.read_head()[0] == 1


def test_a_held_answer_on_the_committed_base_commits_at_settle() -> None:
    design, (r1, r2) = _started(2)
    assert design.on_response(r2, respond(design, r2, 1.0), 1.0).reason == "held"
    assert design.awaited() == [r1]  # a held answer is not awaited: no timer, no give-up
    assert design.on_response(r1, respond(design, r1, 2.0), 2.0).committed
    _, decision = design.settle(3.0)
    assert decision.committed and design.read_head()[0] == 2
    assert design.tools_at(2) == answer_tools(design.tools_at(1), r2.request_id)


def _logged(design: PipelinedDesign) -> list:
    return rows(
        design.conn,
        "SELECT ballot_id, observed_watermark, committed, reason, tools_hash FROM wm_responses"
        " ORDER BY seq",
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("early", [True, False])
def test_an_answer_echoing_another_watermark_is_refused_early_or_on_time(
    request, backend: str, early: bool
) -> None:
    """The echo is checked whenever the answer lands: early it is not held (settle would
    rebuild it from its fence and commit it), it is refused, logged and replayed as on time."""
    design = PipelinedDesign(open_store(request, backend).connect(), window=3, ticks=6)
    r1, r2, r3 = design.start(0.0)
    honest = respond(design, r2, 1.0)  # the right base and hash, only the echo is forged
    forged = dataclasses.replace(honest, observed_watermark=r2.observed_watermark + 7)
    if early:
        decision = design.on_response(r2, forged, 1.0)
        assert design.on_response(r1, respond(design, r1, 2.0), 2.0).committed
    else:
        assert design.on_response(r1, respond(design, r1, 1.0), 1.0).committed
        decision = design.on_response(r2, forged, 2.0)
    assert (decision.committed, decision.reason) == (False, "stale_watermark")
    assert hold.held(design.conn) == [] and design.settle(3.0) is None
    assert design.read_head()[0] == 1
    refused = (r2.ballot_id, 8, 0, "stale_watermark", catalog.tools_hash(forged.tools))
    assert refused in _logged(design)
    # r2's tick is replayed first, then r3's (built on r2's answer) and any above it
    replays = [s.replay_of for s in decision.sends if s.replay_of is not None]
    assert replays[:2] == [r2.ballot_id, r3.ballot_id]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_second_different_answer_for_a_held_ballot_is_refused_and_logged(
    request, backend: str
) -> None:
    """A ballot holds one answer: a different second one is refused (and in the response log),
    the same one delivered again is still held, and the first one is what commits."""
    design = PipelinedDesign(open_store(request, backend).connect(), window=2, ticks=4)
    r1, r2 = design.start(0.0)
    first = respond(design, r2, 1.0)
    other = dataclasses.replace(first, tools=("a", "different", "body"))
    assert design.on_response(r2, first, 1.0).reason == "held"
    second = design.on_response(r2, other, 2.0)
    assert (second.committed, second.reason, second.sends) == (False, ALREADY_HELD, [])
    assert design.on_response(r2, first, 3.0).reason == "held"  # the same answer again
    assert [h.tools for h in hold.held(design.conn)] == [first.tools]
    assert _logged(design) == [(r2.ballot_id, 1, 0, ALREADY_HELD, catalog.tools_hash(other.tools))]
    assert design.on_response(r1, respond(design, r1, 4.0), 4.0).committed
    _, settled = design.settle(5.0)
    assert settled.committed and design.tools_at(2) == first.tools


def test_an_early_answer_whose_ballot_left_flight_is_unknown_and_not_held() -> None:
    """Another loop on the store gave the ballot up before its answer landed: the step reads the
    fence and holds in one transaction, so nothing is held and the answer is refused as the
    loop refuses any unknown ballot."""
    design, (r1, r2) = _started(2)
    design.loop.abandon(r2.ballot_id)
    decision = design.on_response(r2, respond(design, r2, 1.0), 1.0)
    assert (decision.committed, decision.reason) == (False, "unknown_ballot")
    assert hold.held(design.conn) == [] and [r[3] for r in _logged(design)] == ["unknown_ballot"]


def test_giving_up_flushes_every_successor_and_replays_each_tick() -> None:
    design, (r1, r2, r3) = _started(3)
    late = [respond(design, r, 1.0) for r in (r2, r3)]
    assert [
        design.on_response(r, a, 1.0).reason for r, a in zip((r3, r2), late[::-1], strict=True)
    ] == [
        "held",
        "held",
    ]
    sends = design.on_timeout(r1, 2.0)
    assert [s.replay_of for s in sends] == [r1.ballot_id, r2.ballot_id, r3.ballot_id]
    assert [s.observed_watermark for s in sends] == [0, 1, 2]
    assert hold.held(design.conn) == [] and design.settle(3.0) is None
    assert design.on_response(r2, late[0], 4.0).reason == "unknown_ballot"
    assert design.read_head()[0] == 0


def test_a_stale_body_on_the_head_is_refused_and_its_successors_flushed() -> None:
    result = run_schedule(
        "pipelined", ["deliver 1", "deliver 3", "stale 2", "deliver 3", "deliver 4"], window=2
    )
    assert result.labels == ["1:commit", "3:held", "2:stale_base", "3:unknown_ballot", "4:commit"]
    assert result.heads == [1, 1, 1, 1, 2] and not result.rewinds
    assert result.replays == 2  # request 2's tick and, flushed with it, request 3's


# --- the frontier (part one's rule) -------------------------------------------------------------


def test_the_hold_frontier_stops_at_the_first_unanswered_fence() -> None:
    assert hold.frontier(3, {3, 4, 6}) == 5
    assert hold.frontier(3, {4, 5}) == 3
    assert hold.frontier(0, ()) == 0


@settings(max_examples=40, deadline=None)
@given(head=st.integers(0, 4), answered=st.sets(st.integers(0, 9)))
def test_the_hold_frontier_is_part_ones_delivered_frontier(head: int, answered: set) -> None:
    """Fence f is row id f + 1, "answered" is "delivered": the head reaches part one's frontier."""
    conn = part_one.connect()
    part_one.create_schema(conn)
    for fence in range(10):
        row = part_one.enqueue(conn, "ballots", 0)
        assert row == fence + 1
        if fence < head or fence in answered:
            part_one.mark_delivered(conn, row)
    want = part_one.delivered_frontier(conn, "ballots", coverage_base=head)
    assert hold.frontier(head, answered) == want


# --- the exact explorer -----------------------------------------------------------------------


@pytest.mark.parametrize("window", [2, 3])
def test_no_arrival_order_rewinds_pipelined_up_to_six_deliveries(window: int) -> None:
    for n in range(1, 7):
        found = explore("pipelined", n, window=window)
        assert found.orders > 0 and found.rewinding == 0 and found.shortest is None


def test_the_memoised_explorer_counts_as_the_replay_on_sqlite_does() -> None:
    for n in (2, 3):
        fast, slow = explore("pipelined", n, window=2), explore_by_replay("pipelined", n, window=2)
        assert (fast.orders, fast.rewinding, fast.shortest) == (
            slow.orders,
            slow.rewinding,
            slow.shortest,
        )


def test_the_explorer_merges_states() -> None:
    _, stats = explore_with_stats("pipelined", 6, window=3)
    assert stats.distinct * 20 < stats.prefixes  # a memo hit per repeated state, not a replay


@pytest.mark.slow
@pytest.mark.parametrize(("n", "window", "sample"), [(3, 2, None), (3, 3, 400), (4, 3, 1500)])
def test_the_model_agrees_with_sqlite(n: int, window: int, sample: int | None) -> None:
    """The schedules of `n` deliveries with a time-out, a crash and stale bodies (all of them,
    or a stratified sample of about `sample`), played on SQLite and on the model, step by
    step."""
    check = verify_model_against_sqlite(
        "pipelined", n, window=window, crashes=1, stale=True, sample=sample
    )
    assert check.schedules > (sample or 1000) * 3 // 4 and check.agrees, check.mismatches[:3]


# --- crashes ----------------------------------------------------------------------------------


def _assert_sound(run, ticks: int = 6) -> None:
    assert run.killed
    steps = [b - a for a, b in zip(run.heads, run.heads[1:], strict=False)]
    assert set(steps) <= {0, 1}  # never a fall, one version at a time, across the kill
    assert [v[0] for v in run.versions] == list(range(len(run.versions)))
    assert run.versions[-1][0] == ticks and run.held_left == 0
    for (v, _, below), (_, base, tools) in zip(run.versions, run.versions[1:], strict=False):
        assert base == v and tools[:-1] == below  # each body is built on the version below


def test_a_crash_run_counts_the_falls_its_reader_saw() -> None:
    from labkit.designs.pipeline_crash import CrashRun

    assert CrashRun(1, True, (0, 2, 1, 1, 3, 2), (), 0, 9).falls == 2
    assert CrashRun(1, True, (0, 1, 1, 2), (), 0, 9).falls == 0


def test_a_kill_at_every_tenth_statement_keeps_the_readers_promise(tmp_path: Path) -> None:
    total = statement_count(tmp_path / "whole.db")
    assert total > 50
    runs = [crash_and_resume(tmp_path / f"k{k}.db", k) for k in range(1, total + 1, 10)]
    for run_k in runs:
        _assert_sound(run_k)
        assert run_k.falls == 0
    assert any(r.held_at_restart for r in runs)  # some kills left answers held in the file


def test_a_real_kill_of_the_loop_process_keeps_the_readers_promise(tmp_path: Path) -> None:
    """The loop runs in a child process the operating system kills as statement k starts."""
    total = statement_count(tmp_path / "whole.db")
    for k in range(3, total + 1, 37):
        _assert_sound(kill_and_resume(tmp_path / f"real{k}.db", k))
    unbroken = kill_and_resume(tmp_path / "unbroken.db", total + 1)
    assert not unbroken.killed and unbroken.versions[-1][0] == 6


# --- the store: a ballot fenced ahead of the head, on both backends ----------------------------


def _fenced_ahead(loop) -> None:
    """A ballot reserved `ahead` = 1 observes head + 1; its answer cannot commit before the
    head gets there. `apply` would even fence an early answer out (its fence is not the head),
    which is why the pipelined design holds early answers and never hands them to `apply`."""
    on_head = loop.reserve()
    ahead = loop.reserve(ahead=1)
    assert (on_head.watermark, ahead.watermark, ahead.base_version) == (0, 1, 1)
    early = Response(ahead.ballot_id, 1, 1, ["b"])
    assert loop.checks(early).reason == "stale_watermark" and loop.checks(early).fenced_out
    assert loop.apply(Response(on_head.ballot_id, 0, 0, ["a"])).committed
    assert loop.apply(Response(ahead.ballot_id, 1, 1, ["a", "b"])).committed
    assert loop.head_version() == 2
    with pytest.raises(ValueError, match="ahead"):
        loop.reserve(ahead=-1)


def test_reserve_ahead_on_sqlite() -> None:
    from labkit.catalog.loop import WatermarkLoop
    from labkit.db import connect

    _fenced_ahead(WatermarkLoop(connect(), window=2))


@pytest.mark.postgres
def test_reserve_ahead_on_postgres(pg_connect) -> None:
    from labkit.catalog.loop import WatermarkLoop

    _fenced_ahead(WatermarkLoop(pg_connect(autocommit=True), window=2))


# --- the hold and the design on PostgreSQL: the same steps, the same results -------------------


def _steps(design: PipelinedDesign, seed: int, *, ticks: int) -> list:
    """Drive `design` with seeded planner behaviour (answers in a shuffled order, some stale,
    some twice, a give-up now and then), settling after each step; what each step decided,
    the hold after it and the head, in order."""
    rng = random.Random(seed)
    seen: list = []
    answers: list = []
    now = 0.0
    design.start(now)
    for _ in range(400):
        if design.read_head()[0] >= ticks:
            break
        now += 1.0
        waiting = design.awaited()
        roll = rng.random()
        if waiting and roll < 0.1:
            req = rng.choice(waiting)
            design.on_timeout(req, now)
            seen.append(("timeout", req.request_id))
        elif answers and roll < 0.2:  # a duplicate of an earlier answer
            req, resp = rng.choice(answers)
            d = design.on_response(req, resp, now)
            seen.append(("again", req.request_id, d.committed, d.reason))
        elif waiting:
            req = rng.choice(waiting)
            resp = respond(design, req, now, stale=req.base_version > 0 and roll > 0.9)
            answers.append((req, resp))
            d = design.on_response(req, resp, now)
            seen.append(("answer", req.request_id, d.committed, d.reason))
        while (settled := design.settle(now)) is not None:
            seen.append(("settle", settled[0].ballot_id, settled[1].committed))
        seen.append(("hold", tuple(hold.held(design.conn)), design.read_head()))
    log = [(v.version, v.base_version, v.ballot_id, v.tools) for v in catalog.history(design.conn)]
    return [*seen, ("log", log)]


@pytest.mark.postgres
@pytest.mark.parametrize("seed", [0, 1])
def test_pipelined_on_sqlite_and_postgres_agree_step_by_step(request, seed: int) -> None:
    """Same steps on both backends: the same decisions, the same held answers after every
    step, the same commits (versions, bases, ballots, bodies)."""
    runs = []
    for name in ("sqlite", "postgres"):
        store = open_store(request, name)
        runs.append(_steps(PipelinedDesign(store.connect(), window=3, ticks=8), seed, ticks=8))
    sqlite_run, postgres_run = runs
    assert any(s[0] == "settle" for s in sqlite_run)  # answers were held and settled
    assert any(s[0] == "timeout" for s in sqlite_run)  # and a give-up flushed successors
    assert sqlite_run[-1][1][-1][0] == 8
    assert postgres_run == sqlite_run


@pytest.mark.postgres
def test_the_hold_on_postgres_is_durable_when_it_returns(pg_connect) -> None:
    design = PipelinedDesign(pg_connect(), window=2, ticks=4)
    r1, r2 = design.start(0.0)
    assert design.on_response(r2, respond(design, r2, 1.0), 1.0).reason == "held"
    # a new connection (a restarted process) sees the held answer: it was committed
    other = pg_connect()
    (row,) = hold.held(other)
    assert (row.ballot_id, row.fence, row.base_version) == (r2.ballot_id, 1, 1)
    assert row.base_hash == catalog.tools_hash(r2.tools)
    # a restarted loop finds it held (delivered again, it stays held once) and checks it again
    # before it commits it
    again = PipelinedDesign(other, window=2, ticks=4)
    assert again.on_response(r2, respond(design, r2, 2.0), 2.0).reason == "held"
    assert len(hold.held(other)) == 1
    assert again.on_response(r1, respond(again, r1, 3.0), 3.0).committed
    request, decision = again.settle(4.0)
    assert request.ballot_id == r2.ballot_id and decision.committed
    assert catalog.verify(other) == 2 and hold.held(other) == []


@pytest.mark.postgres
def test_the_hold_refuses_a_postgres_session_whose_commits_are_not_durable(pg_connect) -> None:
    from labkit.catalog.versions_pg import DurabilityError

    conn = pg_connect(autocommit=True)
    conn.execute("SET synchronous_commit = off")
    with pytest.raises(DurabilityError, match="hold.create on PostgreSQL: synchronous_commit"):
        hold.create(conn)


@pytest.mark.postgres
def test_the_hold_refuses_a_postgres_transaction_left_open(pg_connect) -> None:
    from labkit.catalog.loop_pg import LoopConnectionError

    conn = pg_connect()
    design = PipelinedDesign(conn, window=2, ticks=4)
    _, r2 = design.start(0.0)
    conn.execute("SELECT 1")  # opens a transaction the caller never ends
    with pytest.raises(LoopConnectionError, match="no open transaction"):
        design.on_response(r2, respond(design, r2, 1.0), 1.0)
    conn.rollback()
    assert hold.held(conn) == []
