"""A real crash: the loop's process is killed in the middle of a planner call and started
again on the same store; the planner's answers to the dead process's calls are judged by the
durable ballots, and nothing the dead process reported committed is lost."""

from __future__ import annotations

import pytest

import labkit.catalog.hold as hold
import labkit.catalog.versions as catalog
from labkit.db import connect
from labkit.remote import run, serve
from labkit.remote.crash import kill_mid_call


@pytest.mark.slow
@pytest.mark.parametrize(
    ("design", "window", "after"), [("ballot", 1, 3), ("fenced", 3, 3), ("pipelined", 3, 3)]
)
def test_a_loop_killed_mid_call_restarts_and_the_old_answers_meet_the_ballots(
    tmp_path, design: str, window: int, after: int
) -> None:
    """`pipelined` is killed as it holds an early answer (after its third commit): the answer
    is in the store's hold when the loop dies, and the restarted loop checks it again (a
    settle row) before it commits it, or asks again for its tick."""
    store = tmp_path / "store.db"
    # pipelined is killed at the first answer it holds after its third commit: on a quick run
    # none came before v8 once (the child finished, "not killed mid-call"), so it gets room
    ticks = 20 if design == "pipelined" else 8
    with serve(latency=0.15, seed=2) as url:
        crash = kill_mid_call(
            url,
            store,
            design,
            ticks=ticks,
            window=window,
            after=after,
            holding=design == "pipelined",
            name=f"crash-{design}",
        )
        assert crash.killed_outright and crash.in_flight
        conn = connect(store)
        owed = {
            row[0]
            for row in conn.execute("SELECT ballot_id FROM wm_ballots WHERE status = 'inflight'")
        }
        held = [h.ballot_id for h in hold.held(conn)] if design == "pipelined" else []
        conn.close()
        if design == "pipelined":  # the answer it died holding was stored before it said so
            assert crash.held and crash.held[-1] in held
        # the calls the dead loop left open; a ballot reserved (durably) after its last report
        # of a send, just before the kill, is in flight too
        sent = set(crash.in_flight)
        assert owed and all(b in sent or b > max(sent) for b in owed), (owed, sent)

        again = run(design, url, ticks=ticks, window=window, store=store, name=f"crash-{design}")

    trace = again.trace
    assert trace["event"].iloc[0] == "restart"
    judged = trace[(trace["event"] == "deliver") & trace["ballot_id"].isin(owed)]
    assert not judged.empty, "no answer owed to the dead loop reached the restarted one"
    assert again.reader_falls == [] and again.summary.rewinds == 0
    if design == "pipelined":
        # each held answer is checked again when its turn comes (a settle row), or re-asked
        # (its tick replayed) if a predecessor timed out first: never applied blindly
        settled = set(trace.loc[trace["event"] == "settle", "ballot_id"])
        replayed = set(trace.loc[trace["event"] == "send", "replay_of"].dropna().astype(int))
        assert set(held) <= settled | replayed
    conn = connect(store)
    try:
        assert catalog.verify(conn) == ticks
        for version, ballot in crash.commits.items():  # no reported commit is lost
            assert catalog.read_version(conn, version).ballot_id == ballot
        statuses = dict(
            conn.execute(
                "SELECT ballot_id, status FROM wm_ballots WHERE ballot_id IN "
                f"({','.join('?' * len(owed))})",
                sorted(owed),
            ).fetchall()
        )
        assert set(statuses.values()) <= {"committed", "rejected", "abandoned"}
        committed = [b for b, s in statuses.items() if s == "committed"]
        for ballot in committed:  # committed once: exactly one version carries it
            assert sum(v.ballot_id == ballot for v in catalog.history(conn)) == 1
    finally:
        conn.close()
