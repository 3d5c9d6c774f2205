"""Exhaustive arrival orders, the schedule checker, Article 2's closing question, and what
compare-and-set on the version accepts next to the ballot."""

from __future__ import annotations

import pytest

from labkit.designs.arrival_orders import (
    StepOutcome,
    cas_versus_ballot,
    closing_question,
    explore,
    run_schedule,
)
from labkit.designs.schedules import Kind, ScheduleError, as_steps

SEED_INVERTED = ["timeout", "deliver 2", "deliver 3", "deliver 1"]


@pytest.mark.parametrize("design", ["callback", "lww"])
def test_seed_inverted_schedule_rewinds_unguarded(design: str) -> None:
    res = run_schedule(design, SEED_INVERTED)
    assert res.rewinds and res.heads == [0, 1, 2, 1] and res.first_rewind == 3


@pytest.mark.parametrize("design", ["ballot", "fenced", "cas"])
def test_seed_inverted_schedule_is_rejected_by_ballots_and_cas(design: str) -> None:
    res = run_schedule(design, SEED_INVERTED)
    assert not res.rewinds
    last = res.outcomes[-1]
    assert (last.kind, last.request_id, last.committed) == (Kind.DELIVER, 1, False)
    want = "cas_conflict" if design == "cas" else "unknown_ballot"
    assert last.reason == want and last.label == f"1:{want}"


def test_exhaustive_counts() -> None:
    found = {d: explore(d, 3) for d in ("callback", "lww", "ballot", "fenced", "cas")}
    assert found["ballot"].rewinding == found["fenced"].rewinding == found["cas"].rewinding == 0
    assert found["ballot"].orders > 0 and found["fenced"].orders > 0
    assert found["callback"].rewinding > 0 and found["lww"].rewinding > 0
    assert found["callback"].shortest == as_steps(["deliver 1", "deliver 2", "deliver 1"])
    assert found["lww"].shortest == as_steps(SEED_INVERTED)


def test_closing_question() -> None:
    table = closing_question()
    rewinds = table.groupby("design")["rewinds"].sum().to_dict()
    assert rewinds == {"ballot": 0, "fenced": 0, "callback": 5, "lww": 3, "cas": 0}
    lww_bad = set(table[(table["design"] == "lww") & table["rewinds"]]["order"])
    assert lww_bad == {o for o in table["order"] if o.startswith("14")}
    assert (table[table["design"].isin(["ballot", "fenced", "cas"])]["final_head"] == 2).all()
    cas = table[table["design"] == "cas"]
    assert cas["outcomes"].str.contains("12:cas_conflict").all()
    fenced = table[table["design"] == "fenced"]
    assert fenced["outcomes"].str.contains("12:stale_watermark").all()


def test_schedule_errors_name_the_step() -> None:
    with pytest.raises(ScheduleError, match="'deliver 7'.*not been sent"):
        run_schedule("ballot", ["deliver 7"])
    with pytest.raises(ScheduleError, match="'jump 1'"):
        run_schedule("ballot", ["jump 1"])


def test_stale_and_crash_steps() -> None:
    res = run_schedule("ballot", ["1", "stale 2", "crash", "3"])
    assert res.outcomes == [
        StepOutcome(Kind.DELIVER, 1, request_id=1, committed=True),
        StepOutcome(Kind.DELIVER, 1, request_id=2, committed=False, reason="stale_base"),
        StepOutcome(Kind.CRASH, 1),
        StepOutcome(Kind.DELIVER, 2, request_id=3, committed=True),
    ]
    assert res.labels == ["1:commit", "2:stale_base", "crash+restart", "3:commit"]
    assert res.replays == 1 and res.final_head == 2


def test_outcomes_are_typed_and_carry_the_head_and_rewind() -> None:
    res = run_schedule("callback", SEED_INVERTED)
    gave_up, *_, late = res.outcomes
    assert (gave_up.kind, gave_up.request_id, gave_up.committed) == (Kind.TIMEOUT, 1, None)
    assert str(gave_up) == "timeout 1"
    assert late.rewind and late.head == 1 and late.committed
    assert [o.rewind for o in res.outcomes] == [False, False, False, True]
    assert res.first_rewind == 3 and res.heads == [0, 1, 2, 1]
    idle = run_schedule("callback", ["1", "timeout"], ticks=1).outcomes[-1]
    assert (idle.kind, idle.request_id, idle.label) == (
        Kind.TIMEOUT,
        None,
        "timeout: nothing awaited",
    )


def test_unknown_design_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown design 'nope'; expected one of callback"):
        run_schedule("nope", ["1"])


def test_stale_must_be_a_first_delivery_on_a_real_base() -> None:
    with pytest.raises(ScheduleError, match="'stale 1'.*based on version 0"):
        run_schedule("ballot", ["stale 1"])
    with pytest.raises(ScheduleError, match="'stale 2'.*already produced"):
        run_schedule("callback", ["1", "2", "stale 2"])


def test_dup_is_a_documented_alias_of_deliver() -> None:
    plain = run_schedule("callback", ["1", "2", "deliver 1"])
    assert run_schedule("callback", ["1", "2", "dup 1"]).outcomes == plain.outcomes


# --- compare-and-set on the version, next to the ballot ----------------------------------------


def _case(table, case: str, design: str) -> dict:
    (row,) = table[(table["case"] == case) & (table["design"] == design)].to_dict("records")
    return row


def test_cas_refuses_late_duplicate_and_honest_stale_bodies_like_the_ballot() -> None:
    table = cas_versus_ballot()
    for case, cas_words, ballot_words in [
        ("late answer after its replacement committed", "1:cas_conflict", "1:unknown_ballot"),
        ("duplicate after commit", "1:cas_conflict", "1:unknown_ballot"),
        ("stale body that names its old base", "2:cas_conflict", "2:stale_base"),
    ]:
        cas, ballot = _case(table, case, "cas"), _case(table, case, "ballot")
        assert cas["outcomes"].endswith(cas_words) and ballot["outcomes"].endswith(ballot_words)
        assert (cas["final_head"], cas["tools at head"]) == (
            ballot["final_head"],
            ballot["tools at head"],
        )
    assert not table["rewinds"].any()


def test_cas_lets_an_abandoned_answer_win_the_race_the_ballot_refuses_it() -> None:
    """Article 2's claim, as far as it holds here: the loop gave up on request 1 and sent 2;
    1's answer lands first and CAS commits it (its base is still the head), so 2 conflicts."""
    table = cas_versus_ballot()
    cas = _case(table, "abandoned answer lands before its replacement", "cas")
    ballot = _case(table, "abandoned answer lands before its replacement", "ballot")
    assert cas["outcomes"] == "timeout 1 1:commit 2:cas_conflict"
    assert ballot["outcomes"] == "timeout 1 1:unknown_ballot 2:commit"
    assert (cas["tools at head"], ballot["tools at head"]) == ("tool-r1", "tool-r2")


def test_a_stale_body_stamped_with_the_head_passes_cas_and_the_ballot_alike() -> None:
    """Neither check can see a body whose base label lies: version 2 loses tool-r1."""
    table = cas_versus_ballot()
    for design in ("cas", "ballot"):
        row = _case(table, "stale body stamped with the current head", design)
        assert row["outcomes"] == "1:commit 2:commit" and row["final_head"] == 2
        assert row["tools at head"] == "tool-r2" and not row["rewinds"]


def test_cas_replays_a_tick_only_while_it_is_undone() -> None:
    stale = run_schedule("cas", ["deliver 1", "stale 2", "deliver 3"])
    assert stale.labels == ["1:commit", "2:cas_conflict", "3:commit"] and stale.replays == 1
    raced = run_schedule("cas", ["timeout", "deliver 1", "deliver 2", "deliver 3"])
    assert raced.labels == ["timeout 1", "1:commit", "2:cas_conflict", "3:commit"]
    assert raced.replays == 1  # request 2 replayed 1 after the timeout; 3 is a new tick
